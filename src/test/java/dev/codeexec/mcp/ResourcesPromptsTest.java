package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import dev.codeexec.http.HttpServer;
import dev.codeexec.workspace.Workspaces;
import io.modelcontextprotocol.client.McpSyncClient;
import io.modelcontextprotocol.spec.McpError;
import io.modelcontextprotocol.spec.McpSchema.BlobResourceContents;
import io.modelcontextprotocol.spec.McpSchema.CompleteRequest;
import io.modelcontextprotocol.spec.McpSchema.CompleteRequest.CompleteArgument;
import io.modelcontextprotocol.spec.McpSchema.CompleteRequest.CompleteContext;
import io.modelcontextprotocol.spec.McpSchema.CompleteResult;
import io.modelcontextprotocol.spec.McpSchema.CompleteReference;
import io.modelcontextprotocol.spec.McpSchema.GetPromptRequest;
import io.modelcontextprotocol.spec.McpSchema.GetPromptResult;
import io.modelcontextprotocol.spec.McpSchema.PromptReference;
import io.modelcontextprotocol.spec.McpSchema.ReadResourceRequest;
import io.modelcontextprotocol.spec.McpSchema.ReadResourceResult;
import io.modelcontextprotocol.spec.McpSchema.Resource;
import io.modelcontextprotocol.spec.McpSchema.ResourceReference;
import io.modelcontextprotocol.spec.McpSchema.ResourceTemplate;
import io.modelcontextprotocol.spec.McpSchema.Role;
import io.modelcontextprotocol.spec.McpSchema.TextContent;
import io.modelcontextprotocol.spec.McpSchema.TextResourceContents;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static dev.codeexec.mcp.FileToolsTest.call;
import static dev.codeexec.mcp.FileToolsTest.data;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Resources, the file template, prompts and completions through the SDK client against the real HTTP stack. */
class ResourcesPromptsTest {

    static HttpServer server;
    static McpSyncClient client;
    static Workspaces workspaces;
    /** The 8-byte PNG signature, then bytes that are not UTF-8. */
    static final byte[] PNG = {(byte) 0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 'I', 'H', 'D', 'R', (byte) 0xff, (byte) 0xfe};

    @BeforeAll
    static void start() throws Exception {
        ServerSetup setup = TestServers.setup(new FakeExecutor(), List.of());
        workspaces = setup.workspaces();
        server = HttpServer.start(setup);
        client = FileToolsTest.client(server);
        write("proj", "a/b/c.txt", "nested\n");
        write("proj", "src/main.py", "def add(a, b):\n    return a + b\n\nprint(add(1, 2))  # ``` fence inside\n");
        write("proj", "src/math/vec.py", "X = 1\n");
        write("proj", "src/mangle.txt", "m");
        write("proj", "src/other.py", "o");
        write("proj", "my file.txt", "spaced");
        write("proj2", "x.txt", "x");
        write("other", "y.txt", "y");
        data(call(client, "write_file", "workspace", "proj", "path", "img/chart.png",
                "content", Base64.getEncoder().encodeToString(PNG), "encoding", "base64"));
        Path ws = workspaces.root().resolve("default/proj");
        Files.createSymbolicLink(ws.resolve("src/mallink.py"), Path.of("/etc/passwd"));
        Files.createSymbolicLink(ws.resolve("escape"), workspaces.root().resolve("default/other"));
    }

    static void write(String ws, String path, String content) {
        data(call(client, "write_file", "workspace", ws, "path", path, "content", content));
    }

    @AfterAll
    static void stop() {
        client.closeGracefully();
        server.close();
    }

    static ReadResourceResult read(String uri) {
        return client.readResource(new ReadResourceRequest(uri));
    }

    @Test
    void listsTheInfoResourceAndTheFileTemplate() {
        assertThat(client.listResources().resources()).extracting(Resource::uri).containsExactly("code-exec://info");
        assertThat(client.listResourceTemplates().resourceTemplates()).extracting(ResourceTemplate::uriTemplate)
                .containsExactly("ws://{workspace}/{+path}", "job://{job}", "job://{job}/{stream}");
    }

