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

    @Test
    void copyOnWritePagesSharedAfterAForkCountOnce() throws Exception {
        // 64 MiB written by the parent, then 12 children that only sleep: one copy in memory, as a cgroup charges it
        Process p = new ProcessBuilder("python3", "-c", String.join("\n",
                "import os, sys, time",
                "buf = bytearray(b'\\x01' * (64 << 20))",
                "for i in range(12):",
                "    if os.fork() == 0:",
                "        time.sleep(30); os._exit(0)",
                "print('forked', flush=True)",
                "time.sleep(30)")).start();
        MemoryWatchdog.Watched run = new MemoryWatchdog.Watched(256L << 20);
        try {
            assertThat(new String(p.getInputStream().readNBytes(7))).isEqualTo("forked\n");
            run.attach(p.pid());
            long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
            while (run.memoryBytes().orElse(0) == 0 && System.nanoTime() < deadline) Thread.sleep(MemoryWatchdog.TICK_MS);
            Thread.sleep(3 * MemoryWatchdog.TICK_MS);
            assertThat(run.memoryBytes().orElseThrow()).as("one copy of the 64 MiB").isBetween(60L << 20, 120L << 20);
            assertThat(run.oomKilled()).isFalse();
            assertThat(p.isAlive()).isTrue();
        } finally {
            run.remove();
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
        }
    }

    @Test
    void theProportionalShareIsReadFromSmapsRollup() {
        String rollup = "5620eb3e6000-7ffd77174000 ---p 00000000 00:00 0  [rollup]\nRss:  1724 kB\nPss:  785 kB\n"
                + "Pss_Dirty:  116 kB\nPss_Anon:  116 kB\nPss_File:  669 kB\n";
        assertThat(MemoryWatchdog.proportionalAnonymousKb(rollup)).isEqualTo(116);
        assertThat(MemoryWatchdog.proportionalAnonymousKb("x [rollup]\nRss:  1724 kB\nPss:  785 kB\n"))
                .as("a kernel before 5.8: no Pss_Anon, statm is used").isEqualTo(-1);
    }
}
