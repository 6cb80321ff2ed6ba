package dev.codeexec.codemode;

import dev.codeexec.egress.LocalEndpoint;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tools.jackson.databind.json.JsonMapper;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static dev.codeexec.codemode.UpstreamsTest.closedPort;
import static dev.codeexec.codemode.UpstreamsTest.config;
import static dev.codeexec.codemode.UpstreamsTest.secret;
import static org.assertj.core.api.Assertions.assertThat;

/** A run's endpoint ({@link CodeToolsRun}) as sandboxed code sees it, with fake upstreams on 127.0.0.1. */
class CodeToolsRunTest {

    private static final JsonMapper JSON = JsonMapper.shared();

    private static String call(CodeToolsRun run, String server, String tool, Map<String, Object> arguments) {
        LocalEndpoint.Response r = run.handle("POST", CodeToolsRun.PREFIX + "/call",
                JSON.writeValueAsBytes(Map.of("server", server, "tool", tool, "arguments", arguments)));
        return r.status() + " " + new String(r.body(), StandardCharsets.UTF_8);
    }

    /** One call as the run's code makes it: the request's bytes and the answer. */
    private record Call(int status, String body, int requestBytes, int answerBytes) {
        @Override
        public String toString() {
            return status + " " + body;
        }
    }

    private static Call post(CodeToolsRun run, String server, String tool, Map<String, Object> arguments) {
        byte[] request = JSON.writeValueAsBytes(Map.of("server", server, "tool", tool, "arguments", arguments));
        LocalEndpoint.Response r = run.handle("POST", CodeToolsRun.PREFIX + "/call", request);
        return new Call(r.status(), new String(r.body(), StandardCharsets.UTF_8), request.length, r.body().length);
    }

    /**
     * Code tools over one fake upstream: {@code fx} (every tool, for everyone) and {@code locked}, only for the
     * tenant "other" (at a closed port: no call reaches it). Waits until fx is connected.
     */
    private static CodeTools tools(FakeUpstream fx, Path dir, int maxCalls, long maxBytes, Duration callTimeout) throws Exception {
        UpstreamConfig cfg = config(Map.of("fx", Map.of("url", fx.url()),
                "locked", Map.of("url", "http://127.0.0.1:" + closedPort() + "/mcp", "tenants", List.of("other"))), Map.of());
        CodeTools tools = new CodeTools(new Upstreams(cfg, Duration.ZERO).start(), dir, maxCalls, maxBytes, callTimeout);
        Poll.until("fx connected", () -> tools.upstreams().connected("fx"));
        return tools;
    }

    private static List<String> reasons(CodeToolsRun run) {
        return run.report().calls().stream().map(c -> c.reason().orElse("ok")).toList();
    }

    @Test
    void aRunMakesAtMostMaxCallsCallsAndARefusedCallDoesNotCount(@TempDir Path dir) throws Exception {
        try (FakeUpstream fx = FakeUpstream.start(0, FakeUpstream.Initialize.ANSWER);
             CodeTools tools = tools(fx, dir, 2, 16 << 20, Duration.ofSeconds(30))) {
            CodeToolsRun run = tools.open("team", "run-1");
            assertThat(post(run, "fx", "echo", Map.of("text", "one"))).hasToString("200 {\"result\":\"one\",\"structured\":false}");
            assertThat(post(run, "locked", "echo", Map.of()).status()).isEqualTo(403);
            assertThat(post(run, "fx", "echo", Map.of("text", "two")).status()).isEqualTo(200);
            Call third = post(run, "fx", "echo", Map.of("text", "three"));
            assertThat(third.status()).isEqualTo(429);
            assertThat(third.body()).contains("\"reason\":\"call_limit\"", "this run has made its 2 tool calls (CODE_TOOLS_MAX_CALLS)");
            assertThat(reasons(run)).containsExactly("ok", "not_allowed", "ok", "call_limit");
            // the cap is per run
            assertThat(post(tools.open("team", "run-2"), "fx", "echo", Map.of("text", "again")).status()).isEqualTo(200);
        }
    }

