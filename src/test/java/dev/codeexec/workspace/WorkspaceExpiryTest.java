package dev.codeexec.workspace;

import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.time.Instant;

import static org.assertj.core.api.Assertions.assertThat;

/** The expiry schedule: one sweep right at start, then one per period. */
class WorkspaceExpiryTest {

    @Test
    void sweepsAtStartAndThenPeriodically() throws Exception {
        Path root = Files.createTempDirectory("expiry");
        Workspaces ws = new Workspaces(root, 1 << 20, Duration.ofHours(1), 65534, 65534);
        ws.open("t", "old", true);
        ws.open("t", "fresh", true);
        Path old = root.resolve("t/old");
        Files.setLastModifiedTime(old, FileTime.from(Instant.now().minus(Duration.ofHours(2))));
        try (WorkspaceExpiry expiry = WorkspaceExpiry.start(ws, Duration.ofMillis(200))) {
            waitUntilGone(old);
            assertThat(root.resolve("t/fresh")).exists();
            // Made idle later: removed by a later sweep, without a restart.
            Path fresh = root.resolve("t/fresh");
            Files.setLastModifiedTime(fresh, FileTime.from(Instant.now().minus(Duration.ofHours(2))));
            waitUntilGone(fresh);
        }
        Files.delete(root.resolve("t"));
        Files.delete(root);
    }

    private static void waitUntilGone(Path p) throws InterruptedException {
        Poll.until(p + " removed by a sweep", () -> !Files.exists(p));
    }

    /** A sweep that died with an Error (a deep workspace overflowed the stack) ended every later sweep. */
    @Test
    void aSweepThatFailsWithAnErrorDoesNotEndTheSweeps() throws Exception {
        java.util.concurrent.atomic.AtomicInteger sweeps = new java.util.concurrent.atomic.AtomicInteger();
        try (WorkspaceExpiry expiry = WorkspaceExpiry.start(now -> {
            if (sweeps.incrementAndGet() == 1) throw new StackOverflowError();
            return 0;
        }, Duration.ofMillis(50))) {
            Poll.until("a sweep after the one that failed", () -> sweeps.get() >= 3);
        }
    }
}