    @Test
    void infoResourceDescribesVersionLanguagesLibrariesAndLimits() {
        ReadResourceResult r = read("code-exec://info");
        TextResourceContents c = (TextResourceContents) r.contents().getFirst();
        assertThat(c.mimeType()).isEqualTo("application/json");
        JsonNode doc = JsonMapper.builder().build().readTree(c.text());
        assertThat(doc.path("version").asString()).isEqualTo("test");
        assertThat(doc.path("server").asString()).isEqualTo("code-exec-mcp");
        assertThat(doc.path("languages").has("python")).isTrue();
        JsonNode py = doc.path("libraries").path("python");
        for (String lib : List.of("numpy", "pandas", "matplotlib", "scipy", "requests", "pyyaml", "pillow")) {
            assertThat(py.has(lib)).as(lib).isTrue();
        }
        assertThat(py.path("numpy").asBoolean()).isEqualTo(PythonLibraries.available().get("numpy"));
        assertThat(doc.path("limits").path("readFileMaxBytes").asInt()).isEqualTo(1 << 20);
        assertThat(doc.path("limits").path("workspaceQuotaBytes").asLong()).isEqualTo(1L << 30);
        assertThat(doc.path("files").path("resourceTemplate").asString()).isEqualTo("ws://{workspace}/{+path}");
    }

    @Test
    void templateReadsNestedTextFiles() {
        ReadResourceResult r = read("ws://proj/a/b/c.txt");
        TextResourceContents c = (TextResourceContents) r.contents().getFirst();
        assertThat(c.text()).isEqualTo("nested\n");
        assertThat(c.mimeType()).isEqualTo("text/plain");
        assertThat(c.uri()).isEqualTo("ws://proj/a/b/c.txt");
        assertThat(((TextResourceContents) read("ws://proj/src/main.py").contents().getFirst()).mimeType()).isEqualTo("text/x-python");
        assertThat(((TextResourceContents) read("ws://proj/my%20file.txt").contents().getFirst()).text()).isEqualTo("spaced");
    }

    @Test
    void templateReadsBinaryFilesAsBlobs() {
        BlobResourceContents c = (BlobResourceContents) read("ws://proj/img/chart.png").contents().getFirst();
        assertThat(c.mimeType()).isEqualTo("image/png");
        assertThat(Base64.getDecoder().decode(c.blob())).isEqualTo(PNG);
    }

    @Test
    void templateRefusesLinksTraversalAndMissingFilesWithClearErrors() {
        assertThatThrownBy(() -> read("ws://proj/src/mallink.py")).isInstanceOf(McpError.class)
                .hasMessageContaining("bad_path").hasMessageContaining("symbolic link");
        assertThatThrownBy(() -> read("ws://proj/escape/y.txt")).isInstanceOf(McpError.class).hasMessageContaining("bad_path");
        assertThatThrownBy(() -> read("ws://proj/a/../../other/y.txt")).isInstanceOf(McpError.class).hasMessageContaining("bad_path");
        assertThatThrownBy(() -> read("ws://proj/%2E%2E/other/y.txt")).isInstanceOf(McpError.class).hasMessageContaining("bad_path");
        assertThatThrownBy(() -> read("ws://proj/bad%zz")).isInstanceOf(McpError.class).hasMessageContaining("bad_path");
        assertThatThrownBy(() -> read("ws://proj/nope.txt")).isInstanceOf(McpError.class).hasMessageContaining("not_found");
        assertThatThrownBy(() -> read("ws://nope/a.txt")).isInstanceOf(McpError.class).hasMessageContaining("not_found");
        assertThatThrownBy(() -> read("ws://proj/a")).isInstanceOf(McpError.class).hasMessageContaining("is a directory");
    }

    @Test
    void largeFilesPointToTheRestDownload() throws Exception {
        Files.write(workspaces.root().resolve("default/proj2/big.bin"), new byte[(1 << 20) + 10]);
        assertThatThrownBy(() -> read("ws://proj2/big.bin")).isInstanceOf(McpError.class)
                .hasMessageContaining("too_large").hasMessageContaining("GET /api/workspaces/proj2/files/big.bin");
    }

    static GetPromptResult prompt(String name, Object... kv) {
        Map<String, Object> args = new HashMap<>();
        for (int i = 0; i < kv.length; i += 2) args.put((String) kv[i], kv[i + 1]);
        return client.getPrompt(new GetPromptRequest(name, args));
    }

    static String promptText(GetPromptResult r) {
        assertThat(r.messages()).singleElement().satisfies(m -> assertThat(m.role()).isEqualTo(Role.USER));
        return ((TextContent) r.messages().getFirst().content()).text();
    }

    @Test
    void reviewPromptEmbedsTheFileInAFenceTheCodeCannotClose() {
        String t = promptText(prompt("review-code", "workspace", "proj", "path", "src/main.py"));
        assertThat(t).contains("`src/main.py`").contains("workspace `proj`")
                .contains("````python\ndef add(a, b):\n    return a + b\n").contains("# ``` fence inside\n````\n")
                .contains("Correctness").contains("Readability").contains("Robustness").contains("Security");
    }

