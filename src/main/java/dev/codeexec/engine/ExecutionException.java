package dev.codeexec.engine;

/**
 * Why a call could not run, named by cause. Abstract and sealed: a switch over it names every kind, so a new kind of
 * failure cannot be forgotten by one surface (MCP: a tool error; HTTP: a status code; gRPC: a status). Messages are
 * safe to show to clients.
 */
public sealed abstract class ExecutionException extends RuntimeException {

    protected ExecutionException(String message) {
        super(message, null, false, false);
    }

    /** The kind's wire name, as clients see it: {@code invalid_request}, {@code busy}, {@code unavailable}. */
    public final String code() {
        return switch (this) {
            case InvalidRequest x -> "invalid_request";
            case Busy x -> "busy";
            case Unavailable x -> "unavailable";
        };
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
