package dev.codeexec.mcp;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.stream.Stream;

/** Plain HTTP against /mcp, for what the SDK client cannot do (cancel, raw bodies, odd headers). */
public final class RawClient {

    public static final String INIT = """
            {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",\
            "capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}""";

    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private final String base;

    public RawClient(int port) {
        this.base = "http://127.0.0.1:" + port;
    }

    public HttpRequest.Builder request(String path) {
        return HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(30));
    }

    public HttpRequest.Builder mcpPost(String session, String json) {
        HttpRequest.Builder b = request("/mcp").header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream")
                .POST(HttpRequest.BodyPublishers.ofString(json));
        if (session != null) b.header("Mcp-Session-Id", session);
        return b;
    }

    public HttpResponse<String> send(HttpRequest.Builder b) throws IOException, InterruptedException {
        return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    public HttpResponse<Stream<String>> stream(HttpRequest.Builder b) throws IOException, InterruptedException {
        return http.send(b.build(), HttpResponse.BodyHandlers.ofLines());
    }

    /** Initializes a session and sends notifications/initialized; returns the Mcp-Session-Id. */
    public String initialize() throws IOException, InterruptedException {
        HttpResponse<String> r = send(mcpPost(null, INIT));
        if (r.statusCode() != 200) throw new IllegalStateException("initialize: " + r.statusCode() + " " + r.body());
        String session = r.headers().firstValue("Mcp-Session-Id").orElseThrow();
        send(mcpPost(session, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
        return session;
    }

    public static String call(Object id, String code) {
        return "{\"jsonrpc\":\"2.0\",\"id\":" + (id instanceof String s ? "\"" + s + "\"" : id)
                + ",\"method\":\"tools/call\",\"params\":{\"name\":\"execute_code\",\"arguments\":"
                + "{\"language\":\"python\",\"code\":\"" + code + "\"}}}";
    }

    public static String cancel(Object id) {
        return "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":"
                + (id instanceof String s ? "\"" + s + "\"" : id) + ",\"reason\":\"test\"}}";
    }
}
