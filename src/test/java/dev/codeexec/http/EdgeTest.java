package dev.codeexec.http;

import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.mcp.FakeExecutor;
import dev.codeexec.mcp.RawClient;
import dev.codeexec.surface.ServerSetup;
import dev.codeexec.testing.Poll;
import dev.codeexec.mcp.TestServers;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayInputStream;
import java.net.Socket;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;

/** The HTTP edge against the real Jetty stack: auth, CORS, Host, body size, health, and clean error bodies. */
@Tag("slow")
class EdgeTest {

    static final String KEY = "s3cret-key-for-tests";
    FakeExecutor executor = new FakeExecutor();
    HttpServer server;
    RawClient raw;

    @AfterEach
    void stop() {
        if (server != null) server.close();
    }

    private void start(String... config) throws Exception {
        server = TestServers.start(executor, config);
        raw = new RawClient(server.port());
    }

    /** No response of ours may carry a Java stack trace or exception text. */
    static void assertClean(HttpResponse<String> r) {
        assertThat(r.body()).doesNotContain("\tat ").doesNotContain("at io.").doesNotContain("at org.")
                .doesNotContain("Exception").doesNotContain("stackTrace").doesNotContain("<html");
        assertThat(r.headers().firstValue("Content-Type")).hasValueSatisfying(ct -> assertThat(ct).startsWith("application/json"));
        assertThat(r.body()).contains("\"jsonrpc\":\"2.0\"").contains("\"error\"").contains("\"id\":null");
    }

    @Test
    void healthzReportsStatusWithoutAuth() throws Exception {
        start("API_KEY", KEY);
        HttpResponse<String> r = raw.send(raw.request("/healthz").GET());
        assertThat(r.statusCode()).isEqualTo(200);
        assertThat(r.body()).contains("\"status\":\"ok\"").contains("\"version\":\"test\"").contains("\"uptime\":")
                .contains("\"running\":0").contains("\"maxConc\":4").contains("\"queued\":0").contains("\"sandbox\":\"fake\"");
    }

    @Test
    void healthzSaysDegradedWhenTheSandboxCannotRunCode() throws Exception {
        ServerSetup ok = TestServers.setup(executor, List.of());
        server = HttpServer.start(new ServerSetup(ok.config(), executor, ok.arguments(),
                new Sandbox.Status("bwrap", Optional.of("bubblewrap cannot create a user namespace")), "test", List.of(),
                ok.workspaces()));
        raw = new RawClient(server.port());
        HttpResponse<String> r = raw.send(raw.request("/healthz").GET());
        assertThat(r.statusCode()).isEqualTo(200);
        assertThat(r.body()).contains("\"status\":\"degraded\"").contains("\"sandbox\":\"bwrap\"")
                .doesNotContain("namespace");
    }

    @Test
    void apiKeyIsRequiredEverywhereButHealthz() throws Exception {
        start("API_KEY", KEY);
        HttpResponse<String> none = raw.send(raw.mcpPost(null, RawClient.INIT));
        assertThat(none.statusCode()).isEqualTo(401);
        assertThat(none.headers().firstValue("WWW-Authenticate")).hasValue("Bearer");
        assertClean(none);

        HttpResponse<String> wrong = raw.send(raw.mcpPost(null, RawClient.INIT).header("Authorization", "Bearer " + KEY + "x"));
        assertThat(wrong.statusCode()).isEqualTo(401);
        assertClean(wrong);
        HttpResponse<String> prefix = raw.send(raw.mcpPost(null, RawClient.INIT).header("Authorization", "Bearer " + KEY.substring(0, 5)));
        assertThat(prefix.statusCode()).isEqualTo(401);
        HttpResponse<String> basic = raw.send(raw.mcpPost(null, RawClient.INIT).header("Authorization", "Basic " + KEY));
        assertThat(basic.statusCode()).isEqualTo(401);

        HttpResponse<String> ok = raw.send(raw.mcpPost(null, RawClient.INIT).header("Authorization", "Bearer " + KEY));
        assertThat(ok.statusCode()).isEqualTo(200);
        assertThat(ok.headers().firstValue("Mcp-Session-Id")).isPresent();
    }

