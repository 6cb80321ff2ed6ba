package dev.codeexec.sandbox;

import dev.codeexec.linux.Posix;
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
import java.util.concurrent.CopyOnWriteArrayList;

import static java.nio.charset.StandardCharsets.UTF_8;

/**
 * The memory limit of whole runs where no cgroup can hold it (a server run by a normal user without a delegated
 * cgroup v2 subtree, or a host without usable cgroups): every {@link #TICK_MS} a thread of the run's own finds its
 * processes (the descendants of its launcher: a sandbox's orphans are reparented to its init, which is one of them),
 * adds up the memory they hold and kills the run's whole tree when the sum is over the run's limit. Then the run
 * reports {@code memory_limit}, as a cgroup OOM kill would, and its peak is the largest sum seen.
 *
 * <p>What a run holds, each page once ({@link Pass}): its processes' anonymous memory and the shared memory they map
 * (their proportional shares, {@code Pss_Anon} and {@code Pss_Shmem} of /proc/PID/smaps_rollup, Linux 5.8+), the
 * memfds they hold open, mapped or not (the blocks of each file, through /proc/PID/fd), and the files of the run's
 * tmpfs mounts (/tmp, /dev/shm, a tmpfs working directory: statfs), which are memory too and which a cgroup charges
 * to the run as well. A copy-on-write page shared by the n processes of a fork counts 1/n in each, so the run's sum
 * is what a cgroup would charge once. Counting the resident anonymous pages of each process instead (statm) counted a
 * forked python's ~5 MB once per child, and 60 sleeping children of a 256 MB run were killed as a 300 MB run. Where
 * smaps_rollup is missing or unreadable, statm (resident minus shared pages) is the fallback, with that over-count
 * and without shared memory.
 *
 * <p>Weaker than a cgroup, and said so in {@code runtime_info}: a run can overshoot by what it allocates in one tick
 * ({@value #NEAR_TICK_MS} ms once it is over half its limit, {@value #TICK_MS} ms before) before it is stopped
 * (RLIMIT_AS still caps each process at once). And it cannot see shared memory that no process of the run maps or
 * holds a descriptor of: the part of a shared mapping (anonymous, or of a memfd whose descriptor was closed) that a
 * process unmapped while keeping the rest, a SysV segment left detached, a memfd in flight in a unix socket. The
 * kernel keeps those pages with the file, and the ways to reach such a file from outside (/proc/PID/map_files,
 * entering the sandbox's ipc namespace) need CAP_SYS_ADMIN in the host's user namespace, which a normal user does
 * not have. Nor does it count kernel memory (page tables, socket and pipe buffers). Only a cgroup holds those.
 *
 * <p>What a pass costs grows with what the run holds: about 0.5 ms for one python process here, a few µs more per
 * open descriptor (a statx of its /proc link), and a read of /proc/PID/smaps for each process that maps shared
 * memory while memfds are held open or tmpfs files exist (MemoryWatchdogBench). So a pass is bounded: a run whose
 * processes hold more than {@value #MAX_DESCRIPTORS} descriptors, or one of whose smaps is longer than
 * {@link #MAX_SMAPS_CHARS}, cannot be measured in time and is ended as over its limit; and each run has its own
 * thread, paused after each pass for at least twice as long as the pass took, so what one run costs never delays
 * another run's check.
 */
final class MemoryWatchdog {

    static final long TICK_MS = 50;
    /** The tick while a run is over {@link #NEAR} of its limit: its overshoot is what it allocates in 10 ms. */
    static final long NEAR_TICK_MS = 10;
    private static final double NEAR = 0.5;
    private static final long PAGE = 4096;
    /**
     * The most open descriptors a pass looks at in one run (about 4 µs each): a run holding more is ended as over its
     * memory limit, since what they hold cannot be measured in time.
     */
    static final int MAX_DESCRIPTORS = 16_384;
    /** The most of one process's /proc/PID/smaps a pass reads (about 15,000 mappings); more ends the run likewise. */
    static final long MAX_SMAPS_CHARS = 16L << 20;
    private static final Set<Watched> RUNS = ConcurrentHashMap.newKeySet();

    private MemoryWatchdog() {
    }

    /**
     * Watches a run on a thread of its own: what one run makes a pass cost (its processes, descriptors, mappings)
     * delays only its own next pass, never another run's, and a run whose pass is slow is measured less often (the
     * pause after a pass is at least twice the pass), so a watchdog takes at most a third of a core.
     */
    private static void register(Watched w) {
        if (RUNS.add(w)) Thread.ofPlatform().daemon().name("memory-watchdog").start(() -> w.watch(Path.of("/proc")));
    }

