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
 * registers.
 */
public final class RunRegistry {

    /** The key used for the one stdio session. */
    public static final String STDIO_SESSION = "stdio";

    private static final int MAX_EARLY_CANCELS = 1024;
    private static final long EARLY_CANCEL_TTL_NANOS = 60_000_000_000L;

    private final Map<String, Map<String, RunHandle>> runs = new ConcurrentHashMap<>();
    private final LinkedHashMap<String, Long> earlyCancels = new LinkedHashMap<>();

    /** Registration of one run; closing it removes the run from the registry. */
    public interface Registration extends AutoCloseable {
        @Override
        void close();
    }

    public Registration register(String session, String requestId, RunHandle handle) {
        runs.computeIfAbsent(session, s -> new ConcurrentHashMap<>()).put(requestId, handle);
        if (takeEarlyCancel(session, requestId)) handle.cancel();
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
        rememberEarlyCancel(session, requestId);
        return false;
    }

    /** Cancels every run of a session (the session ended); returns how many. */
    public int cancelSession(String session) {
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

    private synchronized void rememberEarlyCancel(String session, String requestId) {
        long now = System.nanoTime();
        earlyCancels.values().removeIf(t -> now - t > EARLY_CANCEL_TTL_NANOS);
        earlyCancels.put(key(session, requestId), now);
        while (earlyCancels.size() > MAX_EARLY_CANCELS) earlyCancels.pollFirstEntry();
    }

    private synchronized boolean takeEarlyCancel(String session, String requestId) {
        Long at = earlyCancels.remove(key(session, requestId));
        return at != null && System.nanoTime() - at <= EARLY_CANCEL_TTL_NANOS;
    }

    private static String key(String session, String requestId) {
        return session + '\n' + requestId;
    }
}