    @Test
    void corsGrantsOnlyListedOrigins() throws Exception {
        start("CORS_ORIGINS", "https://app.example");
        HttpResponse<String> pre = raw.send(raw.request("/mcp").method("OPTIONS", HttpRequest.BodyPublishers.noBody())
                .header("Origin", "https://app.example").header("Access-Control-Request-Method", "POST")
                .header("Access-Control-Request-Headers", "content-type, mcp-session-id, authorization, mcp-protocol-version, x-evil"));
        assertThat(pre.statusCode()).isEqualTo(204);
        assertThat(pre.headers().firstValue("Access-Control-Allow-Origin")).hasValue("https://app.example");
        assertThat(pre.headers().allValues("Vary")).anySatisfy(v -> assertThat(v).contains("Origin"));
        assertThat(pre.headers().firstValue("Access-Control-Allow-Methods")).hasValue("GET, POST, DELETE, OPTIONS");
        assertThat(pre.headers().firstValue("Access-Control-Allow-Headers"))
                .hasValue("Content-Type, Mcp-Session-Id, Authorization, Mcp-Protocol-Version");
        assertThat(pre.headers().firstValue("Access-Control-Expose-Headers")).hasValue("Mcp-Session-Id");

        HttpResponse<String> post = raw.send(raw.mcpPost(null, RawClient.INIT).header("Origin", "https://app.example"));
        assertThat(post.statusCode()).isEqualTo(200);
        assertThat(post.headers().firstValue("Access-Control-Allow-Origin")).hasValue("https://app.example");
        assertThat(post.headers().firstValue("Access-Control-Expose-Headers")).hasValue("Mcp-Session-Id");

        HttpResponse<String> evilPre = raw.send(raw.request("/mcp").method("OPTIONS", HttpRequest.BodyPublishers.noBody())
                .header("Origin", "https://evil.example").header("Access-Control-Request-Method", "POST"));
        assertThat(evilPre.headers().firstValue("Access-Control-Allow-Origin")).isEmpty();
        assertThat(evilPre.statusCode()).isEqualTo(403);

        HttpResponse<String> evil = raw.send(raw.mcpPost(null, RawClient.INIT).header("Origin", "https://evil.example"));
        assertThat(evil.statusCode()).isEqualTo(403);
        assertThat(evil.headers().firstValue("Access-Control-Allow-Origin")).isEmpty();
        assertThat(evil.headers().firstValue("Mcp-Session-Id")).isEmpty();
        assertClean(evil);
    }

