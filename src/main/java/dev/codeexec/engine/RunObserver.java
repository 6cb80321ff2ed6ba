package dev.codeexec.engine;

import java.time.Instant;
import java.util.Optional;

/**
 * Told about every run an {@link ObservedExecutor} accepts and about how it ended: the seam for history, statistics
 * and metrics, which must not live in the engine or in any one surface. Called on engine threads: implementations
 * must be thread-safe and quick, and must not throw (an exception is logged and ignored).
 */
public interface RunObserver {

    /** A run was accepted (it may still wait for a slot). */
    default void submitted(RunStart run) {
    }

    /** A run ended: with a result (every outcome, timeouts and cancels included) or with the error that kept it from running. */
    void finished(RunEnd run);

    /**
     * @param id          the run's id (the engine's, also in the audit line)
     * @param submittedAt when the surface submitted it
     * @param request     what was asked, with its {@link ExecutionRequest.AuditInfo} (tenant, request id)
     */
    record RunStart(String id, Instant submittedAt, ExecutionRequest request) {
    }

    /**
     * @param start      the run as it was accepted
     * @param endedAt    when its result (or error) was known
     * @param result     the result, when the run was attempted
     * @param error      why it was not attempted (queue full, queue timeout, unavailable: also when {@code submit}
     *                   itself refused it — such a run has an id {@code rejected-N}), otherwise empty
     */
    record RunEnd(RunStart start, Instant endedAt, Optional<ExecutionResult> result, Optional<ExecutionException> error) {
        public RunEnd {
            result = result == null ? Optional.empty() : result;
            error = error == null ? Optional.empty() : error;
        }
    }
}
