package dev.codeexec.engine;

import java.util.concurrent.CompletableFuture;

/** A submitted run: its result when it ends, and a way to cancel it (queued or running). */
public interface RunHandle {

    String id();

    /**
     * Completes with the result (every outcome, including timeout and cancel) or exceptionally with an
     * {@link ExecutionException} when the run could not be attempted (queue full, queue timeout, unavailable).
     */
    CompletableFuture<ExecutionResult> result();

    /** Kills the run's whole process tree if running, or drops it from the queue; its outcome is CANCELLED. */
    void cancel();
}
