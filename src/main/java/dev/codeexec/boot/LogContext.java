package dev.codeexec.boot;

import org.slf4j.MDC;

import java.util.Optional;

/**
 * The request id in the logging MDC, so JSON log lines carry {@code "mdc":{"requestId":...}}: the HTTP edge sets it
 * for the thread serving a request, the MCP tool handler for the SDK's thread, the engine for a run's audit line.
 * A scope puts back what the thread had before, so a nested scope (a run refused on the request's own thread) does
 * not clear the request's id.
 */
public final class LogContext {

    /** The MDC key; its value is the HTTP request's {@code X-Request-Id}. */
    public static final String REQUEST_ID = "requestId";

    private LogContext() {
    }

    /** Sets the request id until the scope closes; no change when absent. */
    public static Scope requestId(Optional<String> id) {
        if (id.isEmpty()) return () -> { };
        String before = MDC.get(REQUEST_ID);
        MDC.put(REQUEST_ID, id.get());
        return () -> {
            if (before == null) MDC.remove(REQUEST_ID);
            else MDC.put(REQUEST_ID, before);
        };
    }

    /** A scope that cannot fail to close. */
    public interface Scope extends AutoCloseable {
        @Override
        void close();
    }
}
