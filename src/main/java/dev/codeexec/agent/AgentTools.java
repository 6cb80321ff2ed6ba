package dev.codeexec.agent;

import dev.langchain4j.agent.tool.ToolSpecification;
import dev.langchain4j.model.chat.request.json.JsonObjectSchema;
import dev.langchain4j.model.chat.request.json.JsonRawSchema;
import dev.langchain4j.model.chat.request.json.JsonSchemaElement;
import tools.jackson.databind.json.JsonMapper;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;

/**
 * The tools of one answer in one mode, for one caller: what the model is offered, and the calls it asks for.
 * {@link CodeModeTools} (this server's own tools, in-process) and {@link DirectModeTools} (the upstream tools one by
 * one) are the two. Closed when the answer ends.
 */
interface AgentTools extends AutoCloseable {

    /** The longest tool result given to the model: past it, its head and tail with a marker between. */
    int MAX_RESULT_CHARS = 32 * 1024;

    /** A tool call's end: the text the model gets, whether it failed, and the images it made (for people). */
    record Outcome(String text, boolean isError, List<Map<String, String>> images) {
        static Outcome error(String text) {
            return new Outcome(text, true, List.of());
        }
    }

    /** What the model is offered: name, description, input schema (as JSON Schema maps). */
    List<Map<String, Object>> describe();

    /** The system prompt's part about these tools. */
    String instructions();

    /**
     * Runs one call. {@code callId} names it (for cancel and the run's audit line); {@code output} hears a running
     * program's output as (stream, text). Never throws for a tool's failure: that is an error outcome the model sees.
     */
    Outcome call(String tool, Map<String, Object> arguments, String callId, BiConsumer<String, String> output);

    /** Stops the call that is running, if any (the request went away). */
    void cancel();

    @Override
    void close();

    /** The offered tools as LangChain4j's specifications (each schema's properties passed on as they are). */
    default List<ToolSpecification> specifications() {
        List<ToolSpecification> out = new ArrayList<>();
        for (Map<String, Object> t : describe()) {
            @SuppressWarnings("unchecked")
            Map<String, Object> schema = (Map<String, Object>) t.get("inputSchema");
            out.add(ToolSpecification.builder().name((String) t.get("name")).description((String) t.get("description"))
                    .parameters(parameters(schema)).build());
        }
        return out;
    }

    /** A JSON Schema object as LangChain4j's: each property's schema raw, the required list kept. */
    static JsonObjectSchema parameters(Map<String, Object> schema) {
        JsonMapper json = JsonMapper.shared();
        JsonObjectSchema.Builder b = JsonObjectSchema.builder();
        Map<String, JsonSchemaElement> props = new LinkedHashMap<>();
        if (schema != null && schema.get("properties") instanceof Map<?, ?> p)
            for (Map.Entry<?, ?> e : p.entrySet()) props.put(String.valueOf(e.getKey()), JsonRawSchema.from(json.writeValueAsString(e.getValue())));
        b.addProperties(props);
        if (schema != null && schema.get("required") instanceof List<?> r && !r.isEmpty())
            b.required(r.stream().map(String::valueOf).toList());
        return b.build();
    }

    /** {@code text} at most {@link #MAX_RESULT_CHARS}: its head and tail, and how much was left out. */
    static String capped(String text) {
        if (text.length() <= MAX_RESULT_CHARS) return text;
        int half = MAX_RESULT_CHARS / 2;
        return text.substring(0, half) + "\n[... " + (text.length() - 2 * half) + " characters left out ...]\n"
                + text.substring(text.length() - half);
    }
}
