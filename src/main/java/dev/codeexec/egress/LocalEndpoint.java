package dev.codeexec.egress;

/**
 * A service of the server's that a run reaches through its channel, at {@code http://127.0.0.1:3128/...} in origin
 * form (a plain request to the proxy's address, not a proxy request): code mode's tool calls. One per run, armed
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

    /** The run ended: whatever is in flight is cancelled, later requests are refused. */
    @Override
    void close();

    /** An HTTP answer. */
    record Response(int status, String contentType, byte[] body) {
    }
}
