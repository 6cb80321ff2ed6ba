package dev.codeexec.sandbox;

import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.List;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

/** How the watchdog finds a run's processes; that it kills a run over its limit: BwrapSandboxTest. */
class MemoryWatchdogTest {

    @Test
    void aProcesssChildrenAreFoundThroughItsThreadsAsThroughAFullWalk() throws Exception {
        Process p = new ProcessBuilder("/bin/sh", "-c", "sleep 30 & sleep 30 & echo started; wait").start();
        try {
            assertThat(new String(p.getInputStream().readNBytes(8))).isEqualTo("started\n");
            List<Long> viaTasks = Poll.until("both sleeps are the shell's children",
                    () -> MemoryWatchdog.childrenFromTasks(Path.of("/proc"), p.pid()), c -> c.size() >= 2);
            List<Long> expected = p.children().map(ProcessHandle::pid).sorted().toList();
            assertThat(viaTasks.stream().sorted().toList()).hasSize(2).isEqualTo(expected);
            assertThat(MemoryWatchdog.childrenOf(Path.of("/proc")).get(p.pid()).stream().sorted().toList()).isEqualTo(expected);
            try (MemoryWatchdog.Pass pass = new MemoryWatchdog.Pass(Path.of("/proc"))) {
                pass.process(p.pid());
                assertThat(pass.usage().anonymous()).isPositive();
            }
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
            // a pass of the test's own sees the parent and its 12 children, and the 64 MiB once
            MemoryWatchdog.Usage u = run.measure(Path.of("/proc"), null);
            assertThat(u.processes()).as("the parent and its 12 children").isEqualTo(13);
            assertThat(u.total()).as("one copy of the 64 MiB").isBetween(60L << 20, 120L << 20);
            // the watchdog's own pass (over all 13: they were forked before the attach) counts the same, and so
            // leaves the run alone: 13 copies would be over the 256 MiB limit
            long watched = Poll.until("a pass of the watchdog over the run", () -> run.memoryBytes().orElse(0),
                    b -> b > 0);
            assertThat(watched).as("one copy of the 64 MiB").isBetween(60L << 20, 120L << 20);
            assertThat(run.oomKilled()).isFalse();
            assertThat(p.isAlive()).isTrue();
        } finally {
            run.remove();
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
        }
    }

    @Test
    void theProportionalSharesAreReadFromSmapsRollup() {
        String rollup = "5620eb3e6000-7ffd77174000 ---p 00000000 00:00 0  [rollup]\nRss:  1724 kB\nPss:  785 kB\n"
                + "Pss_Dirty:  116 kB\nPss_Anon:  116 kB\nPss_File:  669 kB\nPss_Shmem:  24 kB\nShared_Clean:  1000 kB\n";
        assertThat(MemoryWatchdog.rollupKb(rollup)).containsExactly(116, 24);
        assertThat(MemoryWatchdog.rollupKb("x [rollup]\nRss:  1724 kB\nPss:  785 kB\n"))
                .as("a kernel before 5.8: no Pss_Anon, statm is used").isNull();
    }

    /**
     * Twelve memfds of 16 MiB, allocated (posix_fallocate) and never mapped, the way the finding held 3 GiB: each
     * file counts whole, and once, though a forked child holds the same descriptors.
     */
    @Test
    void memfdsHeldOpenCountWholeAndOnceThoughNeverMapped() throws Exception {
        Process p = python(
                "fds = [os.memfd_create('m%d' % i) for i in range(12)]",
                "for fd in fds: os.posix_fallocate(fd, 0, 16 << 20)",
                "if os.fork() == 0:",
                "    time.sleep(30); os._exit(0)",
                "ready()");
        try {
            MemoryWatchdog.Usage u = measured(p);
            assertThat(u.shared()).as("12 × 16 MiB, once").isBetween(192L << 20, 200L << 20);
            assertThat(u.anonymous()).isLessThan(64L << 20);
        } finally {
            end(p);
        }
    }

