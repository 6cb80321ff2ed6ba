package dev.codeexec.mcp;

import dev.codeexec.auth.Principal;
import dev.codeexec.egress.EgressPolicy;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.node.ObjectNode;

import java.util.Map;
import java.util.Optional;

/**
 * Looks at every JSON-RPC message from a client before the SDK does (the HTTP filter and the stdio input stream
 * both call it), because the SDK (2.1.0, 2.2.0) gives a tool handler neither the JSON-RPC id of its call nor any way to
 * hear {@code notifications/cancelled}.
 *
 * <ul>
 *   <li>{@code notifications/cancelled}: cancels the run registered under (session, params.requestId).</li>
 *   <li>{@code tools/call}: writes the call's id and session into {@code params._meta} under keys of our own,
 *   always overwriting what a client may have put there, so the handler can register its run for cancellation;
 *   over HTTP also the request's X-Request-Id (removed when there is none, so a client cannot plant one).</li>
 *   <li>every request with params (tools, resources, prompts, completions): writes the caller's tenant and admin
 *   flag, as authenticated at the edge, into {@code params._meta}, again overwriting whatever the client sent.
 *   Handlers read the tenant only from there ({@link #principalOf}).</li>
 * </ul>
 * Everything else passes through untouched.
 */
public final class MessageInterceptor {

    static final String REQUEST_ID_META = "dev.codeexec/requestId";
    static final String SESSION_META = "dev.codeexec/session";
    static final String TENANT_META = "dev.codeexec/tenant";
    static final String ADMIN_META = "dev.codeexec/admin";
    static final String EGRESS_META = "dev.codeexec/egress";
    /** The X-Request-Id of the HTTP request that carried a tools/call, for the run's audit line and log MDC. */
    static final String HTTP_REQUEST_ID_META = "dev.codeexec/httpRequestId";

    private static final JsonMapper JSON = JsonMapper.builder().build();

    private final RunRegistry registry;
    /** Whether a tenant may watch a resource (resources/subscribe); the SDK itself accepts any URI. */
    private final java.util.function.BiPredicate<String, String> mayWatch;

    public MessageInterceptor(RunRegistry registry) {
        this(registry, (tenant, uri) -> true);
    }

    /**
     * @param mayWatch (tenant, uri) → whether that tenant may subscribe to the resource: a subscription it may not
     *                 make is turned into one to a URI that never changes, so the answer is the same as for an
     *                 unknown resource and nothing about another tenant's resource reaches it
     */
    public MessageInterceptor(RunRegistry registry, java.util.function.BiPredicate<String, String> mayWatch) {
        this.registry = registry;
        this.mayWatch = mayWatch;
    }

    /** The URI a refused subscription is turned into: nothing is ever updated there. */
    static final String NOWHERE = "code-exec://nowhere";

    /**
     * Returns the message to hand to the SDK: the same text, or the text with our meta keys added.
     *
     * @throws JacksonException when the text is not JSON at all
     * @throws NotAMessage      when it is JSON but not an object
     */
    public String intercept(String session, Principal principal, String message) {
        return intercept(session, principal, null, message);
    }

    /**
     * As {@link #intercept(String, Principal, String)}, for a message that came in an HTTP request.
     *
     * @param httpRequestId the request's X-Request-Id, or null outside HTTP
     */
    public String intercept(String session, Principal principal, String httpRequestId, String message) {
        JsonNode node = JSON.readTree(message);
        if (!(node instanceof ObjectNode msg)) throw new NotAMessage();
        String method = msg.path("method").asString("");
        JsonNode params = msg.get("params");
        boolean request = msg.has("id") && !method.isEmpty();
        if (request && params instanceof ObjectNode p && !method.equals("tools/call")) {
            withPrincipal(p, principal);
            if (method.equals("resources/subscribe") && !mayWatch.test(principal.tenant(), p.path("uri").asString("")))
                p.put("uri", NOWHERE);
            return JSON.writeValueAsString(msg);
        }
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
                if (httpRequestId == null) m.remove(HTTP_REQUEST_ID_META);
                else m.put(HTTP_REQUEST_ID_META, httpRequestId);
                withPrincipal(p, principal);
                return JSON.writeValueAsString(msg);
            }
            default -> {
                return message;
            }
        }
    }

    private static void withPrincipal(ObjectNode params, Principal principal) {
        JsonNode meta = params.get("_meta");
        ObjectNode m = meta instanceof ObjectNode o ? o : params.putObject("_meta");
        m.put(TENANT_META, principal.tenant());
        m.put(ADMIN_META, principal.admin());
        // the tenant's own allow-list, or nothing (the server's): never what the client put there
        if (principal.egress().isPresent()) m.put(EGRESS_META, principal.egress().get().toString());
        else m.remove(EGRESS_META);
    }

    /**
     * The caller as the edge authenticated it, from a request's {@code _meta}; {@link Principal#DEFAULT} when
     * absent, which only happens for messages that did not pass through {@link #intercept} (in-process tests).
     */
    public static Principal principalOf(Map<String, Object> meta) {
        if (meta == null || !(meta.get(TENANT_META) instanceof String tenant)) return Principal.DEFAULT;
        Optional<EgressPolicy> egress = meta.get(EGRESS_META) instanceof String e ? Optional.of(EgressPolicy.parse(e)) : Optional.empty();
        return new Principal(tenant, Boolean.TRUE.equals(meta.get(ADMIN_META)), egress);
    }

    /** Valid JSON that is not a JSON-RPC message object ({@code null}, a number, an array: no batches since 2025-06-18). */
    public static final class NotAMessage extends RuntimeException {
        NotAMessage() {
            super("not a JSON-RPC message object", null, false, false);
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
