package dev.codeexec.agent;

import dev.codeexec.auth.Principal;
import dev.codeexec.codemode.CodeTools;
import dev.codeexec.codemode.Library;
import dev.codeexec.mcp.InProcessTools;
import io.modelcontextprotocol.spec.McpSchema;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.BiConsumer;

/**
 * Code mode's tools: this server's own {@code execute_code}, file and session tools and {@code list_code_tools},
 * called in-process as the calling tenant ({@link InProcessTools}): a direct MCP caller's validation, limits,
 * policies and audit. A call that names no workspace gets the conversation's, so files persist across turns.
 */
final class CodeModeTools implements AgentTools {

    /** The tools whose calls take a workspace (and get the conversation's when they name none). */
    private static final Set<String> IN_WORKSPACE = Set.of("execute_code", "write_file", "read_file", "list_files", "delete_file");

    private final InProcessTools tools;
    private final Optional<CodeTools> codeTools;
    private final Principal who;
    private final String session;
    private final String workspace;
    private volatile String running;

    /**
     * @param session the name the calls are registered under for cancel (the conversation's), never an MCP session's
     */
    CodeModeTools(InProcessTools tools, Optional<CodeTools> codeTools, Principal who, String session, String workspace) {
        this.tools = tools;
        this.codeTools = codeTools;
        this.who = who;
        this.session = session;
        this.workspace = workspace;
    }

    @Override
    public List<Map<String, Object>> describe() {
        List<Map<String, Object>> out = new ArrayList<>();
        for (McpSchema.Tool t : tools.list()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("name", t.name());
            m.put("description", t.description() == null ? "" : t.description());
            m.put("inputSchema", t.inputSchema() == null ? Map.of("type", "object") : t.inputSchema());
            out.add(m);
        }
        return out;
    }

    @Override
    public String instructions() {
        StringBuilder b = new StringBuilder();
        b.append("You answer by running code with execute_code (python, nodejs, typescript, go, java, c, shell, bash; ")
                .append("python has numpy, pandas and matplotlib). Your workspace is '").append(workspace)
                .append("': execute_code and the file tools use it when you name none, and its files stay for the rest ")
                .append("of this conversation. Save charts as PNG files there to show them. ")
                .append("When a call fails, read the error and correct the code.");
        codeTools.ifPresent(ct -> {
            List<dev.codeexec.codemode.UpstreamConfig.HttpApi> apis = ct.routes().visible(who.tenant());
            if (!apis.isEmpty()) {
                b.append("\n\nHTTP APIs your programs can call with the server's credentials (send no token of your own): "
                        + "http://127.0.0.1:3128/apis/NAME/PATH (CODE_APIS_URL), or in Python `mcp_tools.apis.NAME.get(\"/path\")`:");
                for (var api : apis) b.append("\n- ").append(api.name())
                        .append(api.description().isBlank() ? "" : ": " + api.description().strip());
            }
            List<Library.ServerView> servers = ct.visible(who.tenant());
            if (servers.isEmpty()) return;
            b.append("\n\nCode mode: your programs can call the tools of these MCP servers as functions. In Python: ")
                    .append("`import mcp_tools`, then `mcp_tools.SERVER.TOOL(arg=...)`; in Node: ")
                    .append("`const { SERVER } = require('mcp-tools')`, then `await SERVER.TOOL({...})`. ")
                    .append("Loop, filter and join their results in one program and print only what the answer needs. ")
                    .append("list_code_tools gives a tool's signature. The servers:");
            for (Library.ServerView s : servers) {
                b.append("\n- ").append(s.name());
                if (s.description() != null && !s.description().isBlank()) b.append(": ").append(s.description().strip());
                if (s.unavailable().isPresent()) b.append(" (unavailable now: ").append(s.unavailable().get()).append(')');
                else b.append(" (tools: ").append(String.join(", ", s.tools().stream().map(McpSchema.Tool::name).toList())).append(')');
            }
        });
        return b.toString();
    }

    @Override
    public Outcome call(String tool, Map<String, Object> arguments, String callId, BiConsumer<String, String> output) {
        Map<String, Object> args = new LinkedHashMap<>(arguments);
        if (IN_WORKSPACE.contains(tool) && !args.containsKey("workspace")) args.put("workspace", workspace);
        running = callId;
        McpSchema.CallToolResult r;
        try {
            r = tools.call(tool, args, who, session, callId, output);
        } finally {
            running = null;
        }
        StringBuilder text = new StringBuilder();
        List<Map<String, String>> images = new ArrayList<>();
        if (r.content() != null) for (McpSchema.Content c : r.content()) {
            if (!text.isEmpty()) text.append('\n');
            switch (c) {
                case McpSchema.TextContent t -> text.append(t.text());
                case McpSchema.ImageContent i -> {
                    images.add(Map.of("mimeType", i.mimeType(), "data", i.data()));
                    text.append("[image ").append(i.mimeType()).append(" shown to the user]");
                }
                case McpSchema.ResourceLink l -> text.append("[file ").append(l.uri()).append(']');
                default -> text.append('[').append(c.type()).append(" content]");
            }
        }
        return new Outcome(AgentTools.capped(text.toString()), Boolean.TRUE.equals(r.isError()), images);
    }

    @Override
    public void cancel() {
        String id = running;
        if (id != null) tools.cancel(session, id);
    }

    @Override
    public void close() {
        cancel();
    }
}
