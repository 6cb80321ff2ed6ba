package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import dev.codeexec.auth.Principal;
import dev.codeexec.config.Config;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.Workspaces;
import io.modelcontextprotocol.server.McpServerFeatures.SyncResourceSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncResourceTemplateSpecification;
import io.modelcontextprotocol.spec.McpError;
import io.modelcontextprotocol.spec.McpSchema.BlobResourceContents;
import io.modelcontextprotocol.spec.McpSchema.ReadResourceRequest;
import io.modelcontextprotocol.spec.McpSchema.ReadResourceResult;
import io.modelcontextprotocol.spec.McpSchema.Resource;
import io.modelcontextprotocol.spec.McpSchema.ResourceContents;
import io.modelcontextprotocol.spec.McpSchema.ResourceTemplate;
import io.modelcontextprotocol.spec.McpSchema.TextResourceContents;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.databind.SerializationFeature;
import tools.jackson.databind.json.JsonMapper;

import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The resources: {@code code-exec://info} (what this server offers: version, languages, Python libraries,
 * limits) and the template {@code ws://{workspace}/{+path}} for the files of the caller's workspaces.
 * resources/list shows only the info resource: workspace files are many, change with every run and belong to one
 * tenant, so they are reached through the template (with completions) and list_files, not enumerated.
 */
final class WorkspaceResources {

    static final String INFO_URI = "code-exec://info";
    static final String FILE_TEMPLATE = "ws://{workspace}/{+path}";

    private static final Logger LOG = LoggerFactory.getLogger(WorkspaceResources.class);
    private static final JsonMapper PRETTY = JsonMapper.builder().enable(SerializationFeature.INDENT_OUTPUT).build();
    private static final UriTemplates.Template TEMPLATE = new UriTemplates.Template(FILE_TEMPLATE);

    private final ServerSetup setup;
    private final Workspaces workspaces;

    WorkspaceResources(ServerSetup setup) {
        this.setup = setup;
        this.workspaces = setup.workspaces();
    }

    SyncResourceSpecification info() {
        Resource r = Resource.builder().uri(INFO_URI).name("info").title("code-exec-mcp: server info")
                .description("Server version, languages and their versions, preinstalled Python libraries, limits.")
                .mimeType("application/json").build();
        return new SyncResourceSpecification(r, (exchange, request) -> new ReadResourceResult(List.of(
                new TextResourceContents(INFO_URI, "application/json", PRETTY.writeValueAsString(
                        infoDocument(MessageInterceptor.principalOf(request.meta())))))));
    }

    Map<String, Object> infoDocument() {
        return infoDocument(Principal.DEFAULT);
    }

    /** What this server offers, with the caller's own network allow-list. */
    Map<String, Object> infoDocument(Principal who) {
        Config c = setup.config();
        Map<String, Object> doc = new LinkedHashMap<>();
        doc.put("server", McpServers.SERVER_NAME);
        doc.put("version", setup.version());
        doc.put("sandbox", setup.sandbox().name());
        Map<String, Object> runtime;
        try {
            runtime = setup.executor().runtimeInfo();
        } catch (RuntimeException e) {
            LOG.warn("runtime info unavailable for {}: {}", INFO_URI, e.toString());
            runtime = Map.of();
        }
        doc.put("languages", runtime.getOrDefault("languages", Map.of()));
        doc.put("libraries", Map.of("python", PythonLibraries.available()));
        Map<String, Object> limits = new LinkedHashMap<>();
        if (runtime.get("limits") instanceof Map<?, ?> run) run.forEach((k, v) -> limits.put(String.valueOf(k), v));
        limits.put("workspaceQuotaBytes", workspaces.quotaBytes());
        limits.put("workspaceMaxEntries", workspaces.maxEntries());
        limits.put("workspaceMaxAgeHours", c.get(Config.WORKSPACE_MAX_AGE_HOURS));
        limits.put("readFileMaxBytes", WorkspaceFiles.READ_LIMIT);
        limits.put("mcpBodyMaxMb", c.get(Config.MAX_BODY_MB));
        limits.put("uploadMaxMb", c.get(Config.MAX_UPLOAD_MB));
        limits.put("inlineImageMaxKb", c.get(Config.MAX_IMAGE_KB));
        doc.put("limits", limits);
        doc.put("network", setup.egress().describe(setup.egress().policyFor(who.egress()), who.tenant()));
        setup.codeTools().filter(t -> !t.upstreams().config().apis().isEmpty())
                .ifPresent(t -> doc.put("apis", t.routes().describe(who.tenant()))); // credentialed HTTP API routes
        doc.put("files", Map.of("resourceTemplate", FILE_TEMPLATE,
                "restDownload", "/api/workspaces/{workspace}/files/{path}",
                "tools", List.of("list_files", "read_file", "write_file", "delete_file", "workspace_info")));
        return doc;
    }

    SyncResourceTemplateSpecification files() {
        ResourceTemplate t = ResourceTemplate.builder().uriTemplate(FILE_TEMPLATE).name("workspace-file")
                .title("Workspace file")
                .description("A file in one of your workspaces, e.g. ws://proj/src/main.py (up to 1 MB; text as text, "
                        + "binary as base64 blob; larger files: GET /api/workspaces/{workspace}/files/{path}).")
                .build();
        return new SyncResourceTemplateSpecification(t, (exchange, request) -> readFile(request));
    }

    ReadResourceResult readFile(ReadResourceRequest request) {
        Principal who = MessageInterceptor.principalOf(request.meta());
        String uri = request.uri();
        try {
            Map<String, String> vars;
            try {
                vars = TEMPLATE.extractVariableValues(uri);
            } catch (IllegalArgumentException e) {
                throw new WorkspaceException(WorkspaceException.Kind.BAD_PATH, e.getMessage());
            }
            if (vars.isEmpty()) throw McpError.RESOURCE_NOT_FOUND.apply(uri);
            RelPath path = RelPath.parse(vars.get("path"));
            if (path.isRoot()) throw new WorkspaceException(WorkspaceException.Kind.BAD_PATH, "a file path is required");
            Workspace ws = workspaces.open(who.tenant(), vars.get("workspace"), false);
            WorkspaceFiles.Loaded file = WorkspaceFiles.read(ws, path, WorkspaceFiles.READ_LIMIT);
            ResourceContents contents = file.text().isPresent()
                    ? new TextResourceContents(uri, textType(file.mimeType()), file.text().get())
                    : new BlobResourceContents(uri, file.mimeType(), Base64.getEncoder().encodeToString(file.bytes()));
            return new ReadResourceResult(List.of(contents));
        } catch (WorkspaceException e) {
            throw error(e);
        }
    }

    /** A file of unknown type that turned out to be text is served as text/plain. */
    private static String textType(String mime) {
        return mime.equals("application/octet-stream") ? "text/plain" : mime;
    }

    /**
     * A refused read as a JSON-RPC error: not found as MCP's resource-not-found (-32002), a bad request as invalid
     * params, anything else internal. The message starts with the wire code, as tool errors do.
     */
    static McpError error(WorkspaceException e) {
        int code = switch (e.kind()) {
            case NOT_FOUND -> -32002;
            case BAD_PATH, BAD_NAME, TOO_LARGE, QUOTA_EXCEEDED, CONFLICT -> -32602;
            case IO -> -32603;
        };
        return McpError.builder(code).message(e.code() + ": " + e.getMessage()).data(Map.of("error", e.code())).build();
    }
}
