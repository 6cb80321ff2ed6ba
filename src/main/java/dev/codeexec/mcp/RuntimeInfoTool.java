package dev.codeexec.mcp;

import dev.codeexec.engine.Executor;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.Tool;
import io.modelcontextprotocol.spec.McpSchema.ToolAnnotations;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.databind.SerializationFeature;
import tools.jackson.databind.json.JsonMapper;

import java.util.Map;

/** The {@code runtime_info} tool: the executor's own description of languages, tools, sandbox and limits. */
final class RuntimeInfoTool {

    static final String NAME = "runtime_info";
    private static final Logger LOG = LoggerFactory.getLogger(RuntimeInfoTool.class);
    private static final JsonMapper PRETTY = JsonMapper.builder().enable(SerializationFeature.INDENT_OUTPUT).build();

    private final Executor executor;

    RuntimeInfoTool(Executor executor) {
        this.executor = executor;
    }

    SyncToolSpecification specification() {
        Tool tool = Tool.builder()
                .name(NAME)
                .title("Runtime info")
                .description("Versions and availability of each language and of common tools (git, curl, make, gcc, "
                        + "jq, sqlite3, ...), the sandbox in use and the limits.")
                .inputSchema(Map.of("type", "object", "properties", Map.of(), "additionalProperties", false))
                .outputSchema(Map.of("type", "object"))
                .annotations(new ToolAnnotations("Runtime info", true, false, true, false, null))
                .build();
        return new SyncToolSpecification(tool, (exchange, call) -> call());
    }

    CallToolResult call() {
        try {
            Map<String, Object> info = executor.runtimeInfo();
            return CallToolResult.builder().structuredContent(info).addTextContent(PRETTY.writeValueAsString(info))
                    .isError(false).build();
        } catch (RuntimeException e) {
            LOG.error("runtime_info failed", e);
            return ExecuteCodeTool.error("Internal error: runtime information is not available (details are in the server log).");
        }
    }
}
