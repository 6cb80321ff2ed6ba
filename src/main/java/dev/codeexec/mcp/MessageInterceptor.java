package dev.codeexec.mcp;

import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.node.ObjectNode;

import java.util.Optional;

/**
 * Looks at every JSON-RPC message from a client before the SDK does (the HTTP filter and the stdio input stream
 * both call it), because the SDK 2.1.0 gives a tool handler neither the JSON-RPC id of its call nor any way to
 * hear {@code notifications/cancelled}.
 *
 * <ul>
 *   <li>{@code notifications/cancelled}: cancels the run registered under (session, params.requestId).</li>
 *   <li>{@code tools/call}: writes the call's id and session into {@code params._meta} under keys of our own,
 *   always overwriting what a client may have put there, so the handler can register its run for cancellation.</li>
 * </ul>
 * Everything else passes through untouched.
 */
public final class MessageInterceptor {

    static final String REQUEST_ID_META = "dev.codeexec/requestId";
    static final String SESSION_META = "dev.codeexec/session";

    private static final JsonMapper JSON = JsonMapper.builder().build();

    private final RunRegistry registry;

    public MessageInterceptor(RunRegistry registry) {
        this.registry = registry;
    }

    /**
     * Returns the message to hand to the SDK: the same text, or the text with our meta keys added.
     *
     * @throws JacksonException when the text is not JSON at all
     */
    public String intercept(String session, String message) {
        JsonNode node = JSON.readTree(message);
        if (!(node instanceof ObjectNode msg)) return message;
        String method = msg.path("method").asString("");
        JsonNode params = msg.get("params");
        switch (method) {
            case "notifications/cancelled" -> {
                requestId(params == null ? null : params.get("requestId")).ifPresent(id -> registry.cancel(session, id));
                return message;
            }
            case "tools/call" -> {
                Optional<String> id = requestId(msg.get("id"));
                if (id.isEmpty() || !(params instanceof ObjectNode p)) return message;
                JsonNode meta = p.get("_meta");
                ObjectNode m = meta instanceof ObjectNode o ? o : p.putObject("_meta");
                m.put(REQUEST_ID_META, id.get());
                m.put(SESSION_META, session);
                return JSON.writeValueAsString(msg);
            }
            default -> {
                return message;
            }
        }
    }

    /** JSON-RPC ids are strings or numbers; both become the same text form on both sides. */
    private static Optional<String> requestId(JsonNode id) {
        if (id == null || id.isNull()) return Optional.empty();
        if (id.isString()) return Optional.of(id.stringValue());
        if (id.isNumber()) return Optional.of(id.asString());
        return Optional.empty();
    }
}
