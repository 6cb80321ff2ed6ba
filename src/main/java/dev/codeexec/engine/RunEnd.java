package dev.codeexec.engine;

import dev.codeexec.sandbox.Limits;
import dev.codeexec.sandbox.Termination;

import java.util.OptionalDouble;
import java.util.OptionalLong;

/**
 * How a run ended: the one place that turns what is known about a run's end ({@link Facts}: the server stopped it,
 * the kernel enforced a limit, the program's wait status, a session's interpreter answered or died, a worker was
 * lost) into its {@link Outcome}, its exit code and the line its stderr ends with ({@code [terminated] ...}). Local
 * runs, session calls and the gateway's runs all end through here, so the same end reads the same everywhere.
 *
 * @param outcome  how it ended
 * @param exitCode the program's exit status (128+N for signal N), or 1 for a session call that raised, or -1 when
 *                 no program status is known (never started, a worker lost, an interpreter that did not answer)
 * @param line     the line appended to stderr ("" for none), ending in a newline
 */
public record RunEnd(Outcome outcome, int exitCode, String line) {

    /** Why the server stopped a program or call that had not ended by itself. */
    public enum Stop {
        /** The caller cancelled (notifications/cancelled, the MCP session ended, shutdown). */
        CANCELLED,
        /** Its wall-clock timeout elapsed. */
        TIMEOUT,
        /** It wrote more than the drain limit (MAX_OUTPUT_DRAIN_MB): an output flood without end. */
        OUTPUT_FLOOD,
        /** Its workspace went past WORKSPACE_QUOTA_MB or WORKSPACE_MAX_ENTRIES while it ran (measured, no kernel quota). */
        WORKSPACE_LIMIT
    }

    /** What is known about a run's end. Each kind is one way a run can end; {@link #of} handles each. */
    public sealed interface Facts {
    }

    /**
     * A program in a sandbox of its own ended (or was ended).
     *
     * @param stop        why the server stopped it, or null when it ended by itself
     * @param termination its wait status, or null when it did not end even after a kill (the sandbox cleans up)
     */
    public record ProgramEnded(Stop stop, Termination termination, boolean memoryLimitHit, boolean cpuLimitHit)
            implements Facts {
    }

    /**
     * A session's interpreter answered a call: the session lives on, whatever happened to the call.
     *
     * @param stop     why the server interrupted the call, when the interpreter answered within
     *                 {@link #SESSION_INTERRUPT_GRACE} of being interrupted; null when it answered without being
     *                 interrupted
     * @param exitCode the call's exit code: the status the answer carries where the interpreter gives one (bash: the
     *                 cell's exit status), else 1 when the code raised (Python, Node, TypeScript; the error is on
     *                 stderr) and 0 when it did not
     */
    public record SessionAnswered(Stop stop, int exitCode) implements Facts {
    }

    /** Why a session's interpreter is gone during a call. */
    public enum Loss {
        /** The call could not be handed to the interpreter (its channel broke). */
        NOT_HANDED_OVER,
        /** It was interrupted for {@code stop} and did not answer within the grace: the server killed it. */
        IGNORED_INTERRUPT,
        /** The server ended the session (reset, close, idle expiry, shutdown) while the call ran. */
        ENDED_BY_SERVER,
        /** It died by itself: a limit, a crash, {@code exit()}. */
        DIED
    }

    /**
     * A session's interpreter is gone: the call ends with it, and so does the session's state.
     *
     * @param stop       for {@link Loss#IGNORED_INTERRUPT}: why it was interrupted
     * @param endedAs    for {@link Loss#ENDED_BY_SERVER}: what the server did, e.g. "reset", "closed after being idle"
     * @param termination the interpreter's wait status, when known
     */
    public record InterpreterLost(Loss loss, Stop stop, String endedAs, Termination termination, boolean memoryLimitHit,
            boolean cpuLimitHit) implements Facts {
    }

    /** Cancelled while it waited for a slot or for its session: nothing of it ran. */
    public record CancelledBeforeStart() implements Facts {
    }