    @Test
    void aRunsToolCallDataIsCappedAcrossItsRequestsAndAnswers(@TempDir Path dir) throws Exception {
        try (FakeUpstream fx = FakeUpstream.start(0, FakeUpstream.Initialize.ANSWER);
             CodeTools tools = tools(fx, dir, 100, 1000, Duration.ofSeconds(30))) {
            CodeToolsRun run = tools.open("team", "run-1");
            assertThat(run.maxRequestBytes()).isEqualTo(1000);
            LocalEndpoint.Response tooLarge = run.tooLarge("POST", CodeToolsRun.PREFIX + "/call", 5000);
            assertThat(tooLarge.status()).isEqualTo(429);
            assertThat(new String(tooLarge.body(), StandardCharsets.UTF_8)).contains("byte_limit", "(5000 bytes)", "CODE_TOOLS_MAX_MB");

            // about 150 bytes out and 135 back: within the 1000
            Call small = post(tools.open("team", "run-2"), "fx", "echo", Map.of("text", "a".repeat(100)));
            assertThat(small.status()).isEqualTo(200);
            CodeToolsRun counted = tools.open("team", "run-3");
            Call first = post(counted, "fx", "echo", Map.of("text", "a".repeat(100)));
            assertThat(first.status()).isEqualTo(200);
            assertThat(counted.report().calls().getFirst()).satisfies(c -> {
                assertThat(c.bytesOut()).as("the request's bytes").isEqualTo(first.requestBytes());
                assertThat(c.bytesIn()).as("the answer's bytes").isEqualTo(first.answerBytes());
            });
            // about 450 bytes out (within what is left), but its answer of about 435 would pass the 1000
            Call big = post(counted, "fx", "echo", Map.of("text", "b".repeat(400)));
            assertThat(big.status()).isEqualTo(429);
            assertThat(big.body()).contains("\"reason\":\"byte_limit\"", "fx.echo's answer would pass this run's");
            // nothing is left after an answer that did not fit
            Call after = post(counted, "fx", "echo", Map.of("text", "c"));
            assertThat(after.status()).isEqualTo(429);
            assertThat(after.body()).contains("\"reason\":\"byte_limit\"", "this run has used its");
            assertThat(reasons(counted)).containsExactly("ok", "byte_limit", "byte_limit");
        }
    }

    @Test
    @Tag("slow") // waits out a call timeout of one second
    void aCallThatDoesNotAnswerInTimeIsCancelledUpstreamAndTheCodeIsToldWhy(@TempDir Path dir) throws Exception {
        try (FakeUpstream fx = FakeUpstream.start(0, FakeUpstream.Initialize.ANSWER);
             CodeTools tools = tools(fx, dir, 100, 16 << 20, Duration.ofSeconds(1))) {
            CodeToolsRun run = tools.open("team", "run-1");
            Call late = post(run, "fx", "hang", Map.of());
            assertThat(late.status()).isEqualTo(504);
            assertThat(late.body()).contains("\"reason\":\"timeout\"",
                    "fx.hang did not answer within 1000 ms (CODE_TOOLS_CALL_TIMEOUT_MS)").doesNotContain("still connecting");
            String id = fx.awaitHangingCall();
            assertThat(fx.awaitCancelled(id)).isEqualTo("the run that made the call ended");
            assertThat(reasons(run)).containsExactly("timeout");
            // the run goes on: its next call works
            assertThat(post(run, "fx", "echo", Map.of("text", "next")).status()).isEqualTo(200);
        }
    }

    @Test
    void endingTheRunCancelsItsCallInFlightUpstreamAndRefusesLaterOnes(@TempDir Path dir) throws Exception {
        try (FakeUpstream fx = FakeUpstream.start(0, FakeUpstream.Initialize.ANSWER);
             CodeTools tools = tools(fx, dir, 100, 16 << 20, Duration.ofMinutes(5));
             ExecutorService code = Executors.newVirtualThreadPerTaskExecutor()) {
            CodeToolsRun run = tools.open("team", "run-1");
            Future<Call> inFlight = code.submit(() -> post(run, "fx", "hang", Map.of()));
            String id = fx.awaitHangingCall(); // the call is at the upstream
            run.close();
            Call ended = inFlight.get(60, TimeUnit.SECONDS);
            assertThat(ended.status()).isEqualTo(410);
            assertThat(ended.body()).contains("\"reason\":\"run_ended\"", "the run has ended");
            assertThat(fx.awaitCancelled(id)).isEqualTo("the run that made the call ended");
            Call later = post(run, "fx", "echo", Map.of("text", "late"));
            assertThat(later.status()).isEqualTo(410);
            assertThat(reasons(run)).containsExactly("run_ended", "run_ended");
        }
    }

