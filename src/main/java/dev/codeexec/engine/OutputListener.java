package dev.codeexec.engine;

/**
 * Receives output while a run goes on, in the order it was read. Called from reader threads: implementations
 * must be thread-safe and must not block for long (a slow listener slows nothing but itself: the engine keeps
 * draining the pipes).
 */
@FunctionalInterface
public interface OutputListener {
    OutputListener NONE = (stream, text) -> { };

    enum Stream { STDOUT, STDERR }

    void onOutput(Stream stream, String text);

    /**
     * The same with the time the server read the text from the program (epoch milliseconds). The engine delivers
     * output this way, one line per call (see ListenerDispatcher); a listener that reports times overrides it.
     */
    default void onOutput(Stream stream, String text, long atMillis) {
        onOutput(stream, text);
    }

    /**
     * Called once when the run has taken its execution slot, right before its sandbox starts (or its session is
     * handed the code): nothing of the program has run yet. Not called for a run refused or cancelled while
     * queued. A worker uses it to acknowledge the job to its gateway and to wait for the gateway's go-ahead, so a
     * job is never started where its gateway may not know it started. Called on the thread that holds the slot; it
     * may block briefly (a network round trip), never for long.
     *
     * @param runId the run's id ({@link RunHandle#id()}), known here even when the handle is not returned yet
     * @return false to drop the run without starting it: it ends CANCELLED, having run nothing
     */
    default boolean onStart(String runId) {
        return true;
    }
}
