package dev.codeexec.engine;

/**
 * Why a call could not run, named by cause. Surfaces map each subtype to an error in one place
 * (MCP: a tool result with isError; HTTP: a status code). Messages are safe to show to clients.
 */
public sealed class ExecutionException extends RuntimeException {

    protected ExecutionException(String message) {
        super(message, null, false, false);
    }

    /** The request itself is wrong: unknown language, bad argument, value out of range. */
    public static final class InvalidRequest extends ExecutionException {
        public InvalidRequest(String message) {
            super(message);
        }
    }

    /** Too many runs waiting, or a run waited longer than QUEUE_TIMEOUT_MS for a slot. */
    public static final class Busy extends ExecutionException {
        public Busy(String message) {
            super(message);
        }
    }

    /** The executor cannot run code now: sandbox not usable, shutting down. */
    public static final class Unavailable extends ExecutionException {
        public Unavailable(String message) {
            super(message);
        }
    }
}
