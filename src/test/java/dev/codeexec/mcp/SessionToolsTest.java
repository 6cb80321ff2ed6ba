package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import dev.codeexec.config.Config;
import dev.codeexec.local.LocalExecutor;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.SandboxLeftovers;
import dev.codeexec.sandbox.Sandboxes;
import dev.codeexec.testing.Requires;
import io.modelcontextprotocol.client.McpSyncClient;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.ImageContent;
import io.modelcontextprotocol.spec.McpSchema.Tool;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.List;
import java.util.Map;

import static dev.codeexec.mcp.FileToolsTest.assertError;
import static dev.codeexec.mcp.FileToolsTest.call;
import static dev.codeexec.mcp.FileToolsTest.data;
import static dev.codeexec.mcp.FileToolsTest.text;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Stateful sessions end to end: real MCP clients of two tenants, the real engine and the bwrap sandbox.
 */
@Tag("sandbox")
@org.junit.jupiter.api.Timeout(value = 120, threadMode = org.junit.jupiter.api.Timeout.ThreadMode.SEPARATE_THREAD)
class SessionToolsTest {

    static TenantServer server;
    static LocalExecutor executor;
    static Sandbox sandbox;
    static McpSyncClient alice;
    static McpSyncClient bob;

    @BeforeAll
    static void start() throws Exception {
        Path data = Files.createTempDirectory("session-tools-data");
        Files.setPosixFilePermissions(data, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Config config = Config.of("PORT", "0", "DATA_DIR", data.toString(), "MAX_SESSIONS", "3", "WARM_POOL", "off");
        sandbox = Sandboxes.create(config);
        Requires.that(sandbox.unavailableReason().isEmpty() && sandbox.supportsControl(), "the bwrap sandbox, usable here");
        executor = LocalExecutor.create(config, sandbox);
        ServerSetup setup = TestServers.real(config, sandbox, executor);
        server = new TenantServer(setup);
        alice = server.client("alice");
        bob = server.client("bob");
    }

    @AfterAll
    static void stop() throws Exception {
        if (alice != null) alice.closeGracefully();
        if (bob != null) bob.closeGracefully();
        if (server != null) server.close();
        if (executor != null) {
            executor.close();
            SandboxLeftovers.awaitNoProcesses("no session interpreter after the executor closed");
            assertThat(SandboxLeftovers.cgroups(sandbox)).isEmpty();
        }
    }

    @Test
    void stateCarriesOverBetweenCallsAndTheToolsListAndCloseSessions() {
        Map<String, Object> first = data(call(alice, "execute_code", "language", "python", "session", "nb",
                "code", "import statistics\nvalues = [3, 1, 2]\nprint('stored')"));
        assertThat(first).containsEntry("session", "nb").containsEntry("sessionCreated", true)
                .containsEntry("stdout", "stored\n").containsEntry("exitCode", 0).doesNotContainKey("result");
        CallToolResult second = call(alice, "execute_code", "language", "python", "session", "nb",
                "code", "values.append(10)\nstatistics.median(values)");
        assertThat(data(second)).containsEntry("result", "2.5").containsEntry("sessionCreated", false);
        assertThat(text(second)).contains("--- result ---\n2.5");

        Map<String, Object> listed = data(call(alice, "session_list"));
        assertThat(listed.get("sessions")).asInstanceOf(org.assertj.core.api.InstanceOfAssertFactories.LIST)
                .singleElement().satisfies(e -> assertThat(cast(e)).containsEntry("name", "nb")
                        .containsEntry("language", "python").containsEntry("calls", 2).containsEntry("busy", false)
                        .containsKeys("created", "lastUsed", "memoryBytes"));
        assertThat(data(call(bob, "session_list")).get("sessions")).asInstanceOf(
                org.assertj.core.api.InstanceOfAssertFactories.LIST).isEmpty();

        Map<String, Object> bobs = data(call(bob, "execute_code", "language", "python", "session", "nb",
                "code", "'values' in globals()"));
        assertThat(bobs).containsEntry("result", "False").containsEntry("sessionCreated", true);
        assertError(call(bob, "session_close", "session", "other"), "not_found");
        assertThat(data(call(bob, "session_close", "session", "nb"))).containsEntry("closed", true);

        assertThat(data(call(alice, "session_reset", "session", "nb"))).containsEntry("reset", true);
        assertThat(data(call(alice, "execute_code", "language", "python", "session", "nb", "code",
                "'values' in globals()"))).containsEntry("result", "False");
        assertThat(data(call(alice, "session_close", "session", "nb"))).containsEntry("closed", true);
        assertError(call(alice, "session_reset", "session", "nb"), "not_found");
        assertThat(data(call(alice, "session_list")).get("sessions")).asInstanceOf(
                org.assertj.core.api.InstanceOfAssertFactories.LIST).isEmpty();
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> cast(Object o) {
        return (Map<String, Object>) o;
    }

    @Test
    void figuresComeBackAsImageContent() {
        CallToolResult r = call(alice, "execute_code", "language", "python", "session", "plots", "code",
                "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()");
        Map<String, Object> s = data(r);
        assertThat(s.get("figures")).asInstanceOf(org.assertj.core.api.InstanceOfAssertFactories.LIST)
                .singleElement().satisfies(f -> assertThat(cast(f)).containsEntry("mimeType", "image/png")
                        .containsEntry("shown", true));
        List<ImageContent> images = r.content().stream().filter(ImageContent.class::isInstance)
                .map(ImageContent.class::cast).toList();
        assertThat(images).singleElement().satisfies(i -> {
            assertThat(i.mimeType()).isEqualTo("image/png");
            assertThat(Base64.getDecoder().decode(i.data())).startsWith(0x89, 'P', 'N', 'G');
        });
        data(call(alice, "session_close", "session", "plots"));
    }

    @Test
    void richOutputsComeBackStructuredAsImagesAndAsReadableText() {
        CallToolResult r = call(alice, "execute_code", "language", "python", "session", "rich", "code", String.join("\n",
                "import pandas as pd",
                "from PIL import Image",
                "class R:",
                "    def _repr_html_(self): return '<b>bold</b>'",
                "display(pd.DataFrame({'city': ['Oslo', 'Lima'], 'n': [1, 2]}), R())",
                "display({'text/markdown': '**md**'}, raw=True)",
                "Image.new('RGB', (6, 3), 'blue')"));
        Map<String, Object> s = data(r);
        List<Map<String, Object>> outputs = ((List<?>) s.get("outputs")).stream().map(SessionToolsTest::cast).toList();
        assertThat(outputs).extracting(o -> o.get("kind")).containsExactly("display", "display", "display", "result");
        assertThat(cast(outputs.get(0).get("data"))).containsKeys("text/plain", "text/html");
        assertThat(cast(outputs.get(1).get("data"))).containsEntry("text/html", "<b>bold</b>");
        assertThat(cast(outputs.get(3).get("data"))).containsOnlyKeys("text/plain");
        assertThat(cast(outputs.get(3).get("image"))).containsEntry("mimeType", "image/png").containsEntry("shown", true);
        List<ImageContent> images = r.content().stream().filter(ImageContent.class::isInstance)
                .map(ImageContent.class::cast).toList();
        assertThat(images).singleElement().satisfies(i -> assertThat(Base64.getDecoder().decode(i.data())).startsWith(0x89, 'P', 'N', 'G'));
        assertThat(text(r)).as("a model reading text sees the table, the HTML of a bare repr and the markdown")
                .contains("--- display 1 ---\n   city  n\n0  Oslo  1\n1  Lima  2")
                .contains("--- display 2 ---\n<__main__.R object at 0x").contains("(text/html) <b>bold</b>")
                .contains("--- display 3 ---\n**md**")
                .contains("--- result ---\n<PIL.Image.Image image mode=RGB size=6x3");
        assertThat(text(r)).doesNotContain("<table").doesNotContain("iVBOR");
        data(call(alice, "session_close", "session", "rich"));
    }

    @Test
    void requestsASessionCannotServeAreToolErrors() {
        CallToolResult go = call(alice, "execute_code", "language", "go", "session", "g", "code", "package main");
        assertThat(go.isError()).isTrue();
        assertThat(text(go)).startsWith("Error [invalid_request]: ").contains("python, nodejs, typescript and bash");
        CallToolResult args = call(alice, "execute_code", "language", "python", "session", "g", "code", "1",
                "args", List.of("x"));
        assertThat(args.isError()).isTrue();
        assertThat(text(args)).contains("'args'");
        CallToolResult badName = call(alice, "execute_code", "language", "python", "session", "../x", "code", "1");
        assertThat(badName.isError()).isTrue();
        assertThat(text(badName)).contains("bad session name");
    }

    @Test
    void theToolsAndRuntimeInfoDescribeSessions() {
        List<Tool> tools = alice.listTools().tools();
        assertThat(tools).extracting(Tool::name).contains("session_list", "session_reset", "session_close");
        Tool exec = tools.stream().filter(t -> t.name().equals("execute_code")).findFirst().orElseThrow();
        assertThat(exec.inputSchema().get("properties")).asInstanceOf(
                org.assertj.core.api.InstanceOfAssertFactories.MAP).containsKey("session");
        assertThat(exec.outputSchema().get("properties")).asInstanceOf(
                org.assertj.core.api.InstanceOfAssertFactories.MAP).containsKeys("session", "result", "figures");
        Map<String, Object> info = data(call(alice, "runtime_info"));
        assertThat(info.get("sessions")).asInstanceOf(org.assertj.core.api.InstanceOfAssertFactories.MAP)
                .containsEntry("maxPerTenant", 3).containsEntry("idleSeconds", 600).containsKey("count");
    }
}
