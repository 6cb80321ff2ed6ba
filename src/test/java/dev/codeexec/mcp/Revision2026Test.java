package dev.codeexec.mcp;

import dev.codeexec.auth.ApiKeys;
import dev.codeexec.config.Config;
import dev.codeexec.config.DataDir;
import dev.codeexec.egress.EgressSettings;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.http.HttpServer;
import dev.codeexec.lang.Languages;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.surface.ServerSetup;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * MCP revision 2026-07-28 on the same /mcp as 2025-11-25, through raw HTTP as its clients speak it: no initialize and
 * no session; each request says its revision in MCP-Protocol-Version and {@code _meta}. Tools (with progress on the
 * request's own stream), resources, prompts, and tenants kept apart by their keys.
 */
class Revision2026Test {

    static final JsonMapper JSON = JsonMapper.shared();
    static HttpServer server;
    static Path dir;
    static FakeExecutor executor = new FakeExecutor();
    static final HttpClient HTTP = HttpClient.newHttpClient();

    @BeforeAll
    static void start() throws Exception {
        dir = Files.createTempDirectory("revision-2026-test");
        Files.setPosixFilePermissions(dir, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Path keys = Files.writeString(dir.resolve("keys.txt"), "alice " + ApiKeys.hashHex("alice-key") + "\n"
                + "bob " + ApiKeys.hashHex("bob-key") + "\n");
        Config config = Config.of("PORT", "0", "API_KEYS_FILE", keys.toString(), "DATA_DIR", dir.toString(),
                "WORKSPACE_ROOT", dir.resolve("ws").toString());
        server = HttpServer.start(new ServerSetup(config, executor, new RequestValidator(config, Languages.load()),
                new Sandbox.Status("fake", Optional.empty()), "test", List.of(), TestServers.workspaces(config),
                EgressSettings.of(config)));
    }

    @AfterAll
    static void stop() throws Exception {
        if (server != null) server.close();
        if (dir != null) DataDir.deleteTree(dir);
    }

    /** One 2026-07-28 request: its headers, and the revision, client info and capabilities in {@code _meta}. */
    static HttpResponse<String> post(String key, int id, String method, String name, Map<String, Object> params)
            throws Exception {
        return post(key, id, method, name, params, Map.of());
    }

    /** The same, with the tasks extension declared in the request's client capabilities. */
    static HttpResponse<String> withTasks(String key, int id, String method, String name, Map<String, Object> params)
            throws Exception {
        return post(key, id, method, name, params, Map.of("extensions", Map.of(McpTasks.EXTENSION, Map.of())));
    }

    static HttpResponse<String> post(String key, int id, String method, String name, Map<String, Object> params,
            Map<String, Object> capabilities) throws Exception {
        Map<String, Object> p = new LinkedHashMap<>(params);
        Map<String, Object> meta = new LinkedHashMap<>();
        if (p.get("_meta") instanceof Map<?, ?> m) m.forEach((k, v) -> meta.put(String.valueOf(k), v));
        meta.put("io.modelcontextprotocol/protocolVersion", "2026-07-28");
        meta.put("io.modelcontextprotocol/clientInfo", Map.of("name", "revision-2026-test", "version", "1"));
        meta.put("io.modelcontextprotocol/clientCapabilities", capabilities);
        p.put("_meta", meta);
        String body = JSON.writeValueAsString(Map.of("jsonrpc", "2.0", "id", id, "method", method, "params", p));
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/mcp"))
                .timeout(Duration.ofSeconds(30))
                .header("Content-Type", "application/json").header("Accept", "application/json, text/event-stream")
                .header("MCP-Protocol-Version", "2026-07-28").header("Mcp-Method", method)
                .POST(HttpRequest.BodyPublishers.ofString(body));
        if (name != null) b.header("Mcp-Name", name);
        if (key != null) b.header("Authorization", "Bearer " + key);
        return HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    /** The JSON-RPC messages of a response: its one JSON body, or each SSE event's data in order. */
    static List<JsonNode> messages(HttpResponse<String> r) {
        List<JsonNode> out = new ArrayList<>();
        if (r.headers().firstValue("Content-Type").orElse("").startsWith("text/event-stream")) {
            for (String line : r.body().split("\n")) if (line.startsWith("data:")) out.add(JSON.readTree(line.substring(5).strip()));
        } else {
            out.add(JSON.readTree(r.body()));
        }
        return out;
    }

    static JsonNode result(HttpResponse<String> r) {
        List<JsonNode> m = messages(r);
        JsonNode last = m.getLast();
        assertThat(last.has("result")).as("a result: %s", r.body()).isTrue();
        return last.path("result");
    }

    static JsonNode call(String key, String tool, Map<String, Object> arguments) throws Exception {
        return result(post(key, 7, "tools/call", tool, Map.of("name", tool, "arguments", arguments)));
    }

    @Test
    void toolsAreListedAndCalledWithoutInitializeOrASession() throws Exception {
        HttpResponse<String> list = post("alice-key", 1, "tools/list", null, Map.of());
        assertThat(list.statusCode()).isEqualTo(200);
        assertThat(list.headers().firstValue("Mcp-Session-Id")).isEmpty();
        JsonNode tools = result(list).path("tools");
        List<String> names = new ArrayList<>();
        tools.forEach(t -> names.add(t.path("name").asString()));
        assertThat(names).contains("execute_code", "runtime_info", "write_file", "read_file", "job_status");

        JsonNode r = call("alice-key", "execute_code", Map.of("language", "python", "code", "print:hello 2026"));
        assertThat(r.path("isError").asBoolean()).isFalse();
        assertThat(r.path("structuredContent").path("stdout").asString()).isEqualTo("hello 2026");
        assertThat(r.path("resultType").asString()).isEqualTo("complete");
    }

    @Test
    void aRunsOutputStreamsAsProgressOnTheRequestsOwnStream() throws Exception {
        HttpResponse<String> r = post("alice-key", 2, "tools/call", "execute_code", Map.of("name", "execute_code",
                "arguments", Map.of("language", "python", "code", "stream:3"), "_meta", Map.of("progressToken", "tok-1")));
        List<JsonNode> m = messages(r);
        List<String> progress = new ArrayList<>();
        for (JsonNode n : m)
            if (n.path("method").asString("").equals("notifications/progress")) {
                assertThat(n.path("params").path("progressToken").asString()).isEqualTo("tok-1");
                progress.add(n.path("params").path("message").asString());
            }
        assertThat(progress).as(r.body()).hasSize(3);
        assertThat(String.join("", progress)).contains("line 0", "line 1", "line 2");
        assertThat(m.getLast().path("id").asInt()).isEqualTo(2);
        assertThat(m.getLast().path("result").path("structuredContent").path("exitCode").asInt()).isZero();
    }

    @Test
    void aTenantsFilesAndResourcesAreItsOwnUnderEitherRevision() throws Exception {
        assertThat(call("alice-key", "write_file", Map.of("workspace", "proj", "path", "a.txt", "content", "alice's"))
                .path("isError").asBoolean()).isFalse();
        JsonNode read = result(post("alice-key", 3, "resources/read", "ws://proj/a.txt", Map.of("uri", "ws://proj/a.txt")));
        assertThat(read.path("contents").get(0).path("text").asString()).isEqualTo("alice's");

        HttpResponse<String> bobs = post("bob-key", 4, "resources/read", "ws://proj/a.txt", Map.of("uri", "ws://proj/a.txt"));
        assertThat(bobs.body()).doesNotContain("alice's");
        assertThat(messages(bobs).getLast().has("error")).as(bobs.body()).isTrue();
        JsonNode bobRead = call("bob-key", "read_file", Map.of("workspace", "proj", "path", "a.txt"));
        assertThat(bobRead.path("isError").asBoolean()).isTrue();
        assertThat(bobRead.toString()).doesNotContain("alice's");

        JsonNode info = result(post("bob-key", 5, "resources/read", "code-exec://info", Map.of("uri", "code-exec://info")));
        assertThat(info.path("contents").get(0).path("text").asString()).contains("\"server\" : \"code-exec-mcp\"");
    }

    @Test
    void promptsAndServerDiscoveryAnswer() throws Exception {
        JsonNode prompts = result(post("alice-key", 6, "prompts/list", null, Map.of()));
        assertThat(prompts.path("prompts").size()).isPositive();
        JsonNode discover = result(post("alice-key", 8, "server/discover", null, Map.of()));
        assertThat(discover.path("supportedVersions").toString()).contains("2026-07-28");
        assertThat(discover.path("capabilities").has("tools")).isTrue();
    }

    @Test
    void notificationsCancelledKillsTheRunOfThatRequestOfTheSameKeyOnly() throws Exception {
        executor.blockStarted = new java.util.concurrent.CountDownLatch(1);
        int before = executor.cancels.get();
        var call = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
            try {
                return post("alice-key", 41, "tools/call", "execute_code", Map.of("name", "execute_code",
                        "arguments", Map.of("language", "python", "code", "block")));
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        assertThat(executor.blockStarted.await(10, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
        // another key naming the same request id cancels nothing (the edge acts on a notification before answering it)
        notification("bob-key", "notifications/cancelled", Map.of("requestId", 41));
        assertThat(executor.cancels.get()).isEqualTo(before);
        HttpResponse<String> n = notification("alice-key", "notifications/cancelled", Map.of("requestId", 41));
        assertThat(n.statusCode()).as(n.body()).isLessThan(300);
        HttpResponse<String> r = call.get(20, java.util.concurrent.TimeUnit.SECONDS);
        assertThat(executor.cancels.get()).isEqualTo(before + 1);
        assertThat(r.body()).contains("cancelled");
    }

    @Test
    void moreCallsRunAtOnceThanReactorsBoundedPoolHoldsEachOnAThreadOfItsOwn() throws Exception {
        int calls = 24; // the SDK's sync adapter would hold 10 threads per core (20 here) and queue the rest
        executor.blockStarted = new java.util.concurrent.CountDownLatch(calls);
        int before = executor.cancels.get();
        List<java.util.concurrent.CompletableFuture<HttpResponse<String>>> running = new ArrayList<>();
        for (int i = 0; i < calls; i++) {
            int id = 100 + i;
            running.add(java.util.concurrent.CompletableFuture.supplyAsync(() -> {
                try {
                    return post("alice-key", id, "tools/call", "execute_code", Map.of("name", "execute_code",
                            "arguments", Map.of("language", "python", "code", "block")));
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }, java.util.concurrent.Executors.newVirtualThreadPerTaskExecutor()));
        }
        assertThat(executor.blockStarted.await(20, java.util.concurrent.TimeUnit.SECONDS)).as("all %d runs started", calls).isTrue();
        for (int i = 0; i < calls; i++) notification("alice-key", "notifications/cancelled", Map.of("requestId", 100 + i));
        for (var r : running) assertThat(r.get(20, java.util.concurrent.TimeUnit.SECONDS).body()).contains("cancelled");
        assertThat(executor.cancels.get()).isEqualTo(before + calls);
    }

    /** A task's state as tasks/get answers it to {@code key}, polled until it is {@code status} (or 20 s pass). */
    static JsonNode taskUntil(String key, String taskId, String status) throws Exception {
        long end = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        JsonNode t;
        do {
            t = result(withTasks(key, 60, "tasks/get", taskId, Map.of("taskId", taskId)));
            if (t.path("status").asString().equals(status)) return t;
            Thread.sleep(50);
        } while (System.nanoTime() < end);
        return t;
    }

    static JsonNode error(HttpResponse<String> r) {
        JsonNode last = messages(r).getLast();
        assertThat(last.has("error")).as("an error: %s", r.body()).isTrue();
        return last.path("error");
    }

    @Test
    void executeCodeIsATaskForAClientThatDeclaresTheTasksExtensionAndItsJobIsTheSame() throws Exception {
        JsonNode created = result(withTasks("alice-key", 50, "tools/call", "execute_code", Map.of("name", "execute_code",
                "arguments", Map.of("language", "python", "code", "print:hello from a task"))));
        assertThat(created.path("resultType").asString()).as(created.toString()).isEqualTo("task");
        String id = created.path("taskId").asString();
        assertThat(id).isNotEmpty();
        assertThat(created.has("content")).isFalse();
        assertThat(created.path("ttlMs").asLong()).isEqualTo(Duration.ofHours(24).toMillis()); // JOB_RETENTION_HOURS
        JsonNode done = taskUntil("alice-key", id, "completed");
        assertThat(done.path("status").asString()).as(done.toString()).isEqualTo("completed");
        assertThat(done.path("resultType").asString()).isEqualTo("complete");
        assertThat(done.path("result").path("isError").asBoolean()).isFalse();
        assertThat(done.path("result").path("structuredContent").path("stdout").asString()).isEqualTo("hello from a task");
        assertThat(done.path("result").path("content").get(0).path("text").asString()).contains("hello from a task");
        // the task is a background job of the caller's: job_status reads the same one
        JsonNode job = call("alice-key", "job_status", Map.of("job", id));
        assertThat(job.path("structuredContent").path("job").asString()).isEqualTo(id);
        // without the extension the same call answers at once, as before
        JsonNode plain = call("alice-key", "execute_code", Map.of("language", "python", "code", "print:now"));
        assertThat(plain.path("resultType").asString()).isEqualTo("complete");
        assertThat(plain.path("structuredContent").path("stdout").asString()).isEqualTo("now");
    }

    @Test
    void aTaskIsPolledWhileItRunsAndCancelledAndOnlyItsTenantSeesOrCancelsIt() throws Exception {
        executor.blockStarted = new java.util.concurrent.CountDownLatch(1);
        int before = executor.cancels.get();
        JsonNode created = result(withTasks("alice-key", 51, "tools/call", "execute_code", Map.of("name", "execute_code",
                "arguments", Map.of("language", "python", "code", "block"))));
        String id = created.path("taskId").asString();
        assertThat(executor.blockStarted.await(10, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
        JsonNode working = result(withTasks("alice-key", 52, "tasks/get", id, Map.of("taskId", id)));
        assertThat(working.path("status").asString()).isEqualTo("working");
        assertThat(working.has("result")).isFalse();

        // another tenant: the id is unknown to it, for reading and for cancelling
        assertThat(error(withTasks("bob-key", 53, "tasks/get", id, Map.of("taskId", id))).path("code").asInt())
                .isEqualTo(-32602);
        assertThat(error(withTasks("bob-key", 54, "tasks/cancel", id, Map.of("taskId", id))).path("code").asInt())
                .isEqualTo(-32602);
        assertThat(executor.cancels.get()).isEqualTo(before);
        // without the extension, the methods are refused as a missing capability
        assertThat(error(post("alice-key", 55, "tasks/get", id, Map.of("taskId", id))).path("code").asInt())
                .isEqualTo(-32021);
        // a routing header that names another task
        assertThat(error(withTasks("alice-key", 56, "tasks/get", "task-other", Map.of("taskId", id))).path("code").asInt())
                .isEqualTo(-32020);

        JsonNode ack = result(withTasks("alice-key", 57, "tasks/cancel", id, Map.of("taskId", id)));
        assertThat(ack.path("resultType").asString()).isEqualTo("complete");
        assertThat(ack.has("taskId") || ack.has("status") || ack.has("result")).as(ack.toString()).isFalse();
        assertThat(executor.cancels.get()).isEqualTo(before + 1);
        assertThat(taskUntil("alice-key", id, "cancelled").path("status").asString()).isEqualTo("cancelled");
        // cancelling again is the same acknowledgement
        assertThat(result(withTasks("alice-key", 58, "tasks/cancel", id, Map.of("taskId", id))).path("resultType").asString())
                .isEqualTo("complete");
    }

    @Test
    void aCallRefusedBeforeItStartsIsAnsweredAsWithoutTasks() throws Exception {
        JsonNode r = result(withTasks("alice-key", 59, "tools/call", "execute_code", Map.of("name", "execute_code",
                "arguments", Map.of("language", "cobol", "code", "x"))));
        assertThat(r.path("isError").asBoolean()).as(r.toString()).isTrue();
        assertThat(r.has("taskId")).isFalse();
    }

    @Test
    void subscriptionsListenHearsTheTenantsOwnJobsChangeAndNothingOfAnothers() throws Exception {
        executor.blockStarted = new java.util.concurrent.CountDownLatch(2);
        String mine = call("alice-key", "execute_code", Map.of("language", "python", "code", "block", "background", true))
                .path("structuredContent").path("job").asString();
        String bobs = call("bob-key", "execute_code", Map.of("language", "python", "code", "block", "background", true))
                .path("structuredContent").path("job").asString();
        assertThat(executor.blockStarted.await(10, java.util.concurrent.TimeUnit.SECONDS)).isTrue();

        Map<String, Object> meta = new LinkedHashMap<>();
        meta.put("io.modelcontextprotocol/protocolVersion", "2026-07-28");
        meta.put("io.modelcontextprotocol/clientInfo", Map.of("name", "listener", "version", "1"));
        meta.put("io.modelcontextprotocol/clientCapabilities", Map.of());
        String body = JSON.writeValueAsString(Map.of("jsonrpc", "2.0", "id", 70, "method", "subscriptions/listen",
                "params", Map.of("notifications", Map.of("resourceSubscriptions",
                        List.of("job://" + mine, "job://" + bobs)), "_meta", meta)));
        java.util.concurrent.BlockingQueue<JsonNode> heard = new java.util.concurrent.LinkedBlockingQueue<>();
        var stream = HTTP.sendAsync(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/mcp"))
                .header("Authorization", "Bearer alice-key").header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream").header("MCP-Protocol-Version", "2026-07-28")
                .header("Mcp-Method", "subscriptions/listen").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofLines());
        try {
            Thread.ofVirtual().start(() -> {
                try {
                    stream.get(20, java.util.concurrent.TimeUnit.SECONDS).body().forEach(line -> {
                        if (line.startsWith("data:")) heard.add(JSON.readTree(line.substring(5).strip()));
                    });
                } catch (Exception e) {
                    // the stream ends with the test
                }
            });
            JsonNode first = heard.poll(20, java.util.concurrent.TimeUnit.SECONDS);
            assertThat(first).as("the acknowledgement").isNotNull();
            assertThat(first.path("method").asString()).isEqualTo("notifications/subscriptions/acknowledged");
            assertThat(first.toString()).contains("job://" + mine).doesNotContain(bobs);

            // bob's job changes first: were it heard, it would come before alice's
            call("bob-key", "job_cancel", Map.of("job", bobs));
            call("alice-key", "job_cancel", Map.of("job", mine));
            JsonNode updated = null;
            for (JsonNode n; (n = heard.poll(20, java.util.concurrent.TimeUnit.SECONDS)) != null; ) {
                assertThat(n.toString()).as("nothing of bob's job").doesNotContain(bobs);
                if (n.path("method").asString().equals("notifications/resources/updated")) {
                    updated = n;
                    break;
                }
            }
            assertThat(updated).as("alice's job's change heard").isNotNull();
            assertThat(updated.path("params").path("uri").asString()).isEqualTo("job://" + mine);
        } finally {
            stream.cancel(true);
        }
    }

    static HttpResponse<String> notification(String key, String method, Map<String, Object> params) throws Exception {
        Map<String, Object> p = new LinkedHashMap<>(params);
        p.put("_meta", Map.of("io.modelcontextprotocol/protocolVersion", "2026-07-28"));
        String body = JSON.writeValueAsString(Map.of("jsonrpc", "2.0", "method", method, "params", p));
        return HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/mcp"))
                .timeout(Duration.ofSeconds(30)).header("Authorization", "Bearer " + key)
                .header("Content-Type", "application/json").header("Accept", "application/json, text/event-stream")
                .header("MCP-Protocol-Version", "2026-07-28").header("Mcp-Method", method)
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void aRequestWithoutAKeyIsRefusedAtTheEdgeAsAnyOther() throws Exception {
        HttpResponse<String> r = post(null, 9, "tools/list", null, Map.of());
        assertThat(r.statusCode()).isEqualTo(401);
    }
}
