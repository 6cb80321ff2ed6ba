package dev.codeexec.codemode;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * An upstream MCP server of the tests' own: Streamable HTTP on 127.0.0.1, JSON answers only (no SSE stream), which
 * misbehaves on purpose. Its initialize can be answered, held without an answer until the fixture closes, or failed
 * with a 500 whose body is the request's headers (as a proxy that shows what it got would). Its tools: {@code add}
 * (structured {@code {sum}}), {@code echo}, and {@code headers*}, which give the request's headers back in a text
 * result, a structured result, an error result, a JSON-RPC error or a 500 body; {@code leaky} has them in its
 * description; {@code hang} answers only once the client cancels the call (notifications/cancelled) or the fixture
 * closes. It keeps the notifications it gets.
 */
final class FakeUpstream implements AutoCloseable {

    enum Initialize { ANSWER, HOLD, FAIL_500 }

    private static final JsonMapper JSON = JsonMapper.shared();

    private final HttpServer server;
    private final Initialize initialize;
    private final CountDownLatch closing = new CountDownLatch(1);
    private final CountDownLatch initializeHeld = new CountDownLatch(1);
    private final AtomicInteger held = new AtomicInteger();
    private final List<JsonNode> notifications = new CopyOnWriteArrayList<>();
    /** The JSON-RPC ids (as JSON text) of the hang calls that arrived, in order. */
    private final LinkedBlockingQueue<String> hanging = new LinkedBlockingQueue<>();
    /** By request id (JSON text): counted down when the client cancels that request, or when the fixture closes. */
    private final Map<String, CountDownLatch> cancelled = new ConcurrentHashMap<>();

    private FakeUpstream(HttpServer server, Initialize initialize) {
        this.server = server;
        this.initialize = initialize;
    }

