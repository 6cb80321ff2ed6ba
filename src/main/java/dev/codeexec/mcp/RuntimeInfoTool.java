package dev.codeexec.mcp;

import dev.codeexec.egress.EgressSettings;
import dev.codeexec.auth.Principal;
import dev.codeexec.surface.ResultMaps;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.WorkerStatus;
import dev.codeexec.workspace.Workspaces;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.Tool;
import tools.jackson.databind.SerializationFeature;
import tools.jackson.databind.json.JsonMapper;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The {@code runtime_info} tool: the executor's own description of languages, tools, sandbox and limits, plus
 * {@code mode} ("local" or "gateway") and, on a gateway, {@code workers} (each as {@link ResultMaps#worker}), so a
 * client can see where its runs may go and which workers are up; and {@code workspaces}: their limits, how the
 * limits are enforced (kernel quota or measuring) and how files are shared between runs ({@link Workspaces#describe}).
 */
final class RuntimeInfoTool {

    static final String NAME = "runtime_info";
    private static final JsonMapper PRETTY = JsonMapper.builder().enable(SerializationFeature.INDENT_OUTPUT).build();

    private final Executor executor;
    private final Workspaces workspaces;
    private final EgressSettings egress;

    RuntimeInfoTool(Executor executor, Workspaces workspaces) {
        this(executor, workspaces, EgressSettings.OFF);
    }

    RuntimeInfoTool(Executor executor, Workspaces workspaces, EgressSettings egress) {
        this.executor = executor;
        this.workspaces = workspaces;
        this.egress = egress;
    }

    SyncToolSpecification specification() {
        Tool tool = Tool.builder()
                .name(NAME)
                .title("Runtime info")
                .description("Versions and availability of each language and of common tools (git, curl, make, gcc, "
                        + "jq, sqlite3, ...), the sandbox in use and the limits; mode \"local\" or \"gateway\", and "
                        + "on a gateway the workers (address, name, healthy, running, queued, slots, sessions); "
                        + "`network`: the hosts your runs may reach (none unless the server enables egress), and "
                        + "`network.secrets`: the environment variables your runs get as placeholders that the proxy "
                        + "swaps for the operator's real secret on the way to their hosts.")
                .inputSchema(Map.of("type", "object", "properties", Map.of(), "additionalProperties", false))
                .outputSchema(Map.of("type", "object"))
                .annotations(ToolHints.readOnly().annotations("Runtime info"))
                .build();
        return new SyncToolSpecification(tool, (exchange, call) -> call(MessageInterceptor.principalOf(call.meta())));
    }

    /** Scoped like the admin stats: a tenant key sees the count of its own sessions, an admin key every tenant's. */
    CallToolResult call(Principal who) {
        try {
            Map<String, Object> info = new LinkedHashMap<>(executor.runtimeInfo());
            if (info.containsKey("sessions")) info.put("sessions", ResultMaps.sessions(executor, info,
                    who.admin() ? Optional.empty() : Optional.of(who.tenant())));
            List<WorkerStatus> workers = executor.status().workers();
            // A gateway's own description says "gateway" even before its first worker answered.
            String mode = ResultMaps.GATEWAY.equals(info.get("mode")) ? ResultMaps.GATEWAY
                    : ResultMaps.mode(executor, workers);
            info.put("mode", mode);
            if (mode.equals(ResultMaps.GATEWAY)) info.put("workers", ResultMaps.workers(workers));
            info.put("workspaces", workspaces.describe());
            info.put("network", egress.describe(egress.policyFor(who.egress()), who.tenant()));
            return CallToolResult.builder().structuredContent(info).addTextContent(PRETTY.writeValueAsString(info))
                    .isError(false).build();
        } catch (RuntimeException e) {
            return ToolErrors.of(NAME, e);
        }
    }
}
