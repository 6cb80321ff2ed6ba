package dev.codeexec.agent;

import dev.codeexec.config.Ids;

import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The conversations kept on this server, per tenant, in memory: at most CHAT_MAX_CONVERSATIONS per tenant (a new one
 * past it removes the tenant's least recently used that is not answering), each removed after
 * CHAT_CONVERSATION_IDLE_HOURS unused (looked at whenever the tenant's table is used), their history bounded by
 * CHAT_CONVERSATION_MAX_KB ({@link Conversation#history}). A server restart forgets them; behind several gateway
 * replicas each keeps its own (docs/chat.md). Another tenant's conversation is not found, as one that never was.
 */
final class Conversations {

    static final String PREFIX = "conv-";

    private final ChatSettings settings;
    private final Clock clock;
    private final Map<String, Map<String, Conversation>> byTenant = new LinkedHashMap<>();

    Conversations(ChatSettings settings, Clock clock) {
        this.settings = settings;
        this.clock = clock;
    }

    /** A new conversation of {@code tenant}; the workspace defaults to the conversation's own. */
    synchronized Conversation create(String tenant, String mode, Optional<String> workspace) {
        Map<String, Conversation> mine = table(tenant);
        while (mine.size() >= settings.maxConversations()) {
            Optional<Conversation> oldest = mine.values().stream().filter(c -> !c.claimedNow())
                    .min(Comparator.comparing(Conversation::updated));
            if (oldest.isEmpty()) throw new ChatException(429, "busy", "every one of this tenant's "
                    + settings.maxConversations() + " conversations (CHAT_MAX_CONVERSATIONS) is answering a request");
            mine.remove(oldest.get().id);
        }
        String hex = Ids.hex(12);
        String id = PREFIX + hex;
        Conversation c = new Conversation(id, tenant, mode, workspace.orElse(defaultWorkspace(id)), clock.instant());
        mine.put(id, c);
        return c;
    }

    /** The workspace of a conversation that names none: {@code chat-} and the first 12 characters of its id's hex. */
    static String defaultWorkspace(String id) {
        String hex = id.startsWith(PREFIX) ? id.substring(PREFIX.length()) : id;
        return "chat-" + hex.substring(0, Math.min(12, hex.length()));
    }

    synchronized Optional<Conversation> get(String tenant, String id) {
        return Optional.ofNullable(table(tenant).get(id));
    }

    synchronized boolean delete(String tenant, String id) {
        Map<String, Conversation> mine = table(tenant);
        Conversation c = mine.get(id);
        if (c == null) return false;
        if (c.claimedNow()) throw new ChatException(409, "busy", "the conversation is answering a request");
        mine.remove(id);
        return true;
    }

    /** The tenant's conversations, most recently used first. */
    synchronized List<Conversation> list(String tenant) {
        List<Conversation> out = new ArrayList<>(table(tenant).values());
        out.sort(Comparator.comparing(Conversation::updated).reversed());
        return out;
    }

    /** The tenant's table, with the conversations idle past the limit removed. */
    private Map<String, Conversation> table(String tenant) {
        Map<String, Conversation> mine = byTenant.computeIfAbsent(tenant, t -> new LinkedHashMap<>());
        Instant cutoff = clock.instant().minus(settings.idle());
        mine.values().removeIf(c -> c.updated().isBefore(cutoff) && !c.claimedNow());
        return mine;
    }
}