    /** A fixture on {@code port} of 127.0.0.1 (0: any free one). */
    static FakeUpstream start(int port, Initialize initialize) throws IOException {
        HttpServer s = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 16);
        FakeUpstream f = new FakeUpstream(s, initialize);
        s.createContext("/mcp", f::handle);
        s.setExecutor(Executors.newVirtualThreadPerTaskExecutor());
        s.start();
        return f;
    }

    int port() {
        return server.getAddress().getPort();
    }

    String url() {
        return "http://127.0.0.1:" + port() + "/mcp";
    }

    /** Waits until an initialize is being held (Initialize.HOLD); false after the bound that stops a hung test. */
    boolean awaitInitializeHeld() throws InterruptedException {
        return initializeHeld.await(60, TimeUnit.SECONDS);
    }

    /** How many initialize requests are held unanswered now. */
    int held() {
        return held.get();
    }

    /** Waits for the next call of {@code hang} to arrive; its JSON-RPC id (as JSON text). */
    String awaitHangingCall() throws InterruptedException {
        String id = hanging.poll(60, TimeUnit.SECONDS);
        if (id == null) throw new AssertionError("no call of hang arrived");
        return id;
    }

    /** Waits until the client cancels request {@code id} (JSON text); the notification's reason. */
    String awaitCancelled(String id) throws InterruptedException {
        if (!cancelLatch(id).await(60, TimeUnit.SECONDS)) throw new AssertionError("request " + id + " was not cancelled: "
                + notifications);
        return notifications.stream().filter(n -> n.path("method").asString().equals("notifications/cancelled")
                        && n.path("params").path("requestId").toString().equals(id))
                .map(n -> n.path("params").path("reason").asString()).findFirst().orElseThrow();
    }

    /** The notifications the client sent so far, each the whole JSON-RPC message. */
    List<JsonNode> notifications() {
        return List.copyOf(notifications);
    }

    private CountDownLatch cancelLatch(String id) {
        return cancelled.computeIfAbsent(id, k -> new CountDownLatch(1));
    }

    @Override
    public void close() {
        closing.countDown();
        cancelled.values().forEach(CountDownLatch::countDown);
        server.stop(0);
    }

    private void handle(HttpExchange x) throws IOException {
        try (x) {
            if (!x.getRequestMethod().equals("POST")) {
                reply(x, 405, "text/plain", "no SSE stream here");
                return;
            }
            JsonNode msg = JSON.readTree(x.getRequestBody().readAllBytes());
            if (!msg.has("id") || !msg.has("method")) {
                if (msg.has("method")) notifications.add(msg);
                if (msg.path("method").asString().equals("notifications/cancelled"))
                    cancelLatch(msg.path("params").path("requestId").toString()).countDown();
                reply(x, 202, "text/plain", ""); // a notification
                return;
            }
            String headers = headers(x);
            JsonNode params = msg.path("params");
            Object answer = switch (msg.get("method").asString()) {
                case "initialize" -> switch (initialize) {
                    case ANSWER -> Map.of("protocolVersion", params.path("protocolVersion").asString(),
                            "capabilities", Map.of("tools", Map.of()), "serverInfo", Map.of("name", "fake", "version", "1"));
                    case HOLD -> {
                        held.incrementAndGet();
                        initializeHeld.countDown();
                        try {
                            closing.await();
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                        held.decrementAndGet();
                        yield null;
                    }
                    case FAIL_500 -> null;
                };
                case "tools/list" -> Map.of("tools", List.of(
                        tool("add", "Adds a and b.", Map.of("a", Map.of("type", "number"), "b", Map.of("type", "number"))),
                        tool("echo", "Echoes text.", Map.of("text", Map.of("type", "string"))),
                        tool("headers", "The request's headers as text.", Map.of()),
                        tool("headers_structured", "The request's headers as structured content.", Map.of()),
                        tool("headers_error_result", "An error result carrying the request's headers.", Map.of()),
                        tool("headers_rpc_error", "A JSON-RPC error carrying the request's headers.", Map.of()),
                        tool("headers_500", "A 500 whose body is the request's headers.", Map.of()),
                        tool("leaky", "Listed with the headers it was listed with: " + headers, Map.of()),
                        tool("hang", "Answers only once the call is cancelled.", Map.of())));
                case "tools/call" -> params.path("name").asString().equals("hang") ? hang(msg.get("id").toString())
                        : call(params, headers);
                case "ping" -> Map.of();
                default -> null;
            };
            boolean fail500 = answer == null || answer instanceof Fail500;
            if (fail500) {
                // on one line, as a JSON body: an error message keeps its first line only
                reply(x, 500, "application/json", JSON.writeValueAsString(Map.of("error", "upstream error",
                        "request", Map.of("headers", headerMap(headers)))));
                return;
            }
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("jsonrpc", "2.0");
            out.put("id", JSON.treeToValue(msg.get("id"), Object.class));
            if (answer instanceof RpcError e) out.put("error", Map.of("code", -32602, "message", e.message()));
            else out.put("result", answer);
            reply(x, 200, "application/json", JSON.writeValueAsString(out));
        }
    }

    private record RpcError(String message) {
    }

    /** The answer to a call of hang, once the client cancelled it (or the fixture closes). */
    private Object hang(String id) {
        CountDownLatch cancel = cancelLatch(id);
        if (closing.getCount() == 0) cancel.countDown();
        hanging.add(id);
        try {
            cancel.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return Map.of("content", List.of(text("answered after the cancel")));
    }

    private record Fail500() {
    }

    private static Object call(JsonNode params, String headers) {
        JsonNode args = params.path("arguments");
        return switch (params.path("name").asString()) {
            case "add" -> {
                double sum = args.path("a").asDouble() + args.path("b").asDouble();
                yield Map.of("content", List.of(text(String.valueOf(sum))), "structuredContent", Map.of("sum", sum));
            }
            case "echo" -> Map.of("content", List.of(text(args.path("text").asString())));
            case "headers" -> Map.of("content", List.of(text(headers)));
            case "headers_structured" -> Map.of("content", List.of(text("see structuredContent")),
                    "structuredContent", Map.of("headers", headerMap(headers)));
            case "headers_error_result" -> Map.of("content", List.of(text("refused; the request was:\n" + headers)), "isError", true);
            case "headers_rpc_error" -> new RpcError("refused; the request was: " + headers.replace('\n', ' '));
            case "headers_500" -> new Fail500();
            default -> new RpcError("no tool " + params.path("name").asString());
        };
    }

    private static Map<String, Object> tool(String name, String description, Map<String, Object> properties) {
        return Map.of("name", name, "description", description, "inputSchema", Map.of("type", "object", "properties", properties));
    }

    private static Map<String, Object> text(String text) {
        return Map.of("type", "text", "text", text);
    }

    /** The request's headers, one "Name: value" a line. */
    private static String headers(HttpExchange x) {
        StringBuilder sb = new StringBuilder();
        new TreeMap<>(x.getRequestHeaders()).forEach((k, vs) -> vs.forEach(v -> sb.append(k).append(": ").append(v).append('\n')));
        return sb.toString();
    }

    private static Map<String, String> headerMap(String headers) {
        Map<String, String> m = new TreeMap<>();
        for (String line : headers.split("\n")) {
            int c = line.indexOf(": ");
            if (c > 0) m.put(line.substring(0, c), line.substring(c + 2));
        }
        return m;
    }

    private static void reply(HttpExchange x, int status, String type, String body) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        x.getResponseHeaders().set("Content-Type", type);
        x.sendResponseHeaders(status, b.length == 0 ? -1 : b.length);
        if (b.length > 0) x.getResponseBody().write(b);
    }
}
