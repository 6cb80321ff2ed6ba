package dev.codeexec.http;

import dev.codeexec.boot.Logging;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.OutputStreamAppender;
import dev.codeexec.auth.Principal;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.mcp.FakeExecutor;
import dev.codeexec.mcp.MessageInterceptor;
import dev.codeexec.mcp.RawClient;
import dev.codeexec.mcp.RunRegistry;
import dev.codeexec.mcp.TestServers;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.LoggerFactory;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.ByteArrayOutputStream;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * X-Request-Id on every response (the client's sane id echoed, anything else replaced), and the same id in the JSON
 * log line of the run a tool call started: through the MCP SDK's thread hop and the engine's own threads.
 */
@Tag("sandbox")
@Timeout(value = 120, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class RequestIdTest {

    private static final String SANE = "[A-Za-z0-9._-]{1,64}";
    private static final JsonMapper JSON = JsonMapper.builder().build();

    @Test
    void everyResponseCarriesAnIdAndASaneIncomingOneIsEchoed() throws Exception {
        try (HttpServer server = TestServers.start(new FakeExecutor(), "API_KEY", "k-1")) {
            RawClient raw = new RawClient(server.port());
            List<HttpResponse<String>> answers = List.of(
                    raw.send(raw.request("/healthz").GET()),                          // 200
                    raw.send(raw.request("/nowhere").header("Authorization", "Bearer k-1").GET()), // 404
                    raw.send(raw.mcpPost(null, RawClient.INIT)),                        // 401 at the edge
                    raw.send(raw.request("/api/workspaces/%2e%2e/x").GET()),             // 400 before the servlets
                    raw.send(raw.mcpPost(null, "{oops").header("Authorization", "Bearer k-1")), // 400 from /mcp
                    raw.send(raw.request("/metrics").header("Authorization", "Bearer k-1").GET())); // 200
            List<String> ids = new ArrayList<>();
            for (HttpResponse<String> r : answers) {
                String id = r.headers().firstValue("X-Request-Id").orElse(null);
                assertThat(id).as("X-Request-Id of %s (%d)", r.uri(), r.statusCode()).isNotNull().matches(SANE);
                ids.add(id);
            }
            assertThat(answers.stream().map(HttpResponse::statusCode)).containsExactly(200, 404, 401, 400, 400, 200);
            assertThat(ids).doesNotHaveDuplicates();

            for (String sane : List.of("abc-123.XY_z", "7", "x".repeat(64))) {
                HttpResponse<String> r = raw.send(raw.request("/healthz").header("X-Request-Id", sane).GET());
                assertThat(r.headers().firstValue("X-Request-Id")).hasValue(sane);
            }
            for (String insane : List.of("two words", "x".repeat(65), "<script>", "a\"b", "id;drop", "a/b", "")) {
                HttpResponse<String> r = raw.send(raw.request("/healthz").header("X-Request-Id", insane).GET());
                assertThat(r.headers().firstValue("X-Request-Id")).as(insane)
                        .hasValueSatisfying(id -> assertThat(id).isNotEqualTo(insane).matches(SANE));
            }
        }
    }

    @Test
    void aToolCallsRunCarriesTheIdOfItsPostAndAClientCannotPlantOne() throws Exception {
        FakeExecutor executor = new FakeExecutor();
        try (HttpServer server = TestServers.start(executor)) {
            RawClient raw = new RawClient(server.port());
            String session = raw.initialize();
            String planted = "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"execute_code\","
                    + "\"arguments\":{\"language\":\"python\",\"code\":\"print:hi\"},"
                    + "\"_meta\":{\"dev.codeexec/httpRequestId\":\"planted\"}}}";
            HttpResponse<String> r = raw.send(raw.mcpPost(session, planted).header("X-Request-Id", "call-77"));
            assertThat(r.statusCode()).isEqualTo(200);
            assertThat(r.headers().firstValue("X-Request-Id")).hasValue("call-77");
            ExecutionRequest.AuditInfo audit = executor.requests.getLast().audit();
            assertThat(audit.httpRequestId()).hasValue("call-77");
            assertThat(audit.requestId()).hasValue("5"); // the JSON-RPC id keeps its own field

            raw.send(raw.mcpPost(session, planted.replace("\"id\":5", "\"id\":6")));
            assertThat(executor.requests.getLast().audit().httpRequestId()).hasValueSatisfying(
                    id -> assertThat(id).isNotEqualTo("planted").matches(SANE));
        }
        // The playground's runs carry the id of their POST too.
        FakeExecutor playground = new FakeExecutor();
        try (HttpServer server = TestServers.start(playground)) {
            RawClient raw = new RawClient(server.port());
            HttpResponse<String> r = raw.send(raw.request("/api/execute").header("Content-Type", "application/json")
                    .header("X-Request-Id", "play-5").POST(java.net.http.HttpRequest.BodyPublishers.ofString(
                            "{\"language\":\"python\",\"code\":\"print:hi\"}")));
            assertThat(r.statusCode()).isEqualTo(200);
            assertThat(r.body()).contains("\"type\":\"result\"");
            assertThat(playground.requests.getLast().audit().httpRequestId()).hasValue("play-5");
        }
        // Outside HTTP (stdio) there is no id at all, and a planted one is dropped.
        String out = new MessageInterceptor(new RunRegistry()).intercept("s", Principal.DEFAULT,
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\","
                        + "\"_meta\":{\"dev.codeexec/httpRequestId\":\"planted\"}}}");
        assertThat(out).doesNotContain("planted").doesNotContain("httpRequestId");
    }

    @Test
    void aLogLineWrittenWhileServingARequestCarriesItsId() throws Exception {
        FakeExecutor executor = new FakeExecutor();
        try (HttpServer server = TestServers.start(executor); CapturedLog log = new CapturedLog("dev.codeexec.http")) {
            RawClient raw = new RawClient(server.port());
            String session = raw.initialize();
            var call = java.net.http.HttpClient.newHttpClient().sendAsync(raw.mcpPost(session,
                    RawClient.call(1, "block")).build(), HttpResponse.BodyHandlers.ofString());
            assertThat(executor.blockStarted.await(30, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
            // The tool registers the run under its session just after submitting it: a DELETE in between found
            // nothing to cancel and logged nothing (CI, once).
            dev.codeexec.testing.Poll.until("the run registered", () -> server.registry().size() == 1);
            // Ending the session cancels its run, which the /mcp filter logs on the DELETE's own thread.
            HttpResponse<String> delete = raw.send(raw.request("/mcp").header("Mcp-Session-Id", session)
                    .header("X-Request-Id", "delete-42").DELETE());
            assertThat(delete.statusCode()).isLessThan(300);
            JsonNode line = log.line("session ended: cancelled 1 run(s)");
            assertThat(line.path("mdc").path("requestId").asString()).isEqualTo("delete-42");
            call.get(30, java.util.concurrent.TimeUnit.SECONDS);
        }
    }

    @Test
    void theJsonAuditLineOfARunHasTheIdOfTheHttpRequestThatStartedIt() throws Exception {
        try (CapturedLog log = new CapturedLog("audit"); RealServer server = new RealServer("WARM_POOL", "off")) {
            String session = server.session(RealServer.TENANT_KEY);

            HttpResponse<String> given = server.raw.send(server.python(session, 11, "print(11)", RealServer.TENANT_KEY)
                    .header("X-Request-Id", "trace-given-1"));
            assertThat(given.headers().firstValue("X-Request-Id")).hasValue("trace-given-1");
            HttpResponse<String> fresh = server.raw.send(server.python(session, 12, "print(12)", RealServer.TENANT_KEY));
            String freshId = fresh.headers().firstValue("X-Request-Id").orElseThrow();
            assertThat(given.body()).contains("11");
            assertThat(fresh.body()).contains("12");

            JsonNode first = log.line("code=\"print(11)\"");
            assertThat(first.path("loggerName").asString()).isEqualTo("audit");
            assertThat(first.path("mdc").path("requestId").asString()).isEqualTo("trace-given-1");
            assertThat(first.path("formattedMessage").asString()).contains("httpRequestId=trace-given-1")
                    .contains("requestId=11").contains("tenant=alice");
            JsonNode second = log.line("code=\"print(12)\"");
            assertThat(second.path("mdc").path("requestId").asString()).isEqualTo(freshId);
            assertThat(second.path("formattedMessage").asString()).contains("httpRequestId=" + freshId);
        }
    }

    @Test
    void aJsonRpcIdOrAClientNameWithANewlineCannotPlantALineInTheLog() throws Exception {
        String forged = "\n2026-01-01T00:00:00.000Z INFO  [exec-sandbox-0] audit - run id=run-0 language=python "
                + "outcome=exited tenant=other";
        String json = forged.replace("\n", "\\n");
        for (String format : List.of("text", "json")) {
            try (CapturedLog log = new CapturedLog(org.slf4j.Logger.ROOT_LOGGER_NAME, format);
                    RealServer server = new RealServer("WARM_POOL", "off")) {
                HttpResponse<String> init = server.raw.send(server.mcpPost(null, RawClient.INIT.replace(
                        "\"name\":\"raw\"", "\"name\":\"raw" + json + "\""), RealServer.TENANT_KEY));
                String session = init.headers().firstValue("Mcp-Session-Id").orElseThrow();
                HttpResponse<String> r = server.raw.send(server.mcpPost(session, "{\"jsonrpc\":\"2.0\",\"id\":\"7"
                        + json + "\",\"method\":\"tools/call\",\"params\":{\"name\":\"execute_code\",\"arguments\":"
                        + "{\"language\":\"python\",\"code\":\"print(7)\"}}}", RealServer.TENANT_KEY));
                assertThat(r.body()).contains("7");
                String audit = log.message("code=\"print(7)\"");
                assertThat(audit).as(format).contains("tenant=alice ").contains(" requestId=\"7\\n2026-01-01T00:00:00.000Z"
                        + " INFO  [exec-sandbox-0] audit - run id=run-0 language=python outcome=exited tenant=other\"");
                assertThat(log.message("Client initialize request")).as("the SDK's own line, " + format)
                        .contains("name=raw\\n2026-01-01T00:00:00.000Z INFO  [exec-sandbox-0] audit - run id=run-0");
                assertThat(log.lines()).as(format).noneMatch(l -> l.startsWith("2026-01-01T00:00:00.000Z"));
            }
        }
    }

    /** Log lines of one logger (and its children), encoded exactly as LOG_FORMAT=json (or text) writes them. */
    private static final class CapturedLog implements AutoCloseable {
        private final ByteArrayOutputStream captured = new ByteArrayOutputStream();
        private final OutputStreamAppender<ILoggingEvent> appender = new OutputStreamAppender<>();
        private final ch.qos.logback.classic.Logger logger;
        private final String format;

        CapturedLog(String loggerName) {
            this(loggerName, "json");
        }

        CapturedLog(String loggerName, String format) {
            this.format = format;
            LoggerContext ctx = (LoggerContext) LoggerFactory.getILoggerFactory();
            appender.setContext(ctx);
            appender.setName(format + "-capture");
            appender.setEncoder(Logging.encoder(format, ctx));
            appender.setOutputStream(captured);
            appender.start();
            logger = ctx.getLogger(loggerName);
            logger.addAppender(appender);
        }

        List<String> lines() {
            return captured.toString(StandardCharsets.UTF_8).lines().toList();
        }

        /** The message of the first line containing the text, once logged (the text line itself, or the JSON's). */
        String message(String text) throws InterruptedException {
            return Poll.until("a log line with " + text, () -> lines().stream()
                    .map(l -> format.equals("json") ? JSON.readTree(l).path("formattedMessage").asString() : l)
                    .filter(m -> m.contains(text)).findFirst(), Optional::isPresent).get();
        }

        /** The first line whose message contains the text, once logged (engine threads log on their own). */
        JsonNode line(String text) throws InterruptedException {
            return Poll.until("a log line with " + text, () -> captured.toString(StandardCharsets.UTF_8).lines()
                    .map(JSON::readTree).filter(n -> n.path("formattedMessage").asString().contains(text)).findFirst(),
                    Optional::isPresent).get();
        }

        @Override
        public void close() {
            logger.detachAppender(appender);
            appender.stop();
        }
    }
}
