package dev.codeexec.http;

import dev.codeexec.auth.ApiKeys;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import tools.jackson.databind.JsonNode;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static dev.codeexec.http.ApiFilesTest.assertError;
import static dev.codeexec.http.ApiFilesTest.json;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The admin console's data over real HTTP, with two tenant keys and an admin key: who sees which runs, counters
 * and workspaces; the {@code ?tenant=} override; the playground's NDJSON stream and what a disconnect does. The
 * engine is {@link dev.codeexec.mcp.FakeExecutor}; {@link PlaygroundRealRunTest} streams real programs.
 */
@Tag("slow")
@Timeout(value = 120, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class AdminApiTest {

    static final String ALICE = "key-of-alice";
    static final String BOB = "key-of-bob";
    static final String ROOT = "key-of-root";

    ApiClient api;
    Path keys;

    @BeforeEach
    void start() throws Exception {
        keys = Files.createTempFile("keys", ".txt");
        Files.writeString(keys, "alice " + ApiKeys.hashHex(ALICE) + "\nbob " + ApiKeys.hashHex(BOB) + "\nroot "
                + ApiKeys.hashHex(ROOT) + " admin\n");
        api = new ApiClient("API_KEYS_FILE", keys.toString());
    }

    @AfterEach
    void stop() throws Exception {
        if (api != null) api.close();
        Files.deleteIfExists(keys);
    }

    /** POST /api/execute and the NDJSON lines of the answer, each parsed. */
    List<JsonNode> execute(String key, String query, String body) throws Exception {
        HttpResponse<String> r = executeRaw(key, query, body);
        assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
        assertThat(r.headers().firstValue("Content-Type")).hasValueSatisfying(ct -> assertThat(ct).startsWith("application/x-ndjson"));
        List<JsonNode> lines = new ArrayList<>();
        for (String line : r.body().split("\n")) lines.add(JsonErrors.JSON.readTree(line));
        return lines;
    }

    HttpResponse<String> executeRaw(String key, String query, String body) throws Exception {
        return api.as(key).send(api.req("/api/execute" + query).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body)));
    }

    static JsonNode last(List<JsonNode> lines) {
        return lines.getLast();
    }

    JsonNode get(String key, String path) throws Exception {
        HttpResponse<String> r = api.as(key).get(path);
        assertThat(r.statusCode()).as(path + " " + r.body()).isEqualTo(200);
        return json(r);
    }

    static List<String> texts(JsonNode array, String field) {
        return array.valueStream().map(n -> n.path(field).asString()).toList();
    }

    @Test
    void tenantsSeeTheirOwnRunsAndStatsAndTheAdminSeesAll() throws Exception {
        JsonNode before = get(ROOT, "/api/admin/stats");
        assertThat(before.path("tenant").isNull()).isTrue();
        assertThat(before.path("executions").path("total").asLong()).isZero();

        List<JsonNode> a = execute(ALICE, "", "{\"language\":\"python\",\"code\":\"print:hello\"}");
        assertThat(a.getFirst().path("type").asString()).isEqualTo("output");
        assertThat(a.getFirst().path("stream").asString()).isEqualTo("stdout");
        assertThat(a.getFirst().path("text").asString()).isEqualTo("hello");
        JsonNode result = last(a).path("result");
        assertThat(last(a).path("type").asString()).isEqualTo("result");
        // execute_code's structuredContent, field for field
        assertThat(new ArrayList<>(result.propertyNames())).containsExactly("language", "exitCode", "stdout", "stderr", "durationMs", "timedOut", "truncated",
                        "outcome", "peakMemoryBytes", "sandbox", "network");
        assertThat(result.path("stdout").asString()).isEqualTo("hello");
        assertThat(result.path("outcome").asString()).isEqualTo("exited");
        assertThat(result.path("network").path("allow").isEmpty()).as("a run without network says so").isTrue();
        execute(BOB, "", "{\"language\":\"go\",\"code\":\"exit:3\"}");

        // The dashboard's counts moved with the runs.
        JsonNode all = get(ROOT, "/api/admin/stats");
        assertThat(all.path("executions").path("total").asLong()).isEqualTo(2);
        assertThat(all.path("executions").path("failed").asLong()).isEqualTo(1);
        assertThat(all.path("executions").path("byLanguage").path("python").asLong()).isEqualTo(1);
        assertThat(all.path("executions").path("byLanguage").path("go").asLong()).isEqualTo(1);
        assertThat(all.path("executions").path("byOutcome").path("exited").asLong()).isEqualTo(2);
        assertThat(all.path("executions").path("durationMs").path("window").asInt()).isEqualTo(2);
        assertThat(all.path("history").path("size").asInt()).isEqualTo(2);
        assertThat(all.path("history").path("capacity").asInt()).isEqualTo(10_000);
        assertThat(all.path("queue").path("maxConcurrent").asInt()).isEqualTo(4);
        assertThat(all.path("sandbox").asString()).isEqualTo("fake");
        assertThat(all.path("version").asString()).isEqualTo("test");
        assertThat(all.has("limits")).isTrue();
        assertThat(all.path("warmPool").isObject()).isTrue();
        assertThat(all.path("sessions").has("count")).isTrue();

        JsonNode alice = get(ALICE, "/api/admin/stats");
        assertThat(alice.path("tenant").asString()).isEqualTo("alice");
        assertThat(alice.path("executions").path("total").asLong()).isEqualTo(1);
        assertThat(alice.path("executions").path("failed").asLong()).isZero();
        assertThat(alice.path("executions").path("byLanguage").has("go")).isFalse();
        assertThat(alice.path("history").path("size").asInt()).as("a tenant's history holds its own runs").isEqualTo(1);
        assertThat(get(BOB, "/api/admin/stats").path("executions").path("failed").asLong()).isEqualTo(1);
        assertThat(get(ROOT, "/api/admin/stats?tenant=bob").path("executions").path("total").asLong()).isEqualTo(1);
        assertError(api.as(ALICE).get("/api/admin/stats?tenant=bob"), 403, "forbidden");

        JsonNode aliceRuns = get(ALICE, "/api/admin/executions");
        assertThat(aliceRuns.path("total").asInt()).isEqualTo(1);
        assertThat(aliceRuns.path("capacity").asInt()).isEqualTo(10_000);
        JsonNode aliceRun = aliceRuns.path("executions").get(0);
        assertThat(aliceRun.path("tenant").asString()).isEqualTo("alice");
        assertThat(aliceRun.path("language").asString()).isEqualTo("python");
        assertThat(aliceRun.path("outcome").asString()).isEqualTo("exited");
        assertThat(aliceRun.path("exitCode").asInt()).isZero();
        assertThat(aliceRun.path("codeExcerpt").asString()).isEqualTo("print:hello");
        assertThat(aliceRun.path("workspace").isNull()).isTrue();
        assertThat(aliceRun.path("session").isNull()).isTrue();
        assertThat(aliceRun.path("time").asString()).matches("\\d{4}-\\d\\d-\\d\\dT.*Z");
        assertThat(get(ALICE, "/api/admin/executions?tenant=alice").path("total").asInt()).isEqualTo(1);
        assertError(api.as(ALICE).get("/api/admin/executions?tenant=bob"), 403, "forbidden");

        JsonNode bobRun = get(BOB, "/api/admin/executions").path("executions").get(0);
        assertThat(bobRun.path("exitCode").asInt()).isEqualTo(3);
        String aliceId = aliceRun.path("id").asString();
        String bobId = bobRun.path("id").asString();
        assertError(api.as(ALICE).get("/api/admin/executions/" + bobId), 404, "not_found");
        assertError(api.as(BOB).get("/api/admin/executions/" + aliceId), 404, "not_found");
        assertError(api.as(ALICE).get("/api/admin/executions/run-nope"), 404, "not_found");
        JsonNode detail = get(ALICE, "/api/admin/executions/" + aliceId);
        assertThat(detail.path("code").asString()).isEqualTo("print:hello");
        assertThat(detail.path("stdout").asString()).isEqualTo("hello");
        assertThat(detail.path("outputTruncated").asBoolean()).isFalse();
        assertThat(detail.path("running").asBoolean()).isFalse();
        assertThat(detail.path("peakMemoryBytes").asLong()).isEqualTo(1234567);
        assertThat(get(ROOT, "/api/admin/executions/" + bobId).path("stderr").asString()).isEqualTo("boom\n");

        JsonNode everyone = get(ROOT, "/api/admin/executions");
        assertThat(everyone.path("total").asInt()).isEqualTo(2);
        assertThat(texts(everyone.path("executions"), "id")).containsExactly(bobId, aliceId);
        assertThat(texts(get(ROOT, "/api/admin/executions?tenant=alice").path("executions"), "id")).containsExactly(aliceId);
        assertThat(texts(get(ROOT, "/api/admin/executions?outcome=failed").path("executions"), "id")).containsExactly(bobId);
        assertThat(texts(get(ROOT, "/api/admin/executions?language=python&q=HELLO").path("executions"), "id"))
                .containsExactly(aliceId);
        JsonNode paged = get(ROOT, "/api/admin/executions?limit=1&offset=1");
        assertThat(texts(paged.path("executions"), "id")).containsExactly(aliceId);
        assertThat(paged.path("total").asInt()).isEqualTo(2);
        assertError(api.as(ROOT).get("/api/admin/executions?limit=abc"), 400, "bad_request");
        assertError(api.as(ROOT).get("/api/admin/executions?offset=-1"), 400, "bad_request");
        assertError(api.as(ROOT).get("/api/admin/executions?q=" + "a".repeat(201)), 400, "bad_request");
        assertThat(get(ROOT, "/api/admin/executions?limit=100000").path("executions").size()).isEqualTo(2);
    }

    @Test
    void workspacesAndTheAdminTenantOverride() throws Exception {
        assertThat(api.as(ALICE).upload("a1", "x.txt", "alice's").statusCode()).isEqualTo(201);
        assertThat(api.as(BOB).upload("b1", "y.txt", "bob's").statusCode()).isEqualTo(201);

        JsonNode mine = get(ALICE, "/api/admin/workspaces").path("workspaces");
        assertThat(texts(mine, "name")).containsExactly("a1");
        assertThat(texts(mine, "tenant")).containsExactly("alice");
        assertThat(mine.get(0).path("size").asLong()).isEqualTo(7);
        assertThat(mine.get(0).has("quota") && mine.get(0).has("files") && mine.get(0).has("lastUsed")).isTrue();
        JsonNode every = get(ROOT, "/api/admin/workspaces").path("workspaces");
        assertThat(texts(every, "tenant")).containsExactly("alice", "bob");
        assertThat(texts(every, "name")).containsExactly("a1", "b1");
        assertThat(texts(get(ROOT, "/api/admin/workspaces?tenant=bob").path("workspaces"), "name")).containsExactly("b1");
        assertError(api.as(ALICE).get("/api/admin/workspaces?tenant=bob"), 403, "forbidden");

        // An admin acts on another tenant's workspaces with ?tenant=; a tenant key may name only itself.
        assertThat(texts(get(ROOT, "/api/workspaces?tenant=alice"), "name")).containsExactly("a1");
        assertThat(api.as(ROOT).get("/api/workspaces/a1/files/x.txt?tenant=alice").body()).isEqualTo("alice's");
        assertThat(api.as(ROOT).upload("b1", "from-admin.txt?tenant=bob", "admin").statusCode()).isEqualTo(201);
        assertThat(Files.readString(api.dir("bob", "b1").resolve("from-admin.txt"))).isEqualTo("admin");
        assertThat(api.as(ROOT).send(api.req("/api/workspaces/b1/files/from-admin.txt?tenant=bob").DELETE())
                .statusCode()).isEqualTo(204);
        assertError(api.as(ROOT).get("/api/workspaces/a1/files/x.txt"), 404, "not_found");
        assertError(api.as(ROOT).get("/api/workspaces?tenant=../alice"), 400, "bad_name");
        assertError(api.as(ALICE).get("/api/workspaces?tenant=bob"), 403, "forbidden");
        assertError(api.as(ALICE).get("/api/workspaces/b1/files/y.txt?tenant=bob"), 403, "forbidden");
        assertError(api.as(ALICE).upload("b1", "z.txt?tenant=bob", "x"), 403, "forbidden");
        assertThat(api.dir("bob", "b1").resolve("z.txt")).doesNotExist();
        assertThat(texts(get(ALICE, "/api/workspaces?tenant=alice"), "name")).containsExactly("a1");

        // Playground runs resolve the workspace in the acting tenant.
        execute(ALICE, "", "{\"language\":\"python\",\"code\":\"print:1\",\"workspace\":\"a1\"}");
        execute(ROOT, "?tenant=bob", "{\"language\":\"python\",\"code\":\"print:2\",\"workspace\":\"b1\",\"session\":\"s\"}");
        List<ExecutionRequest> seen = api.fake.requests;
        assertThat(seen).hasSize(2);
        assertThat(seen.get(0).workspace().orElseThrow().tenant()).isEqualTo("alice");
        assertThat(seen.get(0).audit().tenant()).hasValue("alice");
        assertThat(seen.get(1).workspace().orElseThrow().tenant()).isEqualTo("bob");
        assertThat(seen.get(1).session().orElseThrow().tenant()).isEqualTo("bob");
        assertThat(seen.get(1).audit().tenant()).hasValue("bob");
        JsonNode run = get(BOB, "/api/admin/executions").path("executions").get(0);
        assertThat(run.path("workspace").asString()).isEqualTo("b1");
        assertThat(run.path("session").asString()).isEqualTo("s");
        assertError(executeRaw(ALICE, "?tenant=bob", "{\"language\":\"python\",\"code\":\"print:x\",\"workspace\":\"b1\"}"),
                403, "forbidden");
        assertThat(api.fake.requests).hasSize(2);
    }

    @Test
    void badPlaygroundRequestsAreJsonErrorsBeforeAnythingStreams() throws Exception {
        assertError(executeRaw(ALICE, "", "{\"language\":\"cobol\",\"code\":\"x\"}"), 400, "invalid_request");
        assertThat(json(executeRaw(ALICE, "", "{\"language\":\"cobol\",\"code\":\"x\"}")).path("message").asString())
                .contains("unknown language");
        assertError(executeRaw(ALICE, "", "{\"language\":\"python\"}"), 400, "invalid_request");
        assertError(executeRaw(ALICE, "", "{\"language\":\"python\",\"code\":\"x\",\"timeout_ms\":0}"), 400, "invalid_request");
        assertError(executeRaw(ALICE, "", "{nope"), 400, "bad_request");
        assertError(executeRaw(ALICE, "", "[1,2]"), 400, "bad_request");
        assertError(executeRaw(ALICE, "", "{\"language\":\"python\",\"code\":\"x\",\"workspace\":\"../etc\"}"), 400, "bad_name");
        assertError(executeRaw(ALICE, "", "{\"language\":\"python\",\"code\":\"x\",\"workspace\":7}"), 400, "invalid_request");
        assertError(executeRaw(ALICE, "", "{\"language\":\"python\",\"code\":\"x\",\"session\":\"a b\"}"), 400, "bad_name");
        assertError(api.as(ALICE).get("/api/execute"), 405, "method_not_allowed");
        assertError(api.as(ALICE).send(api.req("/api/admin/stats").POST(HttpRequest.BodyPublishers.ofString("{}"))),
                405, "method_not_allowed");
        assertError(api.as(ALICE).get("/api/admin/nothing"), 404, "not_found");
        assertError(api.as(null).get("/api/admin/stats"), 401, "unauthorized");
        assertError(executeRaw(null, "", "{\"language\":\"python\",\"code\":\"print:x\"}"), 401, "unauthorized");
        assertThat(api.fake.requests).isEmpty();
        assertThat(api.dir("alice", "etc")).doesNotExist();

        // A run the executor refuses is a 200 stream with one error line, and counts as rejected.
        List<JsonNode> busy = execute(ALICE, "", "{\"language\":\"python\",\"code\":\"busy\"}");
        assertThat(busy).hasSize(1);
        assertThat(busy.getFirst().path("type").asString()).isEqualTo("error");
        assertThat(busy.getFirst().path("error").asString()).isEqualTo("busy");
        assertThat(busy.getFirst().path("message").asString()).contains("busy").doesNotContain("Exception");
        JsonNode rejected = get(ALICE, "/api/admin/executions?outcome=rejected").path("executions");
        assertThat(rejected.size()).isEqualTo(1);
        assertThat(rejected.get(0).path("exitCode").isNull()).isTrue();
        assertThat(get(ALICE, "/api/admin/executions/" + rejected.get(0).path("id").asString()).path("error").asString())
                .contains("busy");
        JsonNode stats = get(ALICE, "/api/admin/stats").path("executions");
        assertThat(stats.path("byOutcome").path("rejected").asLong()).isEqualTo(1);
        assertThat(stats.path("failed").asLong()).isEqualTo(1);
    }

    @Test
    void outputStreamsInOrderBeforeTheResult() throws Exception {
        List<JsonNode> lines = execute(ALICE, "", "{\"language\":\"python\",\"code\":\"stream:4\"}");
        List<JsonNode> output = lines.stream().filter(n -> n.path("type").asString().equals("output")).toList();
        assertThat(output.stream().map(n -> n.path("text").asString()))
                .containsExactly("line 0\n", "line 1\n", "line 2\n", "line 3\n");
        assertThat(output.stream().map(n -> n.path("stream").asString()))
                .containsExactly("stdout", "stderr", "stdout", "stderr");
        assertThat(last(lines).path("type").asString()).isEqualTo("result");
        assertThat(last(lines).path("result").path("stdout").asString()).isEqualTo("line 0\nline 2\n");
        assertThat(lines.stream().filter(n -> n.path("type").asString().equals("result")).count()).isEqualTo(1);
    }

    @Test
    void aClientThatDisconnectsCancelsItsRun() throws Exception {
        String body = "{\"language\":\"python\",\"code\":\"block\"}";
        try (Socket s = new Socket("127.0.0.1", api.server.port())) {
            OutputStream out = s.getOutputStream();
            out.write(("POST /api/execute HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + ALICE
                    + "\r\nContent-Type: application/json\r\nContent-Length: " + body.length() + "\r\n\r\n" + body)
                    .getBytes(StandardCharsets.UTF_8));
            out.flush();
            InputStream in = s.getInputStream();
            String head = readUntil(in, "\r\n\r\n");
            assertThat(head).startsWith("HTTP/1.1 200").containsIgnoringCase("application/x-ndjson");
            assertThat(api.fake.blockStarted.await(10, TimeUnit.SECONDS)).isTrue();
            JsonNode running = get(ALICE, "/api/admin/executions?outcome=running");
            assertThat(running.path("total").asInt()).isEqualTo(1);
            assertThat(get(ALICE, "/api/admin/stats").path("executions").path("running").asInt()).isEqualTo(1);
            assertThat(get(BOB, "/api/admin/stats").path("executions").path("running").asInt()).isZero();
        }
        // The socket is closed while the run prints nothing: the keep-alive writes find out and cancel it.
        String id = get(ALICE, "/api/admin/executions").path("executions").get(0).path("id").asString();
        JsonNode detail = Poll.until("the run ended", () -> get(ALICE, "/api/admin/executions/" + id),
                d -> !d.path("running").asBoolean());
        assertThat(detail.path("outcome").asString()).isEqualTo("cancelled");
        assertThat(api.fake.cancels.get()).isEqualTo(1);
        assertThat(get(ALICE, "/api/admin/stats").path("executions").path("byOutcome").path("cancelled").asLong())
                .isEqualTo(1);
    }

    static String readUntil(InputStream in, String end) throws Exception {
        StringBuilder b = new StringBuilder();
        int c;
        while (!b.toString().endsWith(end) && (c = in.read()) >= 0) b.append((char) c);
        return b.toString();
    }

    @Test
    void aGatewaysStatsListTheWorkersAndEachRunNamesItsWorker() throws Exception {
        JsonNode local = get(ROOT, "/api/admin/stats");
        assertThat(local.path("mode").asString()).isEqualTo("local");
        assertThat(local.path("workers").isArray()).isTrue();
        assertThat(local.path("workers").size()).isZero();

        api.fake.workers = List.of(dev.codeexec.mcp.FakeExecutor.worker("10.0.0.1:30031", "w-1", true, 1, 4),
                dev.codeexec.mcp.FakeExecutor.worker("10.0.0.2:30031", "w-2", false, 0, 0));
        api.fake.worker = "w-1";
        JsonNode first = last(execute(ALICE, "", "{\"language\":\"python\",\"code\":\"print:one\"}"));
        assertThat(first.path("result").path("worker").asString()).isEqualTo("w-1");
        api.fake.worker = "w-3";
        execute(ALICE, "", "{\"language\":\"python\",\"code\":\"print:two\"}");

        for (String key : List.of(ROOT, ALICE)) {
            JsonNode stats = get(key, "/api/admin/stats");
            assertThat(stats.path("mode").asString()).isEqualTo("gateway");
            JsonNode workers = stats.path("workers");
            assertThat(texts(workers, "address")).containsExactly("10.0.0.1:30031", "10.0.0.2:30031");
            assertThat(workers.get(0).path("name").asString()).isEqualTo("w-1");
            assertThat(workers.get(0).path("healthy").asBoolean()).isTrue();
            assertThat(workers.get(0).path("running").asInt()).isEqualTo(1);
            assertThat(workers.get(0).path("slots").asInt()).isEqualTo(4);
            assertThat(workers.get(0).path("sessions").asInt()).isEqualTo(1);
            assertThat(workers.get(0).path("lastSeen").asString()).isEqualTo("2026-11-30T12:00:00Z");
            assertThat(workers.get(1).path("healthy").asBoolean()).isFalse();
            assertThat(workers.get(1).path("name").isNull()).isTrue();
            assertThat(workers.get(1).path("error").asString()).contains("UNAVAILABLE");
        }

        JsonNode runs = get(ROOT, "/api/admin/executions").path("executions");
        assertThat(texts(runs, "worker")).containsExactly("w-3", "w-1");
        assertThat(texts(runs, "codeExcerpt")).containsExactly("print:two", "print:one");
        String firstId = runs.get(1).path("id").asString();
        assertThat(get(ALICE, "/api/admin/executions/" + firstId).path("worker").asString()).isEqualTo("w-1");
        assertThat(texts(get(ROOT, "/api/admin/executions?worker=w-1").path("executions"), "id")).containsExactly(firstId);
        assertThat(get(ROOT, "/api/admin/executions?worker=w-9").path("total").asInt()).isZero();
    }

    @Test
    void aServerWithoutKeysIsOneAdmin() throws Exception {
        api.close();
        api = new ApiClient();
        execute(null, "", "{\"language\":\"python\",\"code\":\"print:x\"}");
        JsonNode stats = get(null, "/api/admin/stats");
        assertThat(stats.path("tenant").isNull()).isTrue();
        assertThat(stats.path("executions").path("total").asLong()).isEqualTo(1);
        assertThat(get(null, "/api/admin/executions").path("executions").get(0).path("tenant").asString())
                .isEqualTo("default");
    }

    @Test
    void anExecuteCodeCallOverMcpIsInTheHistoryOfItsTenant() throws Exception {
        dev.codeexec.mcp.RawClient raw = new dev.codeexec.mcp.RawClient(api.server.port());
        HttpResponse<String> init = raw.send(raw.mcpPost(null, dev.codeexec.mcp.RawClient.INIT)
                .header("Authorization", "Bearer " + ALICE));
        assertThat(init.statusCode()).as(init.body()).isEqualTo(200);
        String session = init.headers().firstValue("Mcp-Session-Id").orElseThrow();
        raw.send(raw.mcpPost(session, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}")
                .header("Authorization", "Bearer " + ALICE));
        HttpResponse<String> call = raw.send(raw.mcpPost(session, dev.codeexec.mcp.RawClient.call(1, "print:via-mcp"))
                .header("Authorization", "Bearer " + ALICE));
        assertThat(call.body()).contains("via-mcp");

        // The MCP caller has its result: the history already shows the run, ended, under the caller's tenant.
        JsonNode mine = get(ALICE, "/api/admin/executions");
        assertThat(mine.path("total").asInt()).isEqualTo(1);
        JsonNode run = mine.path("executions").get(0);
        assertThat(run.path("tenant").asString()).isEqualTo("alice");
        assertThat(run.path("codeExcerpt").asString()).isEqualTo("print:via-mcp");
        assertThat(run.path("outcome").asString()).isEqualTo("exited");
        assertThat(get(ALICE, "/api/admin/stats").path("executions").path("total").asLong()).isEqualTo(1);
        assertThat(get(BOB, "/api/admin/executions").path("total").asInt()).isZero();
    }
}
