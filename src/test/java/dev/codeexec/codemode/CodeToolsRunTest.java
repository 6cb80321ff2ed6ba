package dev.codeexec.codemode;

import dev.codeexec.egress.LocalEndpoint;
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
