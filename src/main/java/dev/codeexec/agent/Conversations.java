package dev.codeexec.agent;

import dev.codeexec.config.Ids;

import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The conversations kept on this server, per tenant, in memory: at most CHAT_MAX_CONVERSATIONS per tenant (a new one
 * past it removes the tenant's least recently used that is not answering), each removed after
 * CHAT_CONVERSATION_IDLE_HOURS unused (every tenant's are looked at whenever any tenant uses the chat, so a tenant
 * that never comes back holds nothing past that), each bounded by CHAT_CONVERSATION_MAX_KB ({@link Conversation#ended}).
 * A server restart forgets them; behind several gateway replicas each keeps its own (docs/chat.md). Another tenant's
 * conversation is not found, as one that never was.
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
        return Optional.ofNullable(existing(tenant).get(id));
    }

    synchronized boolean delete(String tenant, String id) {
        Map<String, Conversation> mine = existing(tenant);
        Conversation c = mine.get(id);
        if (c == null) return false;
        if (c.claimedNow()) throw new ChatException(409, "busy", "the conversation is answering a request");
        mine.remove(id);
        return true;
    }

    /** The tenant's conversations, most recently used first. */
    synchronized List<Conversation> list(String tenant) {
        List<Conversation> out = new ArrayList<>(existing(tenant).values());
        out.sort(Comparator.comparing(Conversation::updated).reversed());
        return out;
    }

    /** How many conversations are held now, of all tenants (the sweep runs on use, not on this). */
    synchronized int held() {
        return byTenant.values().stream().mapToInt(Map::size).sum();
    }

    /** The tenant's table, made when it has none, after the sweep. */
    private Map<String, Conversation> table(String tenant) {
        sweep();
        return byTenant.computeIfAbsent(tenant, t -> new LinkedHashMap<>());
    }

    /** The tenant's table as it is after the sweep (empty, and not kept, when it has none). */
    private Map<String, Conversation> existing(String tenant) {
        sweep();
        return byTenant.getOrDefault(tenant, new LinkedHashMap<>());
    }

    /**
     * Removes every tenant's conversations idle past the limit (not one answering now), and the tables left empty:
     * on each use, by any tenant, so that what a tenant left behind goes although it never comes back.
     */
    private void sweep() {
        Instant cutoff = clock.instant().minus(settings.idle());
        for (Iterator<Map<String, Conversation>> tables = byTenant.values().iterator(); tables.hasNext(); ) {
            Map<String, Conversation> mine = tables.next();
            mine.values().removeIf(c -> c.updated().isBefore(cutoff) && !c.claimedNow());
            if (mine.isEmpty()) tables.remove();
        }
    }
}
