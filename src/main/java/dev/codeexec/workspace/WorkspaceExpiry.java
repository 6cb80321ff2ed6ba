package dev.codeexec.workspace;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.ToIntFunction;

/**
 * Removes idle workspaces ({@link Workspaces#expire}) once at start and then every {@link #PERIOD}, on one daemon
 * thread, for both transports (stdio sessions leave workspaces behind too). Started by {@code Main} around the
 * server's lifetime; a sweep that fails, whatever the failure, is logged and the next one tries again.
 */
public final class WorkspaceExpiry implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(WorkspaceExpiry.class);
    public static final Duration PERIOD = Duration.ofHours(1);

    private final ScheduledExecutorService scheduler;

    private WorkspaceExpiry(ScheduledExecutorService scheduler) {
        this.scheduler = scheduler;
    }

    public static WorkspaceExpiry start(Workspaces workspaces, Duration period) {
        return start(workspaces::expire, period);
    }

    /** Runs {@code sweep} (now → workspaces removed) at start and every {@code period}. */
    static WorkspaceExpiry start(ToIntFunction<Instant> sweep, Duration period) {
        ScheduledExecutorService s = Executors.newSingleThreadScheduledExecutor(
                Thread.ofPlatform().name("workspace-expiry").daemon(true).factory());
        s.scheduleWithFixedDelay(() -> sweep(sweep), 0, period.toMillis(), TimeUnit.MILLISECONDS);
        return new WorkspaceExpiry(s);
    }

    /**
     * One sweep. Nothing may escape: a scheduled task that throws is never run again, so one sweep's failure (once, a
     * StackOverflowError from a deep workspace) would end expiry for every tenant until a restart, and the next
     * start would hit the same workspace. {@link Workspaces#expire} contains each workspace's failure; this catches
     * what is left, Errors included.
     */
    private static void sweep(ToIntFunction<Instant> sweep) {
        try {
            int removed = sweep.applyAsInt(Instant.now());
            if (removed > 0) LOG.info("removed {} idle workspaces", removed);
        } catch (Throwable e) {
            LOG.warn("workspace expiry sweep failed: {}", e.toString());
        }
    }

    @Override
    public void close() {
        scheduler.shutdownNow();
    }
}