    @Test
    void aRequestTheEndpointCannotServeGetsAClearAnswer(@TempDir Path dir) throws Exception {
        try (FakeUpstream fx = FakeUpstream.start(0, FakeUpstream.Initialize.ANSWER);
             CodeTools tools = tools(fx, dir, 100, 16 << 20, Duration.ofSeconds(30))) {
            CodeToolsRun run = tools.open("team", "run-1");
            LocalEndpoint.Response notJson = run.handle("POST", CodeToolsRun.PREFIX + "/call", "{not json".getBytes(StandardCharsets.UTF_8));
            assertThat(notJson.status()).isEqualTo(400);
            assertThat(new String(notJson.body(), StandardCharsets.UTF_8)).contains("bad_request", "the body must be JSON");
            LocalEndpoint.Response noTool = run.handle("POST", CodeToolsRun.PREFIX + "/call",
                    "{\"server\": \"fx\", \"arguments\": []}".getBytes(StandardCharsets.UTF_8));
            assertThat(noTool.status()).isEqualTo(400);
            LocalEndpoint.Response elsewhere = run.handle("GET", CodeToolsRun.PREFIX + "/call", new byte[0]);
            assertThat(elsewhere.status()).isEqualTo(404);
            assertThat(new String(elsewhere.body(), StandardCharsets.UTF_8))
                    .contains("GET /code-tools/v1/servers, POST /code-tools/v1/call");

            Call unknown = post(run, "fx", "nosuch", Map.of());
            assertThat(unknown.status()).isEqualTo(404);
            assertThat(unknown.body()).contains("\"reason\":\"unknown_tool\"", "no tool 'nosuch' of fx (its tools: add, echo,");
            Call refused = post(run, "locked", "echo", Map.of());
            assertThat(refused.status()).isEqualTo(403);
            assertThat(refused.body()).contains("\"reason\":\"not_allowed\"", "no server 'locked' for this caller (it may call: fx)");

            LocalEndpoint.Response servers = run.handle("GET", CodeToolsRun.PREFIX + "/servers", new byte[0]);
            assertThat(servers.status()).isEqualTo(200);
            String listed = new String(servers.body(), StandardCharsets.UTF_8);
            assertThat(listed).contains("\"name\":\"fx\"", "\"inputSchema\"").doesNotContain("locked");
            // bad requests are not calls; the refused ones are in the report
            assertThat(reasons(run)).containsExactly("unknown_tool", "not_allowed");
        }
    }

    @Test
    void aRunsReportKeepsItsFirstHundredCallsAndCountsTheRest(@TempDir Path dir) throws Exception {
        UpstreamConfig cfg = config(Map.of("locked", Map.of("url", "http://127.0.0.1:" + closedPort() + "/mcp",
                "tenants", List.of("other"))), Map.of());
        try (CodeTools tools = new CodeTools(new Upstreams(cfg, Duration.ZERO), dir, 1000, 16 << 20, Duration.ofSeconds(30))) {
            CodeToolsRun run = tools.open("team", "run-1");
            for (int i = 0; i < ToolCall.Report.MAX_RECORDS + 3; i++)
                assertThat(post(run, "locked", "t" + i, Map.of()).status()).isEqualTo(403);
            ToolCall.Report report = run.report();
            assertThat(report.calls()).hasSize(ToolCall.Report.MAX_RECORDS);
            assertThat(report.calls().getLast().tool()).isEqualTo("t" + (ToolCall.Report.MAX_RECORDS - 1));
            assertThat(report.leftOut()).isEqualTo(3);
            assertThat(report.total()).isEqualTo(ToolCall.Report.MAX_RECORDS + 3);
        }
    }

