package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import dev.codeexec.config.Config;
import dev.codeexec.http.HttpServer;
import dev.codeexec.workspace.Workspaces;
import io.modelcontextprotocol.client.McpClient;
import io.modelcontextprotocol.client.McpSyncClient;
import io.modelcontextprotocol.client.transport.HttpClientStreamableHttpTransport;
import io.modelcontextprotocol.spec.McpSchema.CallToolRequest;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.TextContent;
import io.modelcontextprotocol.spec.McpSchema.Tool;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/** The five file tools through the SDK client over Streamable HTTP against the real Jetty stack (tenant "default"). */
class FileToolsTest {

    static HttpServer server;
    static McpSyncClient client;
    static Workspaces workspaces;

    @BeforeAll
    static void start() throws Exception {
        ServerSetup setup = TestServers.setup(new FakeExecutor(), List.of());
        workspaces = setup.workspaces();
        server = HttpServer.start(setup);
        client = client(server);
    }

    @AfterAll
    static void stop() {
        client.closeGracefully();
        server.close();
    }

    static McpSyncClient client(HttpServer s) {
        McpSyncClient c = McpClient.sync(HttpClientStreamableHttpTransport.builder("http://127.0.0.1:" + s.port()).build())
                // the client checks every structured result against its tool's output schema (the server does not)
                .enableCallToolSchemaCaching(true).requestTimeout(Duration.ofSeconds(30)).build();
        c.initialize();
        return c;
    }

    static CallToolResult call(McpSyncClient c, String tool, Object... kv) {
        Map<String, Object> args = new HashMap<>();
        for (int i = 0; i < kv.length; i += 2) args.put((String) kv[i], kv[i + 1]);
        return c.callTool(CallToolRequest.builder(tool).arguments(args).build());
    }

    static CallToolResult call(String tool, Object... kv) {
        return call(client, tool, kv);
    }