    /** One pass over every watched run (the benchmark measures it); returns whether some run is near its limit. */
    static boolean tick(Path proc) {
        Map<Long, List<Long>> all = CHILDREN_FILES ? null : childrenOf(proc);
        boolean near = false;
        for (Watched w : RUNS) {
            if (w.root <= 0) continue;
            Usage u = w.measure(proc, all);
            w.measured(u);
            near |= u.total() > w.limitBytes * NEAR;
        }
        return near;
    }

    /**
     * What one pass counted of a run, in bytes: its processes' anonymous memory, the shared memory they map or
     * hold open (each page once), and what its tmpfs mounts hold; {@code beyond}, when not null, says why the pass
     * could not measure the run within its bounds ({@link #MAX_DESCRIPTORS}, {@link #MAX_SMAPS_CHARS}).
     */
    record Usage(long anonymous, long shared, long tmpfs, int processes, String beyond) {
        long total() {
            return anonymous + shared + tmpfs;
        }
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

    /** The run's processes: its launcher and every descendant. */
    static List<Long> processes(Path proc, long root, Map<Long, List<Long>> all) {
        List<Long> out = new ArrayList<>();
        List<Long> todo = new ArrayList<>(List.of(root));
        while (!todo.isEmpty() && out.size() < 100_000) {
            long pid = todo.removeLast();
            out.add(pid);
            todo.addAll(all != null ? all.getOrDefault(pid, List.of()) : childrenFromTasks(proc, pid));
        }
        return out;
    }

    /** A file, by device ({@link Posix.Stat#dev}'s encoding) and inode. */
    record FileKey(long dev, long ino) {
    }

    private static final String MEMFD = "/memfd:";
    private static final long TMPFS_MAGIC = 0x01021994;

    /**
     * One run measured once. Each page is counted where it is held, once:
     * <ul>
     * <li>anonymous memory: each process's proportional share ({@code Pss_Anon});</li>
     * <li>shared memory the processes map (memfds, /dev/shm and /tmp files, shared anonymous mappings, SysV
     * segments): their proportional share of it ({@code Pss_Shmem}), so a page mapped by n of them counts 1/n in
     * each;</li>
     * <li>memfds held open, mapped or not: the bytes each file holds (its blocks, through /proc/PID/fd/N), once
     * however many descriptors and processes refer to it;</li>
     * <li>the run's tmpfs mounts (/tmp, /dev/shm, a tmpfs working directory): the bytes each holds (statfs), which
     * takes in every file, open or deleted, mapped or not.</li>
     * </ul>
     * A page of a memfd held open or of a tmpfs file that is also mapped would count twice: for the processes that
     * map shared memory at all, their mappings of those files are read from /proc/PID/smaps and taken off.
     */
    static final class Pass implements AutoCloseable {
        private final Path proc;
        private Posix.Stats stats;
        private long anonymous;
        private long mappedShared;
        private int processes;
        /** Processes that map shared memory: their mappings of files counted whole are taken off. */
        private final List<Long> mapping = new ArrayList<>();
        /** Memfds held open: file → bytes it holds. */
        private final Map<FileKey, Long> held = new HashMap<>();
        /** The run's tmpfs mounts: device → bytes held. */
        private final Map<Long, Long> tmpfs = new HashMap<>();
        /** Descriptors looked at so far. */
        private int descriptors;
        /** Why the run cannot be measured within the pass's bounds, once it is known. */
        private String beyond;

        Pass(Path proc) {
            this.proc = proc;
        }

        private Posix.Stats stats() {
            if (stats == null) stats = new Posix.Stats();
            return stats;
        }

        /** One process of the run: what it maps, and the memfds it holds open. */
        void process(long pid) {
            if (beyond != null) return;
            processes++;
            Path dir = proc.resolve(Long.toString(pid));
            long[] kb = null;
            try {
                kb = rollupKb(Files.readString(dir.resolve("smaps_rollup")));
            } catch (IOException | RuntimeException unreadable) {
                // an older kernel, or gone: statm tells which
            }
            if (kb != null) {
                anonymous += kb[0] << 10;
                mappedShared += kb[1] << 10;
                if (kb[1] > 0) mapping.add(pid);
            } else {
                try {
                    // resident minus shared pages: counts a forked process's copy-on-write pages in each child
                    String[] f = Files.readString(dir.resolve("statm")).trim().split(" ");
                    anonymous += Math.max(0, Long.parseLong(f[1]) - Long.parseLong(f[2])) * PAGE;
                } catch (IOException | RuntimeException gone) {
                    return;
                }
            }
            descriptors(dir);
        }

