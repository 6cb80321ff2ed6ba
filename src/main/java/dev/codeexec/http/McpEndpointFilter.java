package dev.codeexec.http;

import dev.codeexec.auth.Principal;
import dev.codeexec.mcp.MessageInterceptor;
import dev.codeexec.mcp.RunRegistry;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.WriteListener;
import jakarta.servlet.http.HttpFilter;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpServletResponseWrapper;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.function.Consumer;

/**
 * Sits between the edge checks and the SDK's servlet on /mcp, for four gaps of the SDK (2.1.0; 2.2.0's 2025-11-25 stack has them too):
 * <ol>
 *   <li>It buffers each POST body through {@link Bodies} (at most MAX_BODY_MB, counted while reading, so chunked
 *   bodies are capped too; within the server-wide BODY_MEMORY_MB and BODY_TIMEOUT_SECONDS), answers non-JSON with a
 *   clean 400, and shows the message to {@link MessageInterceptor}: that is where
 *   {@code notifications/cancelled} becomes a cancelled run. The SDK then reads the same bytes (or the interceptor's
 *   rewrite) through a request wrapper.</li>
 *   <li>An {@code Mcp-Session-Id} belongs to the key that opened it ({@link McpSessionOwners}): a request naming it
 *   with another key gets the 404 of an unknown session before anything else looks at it, its body unread.</li>
 *   <li>DELETE of a session cancels every run of that session.</li>
 *   <li>Every error response of the SDK ({@code sendError}, or a status of 400 or more with a body that is a
 *   serialized Java exception) is replaced by our JSON-RPC error with a short message.</li>
 * </ol>
 */
final class McpEndpointFilter extends HttpFilter {

    private static final Logger LOG = LoggerFactory.getLogger(McpEndpointFilter.class);
    /** SDK error texts that help a client and carry nothing internal; any other text becomes a generic one. */
    private static final List<String> SAFE_SDK_MESSAGES = List.of("text/event-stream required in Accept header",
            "application/json required in Accept header", "Session ID required in mcp-session-id header",
            "Unsupported Media Type: Content-Type must be application/json", "Server is shutting down");

    /** What the SDK answers for an unknown session, and we for a session of another key. */
    static final String SESSION_NOT_FOUND = "Session not found";

    private final MessageInterceptor interceptor;
    private final RunRegistry registry;
    private final McpSessionOwners owners = new McpSessionOwners();
    private final long maxBodyBytes;
    private final Bodies bodies;
    private final HttpServlet stateless;
    /** POSTs being handled now; a tool call's POST lasts until its result is written. */
    private final Object inFlightLock = new Object();
    private int inFlight;

    McpEndpointFilter(MessageInterceptor interceptor, RunRegistry registry, long maxBodyBytes, Bodies bodies) {
        this(interceptor, registry, maxBodyBytes, bodies, null);
    }

    /**
     * @param stateless the servlet of MCP revision 2026-07-28 (no session: each request says its revision), or null
     *                  where only 2025-11-25 is served
     */
    McpEndpointFilter(MessageInterceptor interceptor, RunRegistry registry, long maxBodyBytes, Bodies bodies,
            HttpServlet stateless) {
        this.interceptor = interceptor;
        this.registry = registry;
        this.maxBodyBytes = maxBodyBytes;
        this.bodies = bodies;
        this.stateless = stateless;
    }

    /**
     * Whether a request is of revision 2026-07-28: it carries no session and says its revision in
     * MCP-Protocol-Version (a 2025-11-25 client sends initialize without that header, then its Mcp-Session-Id).
     */
    static boolean stateless(HttpServletRequest request) {
        if (request.getHeader("Mcp-Session-Id") != null) return false;
        String v = request.getHeader("MCP-Protocol-Version");
        return v != null && v.strip().compareTo("2026-07-28") >= 0;
    }

    /** Runs of revision 2026-07-28 have no session: they are named (for cancel) within their key. */
    static String statelessScope(String keyId) {
        return "stateless:" + keyId;
    }

    @Override
    protected void doFilter(HttpServletRequest request, HttpServletResponse response, FilterChain chain)
            throws IOException, ServletException {
        if (!"POST".equals(request.getMethod())) {
            handle(request, response, chain);
            return;
        }
        synchronized (inFlightLock) {
            inFlight++;
        }
        try {
            handle(request, response, chain);
        } finally {
            synchronized (inFlightLock) {
                inFlight--;
                inFlightLock.notifyAll();
            }
        }
    }

