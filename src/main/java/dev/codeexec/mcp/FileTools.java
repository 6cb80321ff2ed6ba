package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import dev.codeexec.auth.Principal;
import dev.codeexec.config.Config;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.WorkspaceException.Kind;
import dev.codeexec.workspace.WorkspaceFs;
import dev.codeexec.workspace.Workspaces;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.spec.McpSchema.CallToolRequest;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.Tool;

import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The workspace file tools: list_files, read_file, write_file, delete_file, workspace_info. Every call acts in the
 * caller's tenant, taken from the {@code _meta} the edge stamped ({@link MessageInterceptor#principalOf}), never
 * from the arguments; every path goes through {@link WorkspaceFs}. A refused operation is a tool error naming the
 * cause's kind ({@code not_found}, {@code bad_path}, {@code quota_exceeded}, ...: {@link ToolErrors}).
 */
final class FileTools {

    static final int DEFAULT_LIST_LIMIT = 1000;
    static final int MAX_LIST_LIMIT = 10000;

    private final Workspaces workspaces;
    private final long maxWriteBytes;

    FileTools(ServerSetup setup) {
        this.workspaces = setup.workspaces();
        // The MCP body limit caps what a call can carry; decoded content is never larger than that.
        this.maxWriteBytes = (long) setup.config().get(Config.MAX_BODY_MB) << 20;
    }

    List<SyncToolSpecification> specifications() {
        return List.of(
                spec(tool("list_files", "List files",
                        "Lists a directory of a workspace: one level, or the whole tree below it with recursive=true "
                                + "(up to 'limit' entries; 'truncated' says when the limit cut it). Symbolic links are "
                                + "shown as type 'symlink' and never followed.",
                        input(Map.of("workspace", workspaceProp(), "path", pathProp("Directory inside the workspace; '' is its root.", ""),
                                "recursive", Map.of("type", "boolean", "default", false, "description", "List the whole tree below 'path'."),
                                "limit", Map.of("type", "integer", "minimum", 1, "maximum", MAX_LIST_LIMIT, "default", DEFAULT_LIST_LIMIT,
                                        "description", "Most entries returned.")), List.of("workspace")),
                        listOutput(), ToolHints.readOnly()), Set.of("workspace", "path", "recursive", "limit"), this::listFiles),
                spec(tool("read_file", "Read file",
                        "Reads a file of a workspace, up to 1 MB (larger files: GET /api/workspaces/{workspace}/files/{path}). "
                                + "encoding 'auto' returns text for UTF-8 text files and base64 otherwise.",
                        input(Map.of("workspace", workspaceProp(), "path", pathProp("File inside the workspace.", null),
                                "encoding", Map.of("type", "string", "enum", List.of("auto", "text", "base64"), "default", "auto")),
                                List.of("workspace", "path")),
                        object(Map.of("path", str(), "size", integer(), "encoding", Map.of("type", "string", "enum", List.of("text", "base64")),
                                "content", str(), "mimeType", str()), List.of("path", "size", "encoding", "content", "mimeType")),
                        ToolHints.readOnly()), Set.of("workspace", "path", "encoding"), this::readFile),
                spec(tool("write_file", "Write file",
                        "Writes a file into a workspace, creating the workspace and parent directories as needed and "
                                + "replacing an existing file atomically; fails with quota_exceeded when the workspace "
                                + "quota would be exceeded. encoding 'base64' for binary content.",
                        input(Map.of("workspace", workspaceProp(), "path", pathProp("File inside the workspace.", null),
                                "content", Map.of("type", "string", "description", "The file content (text, or base64 with encoding=base64)."),
                                "encoding", Map.of("type", "string", "enum", List.of("text", "base64"), "default", "text")),
                                List.of("workspace", "path", "content")),
                        object(Map.of("path", str(), "size", integer()), List.of("path", "size")),
                        ToolHints.destructive().idempotent()),
                        Set.of("workspace", "path", "content", "encoding"), this::writeFile),
                spec(tool("delete_file", "Delete file",
                        "Deletes a file, a symbolic link (the link itself, never its target) or a directory "
                                + "(empty, or with everything in it when recursive=true).",
                        input(Map.of("workspace", workspaceProp(), "path", pathProp("Entry inside the workspace.", null),
                                "recursive", Map.of("type", "boolean", "default", false, "description", "Delete a directory with its content.")),
                                List.of("workspace", "path")),
                        object(Map.of("path", str(), "type", str(), "deleted", Map.of("type", "boolean")), List.of("path", "type", "deleted")),
                        // deleting twice fails the second time
                        ToolHints.destructive()), Set.of("workspace", "path", "recursive"), this::deleteFile),
                spec(tool("workspace_info", "Workspace info",
                        "Size and entries against the workspace's limits, file and directory counts, last use and how "
                                + "the limits are enforced; without 'workspace', the same for each of your workspaces.",
                        input(Map.of("workspace", workspaceProp()), List.of()), infoOutput(), ToolHints.readOnly()),
                        Set.of("workspace"), this::workspaceInfo));
    }

