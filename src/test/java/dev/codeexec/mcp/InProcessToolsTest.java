package dev.codeexec.mcp;

import dev.codeexec.auth.Principal;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.engine.ExecutionRequest;
import io.modelcontextprotocol.spec.McpSchema;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The chat agent's way into this server's tools: the same handlers as {@code /mcp}, called as the principal given
 * (tenant, allow-list), with the call's id and session for the audit line and cancel, and the run's output as it
 * comes.
 */
class InProcessToolsTest {

    private final FakeExecutor executor = new FakeExecutor();
    private final InProcessTools tools = InProcessTools.of(TestServers.setup(executor, List.of()));

    @Test
    void offersCodeFilesAndSessionsButNotJobsPreviewsOrRuntimeInfo() {
        assertThat(tools.list()).extracting(McpSchema.Tool::name).contains("execute_code", "write_file", "read_file",
                "list_files", "delete_file", "session_list", "session_reset", "session_close")
                .doesNotContain("job_status", "expose_port", "runtime_info", "workspace_info");
    }

    @Test
    void aCallRunsAsTheGivenTenantWithItsAllowListAndNamesItsSessionAndId() {
        Principal bob = new Principal("bob", false, Optional.of(EgressPolicy.parse("example.org")));
        List<String> output = Collections.synchronizedList(new ArrayList<>());
        McpSchema.CallToolResult r = tools.call("execute_code", Map.of("language", "python", "code", "print:hello\n"),
                bob, "chat:conv-1", "call-7", (stream, text) -> output.add(stream + ":" + text));
        assertThat(r.isError()).isFalse();
        assertThat(((McpSchema.TextContent) r.content().get(0)).text()).contains("hello");
        ExecutionRequest sent = executor.requests.get(0);
        assertThat(sent.audit().tenant()).contains("bob");
        assertThat(sent.audit().session()).contains("chat:conv-1");
        assertThat(sent.audit().requestId()).contains("call-7");
        assertThat(output).contains("stdout:hello\n");
    }

    @Test
    void aBadCallIsTheToolsOwnErrorAndAnUnknownToolNamesTheToolsThere() {
        McpSchema.CallToolResult bad = tools.call("execute_code", Map.of("language", "cobol", "code", "x"),
                Principal.DEFAULT, "chat:c", "1", (s, t) -> { });
        assertThat(bad.isError()).isTrue();
        assertThat(((McpSchema.TextContent) bad.content().get(0)).text()).startsWith("Error [").contains("cobol");
        McpSchema.CallToolResult unknown = tools.call("job_list", Map.of(), Principal.DEFAULT, "chat:c", "2", (s, t) -> { });
        assertThat(unknown.isError()).isTrue();
        assertThat(((McpSchema.TextContent) unknown.content().get(0)).text()).contains("execute_code");
    }

    @Test
    void cancelStopsTheRunningCallOfThatSessionAndId() throws Exception {
        Thread t = Thread.ofVirtual().start(() -> tools.call("execute_code", Map.of("language", "python", "code", "block"),
                Principal.DEFAULT, "chat:c", "9", (s, x) -> { }));
        assertThat(executor.blockStarted.await(10, TimeUnit.SECONDS)).isTrue();
        tools.cancel("chat:c", "9");
        t.join(10_000);
        assertThat(t.isAlive()).isFalse();
        assertThat(executor.cancels.get()).isEqualTo(1);
    }
}
