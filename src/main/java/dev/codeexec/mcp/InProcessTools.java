package dev.codeexec.mcp;

import dev.codeexec.auth.Principal;
import dev.codeexec.surface.ServerSetup;
import io.modelcontextprotocol.common.McpTransportContext;
import io.modelcontextprotocol.json.TypeRef;
import io.modelcontextprotocol.server.McpAsyncServerExchange;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.server.McpSyncServerExchange;
import io.modelcontextprotocol.spec.McpLoggableSession;
import io.modelcontextprotocol.spec.McpSchema;
import reactor.core.publisher.Mono;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BiConsumer;

/**
 * Some of this server's own MCP tools, called in-process for a caller that is not an MCP client (the chat agent):
 * the very handlers {@code /mcp} dispatches to, given a call as {@link MessageInterceptor} would have shaped it (the
 * principal in {@code _meta}, a request id and a session id of the caller's), so the validation, the limits, the
 * tenant's policies and the audit lines are a direct MCP caller's. Progress notifications (a run's output while it
 * runs) go to the caller's listener; cancel goes through the same {@link RunRegistry} as a
 * {@code notifications/cancelled}.
 */
public final class InProcessTools {

    /** The tools offered: code execution, files, sessions, and code mode's listing when there are upstreams. */
    static final Set<String> OFFERED = Set.of(ExecuteCodeTool.NAME, "write_file", "read_file", "list_files",
            "delete_file", "session_list", "session_reset", "session_close", CodeToolsTool.NAME);

    private final Map<String, SyncToolSpecification> tools = new LinkedHashMap<>();
    private final RunRegistry registry;

    InProcessTools(List<SyncToolSpecification> specs, RunRegistry registry) {
        for (SyncToolSpecification s : specs) if (OFFERED.contains(s.tool().name())) tools.put(s.tool().name(), s);
        this.registry = registry;
    }

    /** The tools of {@code setup}'s server, with their own registry of runs (for {@link #cancel}). */
    public static InProcessTools of(ServerSetup setup) {
        RunRegistry registry = new RunRegistry();
        return new InProcessTools(McpServers.catalog(setup, registry).tools(), registry);
    }

    /** The tools' definitions (name, description, input schema), in a stable order. */
    public List<McpSchema.Tool> list() {
        return tools.values().stream().map(SyncToolSpecification::tool).toList();
    }

    /**
     * Calls {@code name} as {@code who}. {@code session} and {@code requestId} name the call for cancellation
     * ({@link #cancel}) and its audit line; {@code progress} hears each progress notification's message (a run's
     * output, as (stream, text) with stream {@code stdout} or {@code stderr}). A tool that does not exist here is an error result, as the SDK would answer it.
     */
    public McpSchema.CallToolResult call(String name, Map<String, Object> arguments, Principal who, String session,
            String requestId, BiConsumer<String, String> progress) {
        SyncToolSpecification spec = tools.get(name);
        if (spec == null)
            return McpSchema.CallToolResult.builder().isError(true)
                    .addTextContent("Unknown tool: " + name + " (the tools here: " + String.join(", ", tools.keySet()) + ")")
                    .build();
        Map<String, Object> meta = new LinkedHashMap<>();
        meta.put(MessageInterceptor.REQUEST_ID_META, requestId);
        meta.put(MessageInterceptor.SESSION_META, session);
        meta.put(MessageInterceptor.TENANT_META, who.tenant());
        meta.put(MessageInterceptor.ADMIN_META, who.admin());
        who.egress().ifPresent(e -> meta.put(MessageInterceptor.EGRESS_META, e.toString()));
        meta.put("progressToken", requestId);
        McpSchema.CallToolRequest request = McpSchema.CallToolRequest.builder().name(name)
                .arguments(arguments == null ? Map.of() : arguments).meta(meta).build();
        McpSyncServerExchange exchange = new McpSyncServerExchange(new McpAsyncServerExchange(session,
                new Listener(progress), new McpSchema.ClientCapabilities(null, null, null, null),
                new McpSchema.Implementation("code-exec-mcp chat", "1"), McpTransportContext.EMPTY));
        return spec.callHandler().apply(exchange, request);
    }

    /** Cancels the run of the call {@code (session, requestId)} if it is running. */
    public void cancel(String session, String requestId) {
        registry.cancel(session, requestId);
    }

    private static final String ERR_PREFIX = "[stderr] ";

    /** The in-process "session": progress notifications go to the listener; nothing else is ever sent. */
    private record Listener(BiConsumer<String, String> progress) implements McpLoggableSession {
        @Override
        public <T> Mono<T> sendRequest(String method, Object params, TypeRef<T> type) {
            return Mono.error(new UnsupportedOperationException(method + " is not available in-process"));
        }

        @Override
        public Mono<Void> sendNotification(String method, Object params) {
            if (params instanceof McpSchema.ProgressNotification p && p.message() != null) {
                boolean err = p.meta() != null && "stderr".equals(p.meta().get(ProgressForwarder.STREAM));
                String text = err && p.message().startsWith(ERR_PREFIX) ? p.message().substring(ERR_PREFIX.length()) : p.message();
                progress.accept(err ? "stderr" : "stdout", text);
            }
            return Mono.empty();
        }

        @Override
        public Mono<Void> closeGracefully() {
            return Mono.empty();
        }

        @Override
        public void close() {
        }

        @Override
        public void setMinLoggingLevel(McpSchema.LoggingLevel level) {
        }

        @Override
        public boolean isNotificationForLevelAllowed(McpSchema.LoggingLevel level) {
            return false;
        }
    }
}