    /** java.net.http refuses to set Host, so these go over a plain socket. */
    private String rawStatusLine(String method, String path, String host, String extraHeaders, String body) throws Exception {
        try (Socket socket = new Socket("127.0.0.1", server.port())) {
            socket.setSoTimeout(10000);
            String req = method + " " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n"
                    + "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" + extraHeaders
                    + "Content-Length: " + body.getBytes(StandardCharsets.UTF_8).length + "\r\n\r\n" + body;
            socket.getOutputStream().write(req.getBytes(StandardCharsets.UTF_8));
            String response = new String(socket.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertThat(response).doesNotContain("\tat ").doesNotContain("Exception");
            return response.lines().findFirst().orElse("");
        }
    }

    @Test
    void foreignHostHeaderIsRefused() throws Exception {
        start("ALLOWED_HOSTS", "mcp.internal");
        assertThat(rawStatusLine("POST", "/mcp", "attacker.example", "", RawClient.INIT)).contains(" 403 ");
        assertThat(rawStatusLine("GET", "/healthz", "attacker.example:8080", "", "")).contains(" 403 ");
        assertThat(rawStatusLine("POST", "/mcp", "localhost:1234", "", RawClient.INIT)).contains(" 200 ");
        assertThat(rawStatusLine("POST", "/mcp", "[::1]:8080", "", RawClient.INIT)).contains(" 200 ");
        assertThat(rawStatusLine("POST", "/mcp", "mcp.internal", "", RawClient.INIT)).contains(" 200 ");
    }

    @Test
    void anExposedServerWithAnApiKeyAcceptsAnyHost() throws Exception {
        start("API_KEY", KEY, "HOST", "0.0.0.0");
        assertThat(rawStatusLine("POST", "/mcp", "code-exec.example.com", "Authorization: Bearer " + KEY + "\r\n",
                RawClient.INIT)).contains(" 200 ");
    }

    @Test
    void aLoopbackServerChecksHostEvenWithAnApiKey() throws Exception {
        start("API_KEY", KEY);
        assertThat(rawStatusLine("POST", "/mcp", "evil.example.com", "Authorization: Bearer " + KEY + "\r\n",
                RawClient.INIT)).contains(" 403 ");
    }

    @Test
    void bodyOverTheLimitIs413ByLengthAndWhenChunked() throws Exception {
        start("MAX_BODY_MB", "1");
        String session = raw.initialize();
        char[] pad = new char[1024 * 1024 + 10];
        Arrays.fill(pad, 'a');
        String big = RawClient.call(1, new String(pad));
        HttpResponse<String> sized = raw.send(raw.mcpPost(session, big));
        assertThat(sized.statusCode()).isEqualTo(413);
        assertClean(sized);

        byte[] bytes = big.getBytes();
        HttpResponse<String> chunked = raw.send(raw.mcpPost(session, big)
                .POST(HttpRequest.BodyPublishers.ofInputStream(() -> new ByteArrayInputStream(bytes))));
        assertThat(chunked.statusCode()).isEqualTo(413);
        assertClean(chunked);
        assertThat(executor.requests).isEmpty();
    }

    /** A POST to /mcp that announces {@code length} bytes and sends the first {@code sent} of them. */
    private Socket heldBody(int length, int sent) throws Exception {
        Socket socket = new Socket("127.0.0.1", server.port());
        socket.setSoTimeout(30000);
        String head = "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                + "Accept: application/json, text/event-stream\r\nContent-Length: " + length + "\r\n\r\n";
        socket.getOutputStream().write(head.getBytes(StandardCharsets.US_ASCII));
        byte[] body = new byte[sent];
        Arrays.fill(body, (byte) ' ');
        socket.getOutputStream().write(body);
        socket.getOutputStream().flush();
        return socket;
    }

    /** The whole answer on a connection the server closes after it. */
    private static String answer(Socket socket) throws Exception {
        return new String(socket.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    }

    @Test
    void heldBodiesStayWithinBodyMemoryMbAndTheNextGets503WithRetryAfter() throws Exception {
        start("MAX_BODY_MB", "1", "BODY_MEMORY_MB", "4");
        Bodies bodies = server.bodies();
        List<Socket> held = new java.util.ArrayList<>();
        String refused = null;
        try {
            // Each holds 700 KB of its 1 MB body (11 chunks of 64 KB reserved): five fit in 4 MB, the sixth does not.
            for (int i = 0; i < 12 && refused == null; i++) {
                Socket s = heldBody(1 << 20, 700 * 1024);
                int before = held.size();
                held.add(s);
                long expected = (before + 1) * 11L * Bodies.CHUNK;
                if (expected <= bodies.capacity()) {
                    Poll.until("body " + i + " held", () -> bodies.used() == expected);
                } else {
                    refused = answer(s);
                    held.remove(s);
                    s.close();
                }
            }
            assertThat(held).hasSize(5);
            assertThat(bodies.peak()).isLessThanOrEqualTo(bodies.capacity());
            assertThat(refused).startsWith("HTTP/1.1 503 ").containsIgnoringCase("Retry-After: 2")
                    .containsIgnoringCase("Connection: close")
                    .contains("\"jsonrpc\":\"2.0\"").contains("BODY_MEMORY_MB").doesNotContain("Exception");
            assertThat(bodies.used()).as("the refused body's chunks went back").isEqualTo(5 * 11L * Bodies.CHUNK);
        } finally {
            for (Socket s : held) s.close();
        }
        Poll.until("every held body's memory back in the budget", () -> bodies.used() == 0);
        assertThat(raw.send(raw.mcpPost(null, RawClient.INIT)).statusCode()).isEqualTo(200);
    }

    @Test
    void aBodyThatDoesNotArriveWithinBodyTimeoutSecondsGets408AndItsMemoryBack() throws Exception {
        start("BODY_TIMEOUT_SECONDS", "1");
        try (Socket s = heldBody(1 << 20, 100 * 1024)) {
            String answer = answer(s);
            assertThat(answer).startsWith("HTTP/1.1 408 ").containsIgnoringCase("Connection: close")
                    .contains("\"jsonrpc\":\"2.0\"").contains("BODY_TIMEOUT_SECONDS").doesNotContain("Exception");
        }
        assertThat(server.bodies().used()).isZero();
        assertThat(executor.requests).isEmpty();
    }

    @Test
    void unknownSessionIs404WithACleanBody() throws Exception {
        start();
        HttpResponse<String> post = raw.send(raw.mcpPost("no-such-session", RawClient.call(1, "print:x")));
        assertThat(post.statusCode()).isEqualTo(404);
        assertClean(post);
        assertThat(post.body()).contains("Session not found").doesNotContain("no-such-session");

        HttpResponse<String> get = raw.send(raw.request("/mcp").header("Accept", "text/event-stream")
                .header("Mcp-Session-Id", "no-such-session").GET());
        assertThat(get.statusCode()).isEqualTo(404);
        assertClean(get);

        HttpResponse<String> delete = raw.send(raw.request("/mcp").header("Mcp-Session-Id", "no-such-session").DELETE());
        assertThat(delete.statusCode()).isEqualTo(404);
        assertClean(delete);
    }

    @Test
    void aSessionIdAnswersOnlyTheKeyThatOpenedItAndEveryOtherKeyGetsTheUnknownSession404() throws Exception {
        java.nio.file.Path keys = java.nio.file.Files.createTempFile("edge-keys", ".txt");
        java.nio.file.Files.writeString(keys, "alice " + dev.codeexec.auth.ApiKeys.hashHex("alice-1") + "\n"
                + "alice " + dev.codeexec.auth.ApiKeys.hashHex("alice-2") + "\n"
                + "bob " + dev.codeexec.auth.ApiKeys.hashHex("bob-1") + " admin\n");
        start("API_KEYS_FILE", keys.toString());
        HttpResponse<String> init = raw.send(raw.mcpPost(null, RawClient.INIT).header("Authorization", "Bearer alice-1"));
        String session = init.headers().firstValue("Mcp-Session-Id").orElseThrow();
        raw.send(raw.mcpPost(session, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}")
                .header("Authorization", "Bearer alice-1"));
        var call = java.net.http.HttpClient.newHttpClient().sendAsync(raw.mcpPost(session, RawClient.call(1, "block"))
                .header("Authorization", "Bearer alice-1").build(), HttpResponse.BodyHandlers.ofString());
        assertThat(executor.blockStarted.await(30, java.util.concurrent.TimeUnit.SECONDS)).isTrue();

        HttpResponse<String> unknown = raw.send(raw.mcpPost("no-such-session", RawClient.cancel(1))
                .header("Authorization", "Bearer bob-1"));
        assertThat(unknown.statusCode()).isEqualTo(404);
        // Another tenant (an admin key too), or another key of the same tenant: the session does not exist for them.
        for (String other : List.of("bob-1", "alice-2")) {
            List<HttpRequest.Builder> attempts = List.of(
                    raw.mcpPost(session, RawClient.cancel(1)),
                    raw.mcpPost(session, RawClient.call(2, "print:x")),
                    raw.request("/mcp").header("Accept", "text/event-stream").header("Mcp-Session-Id", session).GET(),
                    raw.request("/mcp").header("Mcp-Session-Id", session).DELETE());
            for (HttpRequest.Builder attempt : attempts) {
                HttpResponse<String> r = raw.send(attempt.header("Authorization", "Bearer " + other));
                assertThat(r.statusCode()).as(other + " " + r.request().method()).isEqualTo(404);
                assertClean(r);
                assertThat(r.body()).as("the same answer as an unknown session's").isEqualTo(unknown.body());
                assertThat(r.headers().map().keySet()).isEqualTo(unknown.headers().map().keySet());
            }
        }
        assertThat(executor.cancels.get()).as("no cancel reached the run").isZero();
        assertThat(executor.requests).hasSize(1);
        assertThat(call).isNotDone();

        HttpResponse<String> own = raw.send(raw.mcpPost(session, RawClient.cancel(1)).header("Authorization", "Bearer alice-1"));
        assertThat(own.statusCode()).isEqualTo(202);
        assertThat(call.get(30, java.util.concurrent.TimeUnit.SECONDS).body()).contains("cancelled");
        HttpResponse<String> delete = raw.send(raw.request("/mcp").header("Mcp-Session-Id", session)
                .header("Authorization", "Bearer alice-1").DELETE());
        assertThat(delete.statusCode()).isEqualTo(200);
        assertThat(raw.send(raw.mcpPost(session, RawClient.call(3, "print:x")).header("Authorization", "Bearer alice-1"))
                .statusCode()).as("a deleted session is gone for its own key too").isEqualTo(404);
    }

    @Test
    void malformedJsonIs400Clean() throws Exception {
        start();
        String session = raw.initialize();
        HttpResponse<String> r = raw.send(raw.mcpPost(session, "{\"jsonrpc\":\"2.0\", this is not json"));
        assertThat(r.statusCode()).isEqualTo(400);
        assertClean(r);
        assertThat(r.body()).contains("-32700");

        HttpResponse<String> notRpc = raw.send(raw.mcpPost(session, "{\"hello\":\"world\"}"));
        assertThat(notRpc.statusCode()).isGreaterThanOrEqualTo(400);
        assertClean(notRpc);

        for (String notAnObject : new String[]{"null", "7", "[]"}) {
            HttpResponse<String> r2 = raw.send(raw.mcpPost(session, notAnObject));
            assertThat(r2.statusCode()).as(notAnObject).isEqualTo(400);
            assertThat(r2.body()).contains("-32600");
            assertClean(r2);
        }
    }

    @Test
    void wrongContentTypeAndAcceptAreCleanErrors() throws Exception {
        start();
        String session = raw.initialize();
        HttpResponse<String> type = raw.send(raw.mcpPost(session, RawClient.call(1, "print:x")).setHeader("Content-Type", "text/plain"));
        assertThat(type.statusCode()).isEqualTo(415);
        assertClean(type);

        HttpResponse<String> get = raw.send(raw.request("/mcp").header("Accept", "text/html")
                .header("Mcp-Session-Id", session).GET());
        assertThat(get.statusCode()).isEqualTo(400);
        assertClean(get);
        assertThat(get.body()).contains("text/event-stream required in Accept header");

        HttpResponse<String> accept = raw.send(raw.mcpPost(session, RawClient.call(1, "print:x")).setHeader("Accept", "application/json"));
        assertThat(accept.statusCode()).isEqualTo(400);
        assertClean(accept);
    }

    @Test
    void unknownPathAndMethodAreJsonErrors() throws Exception {
        start();
        HttpResponse<String> missing = raw.send(raw.request("/nope").header("Accept", "text/html").GET());
        assertThat(missing.statusCode()).isEqualTo(404);
        assertClean(missing);
        HttpResponse<String> method = raw.send(raw.request("/healthz").POST(HttpRequest.BodyPublishers.ofString("x")));
        assertThat(method.statusCode()).isEqualTo(405);
        assertClean(method);
    }

    @Test
    void aRequestHeadOverJettysLimitIs431WithItsOwnReasonPhraseAndMessage() throws Exception {
        start();
        try (Socket socket = new Socket("127.0.0.1", server.port())) {
            socket.setSoTimeout(10000);
            socket.getOutputStream().write(("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + "a".repeat(20_000)
                    + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            String response = new String(socket.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertThat(response).startsWith("HTTP/1.1 431 Request Header Fields Too Large\r\n")
                    .contains("\"message\":\"Request header fields too large\"").doesNotContain("Exception");
        }
    }
}
