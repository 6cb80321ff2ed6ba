package dev.codeexec.agent;

import dev.codeexec.auth.Principal;
import dev.codeexec.codemode.CodeTools;
import dev.codeexec.codemode.DirectTools;
import dev.codeexec.config.Ids;
import dev.codeexec.mcp.InProcessTools;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.Workspaces;
import dev.langchain4j.agent.tool.ToolExecutionRequest;
import dev.langchain4j.agent.tool.ToolSpecification;
import dev.langchain4j.data.message.AiMessage;
import dev.langchain4j.data.message.ChatMessage;
import dev.langchain4j.data.message.SystemMessage;
import dev.langchain4j.data.message.ToolExecutionResultMessage;
import dev.langchain4j.data.message.UserMessage;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.time.Clock;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * The chat agent: answers a tenant's message in one of its conversations by calling the model and the tools it
 * asks for, round after round, until the model answers or LLM_MAX_ROUNDS is reached. The tools are this server's
 * own, as the calling tenant ({@link CodeModeTools}), or the upstream tools one by one ({@link DirectModeTools}).
 * The surfaces call {@link #answer}, {@link #list}, {@link #get}, {@link #delete} and {@link #tools}; docs/chat.md is
 * their contract.
 */
public final class Agent {

    private static final Logger AUDIT = LoggerFactory.getLogger("audit");
    private static final JsonMapper JSON = JsonMapper.shared();
    /** The longest message a request may carry. */
    public static final int MAX_MESSAGE_CHARS = 64 * 1024;
    static final List<String> MODES = List.of("code", "direct");

    private final ChatSettings settings;
    private final Optional<Model> model;
    private final ToolSource tools;
    private volatile Observer observer = (mode, outcome, rounds, toolCalls, in, out) -> { };
    private final Conversations conversations;
    private final Clock clock;

    /** Hears each answer's end, for metrics: its mode, outcome (answer, max_rounds or the error's word), counts. */
    @FunctionalInterface
    public interface Observer {
        void ended(String mode, String outcome, int rounds, int toolCalls, long inputTokens, long outputTokens);
    }

    /** Sets who hears each answer's end. */
    public Agent observedBy(Observer o) {
        observer = o;
        return this;
    }

    /** Where an answer's tools come from, by mode. */
    interface ToolSource {
        /**
         * The tools of one answer.
         *
         * @param conversation the conversation's id, or null for a listing
         * @throws ChatException a mode this server cannot serve
         */
        AgentTools open(Principal who, String mode, String conversation, String workspace);

        /** Whether direct mode has anything to offer (upstream servers are configured). */
        boolean direct();
    }

    Agent(ChatSettings settings, Optional<Model> model, ToolSource tools, Clock clock) {
        this.settings = settings;
        this.model = model;
        this.tools = tools;
        this.clock = clock;
        this.conversations = new Conversations(settings, clock);
    }

    /**
     * The agent of a server: its model from the configuration (none when LLM_MODEL is empty), this server's own
     * tools in code mode, the upstream tools one by one in direct mode.
     */
    public static Agent create(ChatSettings settings, InProcessTools own, Optional<CodeTools> codeTools) {
        ToolSource source = new ToolSource() {
            @Override
            public AgentTools open(Principal who, String mode, String conversation, String workspace) {
                if (mode.equals("direct")) {
                    CodeTools ct = codeTools.orElseThrow(() -> ChatException.badRequest("direct mode calls the upstream "
                            + "MCP servers' tools, and this server has none (UPSTREAM_MCP_FILE)"));
                    return new DirectModeTools(new DirectTools(ct), who.tenant(), "chat-" + Ids.hex(8));
                }
                return new CodeModeTools(own, codeTools, who, "chat:" + (conversation == null ? "-" : conversation), workspace);
            }

            @Override
            public boolean direct() {
                return codeTools.isPresent();
            }
        };
        return new Agent(settings, settings.enabled() ? Optional.of(new LangChainModel(settings)) : Optional.empty(),
                source, Clock.systemUTC());
    }

    public ChatSettings settings() {
        return settings;
    }

    /** A request to answer (docs/chat.md): each part as the client sent it, checked by {@link #answer}. */
    public record Request(Optional<String> message, Optional<String> conversation, Optional<JsonNode> history,
            Optional<String> mode, Optional<String> workspace, boolean stream) {
    }

    /** One answer in progress, so that the surface can stop it when its client goes away. */
    public static final class Turn {
        private volatile boolean cancelled;
        private volatile AgentTools tools;
        private volatile Thread thread;

        public void cancel() {
            cancelled = true;
            AgentTools t = tools;
            if (t != null) t.cancel();
            Thread th = thread;
            if (th != null) th.interrupt();
        }

        boolean cancelled() {
            return cancelled;
        }
    }

    /** The final object of an answer (docs/chat.md); throws {@link ChatException} naming the conversation kept. */
    public Map<String, Object> answer(Principal who, Request req, ChatEvents events, Turn turn) {
        Model m = model.orElseThrow(() -> new ChatException(503, "chat_off", ChatSettings.OFF));
        String mode = req.mode().orElse(null);
        if (mode != null && !MODES.contains(mode))
            throw ChatException.badRequest("mode must be 'code' or 'direct', got '" + cut(mode) + "'");
        req.workspace().ifPresent(w -> checkWorkspace(w));
        if (req.message().isPresent() && req.message().get().length() > MAX_MESSAGE_CHARS)
            throw ChatException.badRequest("the message is longer than " + MAX_MESSAGE_CHARS + " characters");
        if (req.message().isPresent() && req.message().get().isBlank()) throw ChatException.badRequest("the message is empty");
        Conversation c = conversation(who, req, mode);
        if (!c.claim()) throw new ChatException(409, "busy", "the conversation is answering another request").in(c.id);
        try {
            return answerIn(c, who, req, mode, m, events, turn);
        } catch (ChatException e) {
            throw e.in(c.id);
        } finally {
            c.release();
        }
    }

    private Conversation conversation(Principal who, Request req, String mode) {
        if (req.conversation().isPresent())
            return conversations.get(who.tenant(), req.conversation().get())
                    .orElseThrow(() -> ChatException.notFound(cut(req.conversation().get())));
        List<ChatMessage> seed = req.history().map(Agent::seed).orElse(List.of());
        if (req.message().isEmpty() && (seed.isEmpty() || !(seed.get(seed.size() - 1) instanceof UserMessage)))
            throw ChatException.badRequest("'message' is required");
        Conversation c = conversations.create(who.tenant(), mode == null ? "code" : mode, req.workspace());
        seed.forEach(c::add);
        return c;
    }

    /** The seed's form of a history: {@code [{"role": "user" | "assistant", "content": "..."}]}. */
    private static List<ChatMessage> seed(JsonNode history) {
        if (!history.isArray()) throw ChatException.badRequest("'conversation' must be an id or a history array");
        List<ChatMessage> out = new ArrayList<>();
        long chars = 0;
        for (JsonNode n : history) {
            String role = n.path("role").asString("");
            JsonNode content = n.get("content");
            if (content == null || !content.isString() || !(role.equals("user") || role.equals("assistant")))
                throw ChatException.badRequest("each history entry must be {\"role\": \"user\" | \"assistant\", \"content\": \"...\"}");
            chars += content.asString().length();
            if (chars > 16L * MAX_MESSAGE_CHARS) throw ChatException.badRequest("the history is longer than "
                    + 16 * MAX_MESSAGE_CHARS + " characters");
            if (content.asString().isEmpty()) continue;
            out.add(role.equals("user") ? UserMessage.from(content.asString()) : AiMessage.from(content.asString()));
        }
        return out;
    }

    private Map<String, Object> answerIn(Conversation c, Principal who, Request req, String mode, Model m,
            ChatEvents events, Turn turn) {
        long started = System.nanoTime();
        String useMode = mode == null ? c.mode() : mode;
        String workspace = req.workspace().orElse(c.workspace());
        if (req.message().isEmpty() && !c.waiting())
            throw ChatException.badRequest("'message' is required (the conversation's last message was answered)");
        c.use(useMode, workspace, clock.instant());
        Map<String, Object> info = new LinkedHashMap<>();
        info.put("conversation", c.id);
        info.put("mode", useMode);
        info.put("workspace", workspace);
        info.put("model", m.name());
        String message = req.message().orElse("");
        Map<String, Object> record = new LinkedHashMap<>();
        record.put("message", message);
        List<Map<String, Object>> calls = new ArrayList<>();
        long[] usage = new long[2];
        int round = 0;
        String stop = "answer";
        String response = "";
        try (AgentTools tools = this.tools.open(who, useMode, c.id, workspace)) {
            turn.tools = tools;
            turn.thread = Thread.currentThread();
            req.message().ifPresent(text -> c.add(UserMessage.from(text)));
            events.conversation(info);
            List<ToolSpecification> specs = tools.specifications();
            while (true) {
                if (turn.cancelled()) throw new ChatException(499, "cancelled", "the request was cancelled");
                round++;
                events.round(round);
                List<ChatMessage> messages = new ArrayList<>();
                messages.add(SystemMessage.from(system(tools, c.leftOut())));
                messages.addAll(c.history(settings.maxConversationBytes()));
                int r = round;
                Consumer<String> onText = req.stream() ? text -> events.text(r, text) : null;
                Model.Reply reply = m.chat(messages, specs, onText);
                usage[0] += reply.inputTokens();
                usage[1] += reply.outputTokens();
                AiMessage ai = reply.message();
                c.add(ai);
                if (!ai.hasToolExecutionRequests()) {
                    response = ai.text() == null ? "" : ai.text();
                    break;
                }
                for (ToolExecutionRequest call : ai.toolExecutionRequests()) {
                    Map<String, Object> done = call(tools, call, r, events, turn);
                    calls.add(done);
                    c.add(ToolExecutionResultMessage.builder().id(call.id()).toolName(call.name())
                            .text((String) done.get("output")).isError((Boolean) done.get("isError")).build());
                }
                if (round >= settings.maxRounds()) {
                    stop = "max_rounds";
                    response = (ai.text() == null || ai.text().isBlank() ? "" : ai.text() + "\n\n")
                            + "(The answer was cut short: the model still asked for tools after " + round
                            + " rounds, LLM_MAX_ROUNDS.)";
                    break;
                }
            }
        } catch (ChatException e) {
            finish(c, who, useMode, record, calls, round, usage, "error", Optional.of(e), started, "");
            throw e;
        } catch (WorkspaceException e) {
            throw ChatException.badRequest(e.getMessage());
        } finally {
            turn.tools = null;
            turn.thread = null;
            Thread.interrupted(); // a cancel's interrupt must not reach the request's thread afterwards
        }
        return finish(c, who, useMode, record, calls, round, usage, stop, Optional.empty(), started, response);
    }

    /** Runs one tool call the model asked for, and its record (round, id, tool, input, output, isError, ms, images). */
    private Map<String, Object> call(AgentTools tools, ToolExecutionRequest call, int round, ChatEvents events, Turn turn) {
        long t0 = System.nanoTime();
        String id = call.id() == null || call.id().isBlank() ? "call-" + Ids.hex(8) : call.id();
        Map<String, Object> input;
        AgentTools.Outcome o;
        try {
            JsonNode n = call.arguments() == null || call.arguments().isBlank() ? JSON.createObjectNode() : JSON.readTree(call.arguments());
            if (!n.isObject()) throw new IllegalArgumentException("not an object");
            @SuppressWarnings("unchecked")
            Map<String, Object> parsed = JSON.convertValue(n, LinkedHashMap.class);
            input = parsed;
        } catch (JacksonException | IllegalArgumentException e) {
            input = Map.of("arguments", String.valueOf(call.arguments()));
            events.toolCall(round, id, call.name(), input);
            o = AgentTools.Outcome.error("Error [bad_arguments]: the arguments of " + call.name()
                    + " must be a JSON object; got: " + cut(String.valueOf(call.arguments())));
            return record(events, round, id, call.name(), input, o, t0);
        }
        events.toolCall(round, id, call.name(), input);
        if (turn.cancelled()) o = AgentTools.Outcome.error("Error [cancelled]: the request was cancelled");
        else o = tools.call(call.name(), input, id, (stream, text) -> events.toolOutput(id, stream, text));
        return record(events, round, id, call.name(), input, o, t0);
    }

    private static Map<String, Object> record(ChatEvents events, int round, String id, String tool, Map<String, Object> input,
            AgentTools.Outcome o, long t0) {
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("round", round);
        rec.put("id", id);
        rec.put("tool", tool);
        rec.put("input", input);
        rec.put("output", o.text());
        rec.put("isError", o.isError());
        rec.put("ms", (System.nanoTime() - t0) / 1_000_000);
        rec.put("images", o.images());
        events.toolResult(rec);
        return rec;
    }

    private Map<String, Object> finish(Conversation c, Principal who, String mode, Map<String, Object> record,
            List<Map<String, Object>> calls, int rounds, long[] usage, String stop, Optional<ChatException> error,
            long started, String response) {
        long ms = (System.nanoTime() - started) / 1_000_000;
        Map<String, Object> u = new LinkedHashMap<>();
        u.put("inputTokens", usage[0]);
        u.put("outputTokens", usage[1]);
        // the kept turn names its images, without their bytes
        List<Map<String, Object>> kept = new ArrayList<>();
        for (Map<String, Object> call : calls) {
            Map<String, Object> k = new LinkedHashMap<>(call);
            @SuppressWarnings("unchecked")
            List<Map<String, String>> images = (List<Map<String, String>>) call.get("images");
            k.put("images", images.stream().map(i -> Map.of("mimeType", i.get("mimeType"))).toList());
            kept.add(k);
        }
        record.put("response", response);
        record.put("toolCalls", kept);
        record.put("rounds", rounds);
        record.put("usage", u);
        record.put("stopReason", stop);
        error.ifPresent(e -> record.put("error", Map.of("error", e.reason(), "message", e.getMessage())));
        record.put("ms", ms);
        c.ended(record, clock.instant(), settings.maxConversationBytes());
        AUDIT.info("chat tenant={} conversation={} mode={} rounds={} toolCalls={} inputTokens={} outputTokens={} "
                        + "outcome={} ms={}", who.tenant(), c.id, mode, rounds, calls.size(), usage[0], usage[1],
                error.map(ChatException::reason).orElse(stop), ms);
        observer.ended(mode, error.map(ChatException::reason).orElse(stop), rounds, calls.size(), usage[0], usage[1]);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("response", response);
        out.put("conversation", c.id);
        out.put("mode", mode);
        out.put("workspace", c.workspace());
        out.put("toolCalls", calls);
        out.put("rounds", rounds);
        out.put("usage", u);
        out.put("stopReason", stop);
        out.put("ms", ms);
        return out;
    }

    private String system(AgentTools tools, int leftOut) {
        return "You are the assistant of code-exec-mcp, a server that runs code in sandboxes. Answer the user's "
                + "request; use the tools when they help, and give the result in plain words at the end.\n\n"
                + tools.instructions()
                + (leftOut > 0 ? "\n\n(" + leftOut + " earlier turns of this conversation are left out: it grew past "
                + "CHAT_CONVERSATION_MAX_KB.)" : "");
    }

    /** {@code GET /api/chat/tools?mode=}: what the model is offered in that mode. */
    public Map<String, Object> tools(Principal who, String mode) {
        if (!MODES.contains(mode)) throw ChatException.badRequest("mode must be 'code' or 'direct', got '" + cut(mode) + "'");
        List<Map<String, Object>> list;
        if (mode.equals("direct") && !tools.direct()) list = List.of();
        else try (AgentTools t = tools.open(who, mode, null, "chat")) {
            list = t.describe();
        }
        return Map.of("mode", mode, "tools", list);
    }

    /** {@code GET /api/chat}: whether the chat is on, the model, and this tenant's conversations. */
    public Map<String, Object> list(String tenant) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("enabled", settings.enabled());
        if (!settings.enabled()) m.put("reason", ChatSettings.OFF);
        m.put("provider", settings.provider());
        m.put("model", settings.model().orElse(""));
        m.put("maxRounds", settings.maxRounds());
        m.put("modes", tools.direct() ? MODES : List.of("code"));
        m.put("conversations", conversations.list(tenant).stream().map(Conversation::summary).toList());
        return m;
    }

    public Optional<Map<String, Object>> get(String tenant, String id) {
        return conversations.get(tenant, id).map(Conversation::details);
    }

    public boolean delete(String tenant, String id) {
        return conversations.delete(tenant, id);
    }

    private static void checkWorkspace(String name) {
        try {
            Workspaces.checkName("workspace", name);
        } catch (WorkspaceException e) {
            throw ChatException.badRequest(e.getMessage());
        }
    }

    private static String cut(String s) {
        return s.length() > 80 ? s.substring(0, 80) + "…" : s;
    }
}
