package dev.codeexec.agent;

import dev.langchain4j.data.message.AiMessage;
import dev.langchain4j.data.message.ChatMessage;
import dev.langchain4j.data.message.ToolExecutionResultMessage;
import dev.langchain4j.data.message.UserMessage;

import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One conversation, kept on the server for its tenant: the history the model is sent (user messages, the model's
 * messages with their tool calls, the tools' results) and, for people, its turns (each request's message, answer,
 * tool calls, rounds, tokens or error). One request at a time answers in it ({@link #claim}). What was done before
 * a failure stays: the user's message and each tool call are added as they happen.
 */
final class Conversation {

    /** Turns kept for display; older ones are dropped (the model's history is bounded apart, by bytes). */
    static final int MAX_TURNS = 200;

    final String id;
    final String tenant;
    final Instant created;
    private volatile Instant updated;
    private String mode;
    private String workspace;
    private String title = "";
    private final List<ChatMessage> messages = new ArrayList<>();
    private final List<Map<String, Object>> turns = new ArrayList<>();
    private final AtomicBoolean busy = new AtomicBoolean();
    private int leftOut;

    Conversation(String id, String tenant, String mode, String workspace, Instant now) {
        this.id = id;
        this.tenant = tenant;
        this.created = now;
        this.updated = now;
        this.mode = mode;
        this.workspace = workspace;
    }

    /** Takes the conversation for one request; false when another request is answering in it. */
    boolean claim() {
        return busy.compareAndSet(false, true);
    }

    void release() {
        busy.set(false);
    }

    /** Whether a request is answering in it now. */
    boolean claimedNow() {
        return busy.get();
    }

    Instant updated() {
        return updated;
    }

    synchronized String mode() {
        return mode;
    }

    synchronized String workspace() {
        return workspace;
    }

    synchronized void use(String mode, String workspace, Instant now) {
        this.mode = mode;
        this.workspace = workspace;
        this.updated = now;
    }

    synchronized void add(ChatMessage m) {
        if (title.isEmpty() && m instanceof UserMessage u && u.hasSingleText()) {
            String t = u.singleText().strip().replaceAll("\\s+", " ");
            title = t.length() > 80 ? t.substring(0, 80) + "…" : t;
        }
        messages.add(m);
    }

    /**
     * The history to send, at most {@code maxBytes} of it: the oldest turns (from a user message to the next) are
     * dropped from what is kept until it fits (a single turn larger than that is sent whole).
     */
    synchronized List<ChatMessage> history(int maxBytes) {
        long total = 0;
        for (ChatMessage m : messages) total += size(m);
        while (total > maxBytes) {
            int next = -1;
            for (int i = 1; i < messages.size(); i++) if (messages.get(i) instanceof UserMessage) { next = i; break; }
            if (next < 0) break;
            for (int i = 0; i < next; i++) total -= size(messages.get(i));
            messages.subList(0, next).clear();
            leftOut++;
        }
        return List.copyOf(messages);
    }

    /** Turns left out of the model's history so far (to say so in the system prompt). */
    synchronized int leftOut() {
        return leftOut;
    }

    /**
     * Whether the last message still waits for the model: a user message never answered, or tool results the
     * model has not seen. A request without a message continues from there.
     */
    synchronized boolean waiting() {
        if (messages.isEmpty()) return false;
        ChatMessage last = messages.get(messages.size() - 1);
        return last instanceof UserMessage || last instanceof ToolExecutionResultMessage
                || (last instanceof AiMessage a && a.hasToolExecutionRequests());
    }

    synchronized void turn(Map<String, Object> t, Instant now) {
        turns.add(t);
        if (turns.size() > MAX_TURNS) turns.remove(0);
        updated = now;
    }

    synchronized Map<String, Object> summary() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", id);
        m.put("title", title);
        m.put("mode", mode);
        m.put("workspace", workspace);
        m.put("created", created.toString());
        m.put("updated", updated.toString());
        m.put("turns", turns.size());
        return m;
    }

    synchronized Map<String, Object> details() {
        Map<String, Object> m = summary();
        m.put("turns", List.copyOf(turns));
        m.put("waiting", waiting());
        return m;
    }

    /** Roughly what a message costs in the request: its text and its tool calls' names and arguments. */
    static long size(ChatMessage m) {
        return switch (m) {
            case UserMessage u -> u.hasSingleText() ? u.singleText().length() : 256;
            case AiMessage a -> (a.text() == null ? 0 : a.text().length()) + (a.hasToolExecutionRequests()
                    ? a.toolExecutionRequests().stream().mapToLong(r -> r.name().length() + (r.arguments() == null ? 0 : r.arguments().length())).sum() : 0);
            case ToolExecutionResultMessage t -> t.text() == null ? 0 : t.text().length();
            default -> 256;
        };
    }
}
