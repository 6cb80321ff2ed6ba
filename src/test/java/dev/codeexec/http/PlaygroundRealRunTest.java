package dev.codeexec.http;

import dev.codeexec.config.Config;
import dev.codeexec.engine.Executor;
import dev.codeexec.local.LocalExecutor;
import dev.codeexec.surface.ServerSetup;
import dev.codeexec.mcp.TestServers;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.Sandboxes;
import dev.codeexec.testing.Poll;
import dev.codeexec.testing.Requires;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import tools.jackson.databind.JsonNode;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** POST /api/execute with the real engine and sandbox: python output streams as it is printed; a disconnect kills the run. */
@Tag("sandbox")
@Timeout(value = 120, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class PlaygroundRealRunTest {

    HttpServer server;
    Executor executor;
    final HttpClient http = HttpClient.newHttpClient();

    @BeforeEach
    void start() throws Exception {
        Path data = Files.createTempDirectory("playground-data");
        Files.setPosixFilePermissions(data, PosixFilePermissions.fromString("rwx--x--x"));
        Config config = Config.of("PORT", "0", "DATA_DIR", data.toString(), "WARM_POOL", "off");
        Sandbox sandbox = Sandboxes.create(config);
        Requires.that(sandbox.unavailableReason().isEmpty(), "a sandbox that can run code here ("
                + sandbox.unavailableReason().orElse("") + ")");
        executor = LocalExecutor.create(config, sandbox);
        ServerSetup setup = TestServers.real(config, sandbox, executor);
        server = HttpServer.start(setup);
    }

    @AfterEach
    void stop() {
        // the server closes its executor; without a server (its start failed) the executor's start-up work
        // (language warm-ups) would outlive the test
        if (server != null) server.close();
        else if (executor != null) executor.close();
    }

    private String base() {
        return "http://127.0.0.1:" + server.port();
    }

    private JsonNode get(String path) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(base() + path)).GET().build(),
                HttpResponse.BodyHandlers.ofString());
        assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
        return JsonErrors.JSON.readTree(r.body());
    }

    @Test
    void aSessionCallsFigureComesAsAFigureLineBeforeTheResult() throws Exception {
        String code = "import matplotlib.pyplot as plt\\nplt.plot([1, 2, 3])\\nplt.show()\\n6 * 7";
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(base() + "/api/execute"))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString("{\"language\":\"python\",\"session\":\"plots\",\"code\":\""
                        + code + "\"}")).build(), HttpResponse.BodyHandlers.ofString());
        assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
        List<JsonNode> lines = r.body().lines().map(JsonErrors.JSON::readTree)
                .filter(n -> !n.path("type").asString().equals("keepalive")).toList();
        assertThat(lines.getLast().path("type").asString()).as(r.body()).isEqualTo("result");
        JsonNode result = lines.getLast().path("result");
        assertThat(result.path("result").asString()).as(r.body()).isEqualTo("42");
        assertThat(result.path("figures")).hasSize(1);
        List<JsonNode> figures = lines.stream().filter(n -> n.path("type").asString().equals("figure")).toList();
        assertThat(figures).as(r.body()).hasSize(1);
        assertThat(figures.getFirst().path("mimeType").asString()).isEqualTo("image/png");
        byte[] png = java.util.Base64.getDecoder().decode(figures.getFirst().path("data").asString());
        assertThat(png).startsWith(0x89, 'P', 'N', 'G');
        assertThat(png).hasSize(result.path("figures").get(0).path("size").asInt());
        executor.sessions().close("default", "plots");
    }

    @Test
    void pythonOutputArrivesLineByLineBeforeTheResult() throws Exception {
        String code = "import time\\nprint('first', flush=True)\\ntime.sleep(0.3)\\nprint('second')";
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(base() + "/api/execute"))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString("{\"language\":\"python\",\"code\":\"" + code + "\"}")).build(),
                HttpResponse.BodyHandlers.ofString());
        assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
        List<JsonNode> lines = r.body().lines().map(JsonErrors.JSON::readTree)
                .filter(n -> !n.path("type").asString().equals("keepalive")).toList();
        // Output lines first (the interpreter may hand over "first" and its newline apart), then one result.
        List<JsonNode> output = lines.subList(0, lines.size() - 1);
        assertThat(output).as(r.body()).allSatisfy(n -> assertThat(n.path("type").asString()).isEqualTo("output"));
        assertThat(output.stream().map(n -> n.path("text").asString()).reduce("", String::concat))
                .isEqualTo("first\nsecond\n");
        // Printed 300 ms apart, the two lines never share an output line: each went out as it was printed.
        assertThat(output).as(r.body()).noneSatisfy(n -> assertThat(n.path("text").asString()).contains("first")
                .contains("second"));
        JsonNode result = lines.getLast().path("result");
        assertThat(lines.getLast().path("type").asString()).isEqualTo("result");
        assertThat(result.path("stdout").asString()).isEqualTo("first\nsecond\n");
        assertThat(result.path("exitCode").asInt()).isZero();
        assertThat(result.path("sandbox").asString()).isNotEqualTo("fake");

        JsonNode run = get("/api/admin/executions").path("executions").get(0);
        assertThat(run.path("language").asString()).isEqualTo("python");
        assertThat(run.path("outcome").asString()).isEqualTo("exited");
        assertThat(run.path("codeExcerpt").asString()).isEqualTo("import time print('first', flush=True) time.sleep(0.3) print('second')");
        JsonNode detail = get("/api/admin/executions/" + run.path("id").asString());
        assertThat(detail.path("stdout").asString()).isEqualTo("first\nsecond\n");
        assertThat(detail.path("cpuTimeMs").isNumber()).isTrue();
    }

    @Test
    void closingTheConnectionKillsTheRun() throws Exception {
        String body = "{\"language\":\"python\",\"code\":\"import time\\nprint('started', flush=True)\\ntime.sleep(60)\"}";
        try (Socket s = new Socket("127.0.0.1", server.port())) {
            OutputStream out = s.getOutputStream();
            out.write(("POST /api/execute HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    + "Content-Length: " + body.getBytes(StandardCharsets.UTF_8).length + "\r\n\r\n" + body)
                    .getBytes(StandardCharsets.UTF_8));
            out.flush();
            InputStream in = s.getInputStream();
            assertThat(AdminApiTest.readUntil(in, "started")).startsWith("HTTP/1.1 200");
            assertThat(executor.status().running()).isEqualTo(1);
        }
        JsonNode run = Poll.until("the run ended", () -> get("/api/admin/executions").path("executions").get(0),
                r -> !r.path("running").asBoolean());
        assertThat(run.path("outcome").asString()).as("killed, not ended by its 60 s sleep").isEqualTo("cancelled");
        assertThat(executor.status().running()).isZero();
    }
}
