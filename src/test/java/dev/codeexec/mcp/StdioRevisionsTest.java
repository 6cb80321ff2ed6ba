package dev.codeexec.mcp;

import dev.codeexec.config.Config;
import dev.codeexec.config.DataDir;
import dev.codeexec.egress.EgressSettings;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.lang.Languages;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.surface.ServerSetup;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PipedInputStream;
import java.io.PipedOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Both MCP revisions on one stdio pipe, message by message: a 2025-11-25 session (initialize, then calls) and
 * 2026-07-28 requests (server/discover, calls whose {@code _meta} names the revision) interleaved, each answered by
 * its own server, every answer a whole JSON line; a 2026-07-28 call's run is cancelled by its notifications/cancelled.
 */
class StdioRevisionsTest {

    static final JsonMapper JSON = JsonMapper.shared();
    Path dir;
    FakeExecutor executor = new FakeExecutor();
    StdioServer server;
    OutputStream toServer;
    final BlockingQueue<String> fromServer = new LinkedBlockingQueue<>();

    @BeforeEach
    void start() throws Exception {
        dir = Files.createTempDirectory("stdio-revisions-test");
        Files.setPosixFilePermissions(dir, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Config config = Config.of("DATA_DIR", dir.toString(), "WORKSPACE_ROOT", dir.resolve("ws").toString());
        ServerSetup setup = new ServerSetup(config, executor, new RequestValidator(config, Languages.load()),
                new Sandbox.Status("fake", Optional.empty()), "test", List.of(), TestServers.workspaces(config),
                EgressSettings.of(config));
        PipedInputStream in = new PipedInputStream(1 << 16);
        toServer = new PipedOutputStream(in);
        PipedOutputStream out = new PipedOutputStream();
        PipedInputStream outIn = new PipedInputStream(out, 1 << 16);
        server = StdioServer.start(setup, in, out);
        Thread.ofVirtual().start(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(outIn, StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) fromServer.add(line);
            } catch (Exception e) {
                // the pipe closed
            }
        });
    }

    @AfterEach
    void stop() throws Exception {
        if (toServer != null) toServer.close();
        if (server != null) server.close();
        DataDir.deleteTree(dir);
    }

    void send(Map<String, Object> message) throws Exception {
        toServer.write((JSON.writeValueAsString(message) + "\n").getBytes(StandardCharsets.UTF_8));
        toServer.flush();
    }

    static Map<String, Object> request(int id, String method, Map<String, Object> params) {
        return Map.of("jsonrpc", "2.0", "id", id, "method", method, "params", params);
    }

    /** A request of 2026-07-28: its revision, client info and capabilities in {@code _meta}. */
    static Map<String, Object> modern(int id, String method, Map<String, Object> params) {
        Map<String, Object> p = new LinkedHashMap<>(params);
        Map<String, Object> meta = new LinkedHashMap<>();
        if (p.get("_meta") instanceof Map<?, ?> m) m.forEach((k, v) -> meta.put(String.valueOf(k), v));
        meta.put("io.modelcontextprotocol/protocolVersion", "2026-07-28");
        meta.put("io.modelcontextprotocol/clientInfo", Map.of("name", "stdio-test", "version", "1"));
        meta.put("io.modelcontextprotocol/clientCapabilities", Map.of());
        p.put("_meta", meta);
        return request(id, method, p);
    }

    /** Every message up to the answer to {@code id} (each line must be one JSON message); the answer last. */
    List<JsonNode> until(int id) throws Exception {
        List<JsonNode> seen = new ArrayList<>();
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (System.nanoTime() < end) {
            String line = fromServer.poll(200, TimeUnit.MILLISECONDS);
            if (line == null) continue;
            JsonNode m = JSON.readTree(line); // a line that is not whole JSON fails here
            seen.add(m);
            if (m.path("id").asInt(-1) == id && (m.has("result") || m.has("error"))) return seen;
        }
        throw new AssertionError("no answer to " + id + "; seen " + seen);
    }

    @Test
    void bothRevisionsAreServedOnOnePipeEachByItsOwnServer() throws Exception {
        send(request(1, "initialize", Map.of("protocolVersion", "2025-11-25", "capabilities", Map.of(),
                "clientInfo", Map.of("name", "old", "version", "1"))));
        assertThat(until(1).getLast().path("result").path("protocolVersion").asString()).isEqualTo("2025-11-25");
        send(Map.of("jsonrpc", "2.0", "method", "notifications/initialized"));

        send(modern(2, "server/discover", Map.of()));
        JsonNode discover = until(2).getLast().path("result");
        assertThat(discover.path("supportedVersions").toString()).contains("2026-07-28");

        // one of each, in flight at once
        send(modern(3, "tools/call", Map.of("name", "execute_code", "arguments",
                Map.of("language", "python", "code", "print:new revision"))));
        send(request(4, "tools/call", Map.of("name", "execute_code", "arguments",
                Map.of("language", "python", "code", "print:old revision"))));
        Map<Integer, JsonNode> answers = new LinkedHashMap<>();
        for (JsonNode m : until(3)) if (m.has("result")) answers.put(m.path("id").asInt(), m.path("result"));
        if (!answers.containsKey(4)) answers.put(4, until(4).getLast().path("result"));
        JsonNode modern = answers.get(3);
        JsonNode old = answers.get(4);
        assertThat(modern.path("resultType").asString()).isEqualTo("complete");
        assertThat(modern.path("structuredContent").path("stdout").asString()).isEqualTo("new revision");
        assertThat(old.path("structuredContent").path("stdout").asString()).isEqualTo("old revision");
        assertThat(old.has("resultType")).as("a 2025-11-25 answer has no resultType: %s", old).isFalse();
    }

    @Test
    void aModernCallIsCancelledByItsNotification() throws Exception {
        executor.blockStarted = new java.util.concurrent.CountDownLatch(1);
        send(modern(7, "tools/call", Map.of("name", "execute_code", "arguments",
                Map.of("language", "python", "code", "block"))));
        assertThat(executor.blockStarted.await(10, TimeUnit.SECONDS)).isTrue();
        send(Map.of("jsonrpc", "2.0", "method", "notifications/cancelled", "params", Map.of("requestId", 7,
                "_meta", Map.of("io.modelcontextprotocol/protocolVersion", "2026-07-28"))));
        // the run is killed; the request itself gets no answer (a cancelled request is not answered, and the SDK's
        // stdio transport drops its response), or one that says it was cancelled
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (executor.cancels.get() == 0 && System.nanoTime() < end) Thread.sleep(20);
        assertThat(executor.cancels.get()).isEqualTo(1);
        for (String line; (line = fromServer.poll(500, TimeUnit.MILLISECONDS)) != null; )
            if (JSON.readTree(line).path("id").asInt(-1) == 7) assertThat(line).contains("cancelled");
    }
}
