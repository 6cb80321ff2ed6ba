package dev.codeexec.mcp;

import dev.codeexec.auth.Principal;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.PreviewAddress;
import dev.codeexec.engine.PreviewControl;
import dev.codeexec.surface.ServerSetup;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.spec.McpSchema.Tool;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * Port previews: expose_port makes a server that a session or a background job runs (on 127.0.0.1 or 0.0.0.0 inside
 * its sandbox) reachable at a URL of the preview listener, an origin of its own; unexpose_port ends it. The caller's
 * own sessions and jobs only: another tenant's name is unknown here as one that never existed.
 */
final class PreviewTools {

    private final ServerSetup setup;

    PreviewTools(ServerSetup setup) {
        this.setup = setup;
    }

    private PreviewControl previews() {
        return setup.previews().orElseThrow(() -> new ExecutionException.Unavailable(
                "port previews are not served by this server (they need the HTTP server: TRANSPORT=http)"));
    }

    List<SyncToolSpecification> specifications() {
        Map<String, Object> session = Map.of("type", "string", "pattern", "^[A-Za-z0-9_-]{1,64}$",
                "description", "The session whose sandbox runs the server (give this or `job`).");
        Map<String, Object> job = Map.of("type", "string", "description",
                "The running background job whose sandbox runs the server (give this or `session`).");
        Map<String, Object> port = Map.of("type", "integer", "minimum", 1, "maximum", 65535,
                "description", "The port the server listens on inside the sandbox (127.0.0.1 or 0.0.0.0).");
        Map<String, Object> expose = new LinkedHashMap<>();
        expose.put("port", port);
        expose.put("session", session);
        expose.put("job", job);
        expose.put("auth", Map.of("type", "string", "enum", List.of("token", "key"), "default", "token",
                "description", "`token`: the URL is the key (unguessable; works in any browser); `key`: every "
                        + "request must also carry your API key (Authorization: Bearer), for APIs called by programs."));
        Map<String, Object> unexpose = new LinkedHashMap<>();
        unexpose.put("url", Map.of("type", "string", "description", "The preview's URL, as expose_port gave it."));
        unexpose.put("port", port);
        unexpose.put("session", session);
        unexpose.put("job", job);
        Map<String, Object> str = Map.of("type", "string");
        Map<String, Object> out = Map.of("type", "object", "properties", Map.of("url", str, "port",
                Map.of("type", "integer"), "auth", str, "createdAt", str, "expiresAt", str, "session", str, "job", str),
                "required", List.of("url", "port", "expiresAt"));
        return List.of(
                FileTools.spec(tool("expose_port", "Expose port", "Makes a server that your session or running "
                                + "background job listens with (on 127.0.0.1:PORT or 0.0.0.0:PORT inside its sandbox) "
                                + "reachable at a URL: HTTP/1.1, streaming (SSE) and WebSockets pass. The URL is on an "
                                + "origin of its own, never the API's. A port nothing listens on yet is fine: the URL "
                                + "answers 502 until something does. The preview ends with its session or job, with "
                                + "unexpose_port, or at expiresAt. Exposing the same port again returns the same URL.",
                        expose, List.of("port"), out, ToolHints.additive().idempotent()),
                        Set.of("port", "session", "job", "auth"), this::expose),
                FileTools.spec(tool("unexpose_port", "Unexpose port", "Ends a preview: the one of `url`, or every "
                                + "preview of `port` in the `session` or `job`. Its URL then answers 404.",
                        unexpose, List.of(), Map.of("type", "object", "properties", Map.of("ended",
                                Map.of("type", "integer")), "required", List.of("ended")),
                        ToolHints.destructive().idempotent()),
                        Set.of("url", "port", "session", "job"), this::unexpose));
    }

    /** The session or job the call names: exactly one of the two. */
    private static Optional<PreviewControl.Sandbox> sandbox(ToolArgs args, boolean required) {
        boolean s = args.has("session"), j = args.has("job");
        if (s && j) throw new ToolArgs.Invalid("give either 'session' or 'job', not both");
        if (s) return Optional.of(new PreviewControl.Sandbox(PreviewControl.Kind.SESSION, args.required("session")));
        if (j) return Optional.of(new PreviewControl.Sandbox(PreviewControl.Kind.JOB, args.required("job")));
        if (required) throw new ToolArgs.Invalid("give 'session' (a session's name) or 'job' (a running job's id)");
        return Optional.empty();
    }

    private io.modelcontextprotocol.spec.McpSchema.CallToolResult expose(Principal who, ToolArgs args) {
        PreviewControl.Sandbox sb = sandbox(args, true).orElseThrow();
        int port = args.integer("port", 0, 1, 65535);
        if (!args.has("port")) throw new ToolArgs.Invalid("'port' is required");
        boolean key = args.oneOf("auth", "token", List.of("token", "key")).equals("key");
        PreviewControl p = previews();
        PreviewControl.Preview preview = p.expose(who.tenant(), sb, port, key);
        Map<String, Object> m = p.map(preview);
        m.put(sb.kind() == PreviewControl.Kind.SESSION ? "session" : "job", sb.name());
        return FileTools.ok(m, "port " + port + " of " + sb.label() + " is at " + m.get("url")
                + (key ? " (requests need your API key)" : "") + " until " + m.get("expiresAt")
                + " or until the " + sb.kind().name().toLowerCase(java.util.Locale.ROOT) + " ends.");
    }

    private io.modelcontextprotocol.spec.McpSchema.CallToolResult unexpose(Principal who, ToolArgs args) {
        PreviewControl p = previews();
        Optional<String> url = Optional.ofNullable(args.string("url", null));
        Optional<Integer> port = args.has("port") ? Optional.of(args.integer("port", 0, 1, 65535)) : Optional.empty();
        if (url.isEmpty() && port.isEmpty()) throw new ToolArgs.Invalid("give 'url', or 'port' with 'session' or 'job'");
        Optional<PreviewControl.Sandbox> sb = sandbox(args, url.isEmpty());
        Optional<String> token = url.map(u -> PreviewAddress.tokenOf(u).orElseThrow(
                () -> new ToolArgs.Invalid("'url' is not a preview URL (as expose_port gave it)")));
        int ended = p.unexpose(who.tenant(), sb, token, port);
        return FileTools.ok(Map.of("ended", ended), ended == 0 ? "no such preview (it may have ended already)"
                : ended + (ended == 1 ? " preview ended" : " previews ended"));
    }

    private static Tool tool(String name, String title, String description, Map<String, Object> props,
            List<String> required, Map<String, Object> output, ToolHints hints) {
        return Tool.builder().name(name).title(title).description(description)
                .inputSchema(FileTools.input(props, required)).outputSchema(output)
                .annotations(hints.annotations(title)).build();
    }
}
