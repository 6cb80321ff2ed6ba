package dev.codeexec.codemode;

import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigException;
import dev.codeexec.testing.Poll;
import io.modelcontextprotocol.spec.McpSchema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;

import static dev.codeexec.codemode.UpstreamsTest.closedPort;
import static dev.codeexec.codemode.UpstreamsTest.config;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** {@link CodeTools}: what a run's library and listings say, with fake upstreams on 127.0.0.1. */
class CodeToolsTest {

    /**
     * Two servers at one fake upstream: {@code fx} only for the tenant "team" and only its tools add and echo (and
     * "gone", which it does not list); {@code open-data} for everyone, every tool. Both connected.
     */
    private static CodeTools twoServers(FakeUpstream up, Path dir) throws Exception {
        Map<String, Object> servers = new LinkedHashMap<>(); // the file's order is the listings' order
        servers.put("fx", Map.of("url", up.url(), "tenants", List.of("team"), "tools", List.of("add", "echo", "gone")));
        servers.put("open-data", Map.of("url", up.url(), "description", "Open data for all."));
        UpstreamConfig cfg = config(servers, Map.of());
        CodeTools tools = new CodeTools(new Upstreams(cfg, Duration.ZERO).start(), dir, 100, 16 << 20, Duration.ofSeconds(30));
        Poll.until("both servers connected", () -> tools.upstreams().connected("fx") && tools.upstreams().connected("open-data"));
        return tools;
    }

    private static List<String> names(List<McpSchema.Tool> tools) {
        return tools.stream().map(McpSchema.Tool::name).toList();
    }

    @Test
    void aTenantSeesOnlyTheServersTheFileOpensToItAndOnlyTheToolsItLets(@TempDir Path dir) throws Exception {
        try (FakeUpstream up = FakeUpstream.start(0, FakeUpstream.Initialize.ANSWER); CodeTools tools = twoServers(up, dir)) {
            List<Library.ServerView> team = tools.visible("team");
            assertThat(team).extracting(Library.ServerView::name).containsExactly("fx", "open-data");
            assertThat(names(team.get(0).tools())).as("the file's tools list, as far as fx lists them").containsExactly("add", "echo");
            assertThat(names(team.get(1).tools())).contains("add", "echo", "headers", "hang");
            assertThat(team.get(1).module()).isEqualTo("open_data");
            assertThat(team).allSatisfy(v -> assertThat(v.unavailable()).isEmpty());
            assertThat(tools.visible("guest")).extracting(Library.ServerView::name).containsExactly("open-data");

            assertThat(tools.refusal("team", "fx", "add")).isEmpty();
            assertThat(tools.refusal("team", "open_data", "headers")).as("by module name").isEmpty();
            assertThat(tools.refusal("team", "fx", "headers")).hasValue("the tool 'headers' of fx is not open to code on this "
                    + "server (its \"tools\" list in UPSTREAM_MCP_FILE)");
            // a server the caller may not use and one that does not exist get the same answer
            assertThat(tools.refusal("guest", "fx", "add")).hasValue("no server 'fx' for this caller (it may call: open-data)");
            assertThat(tools.refusal("guest", "nosuch", "add")).hasValue("no server 'nosuch' for this caller (it may call: open-data)");
        }
    }

    @Test
    void aTenantOpenToNoServerIsToldSo(@TempDir Path dir) throws Exception {
        UpstreamConfig cfg = config(Map.of("fx", Map.of("url", "http://127.0.0.1:" + closedPort() + "/mcp",
                "tenants", List.of("team"))), Map.of());
        try (CodeTools tools = new CodeTools(new Upstreams(cfg, Duration.ZERO), dir, 100, 16 << 20, Duration.ofSeconds(30))) {
            assertThat(tools.visible("guest")).isEmpty();
            assertThat(tools.refusal("guest", "fx", "add")).hasValue("no server 'fx' for this caller (it may call none)");
            assertThat(tools.listing("guest", Optional.empty(), Optional.empty())).isEqualTo(Map.of("servers", List.of()));
        }
    }

