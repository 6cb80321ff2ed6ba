package dev.codeexec.sandbox;

import dev.codeexec.linux.Spawn;

import java.io.File;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * The root-side first step of every sandboxed run: a tiny {@code /bin/sh} (dash) script that moves itself into
 * the run's cgroup(s), sets rlimits, opens the files the sandbox gets as file descriptors (as root, so none of
 * them has to be readable by the sandbox uid) and then execs the given command line (setpriv → bwrap, ...).
 * Joining the cgroup before the exec means every later process of the run is accounted from its first instruction.
 *
 * <p>If a step fails the script exits with {@link #SETUP_FAILED} before running anything: the program never
 * runs without its limits.
 */
final class Launcher {

    /** Exit code when the launcher could not join the cgroup or set a limit (its reason is on stderr). */
    static final int SETUP_FAILED = 125;

    static final int NOFILE = 4096;

    /**
     * dash redirections take single-digit fds: 0-2 are stdio, 3 is reserved for the seccomp program, 4-7 carry
     * read-only files and 8/9 the control channel ({@link SandboxSpec#CONTROL_IN_FD}, {@link SandboxSpec#CONTROL_OUT_FD}).
     */
    static final int FIRST_FILE_FD = 4;
    static final int LAST_FILE_FD = 7;
    static final int LAST_FD = 9;
    /** codeexec-helper open on this fd, for bwrap to execute as the sandbox's init (which closes it). */
    static final int HELPER_FD = 10;
    /** The status pipe ({@link Spawn#start(List, Map, Path, int)}): the init reports its program's wait status on it. */
    static final int STATUS_FD = 11;

    /**
     * Started processes must be forked from a thread that lives as long as the server: bwrap's
     * {@code --die-with-parent} (PR_SET_PDEATHSIG) fires when the forking *thread* ends, not the process. A
     * virtual thread is no help, as the fork happens on its carrier, which the pool may retire. One platform
     * thread that never ends does every fork, so callers may start runs from any thread.
     */
    private static final ExecutorService SPAWNER = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "sandbox-spawner");
        t.setDaemon(true);
        return t;
    });

    private Launcher() {
    }

    /** The nice value of a background job's processes: below interactive runs (0), inherited by all it starts. */
    static final int BACKGROUND_NICE = 10;

    /**
     * The launch command run at {@link #BACKGROUND_NICE} by coreutils' nice, which execs it: every process of the
     * run inherits the value from its first instruction, and descriptors pass through unchanged.
     */
    static List<String> niced(List<String> cmd) {
        List<String> out = new ArrayList<>(List.of("/usr/bin/nice", "-n", Integer.toString(BACKGROUND_NICE)));
        out.addAll(cmd);
        return out;
    }

    /**
     * @param procsFiles cgroup.procs files to join (may be empty)
     * @param rlimits    the rlimits to set
     * @param fds        fd number → host file opened read-only for the command
     * @param argv       what to exec
     */
    static List<String> command(List<Path> procsFiles, Rlimits rlimits, Map<Integer, Path> fds, List<String> argv) {
        return command(procsFiles, rlimits, fds, Map.of(), argv);
    }

    /** @param writeFds fd number → host file (a FIFO) opened write-only for the command, after {@code fds} */
    static List<String> command(List<Path> procsFiles, Rlimits rlimits, Map<Integer, Path> fds,
            Map<Integer, Path> writeFds, List<String> argv) {
        checkFds(fds, writeFds);
        StringBuilder s = new StringBuilder();
        for (Path p : procsFiles) s.append("echo $$ > ").append(quote(p.toString())).append(" || exit ").append(SETUP_FAILED).append('\n');
        List<String> ulimits = new ArrayList<>();
        for (Rlimit r : rlimits.list()) {
            if (r.soft() == r.hard()) {
                ulimits.add("ulimit -" + r.dashFlag() + " " + r.soft() / r.dashUnit());
            } else {
                ulimits.add("ulimit -S -" + r.dashFlag() + " " + r.soft() / r.dashUnit());
                ulimits.add("ulimit -H -" + r.dashFlag() + " " + r.hard() / r.dashUnit());
            }
        }
        s.append(String.join(" && ", ulimits)).append(" || exit ").append(SETUP_FAILED).append('\n');
        s.append("exec \"$@\"");
        for (Map.Entry<Integer, Path> e : fds.entrySet())
            s.append(' ').append(e.getKey()).append("< ").append(quote(e.getValue().toString()));
        // After the read-only files: a FIFO's open blocks until the server opens the other end, in this order.
        for (Map.Entry<Integer, Path> e : writeFds.entrySet())
            s.append(' ').append(e.getKey()).append("> ").append(quote(e.getValue().toString()));
        List<String> cmd = new ArrayList<>(List.of("/bin/sh", "-c", s.toString(), "sh"));
        cmd.addAll(argv);
        return cmd;
    }

    /**
     * The same first step as {@link #command} (cgroups, rlimits, fds: the same values), done by
     * {@code codeexec-helper launch}, which then also drops to {@code uid}/{@code gid} (what setpriv did) and execs
     * {@code argv} (bwrap, by absolute path).
     *
     * @param mntns what the helper opens to enter the mount namespace to start bwrap in ({@link TrimmedMounts}), or null
     */
    static List<String> helperCommand(Path helper, List<Path> procsFiles, Rlimits rlimits, Map<Integer, Path> fds,
            Map<Integer, Path> writeFds, String mntns, int uid, int gid, List<String> argv) {
        List<String> cmd = new ArrayList<>(List.of(helper.toString(), "launch"));
        for (Path p : procsFiles) cmd.addAll(List.of("--cgroup", p.toString()));
        checkFds(fds, writeFds);
        for (Rlimit r : rlimits.list())
            cmd.addAll(List.of("--rlimit", r.name() + "=" + r.soft() + ":" + r.hard()));
        fds.forEach((fd, path) -> cmd.addAll(List.of("--fd", fd + "=" + path)));
        writeFds.forEach((fd, path) -> cmd.addAll(List.of("--wfd", fd + "=" + path)));
        cmd.addAll(List.of("--fd", HELPER_FD + "=" + helper));
        if (mntns != null) cmd.addAll(List.of("--mntns", mntns));
        cmd.addAll(List.of("--uid", Integer.toString(uid), "--gid", Integer.toString(gid), "--"));
        cmd.addAll(argv);
        return cmd;
    }

    /**
     * One rlimit of a run: the helper's name for it, dash's {@code ulimit} flag and the unit dash counts it in, and
     * the values in the kernel's units (already multiples of that unit, so both launchers set the same limit).
     */
    record Rlimit(String name, String dashFlag, long dashUnit, long soft, long hard) {
    }

    /**
     * The rlimits of a run, the same for every launcher. CPU time, core size (0) and open files always; file size
     * unless left out; address space and processes only where asked, as stand-ins for a cgroup that is missing:
     * RLIMIT_AS counts mappings, not memory, and RLIMIT_NPROC counts every process of the sandbox uid on the host.
     */
    record Rlimits(Limits limits, boolean memory, boolean nproc, boolean fsize, long addressSpaceSlack) {

        /**
         * What RLIMIT_AS allows above the memory limit where the {@link MemoryWatchdog} holds the run's real memory:
         * runtimes reserve address space they never use (node about 730 MB before its first line, the JVM its class
         * space), so an address-space limit at the memory limit would stop them at small limits; the slack keeps one
         * process from running far past the limit between two of the watchdog's looks.
         */
        static final long WATCHED_SLACK = 1L << 30;

        /** CPU time, core size, open files and file size (the disk limit). */
        static Rlimits of(Limits limits) {
            return new Rlimits(limits, false, false, true, 0);
        }

        /** Also RLIMIT_AS at the memory limit. */
        Rlimits withMemory() {
            return new Rlimits(limits, true, nproc, fsize, addressSpaceSlack);
        }

        /** Also RLIMIT_NPROC at the process limit. */
        Rlimits withNproc() {
            return new Rlimits(limits, memory, true, fsize, addressSpaceSlack);
        }

        /** Without RLIMIT_NPROC (set inside the sandbox's user namespace instead: init --nproc). */
        Rlimits withoutNproc() {
            return new Rlimits(limits, memory, false, fsize, addressSpaceSlack);
        }

        /** Without RLIMIT_FSIZE (gVisor: its sentry's memory file is larger than a run's disk limit). */
        Rlimits withoutFsize() {
            return new Rlimits(limits, memory, nproc, false, addressSpaceSlack);
        }

        /**
         * RLIMIT_AS where {@code cgroups} cannot limit memory (with {@link #WATCHED_SLACK} above the limit where the
         * watchdog holds the sum), RLIMIT_NPROC where they cannot limit processes.
         */
        Rlimits standingInFor(Cgroups cgroups) {
            return new Rlimits(limits, !cgroups.limitsMemory(), !cgroups.limitsPids(), fsize,
                    cgroups.watchesMemory() ? WATCHED_SLACK : 0);
        }

        List<Rlimit> list() {
            int cpu = limits.cpuSeconds();
            List<Rlimit> r = new ArrayList<>();
            // hard = soft + 1: SIGXCPU at the soft limit, SIGKILL a second later for programs that catch it.
            r.add(new Rlimit("cpu", "t", 1, cpu, cpu + 1));
            r.add(new Rlimit("core", "c", 1, 0, 0));
            if (fsize) r.add(same("fsize", "f", 512, limits.diskBytes())); // dash counts 512-byte blocks
            r.add(same("nofile", "n", 1, NOFILE));
            if (memory) r.add(same("as", "v", 1024, limits.memoryBytes() + addressSpaceSlack));
            if (nproc) r.add(same("nproc", "p", 1, limits.maxProcesses()));
            return r;
        }
    }

    private static Rlimit same(String name, String dashFlag, long unit, long value) {
        long v = ceilDiv(value, unit) * unit;
        return new Rlimit(name, dashFlag, unit, v, v);
    }

    private static void checkFds(Map<Integer, Path> fds, Map<Integer, Path> writeFds) {
        for (int fd : fds.keySet())
            if (fd < 3 || fd > LAST_FD) throw new IllegalArgumentException("fd out of range: " + fd);
        for (int fd : writeFds.keySet())
            if (fd < 3 || fd > LAST_FD || fds.containsKey(fd)) throw new IllegalArgumentException("fd out of range: " + fd);
    }

    /**
     * Starts the command on the spawner thread with exactly the given environment: with {@link Spawn} (posix_spawn
     * of the launcher itself) where it works, else the JDK's {@link ProcessBuilder} (its jspawnhelper in between).
     * The command's first element must be an absolute path.
     */
    static Process start(List<String> command, Map<String, String> env, File dir) throws SandboxException {
        return start(command, env, dir, Spawn.available());
    }

    /** @param direct posix_spawn through {@link Spawn}, not the JDK's ProcessBuilder (tests compare both) */
    static Process start(List<String> command, Map<String, String> env, File dir, boolean direct) throws SandboxException {
        return start(command, env, dir, direct, 0);
    }

    /** @param statusFd with {@code direct}: give the command a status pipe on this fd (0: none) */
    static Process start(List<String> command, Map<String, String> env, File dir, boolean direct, int statusFd)
            throws SandboxException {
        Future<Process> f = SPAWNER.submit(() -> {
            if (direct) return Spawn.start(command, env, dir == null ? null : dir.toPath(), statusFd);
            ProcessBuilder pb = new ProcessBuilder(command);
            pb.environment().clear();
            pb.environment().putAll(env);
            if (dir != null) pb.directory(dir);
            return pb.start();
        });
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return f.get();
                } catch (InterruptedException e) {
                    // the fork may already be under way: wait for it so the process is not orphaned
                    interrupted = true;
                }
            }
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            throw new SandboxException("cannot start the sandbox: " + (c instanceof IOException ? c.getMessage() : c), c);
        } finally {
            if (interrupted) Thread.currentThread().interrupt();
        }
    }

    static String quote(String s) {
        return "'" + s.replace("'", "'\\''") + "'";
    }

    private static long ceilDiv(long a, long b) {
        return (a + b - 1) / b;
    }
}
