package dev.codeexec.engine;

import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;

/**
 * One call in a session, as it waits for a slot and then for its session: the request, where its output goes, and
 * whether it was cancelled ({@link RunHandle#cancel()} of its run sets the flag; the session interrupts the call).
 */
final class SessionCall {

    private final Sessions sessions;
    private final ExecutionRequest request;
    private final Language language;
    private final OutputListener listener;
    volatile boolean cancelled;

    SessionCall(Sessions sessions, ExecutionRequest request, Language language, OutputListener listener) {
        this.sessions = sessions;
        this.request = request;
        this.language = language;
        this.listener = listener;
    }

    ExecutionRequest request() {
        return request;
    }

    Language language() {
        return language;
    }

    OutputListener listener() {
        return listener;
    }

    SessionRef ref() {
        return request.session().orElseThrow();
    }

    /** Runs on a slot's thread; see {@link Sessions#execute}. */
    ExecutionResult execute() {
        return sessions.execute(this);
    }

    void cancel() {
        cancelled = true;
    }

    ExecutionResult cancelledBeforeStart() {
        return plain(-1, "[terminated] cancelled\n", Outcome.CANCELLED);
    }

    ExecutionResult failedToStart(String message) {
        return plain(-1, message, Outcome.FAILED_TO_START);
    }

    /** The code did not run: the client is told what happened to its session (once). */
    ExecutionResult notice(String message) {
        return failedToStart(message);
    }

    private ExecutionResult plain(int exitCode, String stderr, Outcome outcome) {
        return new ExecutionResult(language.id(), exitCode, "", stderr, 0, outcome, false, OptionalLong.empty(),
                OptionalDouble.empty(), sessions.sandbox().name())
                .withSession(new ExecutionResult.SessionOutput(ref().name(), false, Optional.empty(),
                        java.util.List.of()));
    }
}
