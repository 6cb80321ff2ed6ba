package dev.codeexec.mcp;

import dev.codeexec.engine.RunHandle;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Runs in flight, by MCP session and JSON-RPC request id, so that {@code notifications/cancelled} and the end of a
 * session can reach the run they mean. The SDK ignores cancellation; this is where it is handled.
 *
 * <p>A cancel can overtake the call it cancels (the notification is read while the call is still being parsed and
 * queued). Such early cancels are remembered for a short while, in a small bounded table, and applied when the run
 * registers. Likewise a session can end between a call's submission and its registration: ended sessions are
 * remembered the same way, and a run that registers for one is cancelled at once. Both tables keep a minute and at
 * most 1024 entries (the oldest go first): past that, a late run of a forgotten session runs to its own timeout.
 */
public final class RunRegistry {

    /** The key used for the one stdio session. */
    public static final String STDIO_SESSION = "stdio";

    private static final int MAX_REMEMBERED = 1024;
    private static final long REMEMBER_NANOS = 60_000_000_000L;

    private final Map<String, Map<String, RunHandle>> runs = new ConcurrentHashMap<>();
    private final Recent earlyCancels = new Recent();
    private final Recent endedSessions = new Recent();

    /** Registration of one run; closing it removes the run from the registry. */
    public interface Registration extends AutoCloseable {
        @Override
        void close();
    }

    public Registration register(String session, String requestId, RunHandle handle) {
        runs.computeIfAbsent(session, s -> new ConcurrentHashMap<>()).put(requestId, handle);
        // after the put: a session ending from here on finds the run in its table; one that ended before is
        // remembered (cancelSession remembers before it takes the table)
        if (earlyCancels.take(key(session, requestId)) || endedSessions.contains(session)) handle.cancel();
        return () -> runs.computeIfPresent(session, (s, bySession) -> {
            bySession.remove(requestId, handle);
            return bySession.isEmpty() ? null : bySession;
        });
    }

    /** Cancels the run of this request; remembers the cancel briefly when the run has not registered yet. */
    public boolean cancel(String session, String requestId) {
        Map<String, RunHandle> bySession = runs.get(session);
        RunHandle handle = bySession == null ? null : bySession.get(requestId);
        if (handle != null) {
            handle.cancel();
            return true;
        }
        earlyCancels.add(key(session, requestId));
        return false;
    }

    /**
     * Cancels every run of a session (the session ended); returns how many. A run of the session that registers
     * later (submitted before the end, registered after it) is cancelled when it registers.
     */
    public int cancelSession(String session) {
        endedSessions.add(session);
        Map<String, RunHandle> bySession = runs.remove(session);
        if (bySession == null) return 0;
        List<RunHandle> handles = new ArrayList<>(bySession.values());
        handles.forEach(RunHandle::cancel);
        return handles.size();
    }

    /** Runs registered now. */
    public int size() {
        return runs.values().stream().mapToInt(Map::size).sum();
    }

    private static String key(String session, String requestId) {
        return session + '\n' + requestId;
    }

    /** Keys seen in the last minute, at most {@value #MAX_REMEMBERED} of them (the oldest go first). */
    private static final class Recent {
        private final LinkedHashMap<String, Long> seen = new LinkedHashMap<>();

        synchronized void add(String key) {
            long now = System.nanoTime();
            seen.values().removeIf(t -> now - t > REMEMBER_NANOS);
            seen.put(key, now);
            while (seen.size() > MAX_REMEMBERED) seen.pollFirstEntry();
        }

        /** Whether the key was seen recently; forgets it. */
        synchronized boolean take(String key) {
            Long at = seen.remove(key);
            return at != null && System.nanoTime() - at <= REMEMBER_NANOS;
        }

        synchronized boolean contains(String key) {
            Long at = seen.get(key);
            return at != null && System.nanoTime() - at <= REMEMBER_NANOS;
        }
    }
}
