package dev.codeexec.http;

import dev.codeexec.agent.Agent;
import dev.codeexec.agent.ChatEvents;
import dev.codeexec.agent.ChatException;
import dev.codeexec.auth.Principal;
import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The chat agent over REST (docs/chat.md): {@code POST /api/chat} (an answer, as server-sent events with
 * {@code Accept: text/event-stream}, else the final object as JSON), {@code GET /api/chat} (the chat's state and
 * this tenant's conversations), {@code GET /api/chat/tools?mode=}, {@code GET} and {@code DELETE
 * /api/chat/{conversation}}. Always as the key's own tenant: a conversation is one tenant's, and another's is not
 * found. A client that goes away stops its answer (the running tool call is cancelled).
 */
final class ChatApi {

    private static final Logger LOG = LoggerFactory.getLogger(ChatApi.class);
    static final String PATH = JsonErrors.API_PATH + "/chat";
    private static final Pattern ROUTE = Pattern.compile("^" + Pattern.quote(PATH) + "(?:/([A-Za-z0-9_-]{1,80}))?/?$");
    /** The largest request body: a message of 64 KiB characters and a seed's history, in UTF-8. */
    static final long MAX_BODY = 4L << 20;

    private final Agent agent;
    private final Bodies bodies;

    ChatApi(Agent agent, Bodies bodies) {
        this.agent = agent;
        this.bodies = bodies;
    }

    static boolean handles(String uri) {
        return uri.equals(PATH) || uri.startsWith(PATH + "/");
    }

    void handle(String method, Principal who, HttpServletRequest req, HttpServletResponse resp) throws IOException {
        Matcher m = ROUTE.matcher(req.getRequestURI());
        if (!m.matches()) throw new ApiException(404, "not_found", "no such API route");
        String id = m.group(1);
        try {
            if (id == null) {
                switch (method) {
                    case "GET" -> ApiServlet.json(resp, 200, agent.list(who.tenant()));
                    case "POST" -> answer(who, req, resp);
                    default -> throw new ApiException(405, "method_not_allowed", "use GET or POST on " + PATH);
                }
            } else if (id.equals("tools")) {
                if (!method.equals("GET")) throw new ApiException(405, "method_not_allowed", "use GET on " + PATH + "/tools");
                String mode = ApiRoute.query(req.getQueryString()).getOrDefault("mode", "code");
                ApiServlet.json(resp, 200, agent.tools(who, mode));
            } else {
                switch (method) {
                    case "GET" -> ApiServlet.json(resp, 200, agent.get(who.tenant(), id)
                            .orElseThrow(() -> new ApiException(404, "not_found", "no conversation '" + id + "' here")));
                    case "DELETE" -> {
                        if (!agent.delete(who.tenant(), id)) throw new ApiException(404, "not_found", "no conversation '" + id + "' here");
                        resp.setStatus(204);
                    }
                    default -> throw new ApiException(405, "method_not_allowed", "use GET or DELETE on a conversation");
                }
            }
        } catch (ChatException e) {
            if (resp.isCommitted()) throw new IOException("chat response aborted after commit: " + e.reason());
            error(resp, e);
        }
    }

    private void answer(Principal who, HttpServletRequest req, HttpServletResponse resp) throws IOException {
        Agent.Request request = request(req, resp);
        if (!request.stream()) {
            Map<String, Object> out = agent.answer(who, request, ChatEvents.NONE, new Agent.Turn());
            ApiServlet.json(resp, 200, out);
            return;
        }
        Stream sse = new Stream(resp);
        Agent.Turn turn = new Agent.Turn();
        sse.onGone = turn::cancel;
        try {
            Map<String, Object> out = agent.answer(who, request, sse, turn);
            sse.send("done", out);
        } catch (ChatException e) {
            if (!sse.started) {
                error(resp, e);
                return;
            }
            Map<String, Object> err = new LinkedHashMap<>();
            err.put("error", e.reason());
            err.put("message", e.getMessage());
            e.conversation().ifPresent(c -> err.put("conversation", c));
            sse.send("error", err);
        }
    }

