package dev.codeexec.conformance;

import dev.codeexec.mcp.McpCatalog;
import dev.codeexec.mcp.McpExtension;
import io.modelcontextprotocol.server.McpServerFeatures.SyncCompletionSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncPromptSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncResourceSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncResourceTemplateSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.server.McpSyncServerExchange;
import io.modelcontextprotocol.spec.McpSchema.AudioContent;
import io.modelcontextprotocol.spec.McpSchema.BlobResourceContents;
import io.modelcontextprotocol.spec.McpSchema.CallToolRequest;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.CompleteResult;
import io.modelcontextprotocol.spec.McpSchema.Content;
import io.modelcontextprotocol.spec.McpSchema.CreateMessageRequest;
import io.modelcontextprotocol.spec.McpSchema.CreateMessageResult;
import io.modelcontextprotocol.spec.McpSchema.ElicitFormRequest;
import io.modelcontextprotocol.spec.McpSchema.ElicitResult;
import io.modelcontextprotocol.spec.McpSchema.EmbeddedResource;
import io.modelcontextprotocol.spec.McpSchema.GetPromptResult;
import io.modelcontextprotocol.spec.McpSchema.ImageContent;
import io.modelcontextprotocol.spec.McpSchema.LoggingLevel;
import io.modelcontextprotocol.spec.McpSchema.LoggingMessageNotification;
import io.modelcontextprotocol.spec.McpSchema.ProgressNotification;
import io.modelcontextprotocol.spec.McpSchema.Prompt;
import io.modelcontextprotocol.spec.McpSchema.PromptArgument;
import io.modelcontextprotocol.spec.McpSchema.PromptMessage;
import io.modelcontextprotocol.spec.McpSchema.PromptReference;
import io.modelcontextprotocol.spec.McpSchema.ReadResourceResult;
import io.modelcontextprotocol.spec.McpSchema.Resource;
import io.modelcontextprotocol.spec.McpSchema.ResourceTemplate;
import io.modelcontextprotocol.spec.McpSchema.Role;
import io.modelcontextprotocol.spec.McpSchema.SamplingMessage;
import io.modelcontextprotocol.spec.McpSchema.ServerCapabilities;
import io.modelcontextprotocol.spec.McpSchema.TextContent;
import io.modelcontextprotocol.spec.McpSchema.TextResourceContents;
import io.modelcontextprotocol.spec.McpSchema.Tool;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.BiFunction;

/**
 * The tools, resources, prompts and completion that the server scenarios of {@code @modelcontextprotocol/conformance}
 * 0.2.0-alpha.12 call by name (test_simple_text, test://static-text, test_simple_prompt, ...). They exist only in test scope
 * and are added to the real MCP server through the surfaces' extension hook, so the suite exercises our transport,
 * edge filters and session handling, while the shipped jar offers only execute_code and runtime_info.
 */
public final class ConformanceFixtures {

    /** 1x1 red PNG. */
    static final String PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
    /** A WAV header with no samples. */
    static final String WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQAAAAA=";

    private static final Map<String, Object> NO_ARGS = Map.of("type", "object", "properties", Map.of());

    private ConformanceFixtures() {
    }

    /**
     * Every fixture, for both revisions' servers, with the capabilities widened to what the scenarios probe
     * (resource subscriptions, logging, completions, prompts).
     */
    public static McpExtension extension() {
        return new McpExtension() {
            @Override
            public McpCatalog features() {
                return new McpCatalog(tools(), resources(), templates(), prompts(), completions());
            }

            @Override
            public List<io.modelcontextprotocol.modern.server.feature.McpAsyncTool> modernTools(dev.codeexec.mcp.McpTasks tasks) {
                return ModernFixtures.tools(tasks);
            }

            @Override
            public List<io.modelcontextprotocol.modern.server.feature.McpSyncPrompt> modernPrompts() {
                return ModernFixtures.prompts();
            }

            @Override
            public Optional<ServerCapabilities> capabilities() {
                return Optional.of(ServerCapabilities.builder()
                        .tools(false)
                        .resources(true, false)
                        .prompts(false)
                        .completions()
                        .logging()
                        .build());
            }
        };
    }

