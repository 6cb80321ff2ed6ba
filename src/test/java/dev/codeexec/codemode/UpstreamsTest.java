package dev.codeexec.codemode;

import dev.codeexec.testing.Poll;
import dev.codeexec.testing.Requires;
import io.modelcontextprotocol.spec.McpSchema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tools.jackson.databind.json.JsonMapper;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;

import static org.assertj.core.api.Assertions.assertThat;

/** {@link Upstreams} against upstreams of the test's own: a stdio script (python3) and HTTP fixtures on 127.0.0.1. */
class UpstreamsTest {

    static final Duration BOUND = Duration.ofSeconds(60); // only stops a hung test

    /** The stdio fixture (stdio_upstream.py). */
    static Path stdioScript() throws URISyntaxException {
        return Path.of(UpstreamsTest.class.getResource("stdio_upstream.py").toURI());
    }

    /** A loopback port nothing listens on (it was free a moment ago). */
    static int closedPort() throws Exception {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    static String secret(String prefix) {
        byte[] b = new byte[12];
        ThreadLocalRandom.current().nextBytes(b);
        return prefix + HexFormat.of().formatHex(b);
    }

    static UpstreamConfig config(Map<String, Object> servers, Map<String, String> env) {
        return UpstreamConfig.parse(JsonMapper.shared().writeValueAsString(Map.of("mcpServers", servers)), env::get);
    }

    static McpSchema.CallToolResult result(CompletableFuture<McpSchema.CallToolResult> call) {
        assertThat(call).succeedsWithin(BOUND);
        return call.join();
    }

    @Test
    @SuppressWarnings("unchecked")
    void aStdioUpstreamGetsOnlyPathLangAndItsOwnEnvAndStartsInItsCwd(@TempDir Path dir) throws Exception {
        // the server's own environment (this JVM's: HOME, JAVA_HOME, ...) is what leaked before
        Requires.onlyWhere(System.getenv().keySet().stream().anyMatch(k -> !k.equals("PATH") && !k.equals("LANG")),
                "a server with more variables than PATH and LANG");
        String own = secret("own-");
        UpstreamConfig cfg = config(Map.of(
                "other", Map.of("command", "/usr/bin/python3", "args", new String[] {stdioScript().toString()},
                        "env", Map.of("OTHER_TOKEN", "${OTHER_SECRET}")),
                "reporter", Map.of("command", "/usr/bin/python3", "args", new String[] {stdioScript().toString()},
                        "env", Map.of("OWN_TOKEN", "${OWN_SECRET}", "MODE", "plain value"), "cwd", dir.toString())),
                Map.of("OWN_SECRET", own, "OTHER_SECRET", secret("other-")));
        try (Upstreams u = new Upstreams(cfg).start()) {
            Map<String, Object> seen = (Map<String, Object>) result(u.call("reporter", "environment", Map.of())).structuredContent();
            Map<String, String> env = (Map<String, String>) seen.get("env");
            // names first: a failure must not print the server's whole environment
            assertThat(env.keySet()).containsExactlyInAnyOrder("PATH", "LANG", "MODE", "OWN_TOKEN");
            // its own ${VAR} reached it: the answer carries it, redacted on the way back (a credential of the file)
            assertThat(env).isEqualTo(Map.of("PATH", System.getenv("PATH"), "LANG", "C.UTF-8", "MODE", "plain value",
                    "OWN_TOKEN", Secrets.MASK));
            assertThat(seen.get("cwd")).isEqualTo(dir.toRealPath().toString());
        }
    }

    @Test
    void anUpstreamThatIsDownFailsItsCallsClearlyAndIsPickedUpInTheBackgroundWhenItComesUp(@TempDir Path dir) throws Exception {
        int port = closedPort();
        Path late = dir.resolve("late-upstream"); // not there yet
        UpstreamConfig cfg = config(Map.of("gone", Map.of("url", "http://127.0.0.1:" + port + "/mcp"),
                "missing", Map.of("command", late.toString())), Map.of());
        try (UpstreamLog log = new UpstreamLog(); Upstreams u = new Upstreams(cfg, Duration.ZERO).start()) {
            // a call waits for the attempt under way to the upstream it calls, then fails naming the server and why
            CompletableFuture<McpSchema.CallToolResult> gone = u.call("gone", "add", Map.of());
            CompletableFuture<McpSchema.CallToolResult> missing = u.call("missing", "add", Map.of());
            assertThat(gone).failsWithin(BOUND);
            assertThat(missing).failsWithin(BOUND);
            // the attempts those calls waited for ran on the upstreams' own threads, not on this one (the caller's)
            assertThat(log.lines("cannot connect")).hasSizeGreaterThanOrEqualTo(2)
                    .allSatisfy(l -> assertThat(l.thread()).startsWith("upstream-"));
            assertThat(gone.exceptionNow()).isInstanceOf(Upstreams.UpstreamUnavailable.class)
                    .hasMessageStartingWith("gone is not reachable (").hasMessageContaining("ConnectException");
            assertThat(missing.exceptionNow()).isInstanceOf(Upstreams.UpstreamUnavailable.class)
                    .hasMessageStartingWith("missing is not reachable (").hasMessageContaining(late + "\": Exec failed");
            assertThat(u.tools("gone")).isEmpty();
            assertThat(u.problem("gone")).hasValueSatisfying(p -> assertThat(p).contains("ConnectException"));

            try (FakeUpstream up = FakeUpstream.start(port, FakeUpstream.Initialize.ANSWER)) {
                Files.copy(stdioScript(), late);
                Files.setPosixFilePermissions(late, PosixFilePermissions.fromString("rwxr-xr-x"));
                // each use starts an attempt in the background when none is under way (retry 0 here)
                Poll.until("both upstreams are picked up", () -> {
                    u.tools("gone");
                    u.tools("missing");
                    return u.connected("gone") && u.connected("missing");
                });
                assertThat(u.tools("gone")).extracting(McpSchema.Tool::name).contains("add", "echo");
                assertThat(u.problem("gone")).isEmpty();
                assertThat(result(u.call("gone", "add", Map.of("a", 2, "b", 3))).structuredContent()).isEqualTo(Map.of("sum", 5.0));
                assertThat(result(u.call("missing", "add", Map.of("a", 2, "b", 3))).structuredContent()).isEqualTo(Map.of("sum", 5));
            }
            // every attempt ran on the upstream's own thread, none on this one (the caller's)
            assertThat(log.lines("cannot connect")).isNotEmpty().allSatisfy(l -> assertThat(l.thread()).startsWith("upstream-"));
            assertThat(log.lines(": connected,")).hasSize(2).allSatisfy(l -> assertThat(l.thread()).startsWith("upstream-"));
        }
    }

    @Test
    void aConnectedUpstreamListsItsToolsAndAnswersWithResultsErrorResultsIncluded() throws Exception {
        try (FakeUpstream fx = FakeUpstream.start(0, FakeUpstream.Initialize.ANSWER);
             Upstreams u = new Upstreams(config(Map.of("fx", Map.of("url", fx.url())), Map.of())).start()) {
            Poll.until("fx connected", () -> u.connected("fx"));
            assertThat(u.problem("fx")).isEmpty();
            assertThat(u.tools("fx")).extracting(McpSchema.Tool::name).startsWith("add", "echo", "headers").contains("hang");
            assertThat(u.tools("fx").getFirst().description()).isEqualTo("Adds a and b.");
            assertThat(result(u.call("fx", "add", Map.of("a", 2, "b", 3))).structuredContent()).isEqualTo(Map.of("sum", 5.0));
            McpSchema.CallToolResult echo = result(u.call("fx", "echo", Map.of("text", "hi")));
            assertThat(CodeToolsRun.text(echo)).isEqualTo("hi");
            assertThat(echo.isError()).isNotEqualTo(Boolean.TRUE);
            // an error result is the tool's answer, not a failed call
            McpSchema.CallToolResult error = result(u.call("fx", "headers_error_result", Map.of()));
            assertThat(error.isError()).isTrue();
            assertThat(CodeToolsRun.text(error)).startsWith("refused; the request was:");
        }
    }

    @Test
    void aCallThatFailsSaysWhichServerAndWhyAndALostConnectionIsMadeAgain() throws Exception {
        try (FakeUpstream fx = FakeUpstream.start(0, FakeUpstream.Initialize.ANSWER);
             Upstreams u = new Upstreams(config(Map.of("fx", Map.of("url", fx.url())), Map.of()), Duration.ZERO).start()) {
            Poll.until("fx connected", () -> u.connected("fx"));
            // a JSON-RPC error answer: the upstream refused the call
            CompletableFuture<McpSchema.CallToolResult> unknown = u.call("fx", "nosuch", Map.of());
            assertThat(unknown).failsWithin(BOUND);
            assertThat(unknown.exceptionNow()).isInstanceOf(Upstreams.UpstreamRefused.class).hasMessageContaining("no tool nosuch");
            assertThat(u.connected("fx")).as("a refusal is an answer: the connection stays").isTrue();

            // a 500: the call failed on the way; the connection counts as lost, its tools are kept
            CompletableFuture<McpSchema.CallToolResult> broken = u.call("fx", "headers_500", Map.of());
            assertThat(broken).failsWithin(BOUND);
            assertThat(broken.exceptionNow()).isInstanceOf(Upstreams.UpstreamUnavailable.class).hasMessageStartingWith("fx: ");
            assertThat(u.problem("fx")).hasValueSatisfying(p -> assertThat(p).startsWith("the connection was lost: "));
            assertThat(u.tools("fx")).as("as last listed").extracting(McpSchema.Tool::name).contains("add");
            // the next use connects again (retry 0 here), and calls work
            Poll.until("fx connected again", () -> {
                u.tools("fx");
                return u.connected("fx");
            });
            assertThat(result(u.call("fx", "echo", Map.of("text", "back"))).content()).hasSize(1);

            // a server the file does not name
            assertThat(u.tools("nosuch")).isEmpty();
            assertThat(u.connected("nosuch")).isFalse();
            assertThat(u.problem("nosuch")).hasValue("no such server");
            assertThat(u.call("nosuch", "add", Map.of())).failsWithin(BOUND).withThrowableThat()
                    .withCauseInstanceOf(Upstreams.UpstreamUnavailable.class).withMessageContaining("nosuch is not configured");
        }
    }

    @Test
    void cancellingACallTellsTheUpstreamWhichRequestEnded() throws Exception {
        try (FakeUpstream fx = FakeUpstream.start(0, FakeUpstream.Initialize.ANSWER);
             Upstreams u = new Upstreams(config(Map.of("fx", Map.of("url", fx.url())), Map.of())).start()) {
            CompletableFuture<McpSchema.CallToolResult> call = u.call("fx", "hang", Map.of());
            String id = fx.awaitHangingCall();
            assertThat(call).isNotDone();
            call.cancel(true);
            assertThat(fx.awaitCancelled(id)).isEqualTo("the run that made the call ended");
            // the connection serves the next call
            assertThat(result(u.call("fx", "echo", Map.of("text", "after"))).content()).hasSize(1);
        }
    }

    @Test
    void onceClosedNoUpstreamIsConnectedAndACallFailsAtOnce() throws Exception {
        try (FakeUpstream fx = FakeUpstream.start(0, FakeUpstream.Initialize.ANSWER); UpstreamLog log = new UpstreamLog()) {
            // a name of its own: the log is the JVM's, and other tests' closed upstreams may still log a failed attempt
            Upstreams u = new Upstreams(config(Map.of("shut", Map.of("url", fx.url())), Map.of()), Duration.ZERO).start();
            Poll.until("shut connected (and its attempt logged)", () -> !log.lines("upstream shut: connected,").isEmpty());
            u.close();
            assertThat(u.connected("shut")).isFalse();
            CompletableFuture<McpSchema.CallToolResult> call = u.call("shut", "echo", Map.of("text", "x"));
            assertThat(call).isCompletedExceptionally();
            assertThat(call.exceptionNow()).isInstanceOf(Upstreams.UpstreamUnavailable.class)
                    .hasMessageStartingWith("shut is not reachable");
            u.tools("shut");
            assertThat(log.lines("upstream shut: ")).as("no attempt after the close").hasSize(1);
        }
    }
}