    /**
     * Shared memory counts once however it is held: a memfd held open and mapped by a parent and its child, a shared
     * anonymous mapping both touch, a memfd mapped after its descriptor was closed.
     */
    @Test
    void sharedMemoryMappedByManyProcessesAndHeldOpenCountsOnce() throws Exception {
        Process p = python(
                "fd = os.memfd_create('held'); os.posix_fallocate(fd, 0, 32 << 20)",
                "held = mmap.mmap(fd, 32 << 20); touch(held)",
                "anon = mmap.mmap(-1, 16 << 20); touch(anon)",
                "fd2 = os.memfd_create('closed'); os.ftruncate(fd2, 8 << 20); closed = mmap.mmap(fd2, 8 << 20); os.close(fd2)",
                "touch(closed)",
                "r, w = os.pipe()",
                "if os.fork() == 0:",
                "    touch(held); touch(anon); os.write(w, b'c'); time.sleep(30); os._exit(0)",
                "os.read(r, 1)",
                "ready()");
        try {
            MemoryWatchdog.Usage u = measured(p);
            assertThat(u.shared()).as("32 + 16 + 8 MiB, each page once").isBetween(56L << 20, 60L << 20);
        } finally {
            end(p);
        }
    }

    @Test
    void mappingsOfFilesCountedWholeAreTakenOffTheMappedShare() {
        String smaps = String.join("\n",
                "7f9e57ebc000-7f9e57fbc000 rw-s 00000000 00:01 1030                       /memfd:a (deleted)",
                "Size:               1024 kB", "Rss:                 512 kB", "Pss:                 256 kB",
                "Anonymous:             0 kB", "VmFlags: rd wr sh mr mw me ms",
                "7f9e57fbc000-7f9e57fcc000 rw-s 00000000 00:01 1031                       /memfd:b (deleted)",
                "Pss:                  64 kB", "Anonymous:             0 kB",
                "7f9e57fcc000-7f9e57fdc000 rw-p 00000000 00:2a 7                          /tmp/x",
                "Pss:                 100 kB", "Anonymous:            40 kB",
                "7f9e57fdc000-7f9e57fec000 rw-s 00000000 00:01 1032                       /dev/zero (deleted)",
                "Pss:                  32 kB", "Anonymous:             0 kB",
                "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]",
                "Pss:                   0 kB");
        long memfdDev = 1;
        long tmpfsDev = 0x2aL;
        assertThat(MemoryWatchdog.countedWholeKb(smaps.lines().iterator(), Set.of(new MemoryWatchdog.FileKey(memfdDev, 1030)), Set.of(tmpfsDev)))
                .as("memfd a (held open) and the tmpfs file's page-cache part; not memfd b, not /dev/zero").isEqualTo(256 + 60);
        assertThat(MemoryWatchdog.countedWholeKb(smaps.lines().iterator(), Set.of(), Set.of())).isZero();
    }

    private static final String PRELUDE = String.join("\n",
            "import mmap, os, sys, time",
            "def touch(m):",
            "    for i in range(0, len(m), 4096): m[i] = 1",
            "def ready():",
            "    print('ready', flush=True); time.sleep(30)",
            "");

    private static Process python(String... lines) throws Exception {
        Process p = new ProcessBuilder("/usr/bin/python3", "-c", PRELUDE + String.join("\n", lines)).start();
        assertThat(new String(p.getInputStream().readNBytes(6))).as("the program got ready").isEqualTo("ready\n");
        return p;
    }

    /** One pass over the process and its children. */
    private static MemoryWatchdog.Usage measured(Process p) {
        try (MemoryWatchdog.Pass pass = new MemoryWatchdog.Pass(Path.of("/proc"))) {
            for (long pid : MemoryWatchdog.processes(Path.of("/proc"), p.pid(), null)) pass.process(pid);
            return pass.usage();
        }
    }

    private static void end(Process p) {
        p.descendants().forEach(ProcessHandle::destroyForcibly);
        p.destroyForcibly();
    }
}
