package dev.codeexec.codemode;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.codeexec.egress.LocalEndpoint;
import dev.codeexec.testing.LogCapture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Credentialed API routes ({@link ApiRoutes} through a run's {@link CodeToolsRun}) against a JDK HttpServer on
 * 127.0.0.1 that records what reaches it: who may call what, the fields dropped and added, redirects, caps, the
 * timeout, the record and the audit line.
 */
class ApiRoutesTest {

    private static final JsonMapper JSON = JsonMapper.shared();
    private static final String TOKEN = "tok-0123456789-secret";
    private static final String KEY = "key-abcdefghij-secret";

    /** A request as the fixture saw it. */
    record Seen(String method, String uri, Map<String, List<String>> headers, String body) {
    }

    private HttpServer server;
    private final ConcurrentLinkedQueue<Seen> seen = new ConcurrentLinkedQueue<>();
    private final CountDownLatch release = new CountDownLatch(1);
    private String base;

    @BeforeEach
    void fixture() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.setExecutor(Executors.newVirtualThreadPerTaskExecutor());
        server.createContext("/", this::serve);
        server.start();
        base = "http://127.0.0.1:" + server.getAddress().getPort();
    }

    @AfterEach
    void stop() {
        release.countDown();
        server.stop(0);
    }

    private void serve(HttpExchange x) throws IOException {
        String body = new String(x.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
        seen.add(new Seen(x.getRequestMethod(), x.getRequestURI().toString(), Map.copyOf(x.getRequestHeaders()), body));
        String path = x.getRequestURI().getPath();
        byte[] out;
        switch (path) {
            case "/v1/redirect-in" -> {
                x.getResponseHeaders().add("Location", base + "/v1/echo/next?page=2");
                x.sendResponseHeaders(302, -1);
                x.close();
                return;
            }
            case "/v1/redirect-out" -> {
                x.getResponseHeaders().add("Location", "http://other.test/steal");
                x.sendResponseHeaders(302, -1);
                x.close();
                return;
            }
            case "/v1/slow" -> {
                try {
                    release.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                out = "late".getBytes(StandardCharsets.UTF_8);
            }
            case "/v1/big" -> out = "x".repeat(5000).getBytes(StandardCharsets.UTF_8);
            default -> {
                // echoes what it was sent, headers included: an API that does so must not show the token to code
                x.getResponseHeaders().add("Set-Cookie", "session=abc");
                x.getResponseHeaders().add("X-Echo-Auth", String.valueOf(x.getRequestHeaders().getFirst("Authorization")));
                out = JSON.writeValueAsBytes(Map.of("method", x.getRequestMethod(), "uri", x.getRequestURI().toString(),
                        "auth", String.valueOf(x.getRequestHeaders().getFirst("Authorization")), "body", body));
            }
        }
        x.getResponseHeaders().add("Content-Type", path.equals("/v1/big") ? "application/octet-stream" : "application/json");
        x.sendResponseHeaders(200, out.length);
        x.getResponseBody().write(out);
        x.close();
    }

    private CodeTools tools(Path dir, String apis, int maxCalls, long maxBytes, Duration timeout) {
        UpstreamConfig cfg = UpstreamConfig.parse("{\"httpApis\": " + apis.replace("BASE", base) + "}",
                Map.of("TOKEN", TOKEN, "KEY", KEY)::get);
        return new CodeTools(new Upstreams(cfg, Duration.ZERO).start(), dir, maxCalls, maxBytes, timeout);
    }

    private static final String FX = """
            {"fx": {"url": "BASE/v1", "headers": {"Authorization": "Bearer ${TOKEN}", "X-Api-Key": "${KEY}"},
                    "methods": ["GET", "POST"], "paths": ["/echo/**", "/redirect-*", "/slow", "/big"], "description": "the fixture"},
             "only-b": {"url": "BASE/v1", "tenants": ["team-b"]}}
            """;

    private static LocalEndpoint.Response call(CodeToolsRun run, String method, String target, byte[] body, String... fields) {
        List<LocalEndpoint.Header> headers = new ArrayList<>();
        for (int i = 0; i < fields.length; i += 2) headers.add(new LocalEndpoint.Header(fields[i], fields[i + 1]));
        return run.handle(new LocalEndpoint.Request(method, target, headers, body));
    }

    private static String text(LocalEndpoint.Response r) {
        return new String(r.body(), StandardCharsets.UTF_8);
    }

    private static String header(LocalEndpoint.Response r, String name) {
        return r.headers().stream().filter(h -> h.name().equalsIgnoreCase(name)).map(LocalEndpoint.Header::value).findFirst()
                .orElse(null);
    }

    @Test
    void aCallReachesTheApiWithTheConfiguredHeadersAndWithoutTheCallersCredentials(@TempDir Path dir) {
        try (CodeTools tools = tools(dir, FX, 100, 16 << 20, Duration.ofSeconds(10));
             LogCapture audit = LogCapture.named("audit")) {
            CodeToolsRun run = tools.open("team-a", "run-1");
            byte[] body = "{\"title\": \"hi\"}".getBytes(StandardCharsets.UTF_8);
            LocalEndpoint.Response r = call(run, "POST", "/apis/fx/echo/issues?state=open&q=a%20b", body,
                    "Authorization", "Bearer the-codes-own", "Cookie", "c=1", "Proxy-Authorization", "Basic eA==",
                    "Host", "evil.test", "Connection", "keep-alive, X-Hop", "X-Hop", "1", "Accept-Encoding", "gzip",
                    "Content-Type", "application/json", "X-Request-Id", "r-7", "X-Api-Key", "the-codes-key",
                    "Content-Length", String.valueOf(body.length));
            assertThat(r.status()).isEqualTo(200);
            Seen s = seen.poll();
            assertThat(s.method()).isEqualTo("POST");
            assertThat(s.uri()).isEqualTo("/v1/echo/issues?state=open&q=a%20b");
            assertThat(s.body()).isEqualTo("{\"title\": \"hi\"}");
            assertThat(s.headers().get("Authorization")).containsExactly("Bearer " + TOKEN);
            assertThat(s.headers().get("X-api-key")).containsExactly(KEY);
            assertThat(s.headers().get("Host")).containsExactly(base.substring("http://".length()));
            assertThat(s.headers()).doesNotContainKeys("Cookie", "Proxy-authorization", "X-hop", "Accept-encoding");
            assertThat(s.headers().get("X-request-id")).containsExactly("r-7");
            assertThat(s.headers().get("Content-type")).containsExactly("application/json");

            // the API echoed the token: the code gets it masked, in the body and in the header fields
            assertThat(text(r)).doesNotContain(TOKEN).contains("\"auth\":\"" + Secrets.MASK + "\"");
            assertThat(header(r, "X-Echo-Auth")).isEqualTo(Secrets.MASK);
            assertThat(header(r, "Set-Cookie")).isNull();
            assertThat(r.contentType()).isEqualTo("application/json");

            ApiCall c = run.report().apiCalls().getFirst();
            assertThat(c).isEqualTo(new ApiCall("fx", "POST", "/echo/issues", 200, c.ms(), r.body().length, body.length));
            assertThat(audit.contains("api_call run=run-1 tenant=team-a api=fx method=POST path=/echo/issues status=200 ms="))
                    .isTrue();
            assertThat(audit.contains("state=open")).as("the query is not audited").isFalse();
        }
    }

    @Test
    void aBodyTheProgramSentChunkedGoesOnWithAContentLengthAndIsCounted(@TempDir Path dir) {
        try (CodeTools tools = tools(dir, FX, 100, 16 << 20, Duration.ofSeconds(10))) {
            CodeToolsRun run = tools.open("team-a", "run-chunked");
            // the channel hands the endpoint the body without its chunk framing; the fields are as the program sent them
            byte[] body = "line 1\nline 2\n".getBytes(StandardCharsets.UTF_8);
            LocalEndpoint.Response r = call(run, "POST", "/apis/fx/echo/upload", body, "Transfer-Encoding", "chunked",
                    "Content-Type", "text/plain");
            assertThat(r.status()).isEqualTo(200);
            Seen s = seen.poll();
            assertThat(s.body()).isEqualTo("line 1\nline 2\n");
            assertThat(s.headers().get("Content-length")).containsExactly(String.valueOf(body.length));
            assertThat(s.headers()).doesNotContainKey("Transfer-encoding");
            assertThat(run.report().apiCalls().getFirst().bytesOut()).isEqualTo(body.length);
        }
    }

    @Test
    void aTenantMethodOrPathThatIsNotAllowedIsRefusedNamingWhatIs(@TempDir Path dir) {
        try (CodeTools tools = tools(dir, FX, 100, 16 << 20, Duration.ofSeconds(10))) {
            CodeToolsRun run = tools.open("team-a", "run-1");
            LocalEndpoint.Response other = call(run, "GET", "/apis/only-b/echo", new byte[0]);
            LocalEndpoint.Response missing = call(run, "GET", "/apis/nope/echo", new byte[0]);
            assertThat(other.status()).isEqualTo(403);
            assertThat(text(other)).contains("\"reason\":\"not_allowed\"", "no API 'only-b' for this caller (it may call: fx)");
            assertThat(text(missing)).isEqualTo(text(other).replace("only-b", "nope"));

            LocalEndpoint.Response delete = call(run, "DELETE", "/apis/fx/echo/x", new byte[0]);
            assertThat(delete.status()).isEqualTo(403);
            assertThat(text(delete)).contains("DELETE is not allowed on API fx (allowed: GET, POST)");
            LocalEndpoint.Response path = call(run, "GET", "/apis/fx/admin/users", new byte[0]);
            assertThat(path.status()).isEqualTo(403);
            assertThat(text(path)).contains("the path /admin/users is not allowed on API fx (allowed: /echo/**, /redirect-*, /slow, /big)");
            LocalEndpoint.Response dots = call(run, "GET", "/apis/fx/echo/%2e%2e/admin", new byte[0]);
            assertThat(dots.status()).isEqualTo(400);
            assertThat(text(dots)).contains("'..' segment");
            assertThat(seen).as("no refused call reached the API").isEmpty();

            // the tenant that may: the API without lists takes any method and path
            LocalEndpoint.Response b = call(tools.open("team-b", "run-2"), "DELETE", "/apis/only-b/echo/x", new byte[0]);
            assertThat(b.status()).isEqualTo(200);
            assertThat(seen.poll().uri()).isEqualTo("/v1/echo/x");
            assertThat(run.report().apiCalls()).extracting(ApiCall::status).containsExactly(403, 403, 403, 403, 400);
        }
    }

    @Test
    void aRedirectIsNeverFollowedAndOneUnderTheApiStaysOnTheRoute(@TempDir Path dir) {
        try (CodeTools tools = tools(dir, FX, 100, 16 << 20, Duration.ofSeconds(10))) {
            CodeToolsRun run = tools.open("team-a", "run-1");
            LocalEndpoint.Response in = call(run, "GET", "/apis/fx/redirect-in", new byte[0]);
            assertThat(in.status()).isEqualTo(302);
            assertThat(header(in, "Location")).isEqualTo("http://127.0.0.1:3128/apis/fx/echo/next?page=2");
            LocalEndpoint.Response out = call(run, "GET", "/apis/fx/redirect-out", new byte[0]);
            assertThat(out.status()).isEqualTo(302);
            assertThat(header(out, "Location")).isEqualTo("http://other.test/steal");
            assertThat(seen).extracting(Seen::uri).as("each redirect was answered, not followed")
                    .containsExactly("/v1/redirect-in", "/v1/redirect-out");
        }
    }

    @Test
    void apiCallsCountAgainstTheRunsCallsAndBytesAndAnAnswerPastThemIsCutOff(@TempDir Path dir) {
        try (CodeTools tools = tools(dir, FX, 2, 3000, Duration.ofSeconds(10))) {
            CodeToolsRun calls = tools.open("team-a", "run-1");
            assertThat(call(calls, "GET", "/apis/fx/echo/1", new byte[0]).status()).isEqualTo(200);
            assertThat(call(calls, "GET", "/apis/fx/echo/2", new byte[0]).status()).isEqualTo(200);
            LocalEndpoint.Response third = call(calls, "GET", "/apis/fx/echo/3", new byte[0]);
            assertThat(third.status()).isEqualTo(429);
            assertThat(text(third)).contains("\"reason\":\"call_limit\"", "2 tool and API calls (CODE_TOOLS_MAX_CALLS)");

            CodeToolsRun bytes = tools.open("team-a", "run-2");
            LocalEndpoint.Response big = call(bytes, "GET", "/apis/fx/big", new byte[0]);
            assertThat(big.status()).isEqualTo(429);
            assertThat(text(big)).contains("\"reason\":\"byte_limit\"", "it was cut off").doesNotContain("xxxx");
            assertThat(call(bytes, "GET", "/apis/fx/echo/after", new byte[0]).status()).as("nothing is left").isEqualTo(429);
            LocalEndpoint.Response body = tools.open("team-a", "run-3").tooLarge("POST", "/apis/fx/echo", 5000);
            assertThat(body.status()).isEqualTo(429);
            assertThat(text(body)).contains("(5000 bytes)", "CODE_TOOLS_MAX_MB");
            assertThat(seen).extracting(Seen::uri).containsExactly("/v1/echo/1", "/v1/echo/2", "/v1/big");
        }
    }

    @Test
    void aCallThatDoesNotAnswerInTimeEndsWith504(@TempDir Path dir) {
        try (CodeTools tools = tools(dir, FX, 100, 16 << 20, Duration.ofMillis(300))) {
            CodeToolsRun run = tools.open("team-a", "run-1");
            LocalEndpoint.Response r = call(run, "GET", "/apis/fx/slow", new byte[0]);
            assertThat(r.status()).isEqualTo(504);
            assertThat(text(r)).contains("\"reason\":\"timeout\"", "within 300 ms (CODE_TOOLS_CALL_TIMEOUT_MS)");
            assertThat(run.report().apiCalls().getFirst().status()).isEqualTo(504);
        }
    }

    @Test
    void theRouteListsTheApisTheCallerMayUseWithoutSecrets(@TempDir Path dir) {
        try (CodeTools tools = tools(dir, FX.replace("BASE/v1", "BASE/v1?key=${KEY}"), 100, 16 << 20, Duration.ofSeconds(10))) {
            assertThat(tools.environment()).containsEntry("CODE_APIS_URL", "http://127.0.0.1:3128/apis")
                    .containsEntry("CODE_TOOLS_URL", "http://127.0.0.1:3128/code-tools/v1");
            LocalEndpoint.Response r = call(tools.open("team-a", "run-1"), "GET", "/apis", new byte[0]);
            assertThat(r.status()).isEqualTo(200);
            JsonNode apis = JSON.readTree(r.body()).get("apis");
            assertThat(apis).hasSize(1);
            assertThat(apis.get(0).get("name").asString()).isEqualTo("fx");
            assertThat(apis.get(0).get("url").asString()).isEqualTo(base + "/v1");
            assertThat(apis.get(0).get("route").asString()).isEqualTo("http://127.0.0.1:3128/apis/fx");
            assertThat(text(r)).doesNotContain(KEY, TOKEN);
            assertThat(tools.listing("team-b", java.util.Optional.empty(), java.util.Optional.empty()).get("apis"))
                    .asString().contains("only-b", "fx");
            // the URL's query comes first in every call
            assertThat(call(tools.open("team-a", "run-2"), "GET", "/apis/fx/echo?x=1", new byte[0]).status()).isEqualTo(200);
            assertThat(seen.poll().uri()).isEqualTo("/v1/echo?key=" + KEY + "&x=1");
        }
    }
}