    @Test
    void testsPromptNamesTheFileToolsAndExecuteCodeWithTheirArguments() {
        String t = promptText(prompt("write-and-run-tests", "workspace", "proj", "path", "src/main.py"));
        assertThat(t).contains("def add(a, b)").contains("`write_file`").contains("`execute_code`")
                .contains("\"workspace\": \"proj\"").contains("\"path\": \"src/test_main.py\"")
                .contains("cd src && /usr/bin/python3 -m unittest -v test_main").contains("\"language\": \"bash\"");
        String go = promptText(prompt("write-and-run-tests", "workspace", "proj", "path", "a/b/c.txt", "language", "java"));
        assertThat(go).contains("\"language\": \"java\"").contains("cTest.java").contains("nested");
        String js = promptText(prompt("write-and-run-tests", "workspace", "proj", "path", "a/b/c.txt", "language", "JavaScript"));
        assertThat(js).contains("node --test c.test.js").contains("cd a/b && ").doesNotContain("\"language\": \"javascript\"");
    }

    @Test
    void promptsRefuseLinksMissingFilesAndMissingArguments() {
        assertThatThrownBy(() -> prompt("review-code", "workspace", "proj", "path", "src/mallink.py"))
                .isInstanceOf(McpError.class).hasMessageContaining("bad_path");
        assertThatThrownBy(() -> prompt("write-and-run-tests", "workspace", "proj", "path", "escape/y.txt"))
                .isInstanceOf(McpError.class).hasMessageContaining("bad_path");
        assertThatThrownBy(() -> prompt("review-code", "workspace", "proj", "path", "../other/y.txt"))
                .isInstanceOf(McpError.class).hasMessageContaining("bad_path");
        assertThatThrownBy(() -> prompt("review-code", "workspace", "proj", "path", "gone.py"))
                .isInstanceOf(McpError.class).hasMessageContaining("not_found");
        assertThatThrownBy(() -> prompt("review-code", "workspace", "proj"))
                .isInstanceOf(McpError.class).hasMessageContaining("'path' is required");
        assertThatThrownBy(() -> prompt("review-code", "workspace", "proj", "path", "img/chart.png"))
                .isInstanceOf(McpError.class).hasMessageContaining("not a UTF-8 text file");
    }

    static List<String> complete(CompleteReference ref, String arg, String value, Map<String, String> context) {
        CompleteResult r = client.completeCompletion(new CompleteRequest(ref, new CompleteArgument(arg, value),
                context == null ? null : new CompleteContext(context)));
        return r.completion().values();
    }

    @Test
    void completesWorkspaceNamesAndPathsForPromptsAndTheTemplate() {
        PromptReference review = new PromptReference("review-code");
        ResourceReference file = new ResourceReference("ws://{workspace}/{+path}");
        assertThat(complete(review, "workspace", "pro", null)).containsExactly("proj", "proj2");
        assertThat(complete(file, "workspace", "o", null)).containsExactly("other");
        assertThat(complete(review, "path", "src/ma", Map.of("workspace", "proj")))
                .containsExactly("src/main.py", "src/mangle.txt", "src/math/");
        assertThat(complete(file, "path", "src/ma", Map.of("workspace", "proj")))
                .containsExactly("src/main.py", "src/mangle.txt", "src/math/");
        assertThat(complete(new PromptReference("write-and-run-tests"), "path", "", Map.of("workspace", "proj")))
                .containsExactly("a/", "img/", "my file.txt", "src/");
        assertThat(complete(file, "path", "src/math/", Map.of("workspace", "proj"))).containsExactly("src/math/vec.py");
        // Links are not offered, and not followed.
        assertThat(complete(file, "path", "escape/", Map.of("workspace", "proj"))).isEmpty();
        assertThat(complete(file, "path", "e", Map.of("workspace", "proj"))).isEmpty();
        assertThat(complete(file, "path", "../", Map.of("workspace", "proj"))).isEmpty();
        assertThat(complete(file, "path", "src/", null)).isEmpty();
        assertThat(complete(file, "path", "", Map.of("workspace", "nope"))).isEmpty();
        assertThat(complete(new PromptReference("write-and-run-tests"), "language", "ty", null)).contains("typescript");
    }

    @Test
    void completionsStopAtOneHundred() {
        Path dir = workspaces.root().resolve("default/many");
        try {
            Files.createDirectories(dir);
            for (int i = 0; i < 150; i++) Files.writeString(dir.resolve("f" + i + ".txt"), "");
        } catch (java.io.IOException e) {
            throw new IllegalStateException(e);
        }
        CompleteResult r = client.completeCompletion(new CompleteRequest(new PromptReference("review-code"),
                new CompleteArgument("path", "f"), new CompleteContext(Map.of("workspace", "many"))));
        assertThat(r.completion().values()).hasSize(100);
        assertThat(r.completion().total()).isEqualTo(150);
        assertThat(r.completion().hasMore()).isTrue();
    }
}
