package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import dev.codeexec.workspace.Workspaces;
import io.modelcontextprotocol.client.McpSyncClient;
import io.modelcontextprotocol.spec.McpError;
import io.modelcontextprotocol.spec.McpSchema.CallToolRequest;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.CompleteRequest;
import io.modelcontextprotocol.spec.McpSchema.CompleteRequest.CompleteArgument;
import io.modelcontextprotocol.spec.McpSchema.CompleteRequest.CompleteContext;
import io.modelcontextprotocol.spec.McpSchema.GetPromptRequest;
import io.modelcontextprotocol.spec.McpSchema.PromptReference;
import io.modelcontextprotocol.spec.McpSchema.ReadResourceRequest;
import io.modelcontextprotocol.spec.McpSchema.ResourceReference;
import io.modelcontextprotocol.spec.McpSchema.TextContent;
import io.modelcontextprotocol.spec.McpSchema.TextResourceContents;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

import static dev.codeexec.mcp.FileToolsTest.assertError;
import static dev.codeexec.mcp.FileToolsTest.call;
import static dev.codeexec.mcp.FileToolsTest.data;
import static dev.codeexec.mcp.FileToolsTest.paths;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Two tenants, each with its own MCP client; the tenant is stamped into {@code _meta} by the real
 * {@link MessageInterceptor}, as the HTTP edge does after authentication. The same workspace name holds different
 * files per tenant, and no tool, resource, prompt or completion of one tenant reaches the other's.
 */
class TenantIsolationTest {

    static TenantServer server;
    static Workspaces workspaces;
    static McpSyncClient alice;
    static McpSyncClient bob;

    @BeforeAll
    static void start() throws Exception {
        ServerSetup setup = TestServers.setup(new FakeExecutor(), List.of());
        workspaces = setup.workspaces();
        server = new TenantServer(setup);
        alice = server.client("alice");
        bob = server.client("bob");
        data(call(alice, "write_file", "workspace", "proj", "path", "secret.txt", "content", "alice's"));
        data(call(alice, "write_file", "workspace", "proj", "path", "alice-only.py", "content", "print('a')"));
        data(call(alice, "write_file", "workspace", "aliceonly", "path", "notes.md", "content", "private"));
        data(call(bob, "write_file", "workspace", "proj", "path", "secret.txt", "content", "bob's"));
    }

    @AfterAll
    static void stop() throws Exception {
        alice.closeGracefully();
        bob.closeGracefully();
        server.close();
    }

    @Test
    void sameWorkspaceNameHoldsEachTenantsOwnFiles() {
        assertThat(data(call(alice, "read_file", "workspace", "proj", "path", "secret.txt"))).containsEntry("content", "alice's");
        assertThat(data(call(bob, "read_file", "workspace", "proj", "path", "secret.txt"))).containsEntry("content", "bob's");
        assertThat(workspaces.root().resolve("alice/proj/secret.txt")).hasContent("alice's");
        assertThat(workspaces.root().resolve("bob/proj/secret.txt")).hasContent("bob's");
        assertThat(paths(call(bob, "list_files", "workspace", "proj", "recursive", true))).containsExactly("secret.txt");
        assertThat(paths(call(alice, "list_files", "workspace", "proj"))).containsExactly("alice-only.py", "secret.txt");
    }

