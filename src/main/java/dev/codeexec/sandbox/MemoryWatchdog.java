package dev.codeexec.sandbox;

import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The memory limit of whole runs where no cgroup can hold it (a server run by a normal user without a delegated
 * cgroup v2 subtree, or a host without usable cgroups): every {@link #TICK_MS} one thread finds each watched run's
 * processes (the descendants of its launcher: a sandbox's orphans are reparented to its init, which is one of them), adds up their anonymous memory and kills the run's whole tree when the sum is
 * over the run's limit. Then the run reports {@code memory_limit}, as a cgroup OOM kill would.
 *
 * <p>A process's share is its proportional anonymous memory ({@code Pss_Anon} of /proc/PID/smaps_rollup, Linux
 * 5.8+): a copy-on-write page shared by the n processes of a fork counts 1/n in each, so the run's sum is what a
 * cgroup would charge once. Counting the resident anonymous pages of each process instead (statm) counted a forked
 * python's ~5 MB once per child, and 60 sleeping children of a 256 MB run were killed as a 300 MB run. Where
 * smaps_rollup is missing or unreadable, statm (resident minus shared pages) is the fallback, with that
 * over-count.
 *
 * <p>Weaker than a cgroup, and said so in {@code runtime_info}: a run can overshoot by what it allocates in one tick
 * ({@value #NEAR_TICK_MS} ms once it is over half its limit, {@value #TICK_MS} ms before) before it is stopped (RLIMIT_AS still caps each process at once), memory of files in the run's tmpfs is not counted (the tmpfs
 * has its own size cap, MAX_DISK_MB).
 */
final class MemoryWatchdog {

    static final long TICK_MS = 50;
    /** The tick while some run is over {@link #NEAR} of its limit: its overshoot is what it allocates in 10 ms. */
    static final long NEAR_TICK_MS = 10;
    private static final double NEAR = 0.5;
    private static final long PAGE = 4096;
    private static final Set<Watched> RUNS = ConcurrentHashMap.newKeySet();
    private static Thread thread;

    private MemoryWatchdog() {
    }

    private static synchronized void register(Watched w) {
        RUNS.add(w);
        if (thread == null) {
            thread = Thread.ofPlatform().daemon().name("memory-watchdog").start(MemoryWatchdog::loop);
        }
        MemoryWatchdog.class.notifyAll();
    }

    private static void loop() {
        while (true) {
            try {
                synchronized (MemoryWatchdog.class) {
                    while (RUNS.isEmpty()) MemoryWatchdog.class.wait();
                }
                Thread.sleep(tick(Path.of("/proc")) ? NEAR_TICK_MS : TICK_MS);
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                LoggerFactory.getLogger(MemoryWatchdog.class).warn("memory watchdog: {}", e.toString());
            }
        }
    }

    /**
     * One pass: measure every watched run, kill those over their limit. A run's processes are found through
     * /proc/PID/task/TID/children (a few reads per process of the run, whatever else the machine runs: idle warm
     * sandboxes and sessions cost next to nothing); where the kernel lacks those files, from one walk of all of /proc.
     * Returns whether some run is near its limit (then the next pass comes sooner).
     */
    static boolean tick(Path proc) {
        Map<Long, List<Long>> all = CHILDREN_FILES ? null : childrenOf(proc);
        boolean near = false;
        for (Watched w : RUNS) {
            if (w.root <= 0) continue;
            long bytes = 0;
            int processes = 0;
            List<Long> todo = new ArrayList<>(List.of(w.root));
            while (!todo.isEmpty() && processes < 100_000) {
                long pid = todo.removeLast();
                bytes += anonymousBytes(proc, pid);
                processes++;
                todo.addAll(all != null ? all.getOrDefault(pid, List.of()) : childrenFromTasks(proc, pid));
            }
            w.measured(bytes, processes);
            near |= bytes > w.limitBytes * NEAR;
        }
        return near;
    }

    /** Whether this kernel has /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN). */
    private static final boolean CHILDREN_FILES;

    static {
        long self = ProcessHandle.current().pid();
        CHILDREN_FILES = Files.exists(Path.of("/proc", Long.toString(self), "task", Long.toString(self), "children"));
    }

    /** The children of one process: those each of its threads forked. */
    static List<Long> childrenFromTasks(Path proc, long pid) {
        List<Long> out = new ArrayList<>();
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(proc.resolve(Long.toString(pid)).resolve("task"))) {
            for (Path t : tasks) {
                try {
                    for (String c : Files.readString(t.resolve("children")).trim().split(" "))
                        if (!c.isEmpty()) out.add(Long.parseLong(c));
                } catch (IOException | RuntimeException gone) {
                    // the thread ended meanwhile
                }
            }
        } catch (IOException | RuntimeException gone) {
            // the process ended meanwhile
        }
        return out;
    }

    /** ppid → pids, from /proc/PID/stat of every process. */
    static Map<Long, List<Long>> childrenOf(Path proc) {
        Map<Long, List<Long>> out = new HashMap<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(proc, p -> isNumber(p.getFileName().toString()))) {
            for (Path d : ds) {
                try {
                    String stat = Files.readString(d.resolve("stat"));
                    String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ", 3);
                    out.computeIfAbsent(Long.parseLong(f[1]), k -> new ArrayList<>()).add(Long.parseLong(d.getFileName().toString()));
                } catch (IOException | RuntimeException gone) {
                    // ended meanwhile
                }
            }
        } catch (IOException e) {
            LoggerFactory.getLogger(MemoryWatchdog.class).warn("memory watchdog cannot list {}: {}", proc, e.toString());
        }
        return out;
    }

    /**
     * One process's anonymous memory, 0 when it is gone: its proportional share (Pss_Anon) where the kernel gives it,
     * else its resident minus shared pages.
     */
    static long anonymousBytes(Path proc, long pid) {
        Path dir = proc.resolve(Long.toString(pid));
        try {
            long kb = proportionalAnonymousKb(Files.readString(dir.resolve("smaps_rollup")));
            if (kb >= 0) return kb * 1024;
        } catch (IOException | RuntimeException unreadable) {
            // an older kernel, or gone: statm tells which
        }
        try {
            String[] f = Files.readString(dir.resolve("statm")).trim().split(" ");
            return Math.max(0, Long.parseLong(f[1]) - Long.parseLong(f[2])) * PAGE;
        } catch (IOException | RuntimeException gone) {
            return 0;
        }
    }

    /** The {@code Pss_Anon:} value (kB) of a smaps_rollup text, -1 when the kernel does not report it. */
    static long proportionalAnonymousKb(String rollup) {
        int at = rollup.indexOf("\nPss_Anon:");
        if (at < 0) return -1;
        int end = rollup.indexOf('\n', at + 1);
        String value = rollup.substring(at + "\nPss_Anon:".length(), end < 0 ? rollup.length() : end).trim();
        return Long.parseLong(value.substring(0, value.indexOf(' ')).trim());
    }

    private static boolean isNumber(String s) {
        if (s.isEmpty()) return false;
        for (int i = 0; i < s.length(); i++) if (s.charAt(i) < '0' || s.charAt(i) > '9') return false;
        return true;
    }

    /** One run watched: what a cgroup would report, measured by the watchdog. */
    static final class Watched implements Cgroups.RunCgroup {
        private final long limitBytes;
        private volatile long root = -1;
        private volatile long current;
        private volatile long peak;
        private volatile boolean exceeded;

        Watched(long limitBytes) {
            this.limitBytes = limitBytes;
        }

        @Override
        public void attach(long pid) {
            root = pid;
            register(this);
        }

        void measured(long bytes, int processes) {
            current = bytes;
            if (bytes > peak) peak = bytes;
            if (bytes > limitBytes && !exceeded) {
                exceeded = true;
                LoggerFactory.getLogger(MemoryWatchdog.class).info(
                        "memory watchdog: a run used {} MiB in {} processes, over its {} MiB: killing it",
                        bytes >> 20, processes, limitBytes >> 20);
                killAll();
            }
        }

        @Override
        public List<Path> procsFiles() {
            return List.of();
        }

        /** Every descendant of the launcher (the sandbox's init first among them); the launcher reaps and exits. */
        @Override
        public void killAll() {
            long r = root;
            if (r > 0) ProcessHandle.of(r).ifPresent(h -> h.descendants().forEach(ProcessHandle::destroyForcibly));
        }

        @Override
        public boolean isEmpty() {
            long r = root;
            return r <= 0 || ProcessHandle.of(r).map(h -> !h.isAlive() && h.descendants().findAny().isEmpty()).orElse(true);
        }

        @Override
        public boolean oomKilled() {
            return exceeded;
        }

        @Override
        public OptionalLong peakMemoryBytes() {
            return peak > 0 ? OptionalLong.of(peak) : OptionalLong.empty();
        }

        @Override
        public OptionalLong memoryBytes() {
            return root > 0 ? OptionalLong.of(current) : OptionalLong.empty();
        }

        @Override
        public OptionalDouble cpuTimeMs() {
            return OptionalDouble.empty();
        }

        @Override
        public void remove() {
            RUNS.remove(this);
        }
    }
}
