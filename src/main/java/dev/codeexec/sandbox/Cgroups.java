package dev.codeexec.sandbox;


import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;

/**
 * Kernel resource limits for whole runs: one cgroup per run under {@code <server's own cgroup>/code-exec/}.
 * Supports cgroup v2 (unified, the usual production layout) and v1 (separate memory/pids/cpuacct hierarchies,
 * as on the development machines). Nesting under the server's own cgroup keeps runs inside whatever limits the
 * operator (systemd, a container) gave the server, and is the only place v2 delegation allows us to write.
 *
 * <p>{@link #detect} decides once. When neither is usable the mode is "none" and the launcher falls back to
 * rlimits (RLIMIT_AS, RLIMIT_NPROC), which are weaker: per process, and NPROC is per host uid.
 */
final class Cgroups {

    static final String PARENT = "code-exec";
    static final String INSTANCE_PREFIX = "jvm-";

    enum Mode { V2, V1, NONE }

    private final Mode mode;
    /** v2: the one parent dir. v1: controller → parent dir (memory, pids, cpuacct). */
    private final Map<String, Path> parents;
    private final String note;

    private Cgroups(Mode mode, Map<String, Path> parents, String note) {
        this.mode = mode;
        this.parents = parents;
        this.note = note;
    }

    Mode mode() {
        return mode;
    }

    /** "v2", "v1" or "none(rlimits)" for runtime_info. */
    String label() {
        return switch (mode) {
            case V2 -> "v2";
            case V1 -> "v1";
            case NONE -> "none(rlimits)";
        };
    }

    /** Why cgroups are not used (empty when they are). */
    String note() {
        return note;
    }

    boolean limitsMemory() {
        return mode != Mode.NONE;
    }

    boolean limitsPids() {
        return mode == Mode.V2 || parents.containsKey("pids");
    }

    static Cgroups none(String why) {
        return new Cgroups(Mode.NONE, Map.of(), why);
    }

    /**
     * Whether runs without a cgroup get the {@link MemoryWatchdog} (the sum of their processes' memory, killed
     * over the limit) besides RLIMIT_AS per process. On by default; tests of the bare rlimit fallback turn it off.
     */
    private boolean watchdog = true;

    Cgroups withoutWatchdog() {
        Cgroups c = new Cgroups(mode, parents, note);
        c.watchdog = false;
        return c;
    }

    boolean watchesMemory() {
        return mode == Mode.NONE && watchdog;
    }

    static Cgroups detect() {
        return detect(Path.of("/proc/self/cgroup"), Path.of("/proc/self/mountinfo"),
                INSTANCE_PREFIX + ProcessHandle.current().pid()).registerCleanup();
    }

    /**
     * @param instance the directory under {@code code-exec/} owned by this server process: run cgroups go below
     *                 it, and instance directories of server processes that no longer exist are cleaned up, so a
     *                 crashed server leaves nothing behind past the next start
     */
    static Cgroups detect(Path procSelfCgroup, Path mountinfo, String instance) {
        String why;
        try {
            List<String> self = Files.readAllLines(procSelfCgroup);
            List<String> mounts = Files.readAllLines(mountinfo);
            Optional<Cgroups> v2 = tryV2(self, mounts, instance);
            if (v2.isPresent()) return v2.get();
            Optional<Cgroups> v1 = tryV1(self, mounts, instance);
            if (v1.isPresent()) return v1.get();
            why = "no writable cgroup v2 with memory+pids controllers and no cgroup v1 memory hierarchy";
        } catch (IOException | RuntimeException e) {
            why = "cgroup detection failed: " + e.getMessage();
        }
        return new Cgroups(Mode.NONE, Map.of(), why);
    }

