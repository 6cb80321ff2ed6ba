package dev.codeexec.sandbox;

import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** How the watchdog finds a run's processes; that it kills a run over its limit: BwrapSandboxTest. */
class MemoryWatchdogTest {

    @Test
    void aProcesssChildrenAreFoundThroughItsThreadsAsThroughAFullWalk() throws Exception {
        Process p = new ProcessBuilder("/bin/sh", "-c", "sleep 30 & sleep 30 & echo started; wait").start();
        try {
            assertThat(new String(p.getInputStream().readNBytes(8))).isEqualTo("started\n");
            long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
            List<Long> viaTasks = List.of();
            while (viaTasks.size() < 2 && System.nanoTime() < deadline) {
                viaTasks = MemoryWatchdog.childrenFromTasks(Path.of("/proc"), p.pid());
                Thread.sleep(20);
            }
            List<Long> expected = p.children().map(ProcessHandle::pid).sorted().toList();
            assertThat(viaTasks.stream().sorted().toList()).hasSize(2).isEqualTo(expected);
            assertThat(MemoryWatchdog.childrenOf(Path.of("/proc")).get(p.pid()).stream().sorted().toList()).isEqualTo(expected);
            assertThat(MemoryWatchdog.anonymousBytes(Path.of("/proc"), p.pid())).isPositive();
            assertThat(MemoryWatchdog.childrenFromTasks(Path.of("/proc"), 4_194_305)).as("a pid no process can have").isEmpty();
        } finally {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
        }
    }
}
