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
}