    /** The request's parts; the agent checks their values. */
    private Agent.Request request(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        JsonNode body;
        try (Bodies.Body b = bodies.read(req, MAX_BODY, "the chat's body limit of 4 MiB")) {
            body = JsonErrors.JSON.readTree(b.bytes());
        } catch (JacksonException e) {
            throw ApiException.badRequest("the body is not valid JSON");
        } catch (Bodies.Refused e) {
            throw e.api(resp);
        }
        if (body == null || !body.isObject()) throw ApiException.badRequest("the body must be a JSON object");
        Optional<String> message = text(body, "message");
        JsonNode conv = body.get("conversation");
        Optional<String> id = Optional.empty();
        Optional<JsonNode> history = Optional.empty();
        if (conv != null && !conv.isNull()) {
            if (conv.isString()) id = Optional.of(conv.asString());
            else if (conv.isArray()) history = Optional.of(conv);
            else throw ApiException.badRequest("'conversation' must be a conversation's id or a history array");
        }
        String accept = req.getHeader("Accept");
        boolean stream = accept != null && accept.contains("text/event-stream");
        return new Agent.Request(message, id, history, text(body, "mode"), text(body, "workspace"), stream);
    }

    private static Optional<String> text(JsonNode body, String field) {
        JsonNode n = body.get(field);
        if (n == null || n.isNull()) return Optional.empty();
        if (!n.isString()) throw ApiException.badRequest("'" + field + "' must be a string");
        return Optional.of(n.asString());
    }

    private static void error(HttpServletResponse resp, ChatException e) throws IOException {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("error", e.reason());
        body.put("message", e.getMessage());
        e.conversation().ifPresent(c -> body.put("conversation", c));
        e.retryAfterSeconds().filter(s -> s.matches("\\d{1,6}")).ifPresent(s -> resp.setHeader("Retry-After", s));
        ApiServlet.json(resp, e.status() == 499 ? 503 : e.status(), body);
    }

    /**
     * The answer as server-sent events. Writes come from the answering thread and from a running program's
     * output, so they are serialised; a write that fails (the client went away) stops the answer once.
     */
    private static final class Stream implements ChatEvents {
        private final HttpServletResponse resp;
        private ServletOutputStream out;
        private boolean started;
        private boolean gone;
        private Runnable onGone = () -> { };

        Stream(HttpServletResponse resp) {
            this.resp = resp;
        }

        synchronized void send(String event, Object data) {
            if (gone) return;
            try {
                if (!started) {
                    resp.setStatus(200);
                    resp.setContentType("text/event-stream");
                    resp.setCharacterEncoding(StandardCharsets.UTF_8.name());
                    resp.setHeader("Cache-Control", "no-store");
                    resp.setHeader("X-Accel-Buffering", "no");
                    out = resp.getOutputStream();
                    started = true;
                }
                out.write(("event: " + event + "\ndata: " + JsonErrors.JSON.writeValueAsString(data) + "\n\n")
                        .getBytes(StandardCharsets.UTF_8));
                out.flush();
            } catch (IOException e) {
                gone = true;
                LOG.debug("chat stream closed by the client: {}", e.toString());
                onGone.run();
            }
        }

        @Override
        public void conversation(Map<String, Object> info) {
            send("conversation", info);
        }

        @Override
        public void round(int round) {
            send("round", Map.of("round", round));
        }

        @Override
        public void text(int round, String text) {
            send("text", Map.of("round", round, "text", text));
        }

        @Override
        public void toolCall(int round, String id, String tool, Map<String, Object> input) {
            send("tool_call", Map.of("round", round, "id", id, "tool", tool, "input", input));
        }

        @Override
        public void toolOutput(String id, String stream, String text) {
            send("tool_output", Map.of("id", id, "stream", stream, "text", text));
        }

        @Override
        public void toolResult(Map<String, Object> record) {
            send("tool_result", record);
        }
    }
}