        /**
         * The memfds among a process's open files. Each descriptor's file is looked at through its /proc link
         * (statx: one system call, no string); a memfd is a regular file without a name, like a deleted file, which
         * its link tells apart.
         */
        private void descriptors(Path dir) {
            int fds;
            try {
                fds = Posix.openat(Posix.AT_FDCWD, dir.resolve("fd").toString(), Posix.O_RDONLY | Posix.O_DIRECTORY);
            } catch (Posix.Errno | RuntimeException gone) {
                return;
            }
            try {
                long from = 0;
                while (true) {
                    Posix.DirBatch batch = Posix.readDir(fds, from, 4096);
                    for (Posix.DirEntry e : batch.entries()) {
                        if (++descriptors > MAX_DESCRIPTORS) {
                            beyond = "its processes hold more than " + MAX_DESCRIPTORS + " open descriptors";
                            return;
                        }
                        try {
                            Posix.Allocation a = stats().allocation(fds, e.name(), 0);
                            if ((a.mode() & Posix.S_IFMT) == Posix.S_IFREG && a.links() == 0) memfd(dir, e.name());
                        } catch (Posix.Errno | IOException | RuntimeException closed) {
                            // closed meanwhile
                        }
                    }
                    if (batch.end()) return;
                    from = batch.next();
                }
            } catch (Posix.Errno | RuntimeException gone) {
                // ended meanwhile
            } finally {
                Posix.close(fds);
            }
        }

        /**
         * The bytes a memfd holds. Opened (O_PATH) and its link read through that descriptor: the number may have
         * been closed and reused for another file since it was looked at.
         */
        private void memfd(Path dir, byte[] fd) throws IOException, Posix.Errno {
            int own = Posix.openat(Posix.AT_FDCWD, dir.resolve("fd").resolve(new String(fd, UTF_8)).toString(), Posix.O_PATH);
            try {
                if (!Files.readSymbolicLink(proc.resolve("self/fd/" + own)).toString().startsWith(MEMFD)) return;
                Posix.Allocation a = stats().allocation(own, new byte[0], Posix.AT_EMPTY_PATH);
                held.putIfAbsent(new FileKey(a.dev(), a.ino()), a.bytes());
            } finally {
                Posix.close(own);
            }
        }

        /** Whether the root of {@code pid} is not the host's (the server's) own. */
        boolean hasOwnRoot(long pid) {
            try {
                Posix.Allocation r = stats().allocation(Posix.AT_FDCWD,
                        (proc.resolve(Long.toString(pid)).resolve("root") + "/").getBytes(UTF_8), 0);
                Posix.Allocation host = stats().allocation(Posix.AT_FDCWD, "/".getBytes(UTF_8), 0);
                return r.dev() != host.dev() || r.ino() != host.ino();
            } catch (Posix.Errno | RuntimeException gone) {
                return false;
            }
        }

        /** The bytes the tmpfs at {@code path} holds; nothing where it is not a tmpfs. Each file system once. */
        void tmpfs(String path) {
            int fd;
            try {
                fd = Posix.openat(Posix.AT_FDCWD, path, Posix.O_PATH | Posix.O_DIRECTORY);
            } catch (Posix.Errno | RuntimeException gone) {
                return;
            }
            try {
                Posix.FsStat fs = Posix.fstatfs(fd);
                if (fs.type() != TMPFS_MAGIC) return;
                long dev = stats().allocation(fd, new byte[0], Posix.AT_EMPTY_PATH).dev();
                tmpfs.putIfAbsent(dev, Math.max(0, fs.blocks() - fs.freeBlocks()) * fs.blockSize());
            } catch (Posix.Errno | RuntimeException gone) {
                // unmounted meanwhile
            } finally {
                Posix.close(fd);
            }
        }