    static String text(CallToolResult r) {
        return ((TextContent) r.content().getFirst()).text();
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> data(CallToolResult r) {
        assertThat(r.isError()).as(text(r)).isFalse();
        return (Map<String, Object>) r.structuredContent();
    }

    static void assertError(CallToolResult r, String code) {
        assertThat(r.isError()).as("expected an error, got: " + text(r)).isTrue();
        assertThat(text(r)).startsWith("Error [" + code + "]: ").doesNotContain("Exception").doesNotContain("\tat ");
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> entries(CallToolResult r) {
        return (List<Map<String, Object>>) data(r).get("entries");
    }

    static List<Object> paths(CallToolResult r) {
        return entries(r).stream().map(e -> e.get("path")).toList();
    }

    static Path disk(String workspace) {
        return workspaces.root().resolve("default").resolve(workspace);
    }

    /** readOnly, destructive, idempotent, openWorld: what a client may do without asking the user. */
    @Test
    void everyToolTellsClientsItsEffects() {
        Map<String, List<Boolean>> hints = new HashMap<>();
        client.listTools().tools().forEach(t -> hints.put(t.name(), List.of(t.annotations().readOnlyHint(),
                t.annotations().destructiveHint(), t.annotations().idempotentHint(), t.annotations().openWorldHint())));
        assertThat(hints).containsAllEntriesOf(Map.of(
                "list_files", List.of(true, false, true, false),
                "read_file", List.of(true, false, true, false),
                "workspace_info", List.of(true, false, true, false),
                "runtime_info", List.of(true, false, true, false),
                "write_file", List.of(false, true, true, false),
                "delete_file", List.of(false, true, false, false),
                "execute_code", List.of(false, false, false, false)));
        assertThat(hints).containsAllEntriesOf(Map.of(
                "session_list", List.of(true, false, true, false),
                "session_reset", List.of(false, true, true, false),
                "session_close", List.of(false, true, false, false)));
    }

    @Test
    @SuppressWarnings("unchecked")
    void toolsDeclareInputAndOutputSchemas() {
        Map<String, Tool> tools = new HashMap<>();
        client.listTools().tools().forEach(t -> tools.put(t.name(), t));
        Map<String, List<String>> required = Map.of("list_files", List.of("workspace"), "read_file", List.of("workspace", "path"),
                "write_file", List.of("workspace", "path", "content"), "delete_file", List.of("workspace", "path"),
                "workspace_info", List.of());
        required.forEach((name, req) -> {
            Tool t = tools.get(name);
            assertThat(t).as(name).isNotNull();
            assertThat((List<String>) t.inputSchema().getOrDefault("required", List.of())).as(name).containsExactlyElementsOf(req);
            assertThat(t.inputSchema()).containsEntry("additionalProperties", false);
            assertThat(t.outputSchema()).as(name).containsKey("properties");
        });
        assertThat(tools.get("read_file").annotations().readOnlyHint()).isTrue();
        assertThat(tools.get("delete_file").annotations().destructiveHint()).isTrue();
        assertThat((Map<String, Object>) tools.get("list_files").inputSchema().get("properties")).containsKeys("path", "recursive", "limit");
    }

    @Test
    void writeListReadDeleteRoundTrip() {
        Map<String, Object> w = data(call("write_file", "workspace", "rt", "path", "hello.txt", "content", "hi there\n"));
        assertThat(w).containsEntry("path", "hello.txt").containsEntry("size", 9);

        CallToolResult list = call("list_files", "workspace", "rt");
        assertThat(entries(list)).singleElement().satisfies(e -> assertThat(e).containsEntry("path", "hello.txt")
                .containsEntry("type", "file").containsEntry("size", 9).containsKey("modified"));
        assertThat(data(list)).containsEntry("truncated", false);
        assertThat(text(list)).contains("hello.txt  (9 bytes)");

        CallToolResult read = call("read_file", "workspace", "rt", "path", "hello.txt");
        assertThat(data(read)).containsEntry("content", "hi there\n").containsEntry("encoding", "text")
                .containsEntry("mimeType", "text/plain").containsEntry("size", 9);
        assertThat(text(read)).isEqualTo("hi there\n");

        assertThat(data(call("delete_file", "workspace", "rt", "path", "hello.txt")))
                .containsEntry("deleted", true).containsEntry("type", "file");
        assertError(call("read_file", "workspace", "rt", "path", "hello.txt"), "not_found");
        assertThat(entries(call("list_files", "workspace", "rt"))).isEmpty();
        assertThat(disk("rt").resolve("hello.txt")).doesNotExist();
    }

    @Test
    void nestedDirectoriesAreCreatedListedAndDeletedRecursively() {
        data(call("write_file", "workspace", "nest", "path", "a/b/c.txt", "content", "deep"));
        data(call("write_file", "workspace", "nest", "path", "a/top.txt", "content", "top"));
        assertThat(disk("nest").resolve("a/b/c.txt")).hasContent("deep");

        assertThat(paths(call("list_files", "workspace", "nest"))).containsExactly("a");
        assertThat(entries(call("list_files", "workspace", "nest")).getFirst()).containsEntry("type", "directory");
        assertThat(paths(call("list_files", "workspace", "nest", "path", "a/b"))).containsExactly("a/b/c.txt");
        assertThat(paths(call("list_files", "workspace", "nest", "recursive", true)))
                .containsExactly("a", "a/b", "a/b/c.txt", "a/top.txt");

        CallToolResult cut = call("list_files", "workspace", "nest", "recursive", true, "limit", 2);
        assertThat(paths(cut)).hasSize(2);
        assertThat(data(cut)).containsEntry("truncated", true);
        assertThat(data(call("list_files", "workspace", "nest", "path", "a", "limit", 1))).containsEntry("truncated", true);

        assertThat(data(call("read_file", "workspace", "nest", "path", "a/b/c.txt"))).containsEntry("content", "deep");
        assertError(call("list_files", "workspace", "nest", "path", "a/top.txt"), "bad_path");
        assertError(call("read_file", "workspace", "nest", "path", "a"), "bad_path");
        assertError(call("delete_file", "workspace", "nest", "path", "a"), "conflict");
        assertThat(data(call("delete_file", "workspace", "nest", "path", "a", "recursive", true))).containsEntry("type", "directory");
        assertThat(disk("nest").resolve("a")).doesNotExist();
    }

    @Test
    void binaryContentRoundTripsAsBase64() throws Exception {
        byte[] all = new byte[256];
        for (int i = 0; i < 256; i++) all[i] = (byte) i;
        String b64 = Base64.getEncoder().encodeToString(all);
        assertThat(data(call("write_file", "workspace", "bin", "path", "data/all.bin", "content", b64, "encoding", "base64")))
                .containsEntry("size", 256);
        assertThat(Files.readAllBytes(disk("bin").resolve("data/all.bin"))).isEqualTo(all);

        Map<String, Object> auto = data(call("read_file", "workspace", "bin", "path", "data/all.bin"));
        assertThat(auto).containsEntry("encoding", "base64").containsEntry("content", b64)
                .containsEntry("mimeType", "application/octet-stream").containsEntry("size", 256);
        assertThat(data(call("read_file", "workspace", "bin", "path", "data/all.bin", "encoding", "base64")))
                .containsEntry("content", b64);
        assertError(call("read_file", "workspace", "bin", "path", "data/all.bin", "encoding", "text"), "invalid_arguments");
        // Text read as base64 on request.
        data(call("write_file", "workspace", "bin", "path", "t.txt", "content", "é"));
        assertThat(data(call("read_file", "workspace", "bin", "path", "t.txt", "encoding", "base64")))
                .containsEntry("content", Base64.getEncoder().encodeToString("é".getBytes(StandardCharsets.UTF_8)));
        assertError(call("write_file", "workspace", "bin", "path", "x.bin", "content", "not base64!", "encoding", "base64"),
                "invalid_arguments");
    }

    @Test
    void filesOverOneMegabyteAreRefusedWithThePointerToTheRestDownload() throws Exception {
        data(call("write_file", "workspace", "big", "path", "ok.txt", "content", "x".repeat(1 << 20)));
        assertThat(data(call("read_file", "workspace", "big", "path", "ok.txt"))).containsEntry("size", 1 << 20);
        Files.write(disk("big").resolve("huge file.txt"), new byte[(1 << 20) + 1]);
        CallToolResult r = call("read_file", "workspace", "big", "path", "huge file.txt");
        assertError(r, "too_large");
        assertThat(text(r)).contains("GET /api/workspaces/big/files/huge%20file.txt");
    }

    @Test
    void writesOverTheQuotaFailAndLeaveNothingBehind() throws Exception {
        Workspaces small = TestServers.workspaces(64 * 1024);
        try (HttpServer s = HttpServer.start(TestServers.setup(Config.of("PORT", "0"), new FakeExecutor(), List.of(), small))) {
            McpSyncClient c = client(s);
            try {
                data(call(c, "write_file", "workspace", "q", "path", "one.txt", "content", "a".repeat(40 * 1024)));
                CallToolResult over = call(c, "write_file", "workspace", "q", "path", "two.txt", "content", "b".repeat(40 * 1024));
                assertError(over, "quota_exceeded");
                assertThat(text(over)).contains("quota");
                assertThat(small.root().resolve("default/q/two.txt")).doesNotExist();
                // Replacing a file may reuse its own space.
                data(call(c, "write_file", "workspace", "q", "path", "one.txt", "content", "c".repeat(60 * 1024)));
                Map<String, Object> info = data(call(c, "workspace_info", "workspace", "q"));
                assertThat(info).containsEntry("quotaBytes", 64 * 1024).containsEntry("sizeBytes", 60 * 1024);
            } finally {
                c.closeGracefully();
            }
        }
    }

    @Test
    void badPathsAreRefusedByEveryTool() {
        data(call("write_file", "workspace", "bad", "path", "keep.txt", "content", "k"));
        for (String bad : List.of("../x", "a/../../x", "/etc/passwd", "a\u0000b", "a\\b", "..")) {
            assertError(call("list_files", "workspace", "bad", "path", bad), "bad_path");
            assertError(call("read_file", "workspace", "bad", "path", bad), "bad_path");
            assertError(call("write_file", "workspace", "bad", "path", bad, "content", "x"), "bad_path");
            assertError(call("delete_file", "workspace", "bad", "path", bad), "bad_path");
        }
        for (String badName : List.of("../x", "a/b", "", "x".repeat(65), "wörk")) {
            assertError(call("list_files", "workspace", badName), "bad_name");
            assertError(call("read_file", "workspace", badName, "path", "a"), "bad_name");
            assertError(call("write_file", "workspace", badName, "path", "a", "content", "x"), "bad_name");
            assertError(call("delete_file", "workspace", badName, "path", "a"), "bad_name");
            assertError(call("workspace_info", "workspace", badName), "bad_name");
        }
        assertError(call("delete_file", "workspace", "bad", "path", ""), "bad_path");
        assertError(call("list_files", "workspace", "bad", "recursiv", true), "invalid_arguments");
        assertError(call("list_files", "workspace", "bad", "limit", 10001), "invalid_arguments");
        assertError(call("read_file", "workspace", "bad"), "invalid_arguments");
        assertError(call("read_file", "workspace", "nope", "path", "a"), "not_found");
        assertThat(disk("bad").resolve("keep.txt")).exists();
        assertThat(workspaces.root().resolve("default/x")).doesNotExist();
    }

    @Test
    void plantedSymlinksAreNeverFollowed() throws Exception {
        data(call("write_file", "workspace", "links", "path", "real/ok.txt", "content", "fine"));
        Path victim = workspaces.root().resolve("victim-tenant/secret");
        Files.createDirectories(victim);
        Files.writeString(victim.resolve("secret.txt"), "tenant B's secret");
        String passwd = Files.readString(Path.of("/etc/passwd"));
        Path ws = disk("links");
        Files.createSymbolicLink(ws.resolve("passwd"), Path.of("/etc/passwd"));
        Files.createSymbolicLink(ws.resolve("other"), victim);
        Files.createSymbolicLink(ws.resolve("real/mid"), victim);

        for (String p : List.of("passwd", "other/secret.txt", "real/mid/secret.txt")) {
            CallToolResult r = call("read_file", "workspace", "links", "path", p);
            assertError(r, "bad_path");
            assertThat(text(r)).contains("symbolic link").doesNotContain("secret\"").doesNotContain("root:");
        }
        assertError(call("list_files", "workspace", "links", "path", "other"), "bad_path");
        assertError(call("list_files", "workspace", "links", "path", "real/mid"), "bad_path");
        List<Map<String, Object>> top = entries(call("list_files", "workspace", "links"));
        assertThat(top).filteredOn(e -> e.get("path").equals("passwd")).singleElement()
                .satisfies(e -> assertThat(e).containsEntry("type", "symlink").containsEntry("size", 0));
        assertThat(paths(call("list_files", "workspace", "links", "recursive", true)))
                .containsExactlyInAnyOrder("other", "passwd", "real", "real/mid", "real/ok.txt");

        assertError(call("write_file", "workspace", "links", "path", "passwd", "content", "pwned"), "bad_path");
        assertError(call("write_file", "workspace", "links", "path", "other/new.txt", "content", "pwned"), "bad_path");
        assertError(call("write_file", "workspace", "links", "path", "real/mid/secret.txt", "content", "pwned"), "bad_path");
        assertError(call("delete_file", "workspace", "links", "path", "other/secret.txt"), "bad_path");
        assertError(call("delete_file", "workspace", "links", "path", "real/mid/secret.txt"), "bad_path");

        assertThat(data(call("delete_file", "workspace", "links", "path", "passwd"))).containsEntry("type", "symlink");
        assertThat(data(call("delete_file", "workspace", "links", "path", "other", "recursive", true))).containsEntry("type", "symlink");
        assertThat(ws.resolve("passwd")).doesNotExist();
        assertThat(ws.resolve("other")).doesNotExist();

        // A FIFO planted by user code must not hang the call.
        Process mkfifo = new ProcessBuilder("mkfifo", ws.resolve("pipe").toString()).start();
        assertThat(mkfifo.waitFor()).isZero();
        CallToolResult fifo = call("read_file", "workspace", "links", "path", "pipe");
        assertError(fifo, "bad_path");
        assertThat(text(fifo)).contains("not a regular file");
        assertThat(entries(call("list_files", "workspace", "links"))).filteredOn(e -> e.get("path").equals("pipe"))
                .singleElement().satisfies(e -> assertThat(e).containsEntry("type", "other"));

        assertThat(Files.readString(Path.of("/etc/passwd"))).isEqualTo(passwd);
        assertThat(victim.resolve("secret.txt")).hasContent("tenant B's secret");
        assertThat(victim.resolve("new.txt")).doesNotExist();
    }

    @Test
    @SuppressWarnings("unchecked")
    void workspaceInfoCountsAndListsTheTenantsWorkspaces() {
        data(call("write_file", "workspace", "info1", "path", "d/a.txt", "content", "12345"));
        data(call("write_file", "workspace", "info1", "path", "b.txt", "content", "123"));
        Map<String, Object> info = data(call("workspace_info", "workspace", "info1"));
        assertThat(info).containsEntry("name", "info1").containsEntry("sizeBytes", 8).containsEntry("files", 2)
                .containsEntry("directories", 1).containsEntry("quotaBytes", 1024 * 1024 * 1024).containsKey("lastUsed");
        assertThat((String) info.get("lastUsed")).matches("\\d{4}-\\d\\d-\\d\\dT.*Z");
        assertThat(info).containsEntry("entries", 3).containsEntry("maxEntries", 50_000).containsEntry("complete", true)
                .containsEntry("enforcement", workspaces.enforcement());
        assertThat(text(call("workspace_info", "workspace", "info1"))).contains("3 of 50000 entries")
                .contains(workspaces.enforcement().equals("measured") ? "enforced by measuring" : "by the kernel");

        List<Map<String, Object>> all = (List<Map<String, Object>>) data(call("workspace_info")).get("workspaces");
        assertThat(all).extracting(m -> m.get("name")).contains("info1");
        assertThat(all).filteredOn(m -> m.get("name").equals("info1")).singleElement()
                .satisfies(m -> assertThat(m).containsEntry("files", 2));
        assertError(call("workspace_info", "workspace", "missing"), "not_found");
    }

    /** list_files and workspace_info on a chain of 25,000 directories answer (they never did: the walk overflowed). */
    @Test
    @org.junit.jupiter.api.Tag("slow")
    @SuppressWarnings("unchecked")
    void aDeepChainIsListedDownToTheDeepestNameablePathAndCounted() throws Exception {
        data(call("write_file", "workspace", "chain", "path", "top.txt", "content", "x"));
        Path root = workspaces.open("default", "chain", false).fs().root();
        dev.codeexec.testing.Trees.chain(root, "d", 25_000);
        try {
            Map<String, Object> listed = data(call("list_files", "workspace", "chain", "recursive", true, "limit", 10_000));
            assertThat((List<Object>) listed.get("entries")).hasSize(1 + dev.codeexec.workspace.WorkspaceFs.MAX_WALK_DEPTH);
            assertThat(listed).containsEntry("truncated", true);
            assertThat(text(call("list_files", "workspace", "chain", "recursive", true))).contains("levels deep are listed, not entered");
            assertThat(data(call("workspace_info", "workspace", "chain"))).containsEntry("directories", 25_000)
                    .containsEntry("files", 1);
            assertThat(data(call("workspace_info")).get("workspaces").toString()).contains("chain");
        } finally {
            workspaces.delete("default", "chain");
        }
    }

    /** Names that are not UTF-8 list as different escaped names (they listed as one, "a\uFFFD"). */
    @Test
    void namesThatAreNotUtf8AreListedEscapedAndApart() throws Exception {
        data(call("write_file", "workspace", "bytes", "path", "ok.txt", "content", "x"));
        Path root = workspaces.open("default", "bytes", false).fs().root();
        dev.codeexec.testing.Trees.file(root, new byte[]{'a', (byte) 0xff}, new byte[1]);
        dev.codeexec.testing.Trees.file(root, new byte[]{'a', (byte) 0xfe}, new byte[2]);
        assertThat(entries(call("list_files", "workspace", "bytes"))).extracting(e -> e.get("path") + "=" + e.get("size"))
                .containsExactly("a\\xfe=2", "a\\xff=1", "ok.txt=1");
        assertThat(text(call("list_files", "workspace", "bytes"))).contains("a\\xfe  (2 bytes)");
    }
}
