package dev.codeexec.http;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Which API key opened each MCP session. The SDK (2.1.0, and 2.2.0's 2025-11-25 stack, unchanged there) serves any request that names a live {@code Mcp-Session-Id},
 * whoever sends it; so another tenant holding an id (from a log, a proxy, a shared client) could cancel the session's
 * runs or DELETE it. Here the id is bound, at the moment the SDK hands it out in the {@code initialize} response
 * (before the client can see it), to the key that asked; a request with any other key, or naming an id that was
 * never handed out, gets the 404 of an unknown session, so an id reveals nothing to another key.
 *
 * <p>Entries go with their session: on a successful DELETE, and when the SDK answers 404 for a bound id (it dropped
 * the session itself, e.g. after its stream failed). The map holds one short entry per open SDK session.
 */
final class McpSessionOwners {

    private final Map<String, String> owners = new ConcurrentHashMap<>();

    /** The session was handed out to the caller with this key id. */
    void bind(String session, String keyId) {
        owners.put(session, keyId);
    }

    /** Whether the caller with this key id may use the session: it was handed out to that same key. */
    boolean mayUse(String session, String keyId) {
        return keyId.equals(owners.get(session));
    }

    void forget(String session) {
        owners.remove(session);
    }
}
