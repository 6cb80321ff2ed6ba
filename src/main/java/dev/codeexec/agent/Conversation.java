package dev.codeexec.agent;

import dev.langchain4j.data.message.AiMessage;
import dev.langchain4j.data.message.ChatMessage;
import dev.langchain4j.data.message.ToolExecutionResultMessage;
import dev.langchain4j.data.message.UserMessage;
import tools.jackson.databind.json.JsonMapper;

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
 *
 * <p>What it holds between answers is bounded ({@link #ended}): the history by CHAT_CONVERSATION_MAX_KB, the turns
 * apart by the same and by {@link #MAX_TURNS}. An answer in progress adds its own rounds, bounded by LLM_MAX_ROUNDS
 * and the tools' results (32 KiB each).
 */
final class Conversation {

    private static final JsonMapper JSON = JsonMapper.shared();
    /** Turns kept for display at most; older ones are dropped (and past the byte bound too). */
    static final int MAX_TURNS = 200;

    final String id;
    final String tenant;
    final Instant created;
    private volatile Instant updated;
    private String mode;
    private String workspace;
    private String title = "";
    private final List<ChatMessage> messages = new ArrayList<>();
    private final List<Kept> turns = new ArrayList<>();
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
        dropOldestTurns(maxBytes);
        return List.copyOf(messages);
    }

    /** Drops the oldest whole turns while the history is over {@code maxBytes} and more than one is left; its size. */
    private long dropOldestTurns(int maxBytes) {
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
        return total;
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

    /** A turn kept for display, and its size as JSON (what a GET of the conversation sends of it). */
    private record Kept(Map<String, Object> turn, long bytes) {
        Kept(Map<String, Object> turn) {
            this(turn, json(turn));
        }
    }

    /**
     * An answer has ended (answered, cut at the round cap or failed): its turn is kept for display, and what the
     * conversation holds is brought within {@code maxBytes}, so that it stays bounded until it is used again.
     * <ul>
     * <li>The history: the oldest turns are dropped whole until it fits; a last turn larger than that alone is
     * dropped too (the next answer would leave it out all the same), but for its user message when it still waits
     * for the model (a failed answer: the retry answers that message again, its tool calls made anew).</li>
     * <li>The turns for display: at most {@link #MAX_TURNS} and {@code maxBytes} as JSON, the oldest dropped first;
     * the latest alone larger than that keeps its message, answer and the first of its tool calls that fit, and
     * counts the others in {@code toolCallsLeftOut}.</li>
     * </ul>
     */
    synchronized void ended(Map<String, Object> turn, Instant now, int maxBytes) {
        if (dropOldestTurns(maxBytes) > maxBytes) {
            ChatMessage first = messages.get(0);
            if (waiting() && first instanceof UserMessage) {
                messages.clear();
                messages.add(first);
            } else {
                messages.clear();
                leftOut++;
            }
        }
        turns.add(new Kept(turn));
        long total = 0;
        for (Kept k : turns) total += k.bytes();
        while (turns.size() > MAX_TURNS || (total > maxBytes && turns.size() > 1)) total -= turns.remove(0).bytes();
        if (total > maxBytes) turns.set(0, fit(turns.get(0).turn(), maxBytes));
        updated = now;
    }

    /** The turn with the first of its tool calls that fit in {@code maxBytes} with the rest of it, the others counted. */
    private static Kept fit(Map<String, Object> turn, int maxBytes) {
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> calls = (List<Map<String, Object>>) turn.getOrDefault("toolCalls", List.of());
        Map<String, Object> out = new LinkedHashMap<>(turn);
        out.put("toolCalls", List.of());
        out.put("toolCallsLeftOut", calls.size());
        long used = json(out);
        List<Map<String, Object>> kept = new ArrayList<>();
        for (Map<String, Object> call : calls) {
            long b = json(call) + 1;
            if (used + b > maxBytes) break;
            kept.add(call);
            used += b;
        }
        out.put("toolCalls", kept);
        out.put("toolCallsLeftOut", calls.size() - kept.size());
        return new Kept(out);
    }

    private static long json(Object o) {
        return JSON.writeValueAsString(o).length();
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
        m.put("turns", turns.stream().map(Kept::turn).toList());
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
