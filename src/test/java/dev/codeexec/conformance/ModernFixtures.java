package dev.codeexec.conformance;

import dev.codeexec.mcp.McpTasks;
import io.modelcontextprotocol.json.McpJsonDefaults;
import io.modelcontextprotocol.json.McpJsonMapper;
import io.modelcontextprotocol.modern.McpException;
import io.modelcontextprotocol.modern.McpSchema;
import io.modelcontextprotocol.modern.server.McpAsyncResponse;
import io.modelcontextprotocol.modern.server.McpRequestContext;
import io.modelcontextprotocol.modern.server.McpSyncResponse;
import io.modelcontextprotocol.modern.server.feature.McpAsyncTool;
import io.modelcontextprotocol.modern.server.feature.McpSyncPrompt;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * The fixtures of revision 2026-07-28's scenarios that 2025-11-25 has no form for (conformance 0.2.0-alpha.12):
 * results that ask for input (SEP-2322: test_input_required_result_*), the tasks extension's tools (SEP-2663: greet,
 * slow_compute, failing_job, protocol_error_job, confirm_delete, multi_input, test_tool_with_task, run through the
 * server's own {@link McpTasks}) and the stateless lifecycle's diagnostic tools (SEP-2575). Test scope only.
 */
final class ModernFixtures {

    private static final McpJsonMapper JSON = McpJsonDefaults.getMapper();
    private static final Map<String, Object> NO_ARGS = Map.of("type", "object", "properties", Map.of());

    private ModernFixtures() {
    }

