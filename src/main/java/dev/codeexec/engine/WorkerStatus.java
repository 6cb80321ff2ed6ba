package dev.codeexec.engine;

import java.time.Instant;
import java.util.Map;
import java.util.Optional;

/**
 * One worker as a gateway sees it (see {@link Executor#workers()}): where it is, whether it takes work, and its
 * load at the last status poll.
 *
 * @param address    the resolved address the gateway connects to ({@code host:port})
 * @param name       the worker's WORKER_NAME, once it has answered
 * @param instanceId the worker process's random id (a restarted worker has a new one), once it has answered
 * @param healthy    it answers and its health service says SERVING (a draining or unreachable worker is not)
 * @param draining   it is shutting down: it finishes its runs but takes no new ones
 * @param running    runs executing on it
 * @param queued     runs waiting for a slot on it
 * @param slots      its MAX_CONCURRENT
 * @param sessions   sessions living on it
 * @param warmPool   its warm sandboxes per language ({@code {"python": {"ready": 2, "target": 2}}})
 * @param lastSeen   when it last answered a status poll
 * @param error      why it is not healthy, when known
 */
public record WorkerStatus(String address, Optional<String> name, Optional<String> instanceId, boolean healthy,
        boolean draining, int running, int queued, int slots, int sessions,
        Map<String, Map<String, Integer>> warmPool, Optional<Instant> lastSeen, Optional<String> error) {

    public WorkerStatus {
        name = name == null ? Optional.empty() : name;
        instanceId = instanceId == null ? Optional.empty() : instanceId;
        warmPool = warmPool == null ? Map.of() : Map.copyOf(warmPool);
        lastSeen = lastSeen == null ? Optional.empty() : lastSeen;
        error = error == null ? Optional.empty() : error;
    }
}
