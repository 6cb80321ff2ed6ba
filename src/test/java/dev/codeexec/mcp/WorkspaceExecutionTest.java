package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import dev.codeexec.config.Config;
import dev.codeexec.lang.Languages;
import dev.codeexec.local.LocalExecutor;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.http.HttpServer;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.Sandboxes;
import dev.codeexec.testing.Requires;
import io.modelcontextprotocol.client.McpSyncClient;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.ImageContent;
import io.modelcontextprotocol.spec.McpSchema.ResourceLink;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.List;
import java.util.Map;

import static dev.codeexec.mcp.FileToolsTest.call;
import static dev.codeexec.mcp.FileToolsTest.data;
import static dev.codeexec.mcp.FileToolsTest.text;
import static org.assertj.core.api.Assertions.assertThat;

/** execute_code with a workspace, end to end through a real MCP client, the real engine and the real sandbox. */
@Tag("sandbox")
class WorkspaceExecutionTest {

    static HttpServer server;
    static McpSyncClient client;

    @BeforeAll
    static void start() throws Exception {
        Path data = Files.createTempDirectory("ws-exec-data");
        Files.setPosixFilePermissions(data, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Config config = Config.of("PORT", "0", "DATA_DIR", data.toString(), "MAX_IMAGE_KB", "64");
        Sandbox sandbox = Sandboxes.create(config);
        Requires.that(sandbox.unavailableReason().isEmpty(), "a sandbox that can run code here ("
                + sandbox.unavailableReason().orElse("") + ")");
        ServerSetup setup = new ServerSetup(config, LocalExecutor.create(config, sandbox),
                new RequestValidator(config, Languages.load()),
                new Sandbox.Status(sandbox.name(), sandbox.unavailableReason()), "test", List.of(),
                TestServers.workspaces(config));
        server = HttpServer.start(setup);
        client = FileToolsTest.client(server);
    }

    @AfterAll
    static void stop() {
        if (client != null) client.closeGracefully();
        if (server != null) server.close();
    }

    @Test
    void writeThenExecuteThenReadInOneWorkspace() {
        data(call(client, "write_file", "workspace", "proj", "path", "data/input.csv", "content", "x,y\n1,2\n3,4\n"));
        CallToolResult run = call(client, "execute_code", "workspace", "proj", "language", "python", "code", """
                import csv, os
                rows = list(csv.DictReader(open('data/input.csv')))
                total = sum(int(r['y']) for r in rows)
                os.makedirs('out', exist_ok=True)
                open('out/total.txt', 'w').write(str(total))
                print(total)
                """);
        Map<String, Object> r = data(run);
        assertThat(r.get("stdout")).isEqualTo("6\n");
        assertThat(r.get("workspace")).isEqualTo("proj");
        assertThat(r.get("files")).asList().singleElement().asInstanceOf(
                org.assertj.core.api.InstanceOfAssertFactories.MAP)
                .containsEntry("path", "out/total.txt").containsEntry("status", "created");
        assertThat(run.content()).anySatisfy(c -> assertThat(c).isInstanceOfSatisfying(ResourceLink.class,
                l -> assertThat(l.uri()).isEqualTo("ws://proj/out/total.txt")));
        assertThat(data(call(client, "read_file", "workspace", "proj", "path", "out/total.txt")).get("content"))
                .isEqualTo("6");
    }

    @Test
    void aMatplotlibChartComesBackAsAnImage() {
        CallToolResult run = call(client, "execute_code", "workspace", "charts", "language", "python", "code", """
                import matplotlib.pyplot as plt
                plt.figure(figsize=(2, 2), dpi=50)
                plt.plot([1, 2, 3], [1, 4, 9])
                plt.savefig('chart.png')
                """, "timeout_ms", 60000);
        assertThat(data(run).get("exitCode")).isEqualTo(0);
        ImageContent image = run.content().stream().filter(ImageContent.class::isInstance).map(ImageContent.class::cast)
                .findFirst().orElseThrow(() -> new AssertionError(text(run)));
        assertThat(image.mimeType()).isEqualTo("image/png");
        byte[] png = Base64.getDecoder().decode(image.data());
        assertThat(new String(png, 1, 3, java.nio.charset.StandardCharsets.US_ASCII)).isEqualTo("PNG");
        assertThat(text(run)).contains("created chart.png");
    }

    @Test
    void aBadWorkspaceNameIsAClearErrorAndNothingRuns() {
        CallToolResult r = call(client, "execute_code", "workspace", "../etc", "language", "shell", "code", "echo hi");
        assertThat(r.isError()).isTrue();
        assertThat(text(r)).contains("bad workspace name");
    }

    @Test
    void statelessRunsListNoFiles() {
        Map<String, Object> r = data(call(client, "execute_code", "language", "shell", "code", "echo x > f.txt; cat f.txt"));
        assertThat(r.get("stdout")).isEqualTo("x\n");
        assertThat(r).doesNotContainKey("files");
    }
}
