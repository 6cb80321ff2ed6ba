package dev.codeexec.http;

import dev.codeexec.boot.LogContext;
import dev.codeexec.config.Ids;
import dev.codeexec.ops.Metrics;
import jakarta.servlet.http.HttpServletRequest;
import org.eclipse.jetty.http.HttpFields;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.server.handler.EventsHandler;
import org.eclipse.jetty.util.Callback;

import java.time.Duration;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * The outermost handler, so it sees every request, the ones refused before the servlets too: gives each request an
 * id, sent back as {@code X-Request-Id} and put into the log MDC ({@link LogContext#REQUEST_ID}) while the request
 * is handled on this thread, and counts each answered request in {@link Metrics} (method, status class, route
 * group; never the URI).
 *
 * <p>The id is the client's own {@code X-Request-Id} when that is a sane token (1 to 64 characters of
 * {@code [A-Za-z0-9._-]}, so it can go into logs and headers as it is), else a fresh random one. Code that runs on
 * another thread for the request (the MCP SDK's tool handlers) gets it through {@link #requestId}.
 */
final class RequestTracker extends EventsHandler {

    static final String HEADER = "X-Request-Id";
    /** Request attribute holding the id, for the servlet layer. */
    static final String ATTRIBUTE = "dev.codeexec.requestId";
    private static final Pattern SANE = Pattern.compile("[A-Za-z0-9._-]{1,64}");

    private final Metrics metrics;

    RequestTracker(Metrics metrics) {
        this.metrics = metrics;
    }

    @Override
    public boolean handle(Request request, Response response, Callback callback) throws Exception {
        String id = idFor(request.getHeaders().get(HEADER));
        request.setAttribute(ATTRIBUTE, id);
        response.getHeaders().put(HEADER, id);
        try (LogContext.Scope ignored = LogContext.requestId(Optional.of(id))) {
            return super.handle(request, response, callback);
        }
    }

    /** The incoming id when it is sane, else a new one. */
    static String idFor(String incoming) {
        return incoming != null && SANE.matcher(incoming).matches() ? incoming : Ids.hex(16);
    }

    @Override
    protected void onComplete(Request request, int status, HttpFields headers, Throwable failure) {
        metrics.httpRequest(request.getMethod(), status, Metrics.Route.of(request.getHttpURI().getPath()),
                Duration.ofNanos(System.nanoTime() - request.getBeginNanoTime()));
    }

    /** The id {@link RequestTracker} gave the request (servlet side). */
    static Optional<String> requestId(HttpServletRequest request) {
        return request.getAttribute(ATTRIBUTE) instanceof String id ? Optional.of(id) : Optional.empty();
    }
}
