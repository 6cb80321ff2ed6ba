package dev.codeexec.codemode;

import io.modelcontextprotocol.spec.McpSchema;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The upstream MCP servers' tools offered one by one, for callers that compare code mode with plain tool calling:
 * the chat agent's {@code direct} mode and the {@code /mcp-no-code-execute} endpoint. A tool of server S named T is
 * offered as {@code S__T} (both parts reduced to the characters every model API and MCP client accepts, at most 64
 * in all). What a tenant sees and may call is exactly what its code may call in code mode
 * ({@link CodeTools#visible}, {@link CodeTools#refusal}); each call goes through a {@link CodeToolsRun}, with the
 * same caps, timeout, record and audit line as a call from a sandbox.
 */
public final class DirectTools {

    /** Longest tool name: OpenAI's and Anthropic's limit for a function's name. */
    static final int MAX_NAME = 64;

    private final CodeTools tools;

    public DirectTools(CodeTools tools) {
        this.tools = tools;
    }

    /** One upstream tool as offered directly: its offered name, where it lives, and its upstream definition. */
    public record Entry(String name, String server, String tool, McpSchema.Tool upstream) {
        /** The description offered: the upstream's, with the server named first. */
        public String description() {
            String d = upstream.description() == null ? "" : upstream.description().strip();
            return "[" + server + "] " + (d.isEmpty() ? tool : d);
        }

        /** The upstream's input schema, or an empty object's. */
        public Map<String, Object> inputSchema() {
            Map<String, Object> s = upstream.inputSchema();
            return s == null || s.isEmpty() ? Map.of("type", "object", "properties", Map.of()) : s;
        }
    }

    /** The tools {@code tenant} may call now: the connected servers' tools the operator opens to it, by name. */
    public List<Entry> visible(String tenant) {
        List<Entry> out = new ArrayList<>();
        for (Library.ServerView s : tools.visible(tenant))
            for (McpSchema.Tool t : s.tools()) out.add(new Entry(name(s.name(), t.name()), s.name(), t.name(), t));
        return out;
    }

    /** The entry {@code tenant} may call under {@code name}, if any. */
    public Optional<Entry> find(String tenant, String name) {
        return visible(tenant).stream().filter(e -> e.name().equals(name)).findFirst();
    }

    /**
     * A new set of calls for {@code tenant}, counted and capped as one run ({@code runId} names it in the audit
     * lines); close it when the calls are over.
     */
    public CodeToolsRun open(String tenant, String runId) {
        return tools.open(tenant, runId);
    }

    /** {@code S__T}: letters, digits, '_' and '-' only, at most {@value #MAX_NAME} (a hash keeps long names apart). */
    public static String name(String server, String tool) {
        String n = clean(server) + "__" + clean(tool);
        if (n.length() <= MAX_NAME) return n;
        String hash;
        try {
            hash = HexFormat.of().formatHex(java.security.MessageDigest.getInstance("SHA-256")
                    .digest((server + "\0" + tool).getBytes(StandardCharsets.UTF_8))).substring(0, 8);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        return n.substring(0, MAX_NAME - 9) + "_" + hash;
    }

    private static String clean(String s) {
        StringBuilder b = new StringBuilder(s.length());
        for (char c : s.toCharArray())
            b.append((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ? c : '_');
        return b.toString();
    }
}