    @Test
    void noTextFromAnUpstreamShowsTheRunTheCredentialsItWasSent(@TempDir Path dir) throws Exception {
        String token = secret("tok-");
        String key = secret("key-");
        try (FakeUpstream fx = FakeUpstream.start(0, FakeUpstream.Initialize.ANSWER);
             FakeUpstream broken = FakeUpstream.start(0, FakeUpstream.Initialize.FAIL_500)) {
            UpstreamConfig cfg = config(Map.of(
                    "fx", Map.of("url", fx.url(), "headers", Map.of("Authorization", "Bearer ${TOKEN}", "X-Api-Key", "${KEY}")),
                    "broken", Map.of("url", broken.url(), "headers", Map.of("Authorization", "Bearer ${TOKEN}"))),
                    Map.of("TOKEN", token, "KEY", key));
            try (CodeTools tools = new CodeTools(new Upstreams(cfg, Duration.ZERO).start(), dir, 100, 16 << 20,
                    Duration.ofSeconds(30)); CodeTools.LibraryFiles lib = tools.files()) {
                CodeToolsRun run = tools.open("team", "run-1");
                List<String> seen = new ArrayList<>(); // everything the run's code gets, and the run's record

                // a normal call works (waiting for the first attempt to connect, under way)
                String add = call(run, "fx", "add", Map.of("a", 2, "b", 3));
                assertThat(add).isEqualTo("200 {\"result\":{\"sum\":5.0},\"structured\":true}");

                // the upstream echoes the request's headers in a text result, a structured one, an error result and
                // a JSON-RPC error: each arrives, the credentials redacted
                String text = call(run, "fx", "headers", Map.of());
                assertThat(text).startsWith("200 ").contains("Authorization: [redacted]", "X-api-key: [redacted]");
                String structured = call(run, "fx", "headers_structured", Map.of());
                assertThat(structured).startsWith("200 ").contains("\"Authorization\":\"[redacted]\"");
                String errorResult = call(run, "fx", "headers_error_result", Map.of());
                assertThat(errorResult).startsWith("422 ").contains("tool_error", "Authorization: [redacted]");
                String rpcError = call(run, "fx", "headers_rpc_error", Map.of());
                assertThat(rpcError).startsWith("422 ").contains("tool_error", "Authorization: [redacted]");
                // a 500 whose body is the request: the call fails on the way
                String http500 = call(run, "fx", "headers_500", Map.of());
                assertThat(http500).startsWith("502 ").contains("upstream_unavailable", "Authorization\\\":\\\"[redacted]");
                // an upstream whose initialize answers 500 with the request: unavailable, and why, without the token
                String unreachable = call(run, "broken", "add", Map.of());
                assertThat(unreachable).startsWith("502 ").contains("broken is not reachable", "Authorization\\\":\\\"[redacted]");
                seen.addAll(List.of(add, text, structured, errorResult, rpcError, http500, unreachable));

                LocalEndpoint.Response servers = run.handle("GET", CodeToolsRun.PREFIX + "/servers", new byte[0]);
                seen.add(new String(servers.body(), StandardCharsets.UTF_8));
                assertThat(seen.getLast()).contains("\"name\":\"leaky\"", "[redacted]", "\"unavailable\":");
                lib.write("team");
                for (String f : List.of(CodeTools.PYTHON_FILE, CodeTools.NODE_FILE, CodeTools.TYPES_FILE))
                    seen.add(Files.readString(lib.dir().resolve(f)));
                assertThat(seen.getLast()).contains("Listed with the headers it was listed with");
                seen.add(tools.listing("team", Optional.empty(), Optional.empty()).toString());
                seen.add(tools.listing("team", Optional.of("fx"), Optional.of("leaky")).toString());
                seen.add(run.report().toString());

                assertThat(String.join("\n", seen)).doesNotContain(token).doesNotContain(key);
                // after the lost connection, a call connects again and works
                assertThat(call(run, "fx", "echo", Map.of("text", "still here"))).isEqualTo(
                        "200 {\"result\":\"still here\",\"structured\":false}");
            }
        }
    }
}
