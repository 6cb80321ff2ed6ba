package dev.codeexec.codemode;

import io.modelcontextprotocol.spec.McpSchema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tools.jackson.databind.json.JsonMapper;

import java.net.URISyntaxException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assumptions.assumeThat;

/** {@link Upstreams} against upstreams of the test's own: a stdio script (python3). */
class UpstreamsTest {

    static final Duration BOUND = Duration.ofSeconds(60); // only stops a hung test

    /** The stdio fixture (stdio_upstream.py). */
    static Path stdioScript() throws URISyntaxException {
        return Path.of(UpstreamsTest.class.getResource("stdio_upstream.py").toURI());
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
        assumeThat(System.getenv().keySet()).as("the server has more variables than PATH and LANG").anyMatch(
                k -> !k.equals("PATH") && !k.equals("LANG"));
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
            assertThat(env).isEqualTo(Map.of("PATH", System.getenv("PATH"), "LANG", "C.UTF-8", "MODE", "plain value",
                    "OWN_TOKEN", own));
            assertThat(seen.get("cwd")).isEqualTo(dir.toRealPath().toString());
        }
    }
}