    /** A cgroup with no controllers delegated to us is useless for limits; so is one we cannot write. */
    private static Optional<Cgroups> tryV2(List<String> self, List<String> mounts, String instance) {
        String own = null;
        for (String l : self) if (l.startsWith("0::")) own = l.substring(3);
        if (own == null) return Optional.empty();
        for (String m : mounts) {
            MountLine ml = MountLine.parse(m);
            if (ml == null || !ml.fsType.equals("cgroup2")) continue;
            Path ownDir = ml.mountPoint.resolve(relative(own));
            try {
                String controllers = read(ownDir.resolve("cgroup.controllers"));
                if (!controllers.contains("memory") || !controllers.contains("pids")) continue;
                Path base = ownDir.resolve(PARENT);
                enableV2Controllers(ownDir);
                Files.createDirectories(base);
                enable(base.resolve("cgroup.subtree_control"));
                reapStale(base);
                Path parent = base.resolve(instance);
                Files.createDirectories(parent);
                enable(parent.resolve("cgroup.subtree_control"));
                return Optional.of(new Cgroups(Mode.V2, Map.of("unified", parent), ""));
            } catch (IOException e) {
                // not delegated to us or not writable: try the next mount / v1
            }
        }
        return Optional.empty();
    }

    /**
     * Enables memory and pids (required) and cpu (for usage figures; optional) for a cgroup's children, one
     * controller per write: a controller the parent does not offer fails alone.
     */
    private static void enable(Path subtreeControl) throws IOException {
        write(subtreeControl, "+memory");
        write(subtreeControl, "+pids");
        try {
            write(subtreeControl, "+cpu");
        } catch (IOException e) {
            // no CPU figures then
        }
    }

    /**
     * v2 forbids controllers in a cgroup's children while the cgroup itself holds processes ("no internal
     * processes"), so when the server sits in its cgroup directly it moves itself into a leaf {@code server/}.
     */
    private static void enableV2Controllers(Path ownDir) throws IOException {
        Path sc = ownDir.resolve("cgroup.subtree_control");
        String enabled = read(sc);
        if (enabled.contains("memory") && enabled.contains("pids")) return;
        try {
            enable(sc);
        } catch (IOException busy) {
            Path leaf = ownDir.resolve("server");
            Files.createDirectories(leaf);
            for (String pid : read(ownDir.resolve("cgroup.procs")).split("\\s+")) {
                if (pid.isBlank()) continue;
                try {
                    write(leaf.resolve("cgroup.procs"), pid);
                } catch (IOException gone) {
                    // process exited meanwhile
                }
            }
            enable(sc);
        }
    }

    private static Optional<Cgroups> tryV1(List<String> self, List<String> mounts, String instance) {
        Map<String, String> ownPaths = new LinkedHashMap<>();
        for (String l : self) {
            String[] f = l.split(":", 3);
            if (f.length == 3 && !f[1].isEmpty()) for (String c : f[1].split(",")) ownPaths.put(c, f[2]);
        }
        Map<String, Path> parents = new LinkedHashMap<>();
        for (String controller : List.of("memory", "pids", "cpuacct")) {
            for (String m : mounts) {
                MountLine ml = MountLine.parse(m);
                if (ml == null || !ml.fsType.equals("cgroup") || !List.of(ml.superOptions.split(",")).contains(controller)) continue;
                String own = ownPaths.getOrDefault(controller, "/");
                Path base = ml.mountPoint.resolve(relative(own)).resolve(PARENT);
                Path parent = base.resolve(instance);
                try {
                    Files.createDirectories(base);
                    reapStale(base);
                    Files.createDirectories(parent);
                    parents.put(controller, parent);
                } catch (IOException e) {
                    // unusable: leave this controller out
                }
                break;
            }
        }
        if (!parents.containsKey("memory")) return Optional.empty();
        return Optional.of(new Cgroups(Mode.V1, Map.copyOf(parents), ""));
    }