    /** It could not start; {@code message} says why, fit for the client (it becomes the run's stderr). */
    public record NotStarted(String message) implements Facts {
    }

    /**
     * A gateway lost the worker that was running it: what streamed is all that is known.
     *
     * @param cancelled the caller had cancelled it and the worker confirmed the cancel
     * @param detail    which worker and what happened (for {@code [terminated] worker lost: ...})
     */
    public record RemoteEnded(boolean cancelled, String detail) implements Facts {
    }

    /** How long an interrupted session call may take to answer before its interpreter is killed. */
    public static final java.time.Duration SESSION_INTERRUPT_GRACE = java.time.Duration.ofSeconds(2);

    static final String SESSION_GONE = "; the session was killed (its state is gone) and the next call starts a new one";

    /** How a run with these facts and limits ended. */
    public static RunEnd of(Facts facts, Limits l) {
        return switch (facts) {
            case ProgramEnded p -> program(p, l);
            case SessionAnswered a -> a.stop() == null ? new RunEnd(Outcome.EXITED, a.exitCode(), "")
                    : new RunEnd(outcome(a.stop()), a.exitCode(), "[interrupted] " + reason(a.stop(), l)
                    + "; the call was interrupted and the session kept its state\n");
            case InterpreterLost lost -> interpreterLost(lost, l);
            case CancelledBeforeStart c -> new RunEnd(Outcome.CANCELLED, -1, "[terminated] cancelled\n");
            case NotStarted n -> new RunEnd(Outcome.FAILED_TO_START, -1, "");
            case RemoteEnded r -> r.cancelled() ? new RunEnd(Outcome.CANCELLED, -1, "[terminated] cancelled\n")
                    : new RunEnd(Outcome.WORKER_LOST, -1, "[terminated] worker lost: " + r.detail()
                    + "; the run's outcome is unknown and it was not re-run\n");
        };
    }

    private static RunEnd program(ProgramEnded p, Limits l) {
        int code = p.termination() == null ? -1 : p.termination().exitCode();
        if (p.stop() != null) return new RunEnd(outcome(p.stop()), code, "[terminated] " + reason(p.stop(), l) + "\n");
        if (p.memoryLimitHit()) return new RunEnd(Outcome.MEMORY_LIMIT, code, "[terminated] " + memory(l) + "\n");
        if (p.cpuLimitHit()) return new RunEnd(Outcome.CPU_LIMIT, code, "[terminated] " + cpu(l) + "\n");
        if (p.termination() instanceof Termination.Signaled s)
            return new RunEnd(Outcome.KILLED_BY_SIGNAL, code, "[terminated] killed by " + signal(s) + "\n");
        return new RunEnd(Outcome.EXITED, code, "");
    }

    private static RunEnd interpreterLost(InterpreterLost lost, Limits l) {
        int code = lost.termination() == null ? -1 : lost.termination().exitCode();
        return switch (lost.loss()) {
            case NOT_HANDED_OVER -> new RunEnd(Outcome.FAILED_TO_START, code,
                    "[terminated] the server could not hand the call to the session's interpreter" + SESSION_GONE + "\n");
            case IGNORED_INTERRUPT -> new RunEnd(outcome(lost.stop()), code, "[terminated] " + reason(lost.stop(), l)
                    + "; the call did not stop within " + SESSION_INTERRUPT_GRACE.toMillis()
                    + " ms of being interrupted" + SESSION_GONE + "\n");
            case ENDED_BY_SERVER -> new RunEnd(Outcome.CANCELLED, code,
                    "[terminated] the session was " + lost.endedAs() + " while the call ran\n");
            case DIED -> {
                if (lost.memoryLimitHit()) yield new RunEnd(Outcome.MEMORY_LIMIT, code, "[terminated] " + memory(l) + SESSION_GONE + "\n");
                if (lost.cpuLimitHit()) yield new RunEnd(Outcome.CPU_LIMIT, code, "[terminated] " + cpu(l) + SESSION_GONE + "\n");
                if (lost.termination() instanceof Termination.Signaled s)
                    yield new RunEnd(Outcome.KILLED_BY_SIGNAL, code,
                            "[terminated] the session's interpreter was killed by " + signal(s) + SESSION_GONE + "\n");
                yield new RunEnd(Outcome.EXITED, code, "[session ended] the interpreter exited with code " + code
                        + "; the session's state is gone and the next call starts a new one\n");
            }
        };
    }

