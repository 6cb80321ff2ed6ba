package dev.codeexec.egress;

import java.util.List;
import java.util.Optional;

/**
 * A service of the server's that a run reaches through its channel, at {@code http://127.0.0.1:3128/...} in origin
 * form (a plain request to the proxy's address, not a proxy request): code mode's tool calls and credentialed API
 * routes. One per run, armed
 * with the run's policy; {@link #close} when the run ends cancels what it still has in flight.
 */
public interface LocalEndpoint extends AutoCloseable {

    /** The largest request body it takes; a longer one is answered 413 unread. */
    int maxRequestBytes();

    /** The answer to a request whose body is longer than {@link #maxRequestBytes} (read and dropped). */
    default Response tooLarge(String method, String path, long length) {
        return new Response(413, "application/json", ("{\"error\": \"the request body is longer than " + maxRequestBytes()
                + " bytes\", \"reason\": \"bad_request\"}").getBytes(java.nio.charset.StandardCharsets.UTF_8));
    }

    /**
     * Answers one request. Runs on the connection's own virtual thread and may block (a tool call upstream);
     * never throws for a bad request (that is an answer too).
     */
    Response handle(String method, String path, byte[] body);

    /**
     * Answers one request with its header fields (as the client sent them, in order; framing fields included) and
     * its target as sent (path and query). By default {@link #handle(String, String, byte[])}, which does not need
     * the fields.
     */
    default Response handle(Request request) {
        return handle(request.method(), request.target(), request.body());
    }

    /** The run ended: whatever is in flight is cancelled, later requests are refused. */
    @Override
    void close();

    /** One header field. */
    record Header(String name, String value) {
    }

    /** A request: its method, target in origin form (path and query), header fields and whole body. */
    record Request(String method, String target, List<Header> headers, byte[] body) {
        public Request {
            headers = List.copyOf(headers);
        }

        /** The first field named {@code name} (any case). */
        public Optional<String> header(String name) {
            return headers.stream().filter(h -> h.name().equalsIgnoreCase(name)).map(Header::value).findFirst();
        }
    }

    /**
     * An HTTP answer; {@code headers} are sent after Content-Type (empty: none) and before the framing fields the
     * channel writes itself (Content-Length, Connection), so they must hold neither.
     */
    record Response(int status, String contentType, byte[] body, List<Header> headers) {
        public Response {
            headers = List.copyOf(headers);
        }

        public Response(int status, String contentType, byte[] body) {
            this(status, contentType, body, List.of());
        }
    }
}