    static List<McpAsyncTool> tools(McpTasks tasks) {
        return List.of(
                // ---- tasks (SEP-2663)
                sync("greet", "Says hello (never a task)", props("name", "string"), (ctx, req) ->
                        text("Hello, " + req.arguments().getOrDefault("name", "world") + "!")),
                sync("slow_compute", "Sleeps `seconds` then answers (a task for a client with the tasks extension)",
                        props("seconds", "number", "label", "string"), (ctx, req) -> taskOrNow(tasks, ctx, input -> {
                            double seconds = req.arguments().get("seconds") instanceof Number n ? n.doubleValue() : 0;
                            Thread.sleep((long) (seconds * 1000));
                            return map(text("computed " + req.arguments().get("label") + " after " + seconds + " s"));
                        })),
                McpAsyncTool.of(tool("failing_job", "Fails as a tool after a second (a task; tasks required)", NO_ARGS),
                        McpTasks.REQUIRED, (ctx, req) -> now(() -> tasks.start(ctx, input -> {
                            Thread.sleep(1000);
                            return map(McpSchema.CallToolResult.builder().addContent(McpSchema.TextContent.builder(
                                    "the job failed").build()).isError(true).build());
                        }))),
                sync("protocol_error_job", "Ends in a protocol error (a task)", NO_ARGS, (ctx, req) ->
                        taskOrNow(tasks, ctx, input -> {
                            Thread.sleep(200);
                            throw new McpException(McpSchema.ErrorCodes.INTERNAL_ERROR, "internal failure of the job");
                        })),
                sync("confirm_delete", "Asks to confirm, then 'deletes' (a task)", props("filename", "string"),
                        (ctx, req) -> taskOrNow(tasks, ctx, input -> {
                            Map<String, Object> a = input.ask(Map.of("confirm", elicit("Delete "
                                    + req.arguments().get("filename") + "?", "confirm", "boolean")));
                            return map(text(accepted(a.get("confirm")) ? "deleted " + req.arguments().get("filename")
                                    : "kept " + req.arguments().get("filename")));
                        })),
                sync("multi_input", "Asks two questions at once (a task)", NO_ARGS, (ctx, req) ->
                        taskOrNow(tasks, ctx, input -> {
                            Map<String, Object> a = input.ask(ordered("name", elicit("Your name?", "name", "string"),
                                    "confirm", elicit("Go on?", "confirm", "boolean")));
                            return map(text("answers: " + a.keySet()));
                        })),
                McpAsyncTool.of(tool("test_tool_with_task", "Asks for a name, then runs as a task", NO_ARGS),
                        McpTasks.REQUIRED, (ctx, req) -> now(() -> {
                            Object answer = req.inputResponses() == null ? null : req.inputResponses().get("user_name");
                            if (!(answer instanceof Map<?, ?> m) || !(m.get("content") instanceof Map<?, ?> c)
                                    || !(c.get("name") instanceof String name))
                                return inputRequired(Map.of("user_name", elicit("What is your name?", "name", "string")), null);
                            return tasks.start(ctx, input -> map(text("Hello, " + name + "! (from the task)")));
                        })),
                // ---- results that ask for input (SEP-2322)
                sync("test_input_required_result_elicitation", "Asks the user's name", NO_ARGS, (ctx, req) ->
                        answered(req, "user_name", "What is your name?", "name", "string",
                                a -> text("Hello, " + content(a).get("name") + "!"))),
                sync("test_input_required_result_sampling", "Asks the client's model", NO_ARGS, (ctx, req) -> {
                    if (response(req, "capital_question") instanceof Map<?, ?> a)
                        return text("the model said: " + (a.get("content") instanceof Map<?, ?> c ? c.get("text") : a));
                    return inputRequired(Map.of("capital_question", sampling("What is the capital of France?", 100)), null);
                }),
                sync("test_input_required_result_list_roots", "Asks the client's roots", NO_ARGS, (ctx, req) -> {
                    if (response(req, "client_roots") instanceof Map<?, ?> a)
                        return text("roots: " + a.get("roots"));
                    return inputRequired(Map.of("client_roots", roots()), null);
                }),
                sync("test_input_required_result_request_state", "Keeps its state in requestState", NO_ARGS, (ctx, req) -> {
                    if (response(req, "confirm") != null && "round-1".equals(req.requestState())) return text("state-ok");
                    return inputRequired(Map.of("confirm", elicit("Please confirm", "ok", "boolean")), "round-1");
                }),
                sync("test_input_required_result_tampered_state", "Keeps its state in requestState (sealed)", NO_ARGS,
                        (ctx, req) -> {
                            if (response(req, "confirm") != null) return text("state " + req.requestState());
                            return inputRequired(Map.of("confirm", elicit("Please confirm", "ok", "boolean")), "sealed-1");
                        }),
                sync("test_input_required_result_multiple_inputs", "Asks three things at once", NO_ARGS, (ctx, req) -> {
                    if (response(req, "user_name") != null && response(req, "greeting") != null
                            && response(req, "client_roots") != null && "multi-1".equals(req.requestState()))
                        return text("all three answered");
                    return inputRequired(ordered("user_name", elicit("What is your name?", "name", "string"),
                            "greeting", sampling("Generate a greeting", 50), "client_roots", roots()), "multi-1");
                }),
                sync("test_input_required_result_multi_round", "Asks twice", NO_ARGS, (ctx, req) -> {
                    if ("round-2".equals(req.requestState()) && response(req, "step2") != null)
                        return text("name and colour: done");
                    if ("round-1".equals(req.requestState()) && response(req, "step1") != null)
                        return inputRequired(Map.of("step2", elicit("Step 2: What is your favorite color?", "color",
                                "string")), "round-2");
                    return inputRequired(Map.of("step1", elicit("Step 1: What is your name?", "name", "string")), "round-1");
                }),
                sync("test_input_required_result_capabilities", "Asks only what the client can answer", NO_ARGS, (ctx, req) -> {
                    if (req.inputResponses() != null && !req.inputResponses().isEmpty()) return text("answered");
                    Map<String, Object> ask = new LinkedHashMap<>();
                    McpSchema.ClientCapabilities c = ctx.clientCapabilities();
                    if (c != null && c.supportsElicitationForm()) ask.put("user_name", elicit("What is your name?", "name", "string"));
                    if (c != null && c.supportsSampling()) ask.put("greeting", sampling("Generate a greeting", 50));
                    if (c != null && c.supportsRoots()) ask.put("client_roots", roots());
                    return ask.isEmpty() ? text("nothing the client could answer") : inputRequired(ask, null);
                }),
                // ---- the stateless lifecycle's diagnostics (SEP-2575)
                McpAsyncTool.of(tool("test_missing_capability", "Needs the client's sampling", NO_ARGS),
                        McpSchema.ClientCapabilities.builder().sampling().build(), (ctx, req) -> now(() -> text("sampled"))),
                sync("test_streaming_elicitation", "Asks the user, streaming", NO_ARGS, (ctx, req) -> {
                    if (response(req, "user_name") instanceof Map<?, ?> a) return text("Hello, " + content(a).get("name") + "!");
                    return inputRequired(Map.of("user_name", elicit("What is your name?", "name", "string")), null);
                }),
                McpAsyncTool.of(tool("test_logging_tool", "Logs at info while it runs, if the request asked for logs",
                        NO_ARGS), (ctx, req) -> Mono.just(McpAsyncResponse.streaming(notifier ->
                        (ctx.meta() != null && ctx.meta().get(McpSchema.MetaKeys.LOG_LEVEL) != null
                                ? notifier.notify("notifications/message", Map.of("level", "info", "logger", "fixture",
                                "data", "a log line")) : Mono.<Void>empty())
                                .then(Mono.just((McpSchema.CallToolOutcome) text("logged")))))),
                // ---- a parameter mirrored in a header (SEP-2243)
                sync("test_custom_header", "Echoes `region`, which the client also sends as Mcp-Param-Region",
                        Map.of("type", "object", "properties", Map.of("region", Map.of("type", "string",
                                "x-mcp-header", "Region")), "required", List.of("region")),
                        (ctx, req) -> text("region " + req.arguments().get("region")))
        );
    }