    /**
     * Why an interpreter that died between calls is gone, in words for the next call's notice ("its memory limit
     * of 512 MB was exceeded").
     */
    public static String interpreterDeath(Termination t, boolean memoryLimitHit, boolean cpuLimitHit, Limits l) {
        if (memoryLimitHit) return "its memory limit of " + l.memoryMb() + " MB was exceeded";
        if (cpuLimitHit) return "its CPU time limit was exceeded";
        if (t instanceof Termination.Signaled s) return "its interpreter was killed by " + signal(s);
        return "its interpreter exited with code " + (t == null ? -1 : t.exitCode());
    }

    private static Outcome outcome(Stop stop) {
        return switch (stop) {
            case CANCELLED -> Outcome.CANCELLED;
            case TIMEOUT -> Outcome.TIMEOUT;
            case OUTPUT_FLOOD -> Outcome.OUTPUT_LIMIT;
            case WORKSPACE_LIMIT -> Outcome.WORKSPACE_LIMIT;
        };
    }

    private static String reason(Stop stop, Limits l) {
        return switch (stop) {
            case CANCELLED -> "cancelled";
            case TIMEOUT -> "timeout after " + l.timeout().toMillis() + " ms";
            case OUTPUT_FLOOD -> "output limit: more than " + mb(l.drainBytes()) + " of output";
            case WORKSPACE_LIMIT -> "workspace limit: the workspace went past its quota of bytes or files "
                    + "(WORKSPACE_QUOTA_MB, WORKSPACE_MAX_ENTRIES) while the run wrote to it";
        };
    }

    private static String memory(Limits l) {
        return "memory limit " + l.memoryMb() + " MB exceeded";
    }

    private static String cpu(Limits l) {
        return "CPU time limit " + l.cpuSeconds() + " s exceeded";
    }

    private static String signal(Termination.Signaled s) {
        String name = s.signalName();
        return name.startsWith("signal ") ? name : "signal " + s.signal() + " (" + name + ")";
    }

    public static String mb(long bytes) {
        return bytes % (1024 * 1024) == 0 ? bytes / (1024 * 1024) + " MB" : bytes / 1024 + " KB";
    }

    /**
     * The run's result: the line goes at the end of stderr (after a newline if stderr did not end with one) and to
     * the progress listener, so a client that streams sees it too.
     */
    public ExecutionResult result(String language, CapturedText.Captured stdout, CapturedText.Captured stderr, long durationMs,
            OptionalLong peakMemoryBytes, OptionalDouble cpuTimeMs, String sandbox, OutputListener progress) {
        String err = stderr.text();
        if (!line.isEmpty()) {
            String sep = err.isEmpty() || err.endsWith("\n") ? "" : "\n";
            err = err + sep + line;
            if (progress != null) progress.onOutput(OutputListener.Stream.STDERR, sep + line);
        }
        return ExecutionResult.builder(language, outcome).exitCode(exitCode).stdout(stdout.text()).stderr(err)
                .durationMs(durationMs).truncated(stdout.truncated() || stderr.truncated())
                .peakMemoryBytes(peakMemoryBytes).cpuTimeMs(cpuTimeMs).sandbox(sandbox).build();
    }

    /**
     * A result without output of the program: a run that never started ({@code message} says why, as its stderr),
     * or was cancelled before it did.
     */
    public ExecutionResult result(String language, String sandbox, String message) {
        String err = message + line;
        return ExecutionResult.builder(language, outcome).exitCode(exitCode).stderr(err).durationMs(0)
                .sandbox(sandbox).build();
    }
}
