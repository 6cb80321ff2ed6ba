package dev.codeexec.workspace;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Removes idle workspaces ({@link Workspaces#expire}) once at start and then every {@link #PERIOD}, on one daemon
 * thread, for both transports (stdio sessions leave workspaces behind too). Started by {@code Main} around the
 * server's lifetime; a sweep that fails is logged and the next one tries again.
 */
public final class WorkspaceExpiry implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(WorkspaceExpiry.class);
    public static final Duration PERIOD = Duration.ofHours(1);

    private final ScheduledExecutorService scheduler;

    private WorkspaceExpiry(ScheduledExecutorService scheduler) {
        this.scheduler = scheduler;
    }

    public static WorkspaceExpiry start(Workspaces workspaces, Duration period) {
        ScheduledExecutorService s = Executors.newSingleThreadScheduledExecutor(
                Thread.ofPlatform().name("workspace-expiry").daemon(true).factory());
        s.scheduleWithFixedDelay(() -> sweep(workspaces), 0, period.toMillis(), TimeUnit.MILLISECONDS);
        return new WorkspaceExpiry(s);
    }

    private static void sweep(Workspaces workspaces) {
        try {
            int removed = workspaces.expire(Instant.now());
            if (removed > 0) LOG.info("removed {} idle workspaces", removed);
        } catch (RuntimeException e) {
            LOG.warn("workspace expiry sweep failed: {}", e.toString());
        }
    }

    @Override
    public void close() {
        scheduler.shutdownNow();
    }
}