    @Test
    @SuppressWarnings("unchecked")
    void listCodeToolsGoesFromServersToToolsToOneToolsSchemaAndSignatures(@TempDir Path dir) throws Exception {
        try (FakeUpstream up = FakeUpstream.start(0, FakeUpstream.Initialize.ANSWER); CodeTools tools = twoServers(up, dir)) {
            List<Map<String, Object>> servers = (List<Map<String, Object>>) tools.listing("team", Optional.empty(), Optional.empty())
                    .get("servers");
            assertThat(servers).extracting(m -> m.get("name")).containsExactly("fx", "open-data");
            assertThat(servers.get(0)).containsEntry("module", "fx").containsEntry("tools", 2).doesNotContainKey("unavailable");
            assertThat(servers.get(1)).containsEntry("description", "Open data for all.");

            Map<String, Object> fx = tools.listing("team", Optional.of("fx"), Optional.empty());
            assertThat(fx).containsEntry("server", "fx").containsEntry("module", "fx");
            assertThat((List<Map<String, Object>>) fx.get("tools")).containsExactly(
                    Map.of("name", "add", "description", "Adds a and b."), Map.of("name", "echo", "description", "Echoes text."));
            assertThat(tools.listing("team", Optional.of("open_data"), Optional.empty())).as("by module name")
                    .containsEntry("server", "open-data");

            Map<String, Object> add = tools.listing("team", Optional.of("fx"), Optional.of("add"));
            assertThat(add).containsEntry("tool", "add").containsEntry("description", "Adds a and b.");
            assertThat((String) add.get("python")).startsWith("fx.add(*, ").contains("a: float = ...", "b: float = ...")
                    .endsWith(") -> str");
            assertThat((Map<String, Object>) add.get("inputSchema")).containsEntry("type", "object");
            assertThat((String) add.get("typescript")).startsWith("fx.add(");

            assertThatThrownBy(() -> tools.listing("team", Optional.empty(), Optional.of("add")))
                    .isInstanceOf(IllegalArgumentException.class).hasMessage("'tool' needs 'server'");
            assertThatThrownBy(() -> tools.listing("guest", Optional.of("fx"), Optional.empty()))
                    .isInstanceOf(IllegalArgumentException.class).hasMessage("no server 'fx' for this caller (it may call: open-data)");
            assertThatThrownBy(() -> tools.listing("team", Optional.of("fx"), Optional.of("headers")))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("no tool 'headers' of fx for this caller (its tools: add, echo)");
        }
    }

    @Test
    void eachRunsLibraryHoldsWhatItsTenantMayCallAndIsRewrittenForTheNextTenant(@TempDir Path dir) throws Exception {
        try (FakeUpstream up = FakeUpstream.start(0, FakeUpstream.Initialize.ANSWER); CodeTools tools = twoServers(up, dir)) {
            CodeTools.LibraryFiles lib = tools.files();
            assertThat(lib.dir().getParent()).isEqualTo(dir);
            assertThat(lib.environment()).isEqualTo(Map.of("PYTHONPATH", lib.dir().resolve("python").toString(),
                    "NODE_PATH", lib.dir().resolve("node").toString()));
            assertThat(tools.environment()).isEqualTo(Map.of("CODE_TOOLS_URL", "http://127.0.0.1:3128/code-tools/v1"));

            lib.write("team");
            String py = Files.readString(lib.dir().resolve(CodeTools.PYTHON_FILE));
            assertThat(py).contains("fx = _Server(\"fx\", ", "def _fx__add(", "def _fx__echo(", "open_data = _Server(",
                    "return [\"fx\", \"open_data\"]").doesNotContain("def _fx__headers(");
            assertThat(Files.readString(lib.dir().resolve(CodeTools.NODE_FILE))).contains("const fx = ");
            assertThat(Files.readString(lib.dir().resolve(CodeTools.TYPES_FILE))).contains("add(");
            assertThat(Files.readString(lib.dir().resolve(CodeTools.PACKAGE_FILE))).contains("\"main\": \"index.js\"");
            // the sandbox's uid reads the files, and nobody but the server writes them
            for (String f : List.of(CodeTools.PYTHON_FILE, CodeTools.NODE_FILE, CodeTools.TYPES_FILE, CodeTools.PACKAGE_FILE))
                assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(lib.dir().resolve(f)))).isEqualTo("rw-r--r--");

            // the same (warm) sandbox serving another tenant next: the same files, now without fx
            lib.write("guest");
            String guest = Files.readString(lib.dir().resolve(CodeTools.PYTHON_FILE));
            assertThat(guest).contains("open_data = _Server(", "return [\"open_data\"]").doesNotContain("fx = _Server(", "_fx__");
            assertThat(Files.readString(lib.dir().resolve(CodeTools.NODE_FILE))).doesNotContain("const fx = ");
            try (Stream<Path> all = Files.walk(lib.dir())) {
                assertThat(all.map(p -> p.getFileName().toString())).as("no half-written file left").noneMatch(n -> n.endsWith(".new"));
            }
            assertThat(tools.generated("guest")).as("the same view gives the cached text").isSameAs(tools.generated("guest"));

