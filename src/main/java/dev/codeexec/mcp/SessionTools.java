package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import dev.codeexec.auth.Principal;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.engine.SessionControl;
import dev.codeexec.engine.SessionControl.SessionInfo;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.Tool;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The session tools: session_list, session_reset, session_close. Sessions are created by execute_code with a
 * {@code session} argument; these act on the caller's tenant only, taken from the {@code _meta} the edge stamped
 * ({@link MessageInterceptor#principalOf}), so a name never reaches another tenant's session.
 */
final class SessionTools {

    private final SessionControl sessions;
    private final java.util.Optional<dev.codeexec.engine.PreviewControl> previews;

    SessionTools(ServerSetup setup) {
        this.sessions = setup.executor().sessions();
        this.previews = setup.previews();
    }

    /** The port previews of a sandbox as the tools list them (session_list, job_status); empty when none. */
    static List<Map<String, Object>> previews(java.util.Optional<dev.codeexec.engine.PreviewControl> previews, String tenant,
            dev.codeexec.engine.PreviewControl.Sandbox sandbox) {
        return previews.map(p -> p.list(tenant, sandbox).stream().map(p::map).toList()).orElse(List.of());
    }

    /** The schema of a sandbox's previews in a listing. */
    static Map<String, Object> previewsSchema() {
        return Map.of("type", "array", "description", "Its port previews (expose_port).", "items", Map.of("type",
                "object", "properties", Map.of("url", str(), "port", Map.of("type", "integer"), "auth", str(),
                        "createdAt", str(), "expiresAt", str())));
    }

    List<SyncToolSpecification> specifications() {
        return List.of(
                FileTools.spec(tool("session_list", "List sessions",
                        "Lists your stateful sessions (made by execute_code with 'session'): name, language, "
                                + "workspace, when created and last used, memory, calls, and whether a call is running.",
                        Map.of(), List.of(), listOutput(), ToolHints.readOnly()), Set.of(), this::list),
                FileTools.spec(tool("session_reset", "Reset session",
                        "Restarts a session's interpreter with the same name, language and workspace: every "
                                + "variable, import and function is gone (files in its workspace stay). A call "
                                + "running in it is ended. With `packages`, the fresh interpreter gets that set "
                                + "instead (installed first; `[]` for none).",
                        Map.of("session", sessionProp(), "packages", Map.of("type", "array", "items", Map.of("type", "string"),
                                "description", "The session's new declared packages (pip requirements for python, "
                                        + "npm packages for nodejs); omitted: it keeps its set.")),
                        List.of("session"), changedOutput("reset"),
                        ToolHints.destructive().idempotent()), Set.of("session", "packages"), this::reset),
                FileTools.spec(tool("session_close", "Close session",
                        "Ends a session: its interpreter is stopped and its state is gone (files in its workspace "
                                + "stay). A call running in it is ended.",
                        Map.of("session", sessionProp()), List.of("session"), changedOutput("closed"),
                        ToolHints.destructive()), Set.of("session"), this::close));
    }

    private CallToolResult list(Principal who, ToolArgs args) {
        List<Map<String, Object>> out = new ArrayList<>();
        StringBuilder text = new StringBuilder();
        List<SessionInfo> all = sessions.list(who.tenant());
        text.append(all.size()).append(all.size() == 1 ? " session" : " sessions");
        for (SessionInfo i : all) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("name", i.name());
            m.put("language", i.language());
            i.workspace().ifPresent(w -> m.put("workspace", w));
            m.put("created", i.created().toString());
            m.put("lastUsed", i.lastUsed().toString());
            i.memoryBytes().ifPresent(b -> m.put("memoryBytes", b));
            m.put("calls", i.calls());
            m.put("busy", i.busy());
            List<Map<String, Object>> pv = previews(previews, who.tenant(),
                    new dev.codeexec.engine.PreviewControl.Sandbox(dev.codeexec.engine.PreviewControl.Kind.SESSION, i.name()));
            if (!pv.isEmpty()) m.put("previews", pv);
            out.add(m);
            text.append('\n').append(i.name()).append(": ").append(i.language())
                    .append(i.workspace().map(w -> " in workspace " + w).orElse(""))
                    .append(", ").append(i.calls()).append(i.calls() == 1 ? " call" : " calls")
                    .append(", last used ").append(i.lastUsed())
                    .append(i.memoryBytes().isPresent() ? ", " + (i.memoryBytes().getAsLong() >> 20) + " MB" : "")
                    .append(i.busy() ? ", running a call" : "");
        }
        return FileTools.ok(Map.of("sessions", out), text.toString());
    }

    private CallToolResult reset(Principal who, ToolArgs args) {
        String name = args.required("session");
        boolean found;
        if (args.has("packages")) {
            Optional<SessionInfo> info = sessions.list(who.tenant()).stream().filter(i -> i.name().equals(name)).findFirst();
            if (info.isEmpty()) return notFound(name);
            found = sessions.reset(who.tenant(), name, RequestValidator.packages(info.get().language(), args.raw("packages")));
        } else {
            found = sessions.reset(who.tenant(), name);
        }
        if (!found) return notFound(name);
        return FileTools.ok(Map.of("session", name, "reset", true), "session '" + name + "' was reset: its state is gone");
    }

    private CallToolResult close(Principal who, ToolArgs args) {
        String name = args.required("session");
        if (!sessions.close(who.tenant(), name)) return notFound(name);
        return FileTools.ok(Map.of("session", name, "closed", true), "session '" + name + "' was closed");
    }

    private static CallToolResult notFound(String name) {
        return ToolErrors.error(ToolErrors.NOT_FOUND, "no session '" + name + "' (session_list shows yours)");
    }

    private static Tool tool(String name, String title, String description, Map<String, Object> props,
            List<String> required, Map<String, Object> output, ToolHints hints) {
        return Tool.builder().name(name).title(title).description(description)
                .inputSchema(FileTools.input(props, required)).outputSchema(output)
                .annotations(hints.annotations(title))
                .build();
    }

    static Map<String, Object> sessionProp() {
        return Map.of("type", "string", "pattern", "^[A-Za-z0-9_-]{1,64}$",
                "description", "Session name (yours only).");
    }

    private static Map<String, Object> listOutput() {
        Map<String, Object> item = new LinkedHashMap<>();
        item.put("type", "object");
        item.put("properties", Map.of("name", str(), "language", str(), "workspace", str(),
                "created", Map.of("type", "string", "format", "date-time"),
                "lastUsed", Map.of("type", "string", "format", "date-time"),
                "memoryBytes", Map.of("type", "integer"), "calls", Map.of("type", "integer"),
                "busy", Map.of("type", "boolean"), "previews", previewsSchema()));
        item.put("required", List.of("name", "language", "created", "lastUsed", "calls", "busy"));
        return Map.of("type", "object", "properties", Map.of("sessions", Map.of("type", "array", "items", item)),
                "required", List.of("sessions"));
    }

    private static Map<String, Object> changedOutput(String flag) {
        return Map.of("type", "object", "properties", Map.of("session", str(), flag, Map.of("type", "boolean")),
                "required", List.of("session", flag));
    }

    private static Map<String, Object> str() {
        return Map.of("type", "string");
    }
}