    /**
     * Waits until no POST is being handled, or the deadline passes: on shutdown, after the executor has finished or
     * killed the runs, this lets their calls write their results before the sessions and connections close.
     */
    void awaitIdle(long millis) throws InterruptedException {
        long until = System.nanoTime() + millis * 1_000_000;
        synchronized (inFlightLock) {
            long left;
            while (inFlight > 0 && (left = until - System.nanoTime()) > 0) inFlightLock.wait(left / 1_000_000 + 1);
        }
    }

    private void handle(HttpServletRequest request, HttpServletResponse response, FilterChain chain)
            throws IOException, ServletException {
        String session = request.getHeader("Mcp-Session-Id");
        String keyId = keyId(request);
        if (session != null && !owners.mayUse(session, keyId)) {
            JsonErrors.write(response, 404, SESSION_NOT_FOUND);
            return;
        }
        if (!"POST".equals(request.getMethod())) {
            forward(request, request, response, chain, session, keyId);
            return;
        }
        // The body's bytes count against the server-wide budget until the call is answered.
        try (Bodies.Body body = bodies.read(request, maxBodyBytes, "MAX_BODY_MB")) {
            String text = new String(body.bytes(), StandardCharsets.UTF_8);
            HttpServletRequest forward;
            try {
                boolean modern = stateless != null && stateless(request);
                String scope = modern ? statelessScope(keyId) : session == null ? "" : session;
                String out = interceptor.intercept(scope, principal(request),
                        RequestTracker.requestId(request).orElse(null), text);
                forward = new BufferedBodyRequest(request, out.equals(text) ? body.bytes() : out.getBytes(StandardCharsets.UTF_8));
            } catch (JacksonException e) {
                JsonErrors.write(response, 400, -32700, "Parse error: the body is not valid JSON");
                return;
            } catch (MessageInterceptor.NotAMessage e) {
                JsonErrors.write(response, 400, -32600, "Invalid Request: the body must be one JSON-RPC message object");
                return;
            }
            forward(request, forward, response, chain, session, keyId);
        } catch (Bodies.Refused e) {
            e.prepare(response);
            JsonErrors.write(response, e.why.status, e.getMessage());
        }
    }

    /** Hands the request to the SDK, keeps its error bodies out, and follows the session's end. */
    private void forward(HttpServletRequest request, HttpServletRequest forward, HttpServletResponse response,
            FilterChain chain, String session, String keyId) throws IOException, ServletException {
        boolean modern = stateless != null && stateless(request);
        CleanErrorResponse wrapped = new CleanErrorResponse(response, handedOut -> owners.bind(handedOut, keyId), modern);
        try {
            if (modern) stateless.service(forward, wrapped);
            else chain.doFilter(forward, wrapped);
        } finally {
            wrapped.finish();
        }
        if (session == null) return;
        if (wrapped.errorStatus == 404) {
            owners.forget(session); // the SDK no longer knows it
        } else if ("DELETE".equals(request.getMethod()) && response.getStatus() < 400) {
            owners.forget(session);
            int cancelled = registry.cancelSession(session);
            if (cancelled > 0) LOG.info("session ended: cancelled {} run(s)", cancelled);
        }
    }

    /**
     * Lets successful responses (JSON, SSE) through untouched; from the moment the SDK sets an error status, its
     * body goes into a buffer that is thrown away, and {@link #finish()} writes our JSON error instead.
     */
    private static final class CleanErrorResponse extends HttpServletResponseWrapper {
        private final ByteArrayOutputStream swallowed = new ByteArrayOutputStream();
        private final Consumer<String> onSessionId;
        private int errorStatus;
        private String errorText;
        private boolean sent;

        /** Whether the SDK's own JSON-RPC errors pass (revision 2026-07-28's server writes them itself, with an id). */
        private final boolean jsonRpcErrorsPass;

        /**
         * @param onSessionId       told of the Mcp-Session-Id the SDK hands out, before the header is sent
         * @param jsonRpcErrorsPass whether an error body that is a JSON-RPC error with a short one-line message is
         *                          sent as the SDK wrote it (else every error is ours)
         */
        CleanErrorResponse(HttpServletResponse response, Consumer<String> onSessionId, boolean jsonRpcErrorsPass) {
            super(response);
            this.onSessionId = onSessionId;
            this.jsonRpcErrorsPass = jsonRpcErrorsPass;
        }

        @Override
        public void setHeader(String name, String value) {
            if ("Mcp-Session-Id".equalsIgnoreCase(name) && value != null) onSessionId.accept(value);
            super.setHeader(name, value);
        }