        Usage usage() {
            Map<FileKey, Long> memfds = new HashMap<>(held);
            memfds.keySet().removeIf(k -> tmpfs.containsKey(k.dev())); // a file of a tmpfs mount: counted there
            Set<Long> filled = new java.util.HashSet<>();
            tmpfs.forEach((dev, bytes) -> {
                if (bytes > 0) filled.add(dev);
            });
            long overlapKb = 0;
            if (beyond == null && (!memfds.isEmpty() || !filled.isEmpty())) {
                for (long pid : mapping) {
                    try (java.io.BufferedReader smaps = Files.newBufferedReader(proc.resolve(Long.toString(pid)).resolve("smaps"))) {
                        long[] read = {0};
                        java.util.Iterator<String> lines = smaps.lines().takeWhile(l -> (read[0] += l.length() + 1) <= MAX_SMAPS_CHARS).iterator();
                        overlapKb += countedWholeKb(lines, memfds.keySet(), filled);
                        if (read[0] > MAX_SMAPS_CHARS) {
                            beyond = "a process of it maps more than /proc/PID/smaps can list in " + (MAX_SMAPS_CHARS >> 20) + " MiB";
                            break;
                        }
                    } catch (IOException | RuntimeException gone) {
                        // ended meanwhile
                    }
                }
            }
            long shared = Math.max(0, mappedShared - (overlapKb << 10));
            for (long b : memfds.values()) shared += b;
            long files = 0;
            for (long b : tmpfs.values()) files += b;
            return new Usage(anonymous, shared, files, processes, beyond);
        }

        @Override
        public void close() {
            if (stats != null) stats.close();
        }
    }

    /**
     * {@code Pss_Anon} and {@code Pss_Shmem} (kB) of a smaps_rollup text; null when the kernel does not report
     * them (before 5.8).
     */
    static long[] rollupKb(String rollup) {
        long anon = rollupField(rollup, "\nPss_Anon:");
        long shmem = rollupField(rollup, "\nPss_Shmem:");
        return anon < 0 || shmem < 0 ? null : new long[]{anon, shmem};
    }

    private static long rollupField(String rollup, String field) {
        int at = rollup.indexOf(field);
        if (at < 0) return -1;
        int end = rollup.indexOf('\n', at + 1);
        String value = rollup.substring(at + field.length(), end < 0 ? rollup.length() : end).trim();
        return Long.parseLong(value.substring(0, value.indexOf(' ')).trim());
    }

    /**
     * Of a /proc/PID/smaps text, the proportional shared memory (kB) in mappings of files counted whole elsewhere:
     * the given files, and any file of the given devices. A shared mapping's pages are all the file's; a private
     * mapping's are the file's but for those written since (anonymous copies, counted as anonymous memory).
     */
    static long countedWholeKb(java.util.Iterator<String> smaps, Set<FileKey> files, Set<Long> devices) {
        long total = 0;
        boolean counted = false;
        boolean shared = false;
        long pss = 0;
        long anonymous = 0;
        for (String line : (Iterable<String>) () -> smaps) {
            if (line.isEmpty()) continue;
            char c = line.charAt(0);
            if (c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
                // a mapping: "start-end perms offset major:minor inode [path]"
                if (counted) total += shared ? pss : Math.max(0, pss - anonymous);
                String[] f = line.split(" ", 6);
                counted = false;
                pss = anonymous = 0;
                if (f.length < 5) continue;
                shared = f[1].length() > 3 && f[1].charAt(3) == 's';
                int colon = f[3].indexOf(':');
                if (colon < 0) continue;
                long dev = Long.parseLong(f[3], 0, colon, 16) << 32 | Long.parseLong(f[3], colon + 1, f[3].length(), 16);
                counted = devices.contains(dev) || files.contains(new FileKey(dev, Long.parseLong(f[4])));
            } else if (counted && line.startsWith("Pss:")) {
                pss = kb(line);
            } else if (counted && line.startsWith("Anonymous:")) {
                anonymous = kb(line);
            }
        }
        if (counted) total += shared ? pss : Math.max(0, pss - anonymous);
        return total;
    }

    /** The number of a "Name:   123 kB" line. */
    private static long kb(String line) {
        String v = line.substring(line.indexOf(':') + 1).trim();
        int space = v.indexOf(' ');
        return Long.parseLong(space < 0 ? v : v.substring(0, space));
    }

    private static boolean isNumber(String s) {
        if (s.isEmpty()) return false;
        for (int i = 0; i < s.length(); i++) if (s.charAt(i) < '0' || s.charAt(i) > '9') return false;
        return true;
    }