    private Cgroups registerCleanup() {
        if (mode != Mode.NONE) {
            // An instance dir with no runs left is removed at exit; one still busy is reaped at the next start.
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                for (Path p : parents.values()) {
                    try {
                        Files.deleteIfExists(p);
                    } catch (IOException e) {
                        // still in use or already gone
                    }
                }
            }, "cgroup-cleanup"));
        }
        return this;
    }

    /** Kills what is left in instance dirs of server processes that are gone, and removes the dirs. */
    static void reapStale(Path base) {
        try (var s = Files.list(base)) {
            for (Path inst : s.filter(Files::isDirectory).toList()) {
                String name = inst.getFileName().toString();
                if (!name.startsWith(INSTANCE_PREFIX)) continue;
                long pid;
                try {
                    pid = Long.parseLong(name.substring(INSTANCE_PREFIX.length()));
                } catch (NumberFormatException e) {
                    continue;
                }
                if (ProcessHandle.of(pid).isPresent()) continue;
                try (var runs = Files.list(inst)) {
                    for (Path run : runs.filter(Files::isDirectory).toList()) {
                        killLoop(List.of(run.resolve("cgroup.procs")));
                        rmdir(run);
                    }
                }
                rmdir(inst);
            }
        } catch (IOException e) {
            // nothing to reap, or not ours to reap
        }
    }

    private static String relative(String cgroupPath) {
        String p = cgroupPath.startsWith("/") ? cgroupPath.substring(1) : cgroupPath;
        return p;
    }

    /** A background job's cgroup v2 {@code cpu.weight}: a fifth of an interactive run's (the kernel's default 100). */
    static final int BACKGROUND_CPU_WEIGHT = 20;

    /** Creates the run's cgroup(s) with the limits set; nothing is created in mode NONE. */
    RunCgroup create(String runId, Limits limits) throws SandboxException {
        return create(runId, limits, false);
    }

    /**
     * The same; {@code background}: a background job's, whose {@code cpu.weight} is {@link #BACKGROUND_CPU_WEIGHT}
     * where the cpu controller is enabled (cgroup v2; elsewhere the launcher's nice value is what lowers it).
     */
    RunCgroup create(String runId, Limits limits, boolean background) throws SandboxException {
        if (mode == Mode.NONE) return watchdog ? new MemoryWatchdog.Watched(limits.memoryBytes()) : RunCgroup.NONE;
        List<Path> dirs = new ArrayList<>();
        try {
            for (Map.Entry<String, Path> e : parents.entrySet()) {
                Path d = e.getValue().resolve(runId);
                Files.createDirectory(d);
                dirs.add(d);
            }
            if (mode == Mode.V2) {
                Path d = dirs.getFirst();
                write(d.resolve("memory.max"), Long.toString(limits.memoryBytes()));
                if (Files.exists(d.resolve("memory.swap.max"))) write(d.resolve("memory.swap.max"), "0");
                write(d.resolve("pids.max"), Integer.toString(limits.maxProcesses()));
                if (background && Files.exists(d.resolve("cpu.weight")))
                    write(d.resolve("cpu.weight"), Integer.toString(BACKGROUND_CPU_WEIGHT));
                return new V2(d);
            }
            Path mem = parents.get("memory").resolve(runId);
            write(mem.resolve("memory.limit_in_bytes"), Long.toString(limits.memoryBytes()));
            // memsw must not be below the memory limit, hence set after it; equal means no swap.
            if (Files.exists(mem.resolve("memory.memsw.limit_in_bytes")))
                write(mem.resolve("memory.memsw.limit_in_bytes"), Long.toString(limits.memoryBytes()));
            Path pids = parents.containsKey("pids") ? parents.get("pids").resolve(runId) : null;
            if (pids != null) write(pids.resolve("pids.max"), Integer.toString(limits.maxProcesses()));
            Path cpu = parents.containsKey("cpuacct") ? parents.get("cpuacct").resolve(runId) : null;
            return new V1(List.copyOf(dirs), mem, pids, cpu);
        } catch (IOException e) {
            for (Path d : dirs.reversed()) rmdir(d);
            throw new SandboxException("cannot set up the run's cgroup: " + e.getMessage(), e);
        }
    }

    /** Leftover run cgroups (for tests and health checks). */
    List<Path> leftovers() {
        List<Path> out = new ArrayList<>();
        for (Path p : parents.values()) {
            try (var s = Files.list(p)) {
                s.filter(Files::isDirectory).forEach(out::add);
            } catch (IOException e) {
                // parent gone: nothing left
            }
        }
        return out;
    }

    /** The cgroup(s) of one run. */
    sealed interface RunCgroup permits None, V1, V2, MemoryWatchdog.Watched {
        RunCgroup NONE = new None();

        /** The launcher's pid, once started (a cgroup needs none: the launcher joined it itself). */
        default void attach(long pid) {
        }

        /**
         * The run's own tmpfs mounts, as paths inside the sandbox: what their files hold is memory. A cgroup charges
         * those pages to the run itself; the watchdog counts what the mounts hold.
         */
        default void countTmpfs(List<String> insideSandbox) {
        }

        /** A tmpfs mounted for the run after it started, at this host path (a warm sandbox's working directory). */
        default void countTmpfsAt(Path host) {
        }

        /** Files the launcher writes its pid into before exec. */
        List<Path> procsFiles();

        /** SIGKILLs every process in the run's cgroup until it is empty (or ~2 s passed). */
        void killAll();

        boolean isEmpty();

        boolean oomKilled();

        OptionalLong peakMemoryBytes();

        /** Memory charged to the run now (page cache of its tmpfs files included). */
        OptionalLong memoryBytes();

        OptionalDouble cpuTimeMs();

        /** Removes the cgroup dirs (retrying briefly while the kernel finishes tearing processes down). */
        void remove();
    }

    record None() implements RunCgroup {
        public List<Path> procsFiles() {
            return List.of();
        }

        public void killAll() {
        }

        public boolean isEmpty() {
            return true;
        }

        public boolean oomKilled() {
            return false;
        }

        public OptionalLong peakMemoryBytes() {
            return OptionalLong.empty();
        }

        public OptionalLong memoryBytes() {
            return OptionalLong.empty();
        }

        public OptionalDouble cpuTimeMs() {
            return OptionalDouble.empty();
        }

        public void remove() {
        }
    }

    record V1(List<Path> dirs, Path memory, Path pids, Path cpuacct) implements RunCgroup {
        public List<Path> procsFiles() {
            return dirs.stream().map(d -> d.resolve("cgroup.procs")).toList();
        }

        public void killAll() {
            killLoop(dirs.stream().map(d -> d.resolve("cgroup.procs")).toList());
        }

        public boolean isEmpty() {
            return dirs.stream().allMatch(d -> pidsIn(d.resolve("cgroup.procs")).isEmpty());
        }

        public boolean oomKilled() {
            return keyed(memory.resolve("memory.oom_control"), "oom_kill") > 0;
        }

        public OptionalLong peakMemoryBytes() {
            long v = number(memory.resolve("memory.max_usage_in_bytes"));
            return v >= 0 ? OptionalLong.of(v) : OptionalLong.empty();
        }

        public OptionalLong memoryBytes() {
            long v = number(memory.resolve("memory.usage_in_bytes"));
            return v >= 0 ? OptionalLong.of(v) : OptionalLong.empty();
        }

        public OptionalDouble cpuTimeMs() {
            if (cpuacct == null) return OptionalDouble.empty();
            long ns = number(cpuacct.resolve("cpuacct.usage"));
            return ns >= 0 ? OptionalDouble.of(ns / 1e6) : OptionalDouble.empty();
        }

        public void remove() {
            for (Path d : dirs) rmdir(d);
        }
    }

    record V2(Path dir) implements RunCgroup {
        public List<Path> procsFiles() {
            return List.of(dir.resolve("cgroup.procs"));
        }

        public void killAll() {
            Path kill = dir.resolve("cgroup.kill");
            if (Files.exists(kill)) {
                try {
                    write(kill, "1");
                } catch (IOException e) {
                    // fall through to the pid loop
                }
            }
            killLoop(List.of(dir.resolve("cgroup.procs")));
        }

        public boolean isEmpty() {
            return pidsIn(dir.resolve("cgroup.procs")).isEmpty();
        }

        public boolean oomKilled() {
            return keyed(dir.resolve("memory.events"), "oom_kill") > 0;
        }

        public OptionalLong peakMemoryBytes() {
            long v = number(dir.resolve("memory.peak"));
            return v >= 0 ? OptionalLong.of(v) : OptionalLong.empty();
        }

        public OptionalLong memoryBytes() {
            long v = number(dir.resolve("memory.current"));
            return v >= 0 ? OptionalLong.of(v) : OptionalLong.empty();
        }

        public OptionalDouble cpuTimeMs() {
            long us = keyed(dir.resolve("cpu.stat"), "usage_usec");
            return us >= 0 ? OptionalDouble.of(us / 1e3) : OptionalDouble.empty();
        }

        public void remove() {
            rmdir(dir);
        }
    }

    /**
     * Kills until empty: a process may fork between reading the list and the kill. With the pid namespace the
     * first kill of its init usually takes everything down at once.
     */
    static void killLoop(List<Path> procsFiles) {
        long deadline = System.nanoTime() + 2_000_000_000L;
        while (System.nanoTime() < deadline) {
            List<Long> pids = new ArrayList<>();
            for (Path f : procsFiles) pids.addAll(pidsIn(f));
            if (pids.isEmpty()) return;
            for (long pid : pids) ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
            sleepMs(5);
        }
    }

    static List<Long> pidsIn(Path procs) {
        try {
            List<Long> out = new ArrayList<>();
            for (String s : read(procs).split("\\s+")) if (!s.isBlank()) out.add(Long.parseLong(s.trim()));
            return out;
        } catch (IOException | NumberFormatException e) {
            return List.of();
        }
    }

    private static void rmdir(Path d) {
        for (int i = 0; i < 100; i++) {
            try {
                Files.deleteIfExists(d);
                return;
            } catch (NoSuchFileException e) {
                return;
            } catch (IOException busy) {
                sleepMs(10);
            }
        }
        org.slf4j.LoggerFactory.getLogger(Cgroups.class).warn("could not remove cgroup {}", d);
    }

    private static long keyed(Path file, String key) {
        try {
            for (String line : read(file).split("\n")) {
                String[] kv = line.trim().split("\\s+");
                if (kv.length == 2 && kv[0].equals(key)) return Long.parseLong(kv[1]);
            }
        } catch (IOException | NumberFormatException e) {
            // not available on this kernel
        }
        return -1;
    }

    private static long number(Path file) {
        try {
            return Long.parseLong(read(file).trim());
        } catch (IOException | NumberFormatException e) {
            return -1;
        }
    }

    static String read(Path p) throws IOException {
        return Files.readString(p, StandardCharsets.UTF_8);
    }

    static void write(Path p, String v) throws IOException {
        Files.writeString(p, v, StandardCharsets.UTF_8);
    }

    static void sleepMs(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The fields of one /proc/self/mountinfo line that matter here. */
    private record MountLine(Path mountPoint, String fsType, String superOptions) {
        static MountLine parse(String line) {
            int dash = line.indexOf(" - ");
            if (dash < 0) return null;
            String[] pre = line.substring(0, dash).split(" ");
            String[] post = line.substring(dash + 3).split(" ");
            if (pre.length < 5 || post.length < 3) return null;
            return new MountLine(Path.of(pre[4].replace("\\040", " ")), post[0], post[2]);
        }
    }
}
