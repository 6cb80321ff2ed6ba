package dev.codeexec.mcp;

import dev.codeexec.engine.ExecutionException;
import dev.codeexec.workspace.WorkspaceException;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.TextContent;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** Every tool's errors come from one mapping: the kind first, the exception's client-safe message, nothing else. */
class ToolErrorsTest {

    private static String text(CallToolResult r) {
        assertThat(r.isError()).isTrue();
        assertThat(r.content()).hasSize(1);
        return ((TextContent) r.content().getFirst()).text();
    }

    @Test
    void eachKindOfRefusalIsNamedBeforeItsMessage() {
        assertThat(text(ToolErrors.of("t", new ExecutionException.InvalidRequest("'code' is required"))))
                .isEqualTo("Error [invalid_request]: 'code' is required");
        assertThat(text(ToolErrors.of("t", new ExecutionException.Busy("the queue is full"))))
                .isEqualTo("Error [busy]: the queue is full");
        assertThat(text(ToolErrors.of("t", new ExecutionException.Unavailable("shutting down"))))
                .isEqualTo("Error [unavailable]: shutting down");
        assertThat(text(ToolErrors.of("t", new WorkspaceException(WorkspaceException.Kind.QUOTA_EXCEEDED, "workspace quota exceeded"))))
                .isEqualTo("Error [quota_exceeded]: workspace quota exceeded");
        assertThat(text(ToolErrors.of("t", new WorkspaceException(WorkspaceException.Kind.IO, "I/O error on a.txt"))))
                .isEqualTo("Error [io]: I/O error on a.txt");
        assertThat(text(ToolErrors.of("t", new ToolArgs.Invalid("'limit' must be an integer"))))
                .isEqualTo("Error [invalid_arguments]: 'limit' must be an integer");
    }

    @Test
    void anythingElseIsInternalAndItsMessageStaysInTheServer() {
        String text = text(ToolErrors.of("t", new IllegalStateException("/srv/data/secret.key is corrupt")));
        assertThat(text).isEqualTo("Error [internal]: the call could not be completed (details are in the server log)");
    }
}