    /**
     * The first of {@code pids} (the launcher first) in another mount namespace than the launcher: a process inside
     * the sandbox (the launcher itself may be moving into another namespace, the sandboxes' trimmed one, as it
     * starts); -1 when there is none yet.
     */
    static long inOwnMountNamespace(Path proc, List<Long> pids) {
        try {
            Path launcher = Files.readSymbolicLink(proc.resolve(Long.toString(pids.getFirst())).resolve("ns/mnt"));
            for (long pid : pids.subList(1, pids.size())) {
                try {
                    if (!Files.readSymbolicLink(proc.resolve(Long.toString(pid)).resolve("ns/mnt")).equals(launcher)) return pid;
                } catch (IOException | RuntimeException gone) {
                    // ended meanwhile
                }
            }
        } catch (IOException | RuntimeException gone) {
            // the launcher ended
        }
        return -1;
    }

    /** One run watched: what a cgroup would report, measured by the watchdog. */
    static final class Watched implements Cgroups.RunCgroup {
        private final long limitBytes;
        private volatile long root = -1;
        private volatile long current;
        private volatile long peak;
        private volatile boolean exceeded;
        /** The run's own tmpfs mounts, as paths inside the sandbox. */
        private volatile List<String> tmpfsInside = List.of();
        /** The run's own tmpfs mounts made later, at host paths (a warm sandbox's working directory). */
        private final List<Path> tmpfsOnHost = new CopyOnWriteArrayList<>();
        /** A process inside the sandbox (in its mount namespace, with its root), once found. */
        private volatile long inside = -1;

        Watched(long limitBytes) {
            this.limitBytes = limitBytes;
        }

        @Override
        public void attach(long pid) {
            root = pid;
            register(this);
        }

        @Override
        public void countTmpfs(List<String> insideSandbox) {
            tmpfsInside = List.copyOf(insideSandbox);
        }

        @Override
        public void countTmpfsAt(Path host) {
            tmpfsOnHost.add(host);
        }

        /** One pass over this run. */
        Usage measure(Path proc, Map<Long, List<Long>> all) {
            List<Long> pids = processes(proc, root, all);
            try (Pass pass = new Pass(proc)) {
                for (long pid : pids) pass.process(pid);
                if (!tmpfsInside.isEmpty()) countTmpfsInside(pass, proc, pids);
                for (Path p : tmpfsOnHost) pass.tmpfs(p.toString());
                return pass.usage();
            }
        }

        /**
         * The tmpfs mounts inside the sandbox, through a process in it, found once: its root is checked until it is
         * the sandbox's own (bwrap starts in the host's root, where /dev/shm is the host's), then trusted (chroot is
         * refused inside).
         */
        private void countTmpfsInside(Pass pass, Path proc, List<Long> pids) {
            long in = inside;
            boolean known = in > 0 && pids.contains(in);
            if (!known) in = inOwnMountNamespace(proc, pids);
            if (in <= 0 || !known && !pass.hasOwnRoot(in)) return;
            inside = in;
            for (String p : tmpfsInside) pass.tmpfs(proc.resolve(Long.toString(in)).resolve("root") + p);
        }

        /** Measures the run until it is no longer watched, each pass on this (the run's own) thread. */
        void watch(Path proc) {
            while (RUNS.contains(this)) {
                long t0 = System.nanoTime();
                boolean near = false;
                try {
                    if (root > 0) {
                        Usage u = measure(proc, CHILDREN_FILES ? null : childrenOf(proc));
                        measured(u);
                        near = u.total() > limitBytes * NEAR;
                    }
                } catch (RuntimeException e) {
                    LoggerFactory.getLogger(MemoryWatchdog.class).warn("memory watchdog: {}", e.toString());
                }
                long tookMs = (System.nanoTime() - t0) / 1_000_000;
                try {
                    Thread.sleep(Math.max(near ? NEAR_TICK_MS : TICK_MS, 2 * tookMs));
                } catch (InterruptedException e) {
                    return;
                }
            }
        }

        void measured(Usage u) {
            long bytes = u.total();
            current = bytes;
            if (bytes > peak) peak = bytes;
            if (u.beyond() != null && !exceeded) {
                exceeded = true;
                LoggerFactory.getLogger(MemoryWatchdog.class).info("memory watchdog: a run cannot be measured ({}), "
                        + "so what it holds could pass its {} MiB unseen: killing it", u.beyond(), limitBytes >> 20);
                killAll();
            } else if (bytes > limitBytes && !exceeded) {
                exceeded = true;
                LoggerFactory.getLogger(MemoryWatchdog.class).info(
                        "memory watchdog: a run used {} MiB in {} processes (anonymous {} MiB, shared memory {} MiB, "
                                + "tmpfs files {} MiB), over its {} MiB: killing it",
                        bytes >> 20, u.processes(), u.anonymous() >> 20, u.shared() >> 20, u.tmpfs() >> 20,
                        limitBytes >> 20);
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
