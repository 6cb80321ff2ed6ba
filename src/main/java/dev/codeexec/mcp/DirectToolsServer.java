package dev.codeexec.mcp;

import dev.codeexec.auth.Principal;
import dev.codeexec.codemode.CodeTools;
import dev.codeexec.codemode.CodeToolsRun;
import dev.codeexec.codemode.DirectTools;
import dev.codeexec.codemode.UpstreamConfig;
import dev.codeexec.config.Ids;
import dev.codeexec.surface.ServerSetup;
import io.modelcontextprotocol.common.McpTransportContext;
import io.modelcontextprotocol.server.McpServer;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.server.McpSyncServer;
import io.modelcontextprotocol.server.transport.HttpServletStreamableServerTransportProvider;
import io.modelcontextprotocol.spec.McpSchema;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.ServerCapabilities;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * The MCP server of {@code /mcp-no-code-execute}: the upstream MCP servers' tools offered one by one
 * ({@link DirectTools}, {@code SERVER__TOOL}), called directly by this server with the credentials it keeps, so an
 * external agent can compare plain tool calling with code mode. Each {@code tools/call} is one {@link CodeToolsRun}
 * of the caller's tenant with a fresh run id ({@code direct-<hex>}), closed after the call: the tenants/tools policy,
 * CODE_TOOLS_MAX_CALLS / CODE_TOOLS_MAX_MB, the call timeout, the record and the audit line {@code tool_call run=...
 * tenant=...} are code mode's. An ok call answers the upstream's result as it gave it (content, structuredContent);
 * a refusal or a failure is a tool error {@code Error [reason]: message} with code mode's reason words
 * ({@code not_allowed}, {@code call_limit}, {@code timeout}, {@code tool_error}, {@code upstream_unavailable}, ...).
 *
 * <p><b>One server, listed per tenant.</b> The SDK's tools/list is server-wide, but the SDK (since 2.1.0) filters a listing per
 * request ({@code addToolFilter}, given the request's {@link McpTransportContext}). So there is one SDK server and one
 * transport: every upstream tool the operator opens to code (any tenant's) is registered, and the filter shows a
 * caller only the tools its tenant may call ({@link DirectTools#find}); the tenant comes from the transport context,
 * which the HTTP layer fills from the principal the edge attached ({@link #context}), never from the message. A
 * call of a registered tool the tenant may not see reaches the handler and is refused by {@link CodeToolsRun} as in
 * code mode ({@code Error [not_allowed]: ...}); a name that is no upstream tool at all is the SDK's unknown tool.
 * One server per tenant (created on first use) would have given the same listing at the cost of a transport, a
 * session table and a keep-alive per tenant, and a dispatch by tenant in front of them.
 *
 * <p><b>Following the upstreams.</b> The registered tools are brought up to date whenever an upstream connects or
 * says its tools changed ({@link dev.codeexec.codemode.Upstreams#onToolsChanged}); each tool added or removed sends
 * {@code notifications/tools/list_changed} to the sessions listening (capability {@code tools.listChanged}).
 *
 * <p>Without UPSTREAM_MCP_FILE the endpoint still answers MCP and lists no tools (its instructions say why).
 */
public final class DirectToolsServer {

    private static final Logger LOG = LoggerFactory.getLogger(DirectToolsServer.class);

    /** The endpoint's path. */
    public static final String PATH = "/mcp-no-code-execute";
    /** The transport context's key of the caller's tenant. */
    static final String TENANT = "dev.codeexec/tenant";
    static final String SERVER_NAME = "code-exec-mcp-direct";

    private final Optional<DirectTools> direct;
    private final Optional<CodeTools> codeTools;
    private McpSyncServer server;
    /** The tools registered now, by offered name. Guarded by this. */
    private final Map<String, DirectTools.Entry> registered = new LinkedHashMap<>();

    private DirectToolsServer(Optional<CodeTools> codeTools) {
        this.codeTools = codeTools;
        this.direct = codeTools.map(DirectTools::new);
    }

    /**
     * The server on {@code transport}; its transport must carry the caller's tenant in its context
     * ({@link #context}).
     */
    public static McpSyncServer http(HttpServletStreamableServerTransportProvider transport, ServerSetup setup) {
        DirectToolsServer d = new DirectToolsServer(setup.codeTools());
        d.server = McpServer.sync(transport)
                .serverInfo(SERVER_NAME, setup.version())
                .instructions(d.direct.isPresent()
                        ? "The upstream MCP servers' tools, one tool each, named SERVER__TOOL and called directly "
                        + "(no code execution); the same tools code mode offers through execute_code at /mcp."
                        : "No upstream MCP servers are configured on this server (UPSTREAM_MCP_FILE), so there are no "
                        + "tools here.")
                .capabilities(ServerCapabilities.builder().tools(true).build())
                .requestTimeout(setup.requestTimeout())
                // Handlers run on the request's own virtual thread, as /mcp's (see McpServers.http).
                .immediateExecution(true)
                // The upstream checks its own arguments: a call reaches it as code mode's would.
                .validateToolInputs(false)
                .addToolFilter((ctx, tool) -> d.direct.flatMap(x -> x.find(tenant(ctx), tool.name())).isPresent())
                .build();
        d.codeTools.ifPresent(t -> {
            // The SDK's notification blocks; an upstream's change may be reported on a thread that must not.
            t.upstreams().onToolsChanged(() -> Thread.ofVirtual().name("direct-tools-sync").start(d::sync));
            d.sync(); // what connected before the listener was added
        });
        return d.server;
    }

    /** The transport context of a request made by {@code who}. */
    public static McpTransportContext context(Principal who) {
        return McpTransportContext.create(Map.of(TENANT, who.tenant()));
    }

    private static String tenant(McpTransportContext ctx) {
        return ctx != null && ctx.get(TENANT) instanceof String t ? t : Principal.DEFAULT.tenant();
    }

    /** Registers the upstream tools open to code now and removes the ones gone or changed. */
    private synchronized void sync() {
        Map<String, DirectTools.Entry> wanted = new LinkedHashMap<>();
        CodeTools tools = codeTools.orElseThrow();
        for (UpstreamConfig.Upstream u : tools.upstreams().config().servers())
            for (McpSchema.Tool t : tools.upstreams().tools(u.name()))
                if (u.allowsTool(t.name())) {
                    String name = DirectTools.name(u.name(), t.name());
                    wanted.putIfAbsent(name, new DirectTools.Entry(name, u.name(), t.name(), t));
                }
        try {
            for (var e : Map.copyOf(registered).entrySet())
                if (!e.getValue().equals(wanted.get(e.getKey()))) {
                    server.removeTool(e.getKey());
                    registered.remove(e.getKey());
                }
            for (DirectTools.Entry e : wanted.values())
                if (!registered.containsKey(e.name())) {
                    server.addTool(specification(e));
                    registered.put(e.name(), e);
                }
        } catch (RuntimeException e) {
            LOG.warn("/mcp-no-code-execute: the tool list could not be brought up to date: {}", e.toString());
        }
    }

    private SyncToolSpecification specification(DirectTools.Entry e) {
        McpSchema.Tool up = e.upstream();
        McpSchema.Tool tool = McpSchema.Tool.builder().name(e.name()).title(up.title()).description(e.description())
                .inputSchema(e.inputSchema()).outputSchema(up.outputSchema()).annotations(up.annotations()).build();
        return SyncToolSpecification.builder().tool(tool)
                .callHandler((exchange, request) -> call(e, tenant(exchange.transportContext()), request.arguments()))
                .build();
    }

    /** One call: a run of its own for the tenant, closed after it. */
    private CallToolResult call(DirectTools.Entry e, String tenant, Map<String, Object> arguments) {
        try (CodeToolsRun run = direct.orElseThrow().open(tenant, "direct-" + Ids.hex(6))) {
            CodeToolsRun.Outcome o = run.call(e.server(), e.tool(), arguments == null ? Map.of() : arguments);
            return o.result().orElseGet(() -> ToolErrors.error(o.reason(), o.message()));
        } catch (RuntimeException x) {
            return ToolErrors.of(e.name(), x);
        }
    }
}