    // ---- handlers -----------------------------------------------------------------------------------------------

    private CallToolResult listFiles(Principal who, ToolArgs args) {
        String name = args.required("workspace");
        RelPath dir = RelPath.parse(args.string("path", ""));
        boolean recursive = args.bool("recursive", false);
        int limit = args.integer("limit", DEFAULT_LIST_LIMIT, 1, MAX_LIST_LIMIT);
        Workspace ws = workspaces.open(who.tenant(), name, false);
        List<WorkspaceFs.Entry> entries;
        boolean truncated;
        boolean tooDeep = false;
        if (recursive) {
            List<WorkspaceFs.Entry> all = new ArrayList<>();
            WorkspaceFs.Walked walked = ws.fs().walkTree(dir, limit, all::add);
            truncated = !walked.complete();
            tooDeep = walked.tooDeep();
            entries = all;
        } else {
            // One more than asked tells whether the limit cut the listing; which entries a cut listing holds is
            // unspecified (the directory is read in its on-disk order, then sorted).
            List<WorkspaceFs.Entry> level = ws.fs().list(dir, limit + 1);
            truncated = level.size() > limit;
            entries = truncated ? level.subList(0, limit) : level;
        }
        List<Map<String, Object>> out = new ArrayList<>();
        StringBuilder text = new StringBuilder();
        text.append(entries.size()).append(entries.size() == 1 ? " entry" : " entries").append(" in ")
                .append(name).append('/').append(dir)
                .append(tooDeep ? " (directories " + WorkspaceFs.MAX_WALK_DEPTH + " levels deep are listed, not entered)"
                        : truncated ? " (truncated at " + limit + ")" : "").append(':');
        for (WorkspaceFs.Entry e : entries) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("path", e.path().toString());
            m.put("type", e.type());
            m.put("size", e.size());
            m.put("modified", e.modified().toInstant().toString());
            out.add(m);
            text.append('\n').append(e.path()).append(switch (e.type()) {
                case "directory" -> "/";
                case "file" -> "  (" + e.size() + " bytes)";
                case "symlink" -> "  (symbolic link, not followed)";
                default -> "  (" + e.type() + ")";
            });
        }
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("workspace", name);
        s.put("path", dir.toString());
        s.put("entries", out);
        s.put("truncated", truncated);
        return ok(s, text.toString());
    }

    private CallToolResult readFile(Principal who, ToolArgs args) {
        String name = args.required("workspace");
        RelPath path = RelPath.parse(args.required("path"));
        String encoding = args.oneOf("encoding", "auto", List.of("auto", "text", "base64"));
        if (path.isRoot()) throw new WorkspaceException(Kind.BAD_PATH, "a file path is required (use list_files for directories)");
        Workspace ws = workspaces.open(who.tenant(), name, false);
        WorkspaceFiles.Loaded file = WorkspaceFiles.read(ws, path, WorkspaceFiles.READ_LIMIT);
        String content;
        String used;
        if (encoding.equals("base64") || (encoding.equals("auto") && file.text().isEmpty())) {
            content = Base64.getEncoder().encodeToString(file.bytes());
            used = "base64";
        } else if (encoding.equals("text")) {
            content = WorkspaceFiles.utf8(file.bytes()).orElseThrow(() ->
                    new ToolArgs.Invalid("'" + path + "' is not valid UTF-8 text; read it with encoding 'base64'"));
            used = "text";
        } else {
            content = file.text().orElseThrow();
            used = "text";
        }
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("path", path.toString());
        s.put("size", file.bytes().length);
        s.put("encoding", used);
        s.put("content", content);
        s.put("mimeType", file.mimeType());
        String text = used.equals("text") ? content
                : "base64 of " + path + " (" + file.bytes().length + " bytes, " + file.mimeType() + "):\n" + content;
        return ok(s, text);
    }

    private CallToolResult writeFile(Principal who, ToolArgs args) {
        String name = args.required("workspace");
        RelPath path = RelPath.parse(args.required("path"));
        String content = args.required("content");
        String encoding = args.oneOf("encoding", "text", List.of("text", "base64"));
        if (path.isRoot()) throw new WorkspaceException(Kind.BAD_PATH, "a file path is required");
        byte[] bytes;
        if (encoding.equals("base64")) {
            try {
                bytes = Base64.getMimeDecoder().decode(content);
            } catch (IllegalArgumentException e) {
                throw new ToolArgs.Invalid("'content' is not valid base64");
            }
        } else {
            bytes = content.getBytes(StandardCharsets.UTF_8);
        }
        Workspace ws = workspaces.open(who.tenant(), name, true);
        refuseLink(ws, path);
        long written = ws.write(path, new ByteArrayInputStream(bytes), maxWriteBytes);
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("path", path.toString());
        s.put("size", written);
        return ok(s, "wrote " + written + " bytes to " + name + "/" + path);
    }

    /**
     * The write itself would replace a link planted at the target with a regular file (it never writes through
     * one), but a link there is almost always a trick or a mistake: say so instead of silently replacing it.
     */
    private static void refuseLink(Workspace ws, RelPath path) {
        try {
            if (ws.fs().stat(path).type().equals("symlink"))
                throw new WorkspaceException(Kind.BAD_PATH, "refused: '" + path + "' is a symbolic link (delete it first)");
        } catch (WorkspaceException e) {
            if (e.kind() != Kind.NOT_FOUND) throw e;
        }
    }

    private CallToolResult deleteFile(Principal who, ToolArgs args) {
        String name = args.required("workspace");
        RelPath path = RelPath.parse(args.required("path"));
        boolean recursive = args.bool("recursive", false);
        if (path.isRoot()) throw new WorkspaceException(Kind.BAD_PATH, "the workspace root cannot be deleted with delete_file");
        Workspace ws = workspaces.open(who.tenant(), name, false);
        String type = ws.fs().stat(path).type();
        ws.fs().delete(path, recursive);
        ws.fs().touch();
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("path", path.toString());
        s.put("type", type);
        s.put("deleted", true);
        return ok(s, "deleted " + (type.equals("symlink") ? "symbolic link " : type + " ") + name + "/" + path);
    }

    private CallToolResult workspaceInfo(Principal who, ToolArgs args) {
        if (args.has("workspace")) {
            Workspace.Info info = workspaces.open(who.tenant(), args.required("workspace"), false).info();
            return ok(infoMap(info), describe(info));
        }
        List<Map<String, Object>> all = new ArrayList<>();
        StringBuilder text = new StringBuilder();
        for (Workspace.Info info : workspaces.infos(who.tenant())) {
            all.add(infoMap(info));
            text.append(text.isEmpty() ? "" : "\n").append(describe(info));
        }
        return ok(Map.of("workspaces", all), all.isEmpty() ? "no workspaces yet (write_file creates one)" : text.toString());
    }

    private static Map<String, Object> infoMap(Workspace.Info i) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", i.name());
        if (i.error().isPresent()) {
            m.put("error", i.error().get());
            return m;
        }
        m.put("sizeBytes", i.sizeBytes());
        m.put("quotaBytes", i.quotaBytes());
        m.put("entries", i.entries());
        m.put("maxEntries", i.maxEntries());
        m.put("files", i.files());
        m.put("directories", i.directories());
        m.put("complete", i.complete());
        m.put("lastUsed", i.lastUsed().toInstant().toString());
        m.put("enforcement", i.enforcement());
        return m;
    }

    private static String describe(Workspace.Info i) {
        if (i.error().isPresent()) return i.name() + ": cannot be examined: " + i.error().get();
        String more = i.complete() ? "" : "at least ";
        return i.name() + ": " + more + i.files() + " files, " + more + i.directories() + " directories ("
                + more + i.entries() + " of " + i.maxEntries() + " entries), " + more + i.sizeBytes() + " of "
                + i.quotaBytes() + " bytes used, last used " + i.lastUsed().toInstant() + "; limits enforced by "
                + (i.enforcement().equals("measured") ? "measuring" : "the kernel (" + i.enforcement() + ")");
    }

    // ---- plumbing, shared with SessionTools ---------------------------------------------------------------------

    /** One tool's work, given the caller (from the edge-stamped _meta) and its checked arguments. */
    @FunctionalInterface
    interface Handler {
        CallToolResult handle(Principal who, ToolArgs args);
    }

    /** The tool with its handler; whatever stops a call becomes its tool error ({@link ToolErrors}), never an exception. */
    static SyncToolSpecification spec(Tool tool, Set<String> known, Handler handler) {
        return new SyncToolSpecification(tool, (exchange, call) -> call(tool.name(), call, known, handler));
    }

    private static CallToolResult call(String name, CallToolRequest call, Set<String> known, Handler handler) {
        Principal who = MessageInterceptor.principalOf(call.meta());
        try {
            return handler.handle(who, new ToolArgs(call.arguments(), known));
        } catch (RuntimeException e) {
            return ToolErrors.of(name, e);
        }
    }

    static CallToolResult ok(Map<String, Object> structured, String text) {
        return CallToolResult.builder().structuredContent(structured).addTextContent(text).isError(false).build();
    }

    private static Tool tool(String name, String title, String description, Map<String, Object> input,
            Map<String, Object> output, ToolHints hints) {
        return Tool.builder().name(name).title(title).description(description).inputSchema(input).outputSchema(output)
                .annotations(hints.annotations(title))
                .build();
    }

    static Map<String, Object> workspaceProp() {
        return Map.of("type", "string", "pattern", "^[A-Za-z0-9_-]{1,64}$",
                "description", "Workspace name (yours only; created by write_file).");
    }

    private static Map<String, Object> pathProp(String description, String fallback) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("type", "string");
        m.put("description", description + " Relative, '/'-separated; no '..'.");
        if (fallback != null) m.put("default", fallback);
        return m;
    }

    /** An input schema: these properties, these required, nothing else. */
    static Map<String, Object> input(Map<String, Object> props, List<String> required) {
        Map<String, Object> m = object(props, required);
        m.put("additionalProperties", false);
        return m;
    }

    private static Map<String, Object> object(Map<String, Object> props, List<String> required) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("type", "object");
        m.put("properties", props);
        if (!required.isEmpty()) m.put("required", required);
        return m;
    }

    private static Map<String, Object> str() {
        return Map.of("type", "string");
    }

    private static Map<String, Object> integer() {
        return Map.of("type", "integer");
    }

    private static Map<String, Object> listOutput() {
        Map<String, Object> entry = object(Map.of("path", str(), "type", Map.of("type", "string",
                        "enum", List.of("file", "directory", "symlink", "other")), "size", integer(), "modified", str()),
                List.of("path", "type", "size", "modified"));
        return object(Map.of("workspace", str(), "path", str(), "entries", Map.of("type", "array", "items", entry),
                "truncated", Map.of("type", "boolean")), List.of("workspace", "path", "entries", "truncated"));
    }

    private static Map<String, Object> infoOutput() {
        Map<String, Object> one = new LinkedHashMap<>();
        one.put("name", str());
        one.put("sizeBytes", integer());
        one.put("quotaBytes", integer());
        one.put("entries", integer());
        one.put("maxEntries", integer());
        one.put("files", integer());
        one.put("directories", integer());
        one.put("complete", Map.of("type", "boolean", "description",
                "false when the count stopped at maxEntries: there is more than shown"));
        one.put("lastUsed", str());
        one.put("enforcement", Map.of("type", "string", "enum", List.of("xfs-project-quota", "measured"),
                "description", "how the limits are enforced: by the kernel, or by measuring while code runs"));
        one.put("error", Map.of("type", "string", "description", "why this workspace could not be examined"));
        Map<String, Object> props = new LinkedHashMap<>(one);
        props.put("workspaces", Map.of("type", "array", "items", object(one, List.of("name"))));
        return object(props, List.of());
    }
}