            lib.close();
            assertThat(lib.dir()).doesNotExist();
        }
    }

    @Test
    void withoutUpstreamMcpFileThereIsNoCodeModeAndWithItTheSandboxMustBeBwrap(@TempDir Path dir) throws Exception {
        assertThat(CodeTools.of(Config.of("DATA_DIR", dir.toString()))).isEmpty();
        Path file = Files.writeString(dir.resolve("upstreams.json"), "{\"mcpServers\": {}}");
        assertThatThrownBy(() -> CodeTools.of(Config.of("UPSTREAM_MCP_FILE", file.toString(), "SANDBOX", "none")))
                .isInstanceOf(ConfigException.class).hasMessageContaining("UPSTREAM_MCP_FILE needs SANDBOX=bwrap")
                .hasMessageContaining("SANDBOX=none does not have");
        assertThatThrownBy(() -> CodeTools.of(Config.of("UPSTREAM_MCP_FILE", file.toString(), "SANDBOX", "gvisor")))
                .isInstanceOf(ConfigException.class).hasMessageContaining("cannot be passed into gVisor");
    }

    @Test
    void codeModeTakesItsCapsFromTheConfigurationAndClearsWhatAStoppedServerLeft(@TempDir Path dir) throws Exception {
        Path file = Files.writeString(dir.resolve("upstreams.json"), "{\"mcpServers\": {\"fx\": {\"url\": \"http://127.0.0.1:"
                + closedPort() + "/mcp\"}}}");
        Path data = Files.createDirectory(dir.resolve("data"));
        Path left = Files.createDirectories(data.resolve("code-tools/0123456789abcdef/python"));
        Config config = Config.of("DATA_DIR", data.toString(), "UPSTREAM_MCP_FILE", file.toString(),
                "CODE_TOOLS_MAX_CALLS", "7", "CODE_TOOLS_MAX_MB", "2", "CODE_TOOLS_CALL_TIMEOUT_MS", "1500");
        try (CodeTools tools = CodeTools.of(config).orElseThrow()) {
            assertThat(tools.maxCalls()).isEqualTo(7);
            assertThat(tools.maxBytes()).isEqualTo(2L << 20);
            assertThat(tools.callTimeout()).isEqualTo(Duration.ofMillis(1500));
            assertThat(tools.upstreams().config().servers()).extracting(UpstreamConfig.Upstream::name).containsExactly("fx");
            assertThat(left.getParent()).as("a library directory of a server that did not stop cleanly").doesNotExist();
            assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(data.resolve("code-tools"))))
                    .as("sandboxes reach their own directory by name, and list none").isEqualTo("rwx--x--x");
        }
    }

    @Test
    void aRunsLibraryIsWrittenAtOnceWithTheUpstreamsThatAreDownListedAsUnavailable(@TempDir Path dir) throws Exception {
        Path libraries = Files.createDirectory(dir.resolve("libraries"));
        try (FakeUpstream hung = FakeUpstream.start(0, FakeUpstream.Initialize.HOLD); UpstreamLog log = new UpstreamLog()) {
            UpstreamConfig cfg = config(Map.of("hung", Map.of("url", hung.url()),
                    "gone", Map.of("url", "http://127.0.0.1:" + closedPort() + "/mcp"),
                    "missing", Map.of("command", dir.resolve("no-such-command").toString())), Map.of());
            try (CodeTools tools = new CodeTools(new Upstreams(cfg, Duration.ZERO).start(), libraries, 100, 16 << 20,
                    Duration.ofSeconds(30)); CodeTools.LibraryFiles lib = tools.files()) {
                assertThat(hung.awaitInitializeHeld()).as("the first attempt to connect to hung is under way").isTrue();

                lib.write("team");
                assertThat(hung.held()).as("the library was written while hung still held its initialize").isEqualTo(1);
                // a write starts attempts to the upstreams that are due (retry 0 here), on threads of their own
                Poll.until("gone and missing have each failed twice", () -> {
                    lib.write("team");
                    return log.lines("gone: cannot connect").size() >= 2 && log.lines("missing: cannot connect").size() >= 2;
                });
                assertThat(log.lines("cannot connect")).allSatisfy(l -> assertThat(l.thread()).startsWith("upstream-"));
                assertThat(hung.held()).isEqualTo(1);

                lib.write("team");
                String py = Files.readString(lib.dir().resolve(CodeTools.PYTHON_FILE));
                // each listed as unavailable, and why: still connecting, or the last attempt's error
                assertThat(py).contains("hung = _Server(\"hung\", ", ", \"hung\", \"connecting\")", "gone = _Server(",
                        "missing = _Server(", "Unavailable when this library was written", "ConnectException", "no-such-command");
                assertThat(Files.readString(lib.dir().resolve(CodeTools.NODE_FILE))).contains("const hung = byName(\"hung\", ");
                assertThat(tools.listing("team", Optional.empty(), Optional.empty()).get("servers").toString())
                        .contains("name=hung", "unavailable=connecting", "unavailable=Client failed to initialize");
            }
        }
    }
}