    static List<SyncToolSpecification> tools() {
        return List.of(
                tool("test_simple_text", "Returns a text block", NO_ARGS,
                        (ex, req) -> ok(text("This is a simple text response for testing."))),
                tool("test_image_content", "Returns an image block", NO_ARGS,
                        (ex, req) -> ok(ImageContent.builder(PNG, "image/png").build())),
                tool("test_audio_content", "Returns an audio block", NO_ARGS,
                        (ex, req) -> ok(AudioContent.builder(WAV, "audio/wav").build())),
                tool("test_embedded_resource", "Returns an embedded resource", NO_ARGS,
                        (ex, req) -> ok(embedded("test://embedded-resource", "This is an embedded resource content.", "text/plain"))),
                tool("test_multiple_content_types", "Returns text, an image and a resource", NO_ARGS,
                        (ex, req) -> ok(text("Multiple content types test:"),
                                ImageContent.builder(PNG, "image/png").build(),
                                embedded("test://mixed-content-resource", "{\"test\":\"data\",\"value\":123}", "application/json"))),
                tool("test_tool_with_logging", "Sends log messages while it runs", NO_ARGS, (ex, req) -> {
                    for (String m : List.of("Tool execution started", "Tool processing data", "Tool execution completed")) {
                        ex.loggingNotification(LoggingMessageNotification.builder(LoggingLevel.INFO, m).build());
                    }
                    return ok(text("Tool execution completed with logging"));
                }),
                tool("test_error_handling", "Always fails", NO_ARGS,
                        (ex, req) -> CallToolResult.builder()
                                .content(List.of(text("This tool intentionally returns an error for testing")))
                                .isError(true)
                                .build()),
                tool("test_tool_with_progress", "Reports progress 0, 50, 100", NO_ARGS, ConformanceFixtures::progress),
                tool("test_sampling", "Asks the client's model", schema(Map.of("prompt",
                        Map.of("type", "string", "description", "The prompt to send to the LLM")), "prompt"), (ex, req) -> {
                    String prompt = String.valueOf(req.arguments().get("prompt"));
                    CreateMessageResult r = ex.createMessage(CreateMessageRequest.builder(
                            List.of(SamplingMessage.builder(Role.USER, text(prompt)).build()), 100).build());
                    String answer = r.content() instanceof TextContent t ? t.text() : String.valueOf(r.content());
                    return ok(text("LLM response: " + answer));
                }),
                tool("test_elicitation", "Asks the user", schema(Map.of("message",
                        Map.of("type", "string", "description", "The message to show the user")), "message"), (ex, req) -> {
                    Map<String, Object> requested = schema(ordered(
                            "username", Map.of("type", "string", "description", "User's response"),
                            "email", Map.of("type", "string", "description", "User's email address")), "username", "email");
                    return elicit(ex, String.valueOf(req.arguments().get("message")), requested, "User response: ");
                }),
                tool("test_elicitation_sep1034_defaults", "Elicitation with a default for every primitive type", NO_ARGS,
                        (ex, req) -> elicit(ex, "Please provide your information with defaults", schema(ordered(
                                "name", Map.of("type", "string", "default", "John Doe"),
                                "age", Map.of("type", "integer", "default", 30),
                                "score", Map.of("type", "number", "default", 95.5),
                                "status", Map.of("type", "string", "enum", List.of("active", "inactive", "pending"), "default", "active"),
                                "verified", Map.of("type", "boolean", "default", true)),
                                "name", "age", "score", "status", "verified"), "Elicitation completed: ")),
                tool("test_elicitation_sep1330_enums", "Elicitation with the five enum forms", NO_ARGS,
                        (ex, req) -> elicit(ex, "Select your preferences", schema(ordered(
                                "untitledSingle", Map.of("type", "string", "enum", List.of("option1", "option2", "option3")),
                                "titledSingle", Map.of("type", "string", "oneOf", List.of(
                                        Map.of("const", "value1", "title", "First Option"),
                                        Map.of("const", "value2", "title", "Second Option"),
                                        Map.of("const", "value3", "title", "Third Option"))),
                                "legacyEnum", Map.of("type", "string", "enum", List.of("opt1", "opt2", "opt3"),
                                        "enumNames", List.of("Option One", "Option Two", "Option Three")),
                                "untitledMulti", Map.of("type", "array", "items",
                                        Map.of("type", "string", "enum", List.of("option1", "option2", "option3"))),
                                "titledMulti", Map.of("type", "array", "items", Map.of("anyOf", List.of(
                                        Map.of("const", "value1", "title", "First Choice"),
                                        Map.of("const", "value2", "title", "Second Choice"),
                                        Map.of("const", "value3", "title", "Third Choice"))))),
                                "untitledSingle", "titledSingle", "legacyEnum", "untitledMulti", "titledMulti"),
                                "Elicitation completed: ")),
                tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", jsonSchema202012(),
                        (ex, req) -> ok(text("ok"))));
    }

    /**
     * The json-schema-2020-12 scenario's input schema: {@code $schema}, {@code $defs} with an {@code $anchor},
     * a {@code $ref}, {@code allOf}/{@code anyOf}, {@code if}/{@code then}/{@code else} and
     * {@code additionalProperties: false}, each of which must reach the client as written (SEP-1613, SEP-2106).
     */
    static Map<String, Object> jsonSchema202012() {
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("$schema", "https://json-schema.org/draft/2020-12/schema");
        s.put("type", "object");
        s.put("$defs", Map.of("address", ordered("$anchor", "addressDef", "type", "object", "properties",
                ordered("street", Map.of("type", "string"), "city", Map.of("type", "string")))));
        s.put("properties", ordered("name", Map.of("type", "string"), "address", Map.of("$ref", "#/$defs/address"),
                "contactMethod", Map.of("type", "string", "enum", List.of("phone", "email")),
                "phone", Map.of("type", "string"), "email", Map.of("type", "string")));
        s.put("allOf", List.of(Map.of("anyOf", List.of(Map.of("required", List.of("phone")), Map.of("required", List.of("email"))))));
        s.put("if", Map.of("properties", Map.of("contactMethod", Map.of("const", "phone")), "required", List.of("contactMethod")));
        s.put("then", Map.of("required", List.of("phone")));
        s.put("else", Map.of("required", List.of("email")));
        s.put("additionalProperties", false);
        return s;
    }

    private static CallToolResult progress(McpSyncServerExchange ex, CallToolRequest req) {
        Object token = req.meta() == null ? null : req.meta().get("progressToken");
        if (token == null) return ok(text("Tool execution completed without progress"));
        for (double p : new double[] {0, 50, 100}) {
            ex.progressNotification(ProgressNotification.builder(token, p).total(100.0).build());
        }
        return ok(text("Tool execution completed with progress"));
    }

    private static CallToolResult elicit(McpSyncServerExchange ex, String message, Map<String, Object> requested,
            String prefix) {
        ElicitResult r = ex.createElicitation(ElicitFormRequest.builder(message, requested).build());
        return ok(text(prefix + "action=" + r.action() + ", content=" + r.content()));
    }

    static List<SyncResourceSpecification> resources() {
        return List.of(
                new SyncResourceSpecification(Resource.builder("test://static-text", "Static Text Resource")
                        .description("A static text resource").mimeType("text/plain").build(),
                        (ex, req) -> ReadResourceResult.builder(List.of(TextResourceContents
                                .builder("test://static-text", "This is the content of the static text resource.")
                                .mimeType("text/plain").build())).build()),
                new SyncResourceSpecification(Resource.builder("test://static-binary", "Static Binary Resource")
                        .description("A static binary resource").mimeType("image/png").build(),
                        (ex, req) -> ReadResourceResult.builder(List.of(BlobResourceContents
                                .builder("test://static-binary", PNG).mimeType("image/png").build())).build()),
                new SyncResourceSpecification(Resource.builder("test://watched-resource", "Watched Resource")
                        .description("A resource that can be subscribed to").mimeType("text/plain").build(),
                        (ex, req) -> ReadResourceResult.builder(List.of(TextResourceContents
                                .builder("test://watched-resource", "This is a watched resource content.")
                                .mimeType("text/plain").build())).build()));
    }

    static List<SyncResourceTemplateSpecification> templates() {
        return List.of(new SyncResourceTemplateSpecification(
                ResourceTemplate.builder("test://template/{id}/data", "Template Resource")
                        .description("A resource template with one parameter").mimeType("application/json").build(),
                (ex, req) -> {
                    String id = req.uri().replaceAll("^test://template/(.+)/data$", "$1");
                    String json = "{\"id\":\"" + id + "\",\"templateTest\":true,\"data\":\"Data for ID: " + id + "\"}";
                    return ReadResourceResult.builder(List.of(TextResourceContents.builder(req.uri(), json)
                            .mimeType("application/json").build())).build();
                }));
    }

    static List<SyncPromptSpecification> prompts() {
        return List.of(
                new SyncPromptSpecification(Prompt.builder("test_simple_prompt").description("A simple prompt")
                        .arguments(List.of()).build(),
                        (ex, req) -> GetPromptResult.builder(List.of(user(text("This is a simple prompt for testing."))))
                                .build()),
                new SyncPromptSpecification(Prompt.builder("test_prompt_with_arguments").description("A prompt with arguments")
                        .arguments(List.of(
                                PromptArgument.builder("arg1").description("First test argument").required(true).build(),
                                PromptArgument.builder("arg2").description("Second test argument").required(true).build()))
                        .build(),
                        (ex, req) -> GetPromptResult.builder(List.of(user(text("Prompt with arguments: arg1='"
                                + req.arguments().get("arg1") + "', arg2='" + req.arguments().get("arg2") + "'"))))
                                .build()),
                new SyncPromptSpecification(Prompt.builder("test_prompt_with_embedded_resource")
                        .description("A prompt with an embedded resource")
                        .arguments(List.of(PromptArgument.builder("resourceUri").description("URI of the resource to embed")
                                .required(true).build()))
                        .build(),
                        (ex, req) -> GetPromptResult.builder(List.of(
                                user(embedded(String.valueOf(req.arguments().get("resourceUri")),
                                        "Embedded resource content for testing.", "text/plain")),
                                user(text("Please process the embedded resource above.")))).build()),
                new SyncPromptSpecification(Prompt.builder("test_prompt_with_image").description("A prompt with an image")
                        .arguments(List.of()).build(),
                        (ex, req) -> GetPromptResult.builder(List.of(
                                user(ImageContent.builder(PNG, "image/png").build()),
                                user(text("Please analyze the image above.")))).build()));
    }

    static List<SyncCompletionSpecification> completions() {
        return List.of(new SyncCompletionSpecification(new PromptReference("test_prompt_with_arguments"),
                (ex, req) -> new CompleteResult(new CompleteResult.CompleteCompletion(List.of(), 0, false))));
    }

    private static SyncToolSpecification tool(String name, String description, Map<String, Object> inputSchema,
            BiFunction<McpSyncServerExchange, CallToolRequest, CallToolResult> handler) {
        return SyncToolSpecification.builder()
                .tool(Tool.builder(name, inputSchema).description(description).build())
                .callHandler(handler)
                .build();
    }

    private static CallToolResult ok(Content... content) {
        return CallToolResult.builder().content(List.of(content)).isError(false).build();
    }

    private static TextContent text(String s) {
        return TextContent.builder(s).build();
    }

    private static EmbeddedResource embedded(String uri, String text, String mimeType) {
        return EmbeddedResource.builder(TextResourceContents.builder(uri, text).mimeType(mimeType).build()).build();
    }

    private static PromptMessage user(Content content) {
        return PromptMessage.builder(Role.USER, content).build();
    }

    private static Map<String, Object> schema(Map<String, Object> properties, String... required) {
        return Map.of("type", "object", "properties", properties, "required", List.of(required));
    }

    /** Property order matters to humans reading an elicitation form; Map.of would shuffle it. */
    private static Map<String, Object> ordered(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i + 1 < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }
}