        @Override
        public void addHeader(String name, String value) {
            if ("Mcp-Session-Id".equalsIgnoreCase(name) && value != null) onSessionId.accept(value);
            super.addHeader(name, value);
        }

        @Override
        public void sendError(int sc) {
            sendError(sc, null);
        }

        @Override
        public void sendError(int sc, String msg) {
            errorStatus = sc;
            errorText = msg;
        }

        @Override
        public void setStatus(int sc) {
            if (sc >= 400) errorStatus = sc;
            else super.setStatus(sc);
        }

        @Override
        public ServletOutputStream getOutputStream() throws IOException {
            if (errorStatus == 0) return super.getOutputStream();
            return new ServletOutputStream() {
                @Override
                public boolean isReady() {
                    return true;
                }

                @Override
                public void setWriteListener(WriteListener listener) {
                }

                @Override
                public void write(int b) {
                    swallowed.write(b);
                }
            };
        }

        @Override
        public PrintWriter getWriter() throws IOException {
            if (errorStatus == 0) return super.getWriter();
            return new PrintWriter(new OutputStreamWriter(swallowed, StandardCharsets.UTF_8), true);
        }

        @Override
        public void setContentLength(int len) {
            if (errorStatus == 0) super.setContentLength(len);
        }

        @Override
        public void setContentLengthLong(long len) {
            if (errorStatus == 0) super.setContentLengthLong(len);
        }

        void finish() throws IOException {
            if (errorStatus == 0 || sent || getResponse().isCommitted()) return;
            sent = true;
            HttpServletResponse real = (HttpServletResponse) getResponse();
            real.resetBuffer();
            if (jsonRpcErrorsPass && plainJsonRpcError()) {
                real.setStatus(errorStatus);
                real.setContentType("application/json");
                real.setCharacterEncoding("UTF-8");
                real.setContentLength(swallowed.size());
                real.getOutputStream().write(swallowed.toByteArray());
                return;
            }
            JsonErrors.write(real, errorStatus, JsonErrors.codeFor(errorStatus), message());
        }

        private String message() {
            String sdk = errorText != null ? errorText : sdkMessage();
            if (errorStatus == 404) return SESSION_NOT_FOUND;
            if (sdk == null) return JsonErrors.messageFor(errorStatus);
            String safe = String.join("; ", SAFE_SDK_MESSAGES.stream().filter(sdk::contains).toList());
            return safe.isEmpty() ? JsonErrors.messageFor(errorStatus) : safe;
        }

        /**
         * Whether the swallowed body is a JSON-RPC error and nothing more: {jsonrpc, id, error: {code, message, data?}}
         * with an integer code and a message of one short line (never a serialized exception or a stack trace).
         */
        private boolean plainJsonRpcError() {
            if (swallowed.size() == 0 || swallowed.size() > 4096) return false;
            try {
                JsonNode node = JsonErrors.JSON.readTree(swallowed.toByteArray());
                JsonNode e = node.get("error");
                if (node.size() > 3 || !"2.0".equals(node.path("jsonrpc").asString("")) || e == null || !e.isObject()) return false;
                String m = e.path("message").asString("");
                return e.path("code").isIntegralNumber() && !m.isEmpty() && m.length() <= 300 && m.indexOf('\n') < 0
                        && !m.contains("Exception") && !m.contains("\tat ");
            } catch (JacksonException ex) {
                return false;
            }
        }

        private String sdkMessage() {
            JsonNode error = sdkError();
            return error == null ? null : error.path("message").asString(null);
        }

        /** The SDK serializes McpError (an exception) whole; its JSON-RPC part is under jsonRpcError. */
        private JsonNode sdkError() {
            if (swallowed.size() == 0) return null;
            try {
                JsonNode node = JsonErrors.JSON.readTree(swallowed.toByteArray());
                JsonNode e = node.get("jsonRpcError");
                if (e == null) e = node.get("error");
                return e != null && e.isObject() ? e : null;
            } catch (JacksonException e) {
                return null;
            }
        }
    }

    /** The key the caller presented, as the edge filter (which runs first) identified it. */
    private static String keyId(HttpServletRequest request) {
        return request.getAttribute(EdgeFilter.KEY_ID_ATTRIBUTE) instanceof String k ? k : EdgeFilter.OPEN_KEY_ID;
    }

    /** The caller as authenticated by the edge filter (which runs first); the default tenant without keys. */
    private static Principal principal(HttpServletRequest request) {
        return request.getAttribute(Principal.ATTRIBUTE) instanceof Principal p ? p : Principal.DEFAULT;
    }
}
