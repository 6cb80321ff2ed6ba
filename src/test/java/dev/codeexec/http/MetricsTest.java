package dev.codeexec.http;

import dev.codeexec.mcp.FakeExecutor;
import dev.codeexec.mcp.RawClient;
import dev.codeexec.mcp.TestServers;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.http.HttpResponse;
import java.util.OptionalDouble;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static dev.codeexec.http.RealServer.ADMIN_KEY;
import static dev.codeexec.http.RealServer.METRICS_TOKEN;
import static dev.codeexec.http.RealServer.TENANT_KEY;
import static org.assertj.core.api.Assertions.assertThat;

/** GET /metrics on the real server: what a python run leaves in it, who may read it, and that no URI leaks into it. */
@Tag("sandbox")
@Timeout(value = 120, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class MetricsTest {

    static RealServer server;

    @BeforeAll
    static void start() throws Exception {
        server = new RealServer("WARM_POOL", "python=1");
    }

    @AfterAll
    static void stop() {
        if (server != null) server.close();
    }

    @Test
    void aPythonRunShowsInTheCounterTheDurationHistogramAndTheStartTimer() throws Exception {
        assertThat(server.executor.awaitWarmPool(java.time.Duration.ofSeconds(60))).isTrue();
        String session = server.session(ADMIN_KEY);
        HttpResponse<String> call = server.raw.send(server.python(session, 2, "print(6*7)", ADMIN_KEY));
        assertThat(call.statusCode()).isEqualTo(200);
        assertThat(call.body()).contains("42").doesNotContain("\"isError\":true");

        // The observers hear of the end on the engine's thread, in parallel with the call's answer: wait for them.
        String text = scrapeUntil(t -> value(t, "codeexec_executions_total{language=\"python\",outcome=\"exited\"}")
                .orElse(0) >= 1
                && value(t, "codeexec_http_requests_seconds_count{method=\"POST\",route=\"mcp\",status=\"2xx\"}").orElse(0) >= 1);
        assertThat(value(text, "codeexec_execution_duration_seconds_count{language=\"python\"}").orElse(0))
                .isGreaterThanOrEqualTo(1);
        assertThat(text).contains("codeexec_execution_duration_seconds_bucket{language=\"python\",le=\"0.01\"}")
                .contains("codeexec_execution_duration_seconds_bucket{language=\"python\",le=\"120.0\"}");
        assertThat(value(text, "codeexec_sandbox_start_seconds_count{language=\"python\",start=\"warm\"}")).hasValue(1);
        assertThat(value(text, "codeexec_warm_pool_target{language=\"python\"}")).hasValue(1);
        assertThat(value(text, "codeexec_warm_pool_ready{language=\"python\"}")).isPresent();
        assertThat(value(text, "codeexec_sessions_active")).hasValue(0);
        assertThat(value(text, "codeexec_running")).isPresent();
        assertThat(value(text, "codeexec_queue_depth")).hasValue(0);
        assertThat(value(text, "codeexec_max_concurrent")).hasValue(4);
        assertThat(text).contains("jvm_memory_used_bytes{").contains("jvm_threads_live_threads").contains("process_uptime_seconds")
                .contains("jvm_classes_loaded_classes").contains("system_cpu_count");
    }

    @Test
    void onlyTheAdminKeyOrTheMetricsTokenMayReadIt() throws Exception {
        HttpResponse<String> none = server.get("/metrics", null);
        assertThat(none.statusCode()).isEqualTo(401);
        assertThat(none.headers().firstValue("WWW-Authenticate")).hasValue("Bearer");
        assertThat(none.headers().firstValue("Content-Type")).hasValueSatisfying(ct -> assertThat(ct).startsWith("application/json"));
        assertThat(none.body()).contains("\"error\":\"unauthorized\"").doesNotContain("codeexec_");

        // The same servlet under other spellings of its path: the check must see what the servlet mapping sees.
        for (String path : new String[] {"/metrics", "/metrics;x", "/%6detrics", "/./metrics", "/x/../metrics", "/metrics/"}) {
            HttpResponse<String> tenant = server.get(path, "Bearer " + TENANT_KEY);
            assertThat(tenant.statusCode()).as(path).isIn(400, 401, 404);
            assertThat(tenant.body()).as(path).doesNotContain("codeexec_");
            assertThat(server.get(path, null).body()).as(path).doesNotContain("codeexec_");
            // byte for byte too (java.net.http normalises dots away)
            String raw = AdminConsoleServletTest.raw(server.server.port(), "GET", path, "Authorization: Bearer " + TENANT_KEY);
            assertThat(raw).as(path).doesNotContain("codeexec_").doesNotStartWith("HTTP/1.1 200");
        }
        assertThat(server.get("/metrics", "Bearer " + METRICS_TOKEN + "x").statusCode()).isEqualTo(401);
        assertThat(server.get("/metrics", "Basic " + METRICS_TOKEN).statusCode()).isEqualTo(401);
        // The token is for /metrics only: it is no key to anything else.
        assertThat(server.raw.send(server.mcpPost(null, RawClient.INIT, METRICS_TOKEN)).statusCode()).isEqualTo(401);

        for (String auth : new String[] {"Bearer " + METRICS_TOKEN, "Bearer " + ADMIN_KEY, "bearer  " + METRICS_TOKEN}) {
            HttpResponse<String> ok = server.get("/metrics", auth);
            assertThat(ok.statusCode()).as(auth).isEqualTo(200);
            assertThat(ok.headers().firstValue("Content-Type")).hasValueSatisfying(
                    ct -> assertThat(ct).startsWith("text/plain; version=0.0.4"));
            assertThat(ok.body()).contains("# TYPE codeexec_queue_depth gauge").contains("codeexec_queue_depth ");
        }
    }

    @Test
    void noPathOfARequestBecomesATag() throws Exception {
        assertThat(server.get("/no-such-place-q7z", "Bearer " + ADMIN_KEY).statusCode()).isEqualTo(404);
        assertThat(server.get("/api/workspaces/secret-ws-k3j/files/x", "Bearer " + ADMIN_KEY).statusCode())
                .isEqualTo(404);
        assertThat(server.get("/mcp/deeper-r8w?token=t0k", "Bearer " + ADMIN_KEY).statusCode()).isGreaterThanOrEqualTo(400);

        String text = scrapeUntil(t -> value(t, "codeexec_http_requests_seconds_count{method=\"GET\",route=\"other\",status=\"4xx\"}")
                .orElse(0) >= 1);
        assertThat(text).doesNotContain("no-such-place").doesNotContain("secret-ws").doesNotContain("deeper-r8w")
                .doesNotContain("t0k").doesNotContain("uri=");
        assertThat(value(text, "codeexec_http_requests_seconds_count{method=\"GET\",route=\"api\",status=\"4xx\"}").orElse(0))
                .isGreaterThanOrEqualTo(1);
        // Every route tag is one of the fixed groups.
        Matcher routes = Pattern.compile("route=\"([^\"]*)\"").matcher(text);
        while (routes.find()) assertThat(routes.group(1)).isIn("mcp", "api", "admin", "healthz", "metrics", "other");
    }

    @Test
    void withoutKeysItIsOpenUnlessAMetricsTokenIsSet() throws Exception {
        try (var open = TestServers.start(new FakeExecutor())) {
            HttpResponse<String> r = new RawClient(open.port()).send(new RawClient(open.port()).request("/metrics").GET());
            assertThat(r.statusCode()).isEqualTo(200);
            assertThat(r.body()).contains("codeexec_running");
        }
        try (var guarded = TestServers.start(new FakeExecutor(), "METRICS_TOKEN", "tok-1")) {
            RawClient raw = new RawClient(guarded.port());
            assertThat(raw.send(raw.request("/metrics").GET()).statusCode()).isEqualTo(401);
            for (String path : new String[] {"/metrics;x", "/%6detrics", "/./metrics"}) {
                assertThat(raw.send(raw.request(path).GET()).body()).as(path).doesNotContain("codeexec_");
            }
            assertThat(raw.send(raw.request("/metrics").header("Authorization", "Bearer tok-1").GET()).statusCode())
                    .isEqualTo(200);
            // Everything else of a keyless loopback server stays open.
            assertThat(raw.send(raw.request("/healthz").GET()).statusCode()).isEqualTo(200);
        }
    }

    @Test
    void aRunRefusedAtTheDoorCountsAsRejected() throws Exception {
        try (var open = TestServers.start(new FakeExecutor())) {
            RawClient raw = new RawClient(open.port());
            String session = raw.initialize();
            assertThat(raw.send(raw.mcpPost(session, RawClient.call(1, "busy"))).body()).contains("busy");
            assertThat(raw.send(raw.mcpPost(session, RawClient.call(2, "print:x"))).body()).contains("x");
            String text = raw.send(raw.request("/metrics").GET()).body();
            assertThat(value(text, "codeexec_executions_total{language=\"python\",outcome=\"rejected\"}")).hasValue(1);
            assertThat(value(text, "codeexec_executions_total{language=\"python\",outcome=\"exited\"}")).hasValue(1);
        }
    }

    /** Scrapes until the text satisfies the condition (the run's meters are updated on engine threads). */
    private static String scrapeUntil(Predicate<String> condition) throws Exception {
        return Poll.until("a scrape with the run's meters", () -> {
            HttpResponse<String> r = server.get("/metrics", "Bearer " + METRICS_TOKEN);
            assertThat(r.statusCode()).isEqualTo(200);
            return r.body();
        }, condition);
    }

    /** The value of one exact series (name and labels as printed), if present. */
    static OptionalDouble value(String text, String series) {
        for (String line : text.split("\n")) {
            if (line.startsWith(series + " ")) return OptionalDouble.of(Double.parseDouble(line.substring(series.length() + 1).trim()));
        }
        return OptionalDouble.empty();
    }
}