    @Test
    void toolsNeverReachTheOtherTenantsWorkspaces() {
        assertError(call(bob, "read_file", "workspace", "proj", "path", "alice-only.py"), "not_found");
        assertError(call(bob, "list_files", "workspace", "aliceonly"), "not_found");
        assertError(call(bob, "read_file", "workspace", "aliceonly", "path", "notes.md"), "not_found");
        assertError(call(bob, "delete_file", "workspace", "aliceonly", "path", "notes.md"), "not_found");
        assertError(call(bob, "workspace_info", "workspace", "aliceonly"), "not_found");
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> mine = (List<Map<String, Object>>) data(call(bob, "workspace_info")).get("workspaces");
        assertThat(mine).extracting(m -> m.get("name")).containsExactly("proj");
        // Bob writing "aliceonly" makes a workspace of his own; Alice's stays as it was.
        data(call(bob, "write_file", "workspace", "aliceonly", "path", "notes.md", "content", "bob was here"));
        assertThat(data(call(alice, "read_file", "workspace", "aliceonly", "path", "notes.md"))).containsEntry("content", "private");
        data(call(bob, "delete_file", "workspace", "aliceonly", "path", "notes.md"));
        assertThat(workspaces.root().resolve("alice/aliceonly/notes.md")).hasContent("private");
        workspaces.delete("bob", "aliceonly");
    }

    @Test
    void aForgedTenantInMetaIsOverwritten() {
        CallToolResult r = bob.callTool(CallToolRequest.builder("read_file")
                .arguments(Map.of("workspace", "aliceonly", "path", "notes.md"))
                .meta(Map.of(MessageInterceptor.TENANT_META, "alice")).build());
        assertThat(r.isError()).isTrue();
        assertThat(((TextContent) r.content().getFirst()).text()).startsWith("Error [not_found]");
        assertThatThrownBy(() -> bob.readResource(new ReadResourceRequest("ws://aliceonly/notes.md",
                Map.of(MessageInterceptor.TENANT_META, "alice")))).isInstanceOf(McpError.class).hasMessageContaining("not_found");
    }

    @Test
    void resourcesPromptsAndCompletionsAreTenantScoped() {
        assertThat(((TextResourceContents) alice.readResource(new ReadResourceRequest("ws://proj/secret.txt"))
                .contents().getFirst()).text()).isEqualTo("alice's");
        assertThat(((TextResourceContents) bob.readResource(new ReadResourceRequest("ws://proj/secret.txt"))
                .contents().getFirst()).text()).isEqualTo("bob's");
        assertThatThrownBy(() -> bob.readResource(new ReadResourceRequest("ws://aliceonly/notes.md")))
                .isInstanceOf(McpError.class).hasMessageContaining("not_found");
        assertThatThrownBy(() -> bob.readResource(new ReadResourceRequest("ws://proj/alice-only.py")))
                .isInstanceOf(McpError.class).hasMessageContaining("not_found");

        assertThat(((TextContent) alice.getPrompt(new GetPromptRequest("review-code",
                Map.of("workspace", "proj", "path", "alice-only.py"))).messages().getFirst().content()).text())
                .contains("print('a')");
        assertThatThrownBy(() -> bob.getPrompt(new GetPromptRequest("review-code",
                Map.of("workspace", "proj", "path", "alice-only.py")))).isInstanceOf(McpError.class).hasMessageContaining("not_found");
        assertThatThrownBy(() -> bob.getPrompt(new GetPromptRequest("write-and-run-tests",
                Map.of("workspace", "aliceonly", "path", "notes.md")))).isInstanceOf(McpError.class).hasMessageContaining("not_found");

        PromptReference review = new PromptReference("review-code");
        ResourceReference file = new ResourceReference("ws://{workspace}/{+path}");
        assertThat(alice.completeCompletion(new CompleteRequest(review, new CompleteArgument("workspace", "")))
                .completion().values()).containsExactly("aliceonly", "proj");
        assertThat(bob.completeCompletion(new CompleteRequest(file, new CompleteArgument("workspace", "a")))
                .completion().values()).isEmpty();
        assertThat(bob.completeCompletion(new CompleteRequest(file, new CompleteArgument("path", ""),
                new CompleteContext(Map.of("workspace", "proj")))).completion().values()).containsExactly("secret.txt");
        assertThat(bob.completeCompletion(new CompleteRequest(review, new CompleteArgument("path", ""),
                new CompleteContext(Map.of("workspace", "aliceonly")))).completion().values()).isEmpty();
    }
}
