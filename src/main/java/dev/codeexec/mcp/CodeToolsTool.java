package dev.codeexec.mcp;

import dev.codeexec.auth.Principal;
import dev.codeexec.codemode.CodeTools;
import io.modelcontextprotocol.server.McpServerFeatures.SyncResourceSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncResourceTemplateSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.spec.McpError;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.ReadResourceRequest;
import io.modelcontextprotocol.spec.McpSchema.ReadResourceResult;
import io.modelcontextprotocol.spec.McpSchema.Resource;
import io.modelcontextprotocol.spec.McpSchema.ResourceTemplate;
import io.modelcontextprotocol.spec.McpSchema.TextResourceContents;
import io.modelcontextprotocol.spec.McpSchema.Tool;
import tools.jackson.databind.SerializationFeature;
import tools.jackson.databind.json.JsonMapper;

import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Code mode's discovery, for the model, without loading every schema: the tool {@code list_code_tools} and the same
 * answers as resources ({@code code-tools://servers}, {@code code-tools://servers/{server}},
 * {@code code-tools://servers/{server}/{tool}}). Only on a server with UPSTREAM_MCP_FILE. Each caller sees the
 * servers and tools its tenant may call.
 */
final class CodeToolsTool {

    static final String NAME = "list_code_tools";
    static final String SERVERS_URI = "code-tools://servers";
    private static final JsonMapper PRETTY = JsonMapper.builder().enable(SerializationFeature.INDENT_OUTPUT).build();
    private static final UriTemplates.Template SERVER = new UriTemplates.Template(SERVERS_URI + "/{server}");
    private static final UriTemplates.Template TOOL = new UriTemplates.Template(SERVERS_URI + "/{server}/{tool}");

    private final CodeTools tools;

    CodeToolsTool(CodeTools tools) {
        this.tools = tools;
    }

    SyncToolSpecification specification() {
        Tool tool = Tool.builder()
                .name(NAME)
                .title("List code tools")
                .description("Code mode: the MCP servers whose tools code run by execute_code can call, step by step. "
                        + "No arguments: the servers (name, module to import, description, how many tools). `server`: its "
                        + "tools (name, one-line description). `server` and `tool`: that tool's description, input schema "
                        + "and its Python and TypeScript signatures. In code: Python `from mcp_tools import SERVER; "
                        + "SERVER.TOOL(arg=...)`, Node/TypeScript `const { SERVER } = require('mcp-tools'); await "
                        + "SERVER.TOOL({ arg: ... })`." + (tools.upstreams().config().apis().isEmpty() ? ""
                        : " Without arguments it also lists the HTTP APIs code may call through $CODE_APIS_URL/NAME/PATH "
                        + "(`apis`: name, description, URL, methods, paths); the server adds their credentials."))
                .inputSchema(Map.of("type", "object", "properties", Map.of(
                        "server", Map.of("type", "string", "description", "A server's name (or module name)."),
                        "tool", Map.of("type", "string", "description", "One tool of that server.")),
                        "additionalProperties", false))
                .outputSchema(Map.of("type", "object"))
                .annotations(ToolHints.readOnly().annotations("List code tools"))
                .build();
        return new SyncToolSpecification(tool, (exchange, call) -> {
            try {
                return call(MessageInterceptor.principalOf(call.meta()), call.arguments());
            } catch (RuntimeException e) {
                return ToolErrors.of(NAME, e);
            }
        });
    }

    /** The listing asked for; a server or tool the caller cannot see is {@code not_found}. */
    private CallToolResult call(Principal who, Map<String, Object> arguments) {
        Map<String, Object> args = arguments == null ? Map.of() : arguments;
        Optional<String> server = text(args, "server");
        Optional<String> name = text(args, "tool");
        if (name.isPresent() && server.isEmpty()) throw new ToolArgs.Invalid("'tool' needs 'server'");
        Map<String, Object> answer;
        try {
            answer = tools.listing(who.tenant(), server, name);
        } catch (IllegalArgumentException e) {
            return ToolErrors.error(ToolErrors.NOT_FOUND, e.getMessage());
        }
        return CallToolResult.builder().structuredContent(answer).addTextContent(PRETTY.writeValueAsString(answer))
                .isError(false).build();
    }

    private static Optional<String> text(Map<String, Object> args, String key) {
        Object v = args.get(key);
        if (v == null) return Optional.empty();
        if (!(v instanceof String s) || s.isBlank()) throw new ToolArgs.Invalid("'" + key + "' must be a non-empty string");
        return Optional.of(s);
    }

    SyncResourceSpecification serversResource() {
        Resource r = Resource.builder().uri(SERVERS_URI).name("code-tools").title("Code mode: servers")
                .description("The MCP servers whose tools your code can call (list_code_tools without arguments).")
                .mimeType("application/json").build();
        return new SyncResourceSpecification(r, (exchange, request) -> read(request, Optional.empty(), Optional.empty()));
    }

    List<SyncResourceTemplateSpecification> templates() {
        ResourceTemplate server = ResourceTemplate.builder().uriTemplate(SERVERS_URI + "/{server}").name("code-tools-server")
                .title("Code mode: a server's tools").mimeType("application/json")
                .description("The tools of one server (list_code_tools with `server`).").build();
        ResourceTemplate tool = ResourceTemplate.builder().uriTemplate(SERVERS_URI + "/{server}/{tool}").name("code-tools-tool")
                .title("Code mode: one tool").mimeType("application/json")
                .description("One tool's description, schema and signatures (list_code_tools with `server` and `tool`).").build();
        return List.of(
                new SyncResourceTemplateSpecification(server, (exchange, request) -> {
                    Map<String, String> v = SERVER.extractVariableValues(request.uri());
                    return read(request, Optional.ofNullable(v.get("server")), Optional.empty());
                }),
                new SyncResourceTemplateSpecification(tool, (exchange, request) -> {
                    Map<String, String> v = TOOL.extractVariableValues(request.uri());
                    return read(request, Optional.ofNullable(v.get("server")), Optional.ofNullable(v.get("tool")));
                }));
    }

    private ReadResourceResult read(ReadResourceRequest request, Optional<String> server, Optional<String> tool) {
        Principal who = MessageInterceptor.principalOf(request.meta());
        try {
            Map<String, Object> answer = tools.listing(who.tenant(), server, tool);
            return new ReadResourceResult(List.of(new TextResourceContents(request.uri(), "application/json",
                    PRETTY.writeValueAsString(answer))));
        } catch (IllegalArgumentException e) {
            throw McpError.RESOURCE_NOT_FOUND.apply(request.uri());
        }
    }
}