    static List<McpSyncPrompt> prompts() {
        return List.of(McpSyncPrompt.of(McpSchema.Prompt.builder("test_input_required_result_prompt")
                .description("A prompt that asks the user first").build(), (ctx, req) -> {
            Object a = req.inputResponses() == null ? null : req.inputResponses().get("user_context");
            if (!(a instanceof Map<?, ?> m)) return McpSyncResponse.result(JSON.convertValue(Map.of("resultType",
                    "input_required", "inputRequests", Map.of("user_context", elicit("What context should the prompt use?",
                            "context", "string"))), McpSchema.InputRequiredResult.class));
            return McpSyncResponse.result(JSON.convertValue(Map.of("description", "with context",
                    "messages", List.of(Map.of("role", "user", "content", Map.of("type", "text",
                            "text", "Context: " + content(m).get("context"))))), McpSchema.GetPromptResult.class));
        }));
    }

    // ------------------------------------------------------------------------------------------------------------

    /** A tool whose handler may block: it runs on a worker thread, not the request's. */
    private static McpAsyncTool sync(String name, String description, Map<String, Object> schema,
            java.util.function.BiFunction<McpRequestContext, McpSchema.CallToolRequest, McpSchema.CallToolOutcome> handler) {
        return McpAsyncTool.of(tool(name, description, schema), (ctx, req) -> now(() -> handler.apply(ctx, req)));
    }

    private static Mono<McpAsyncResponse<McpSchema.CallToolOutcome>> now(Callable<McpSchema.CallToolOutcome> c) {
        return Mono.fromCallable(c).subscribeOn(Schedulers.boundedElastic()).map(McpAsyncResponse::result);
    }

    /** A task for a client with the extension; otherwise run here and now (input cannot be asked for then). */
    private static McpSchema.CallToolOutcome taskOrNow(McpTasks tasks, McpRequestContext ctx, McpTasks.Body body) {
        if (McpTasks.declared(ctx)) return tasks.start(ctx, body);
        try {
            return JSON.convertValue(body.run(requests -> {
                throw McpException.missingClientCapability(McpTasks.REQUIRED);
            }), McpSchema.CallToolResult.class);
        } catch (McpException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private static McpSchema.Tool tool(String name, String description, Map<String, Object> schema) {
        return McpSchema.Tool.builder(name, schema).description(description).build();
    }

    private static Map<String, Object> props(String... nameType) {
        Map<String, Object> p = new LinkedHashMap<>();
        for (int i = 0; i < nameType.length; i += 2) p.put(nameType[i], Map.of("type", nameType[i + 1]));
        return Map.of("type", "object", "properties", p);
    }

    private static McpSchema.CallToolResult text(String s) {
        return McpSchema.CallToolResult.builder().addContent(McpSchema.TextContent.builder(s).build()).build();
    }

    private static Map<?, ?> map(Object o) {
        return JSON.convertValue(o, Map.class);
    }

    private static Map<String, Object> elicit(String message, String field, String type) {
        return Map.of("method", "elicitation/create", "params", Map.of("message", message, "requestedSchema",
                Map.of("type", "object", "properties", Map.of(field, Map.of("type", type)), "required", List.of(field))));
    }

    private static Map<String, Object> sampling(String text, int maxTokens) {
        return Map.of("method", "sampling/createMessage", "params", Map.of("messages", List.of(Map.of("role", "user",
                "content", Map.of("type", "text", "text", text))), "maxTokens", maxTokens));
    }

    private static Map<String, Object> roots() {
        return Map.of("method", "roots/list", "params", Map.of());
    }

    private static McpSchema.InputRequiredResult inputRequired(Map<String, ?> requests, String state) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("resultType", "input_required");
        m.put("inputRequests", requests);
        if (state != null) m.put("requestState", state);
        return JSON.convertValue(m, McpSchema.InputRequiredResult.class);
    }

    /** One round's answer: done when the client answered {@code key} in shape, else (again) the question. */
    private static McpSchema.CallToolOutcome answered(McpSchema.CallToolRequest req, String key, String message,
            String field, String type, java.util.function.Function<Map<?, ?>, McpSchema.CallToolOutcome> done) {
        if (response(req, key) instanceof Map<?, ?> a && content(a).get(field) != null) return done.apply(a);
        return inputRequired(Map.of(key, elicit(message, field, type)), null);
    }

    private static Object response(McpSchema.CallToolRequest req, String key) {
        return req.inputResponses() == null ? null : req.inputResponses().get(key);
    }

    private static Map<?, ?> content(Map<?, ?> answer) {
        return answer.get("content") instanceof Map<?, ?> c ? c : Map.of();
    }

    private static boolean accepted(Object answer) {
        return answer instanceof Map<?, ?> m && "accept".equals(m.get("action"));
    }

    @SuppressWarnings("unchecked")
    private static <V> Map<String, V> ordered(Object... kv) {
        Map<String, V> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], (V) kv[i + 1]);
        return m;
    }
}
