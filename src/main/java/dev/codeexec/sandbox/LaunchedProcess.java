package dev.codeexec.sandbox;

import dev.codeexec.linux.Posix;
import dev.codeexec.linux.Spawn;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;

/**
 * A started launcher process plus the run's cgroup and whatever else must be cleaned up. Shared by all sandbox
 * kinds: the difference between them is only the command line the launcher execs.
 */
final class LaunchedProcess implements SandboxProcess {

    static final int SIGXCPU = 24;

    private final Process process;
    private final Cgroups.RunCgroup cgroup;
    private final int cpuSeconds;
    private final boolean pidNamespace;
    private final Runnable cleanup;
    private final Optional<ControlChannel> control;
    /** The host directory bound at the working directory, to mount the run's directory on later (or null). */
    private final Path lateReadOnlyDir;
    private boolean readOnlyMounted;
    private final Path lateWorkDir;
    private final WorkDirMounts mounts;
    private final UidPool.Lease lease;
    private final OptionalInt hostUid;
    private boolean workDirMounted;
    private long programPid;
    private int[] owner;
    private long hardCpu = -1;
    private long hardFsize = -1;
    private long lastSoftCpu = -1;
    private long lastFsize = -1;

    private volatile boolean killedByUs;
    /** The launched program reports the sandbox's fatal signal n as exit code 128 + n (gVisor's runsc). */
    private boolean signalsAsExitCodes;
    private boolean closed;
    // Final figures read just before the cgroup is removed.
    private boolean oom;
    private OptionalLong peak = OptionalLong.empty();
    private OptionalDouble cpu = OptionalDouble.empty();

    /**
     * @param pidNamespace the launcher's only child is the init of a pid namespace holding the whole run (bwrap)
     */
    LaunchedProcess(Process process, Cgroups.RunCgroup cgroup, int cpuSeconds, boolean pidNamespace, Runnable cleanup) {
        this(process, cgroup, cpuSeconds, pidNamespace, cleanup, Optional.empty(), null, null, OptionalInt.empty(), null);
    }

    /**
     * @param hostUid the host uid the sandbox's processes run as, where the sandbox decides it
     * @param lease   the lease of {@code hostUid} (given back once the sandbox is closed and its tree is gone), or
     *                null when it runs as the server-wide sandbox uid
     */
    LaunchedProcess(Process process, Cgroups.RunCgroup cgroup, int cpuSeconds, boolean pidNamespace, Runnable cleanup,
            Optional<ControlChannel> control, WorkDirMounts mounts, Path lateWorkDir, OptionalInt hostUid, UidPool.Lease lease) {
        this(process, cgroup, cpuSeconds, pidNamespace, cleanup, control, mounts, lateWorkDir, hostUid, lease, null);
    }

    /** @param lateReadOnlyDir the mount point of {@link SandboxSpec#lateReadOnlyDir()} on the host, or null */
    LaunchedProcess(Process process, Cgroups.RunCgroup cgroup, int cpuSeconds, boolean pidNamespace, Runnable cleanup,
            Optional<ControlChannel> control, WorkDirMounts mounts, Path lateWorkDir, OptionalInt hostUid, UidPool.Lease lease,
            Path lateReadOnlyDir) {
        this.lateReadOnlyDir = lateReadOnlyDir;
        this.hostUid = hostUid;
        this.lease = lease;
        this.process = process;
        this.pidNamespace = pidNamespace;
        this.cgroup = cgroup;
        this.cpuSeconds = cpuSeconds;
        this.cleanup = cleanup;
        this.control = control;
        this.mounts = mounts;
        this.lateWorkDir = lateWorkDir;
    }

    @Override
    public Optional<ControlChannel> control() {
        return control;
    }

    @Override
    public OptionalInt hostUid() {
        return hostUid;
    }

    @Override
    public OptionalLong memoryBytes() {
        return cgroup.memoryBytes();
    }

    @Override
    public synchronized void mountWorkDir(Optional<Path> workspace, long tmpfsBytes) throws SandboxException {
        if (lateWorkDir == null) throw new SandboxException("this sandbox was not started for a late working directory");
        if (workDirMounted) throw new SandboxException("the working directory is already mounted");
        mounts.mount(lateWorkDir, workspace, tmpfsBytes, lease == null ? mounts.sandboxUid() : lease.uid());
        if (workspace.isEmpty()) cgroup.countTmpfsAt(lateWorkDir);
        workDirMounted = true;
    }

    @Override
    public synchronized void mountReadOnly(Path hostDir) throws SandboxException {
        if (lateReadOnlyDir == null) throw new SandboxException("this sandbox was not started for a late read-only directory");
        if (readOnlyMounted) throw new SandboxException("the read-only directory is already mounted");
        mounts.mountReadOnly(lateReadOnlyDir, hostDir);
        readOnlyMounted = true;
    }

    @Override
    public synchronized void writeWorkFile(String name, byte[] content) throws SandboxException {
        if (!workDirMounted) throw new SandboxException("the working directory is not mounted yet");
        if (!name.matches("[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")) throw new SandboxException("bad file name: " + name);
        Path f = lateWorkDir.resolve(name);
        // CREATE_NEW is O_CREAT|O_EXCL: never follows a planted symlink, never overwrites a user's file
        try (var out = Files.newOutputStream(f, java.nio.file.StandardOpenOption.CREATE_NEW,
                java.nio.file.StandardOpenOption.WRITE)) {
            out.write(content);
        } catch (IOException e) {
            throw new SandboxException("cannot place " + name + " in the working directory: " + e.getMessage(), e);
        }
        try {
            Files.setPosixFilePermissions(f, java.nio.file.attribute.PosixFilePermissions.fromString("r--r--r--"));
        } catch (IOException e) {
            throw new SandboxException("cannot make " + name + " read-only: " + e.getMessage(), e);
        }
    }

    @Override
    public synchronized void limitProgramCpu(int cpuSeconds) throws SandboxException {
        long pid = programPid();
        try {
            long soft = (long) Math.ceil(cpuSecondsUsed(pid)) + cpuSeconds;
            setLimit(pid, Posix.RLIMIT_CPU, soft, soft + 1);
        } catch (IOException e) {
            throw new SandboxException("cannot read the program's CPU time: " + e.getMessage(), e);
        }
    }

    @Override
    public synchronized void limitCommandCpu(int cpuSeconds) throws SandboxException {
        setLimit(programPid(), Posix.RLIMIT_CPU, cpuSeconds, cpuSeconds + 1);
    }

    @Override
    public synchronized void limitProgramFileSize(long fileSizeBytes) throws SandboxException {
        setLimit(programPid(), Posix.RLIMIT_FSIZE, fileSizeBytes, fileSizeBytes);
    }

    private void setLimit(long pid, int resource, long soft, long hard) throws SandboxException {
        try {
            if (owner == null) owner = owner(pid);
            Posix.prlimitAs(owner[0], owner[1], pid, resource, soft, hard);
        } catch (Posix.Errno | IOException e) {
            throw new SandboxException("cannot set the program's limits: " + e.getMessage(), e);
        }
    }

    /**
     * Per call of a session. The hard limits are read once; a limit whose new value equals the one set last time
     * is not set again (each prlimit costs a credential switch, and for short calls the rounded CPU budget rarely
     * moves). CPU: only the soft limit moves (the program may raise it to the lifetime hard limit; the call's timeout
     * holds it anyway). File size: soft and hard both at the call's cap, as a run's are, because a soft limit alone
     * would let the code raise it past a workspace's quota. Lowering a hard limit needs no privilege; raising it again
     * (a later call, after files were deleted) needs CAP_SYS_RESOURCE: where the server lacks it, the cap stays
     * where it was, never above the quota left.
     */
    @Override
    public synchronized long limitProgramSoft(int cpuSeconds, long fileSizeBytes) throws SandboxException {
        long pid = programPid();
        long soft;
        try {
            if (hardCpu < 0) {
                hardCpu = hardLimit(pid, "Max cpu time");
                hardFsize = hardLimit(pid, "Max file size");
            }
            soft = Math.min((long) Math.ceil(cpuSecondsUsed(pid)) + cpuSeconds, hardCpu);
        } catch (IOException | RuntimeException e) {
            throw new SandboxException("cannot read the program's limits: " + e.getMessage(), e);
        }
        if (soft != lastSoftCpu) {
            setLimit(pid, Posix.RLIMIT_CPU, soft, hardCpu);
            lastSoftCpu = soft;
        }
        long fsize = Math.min(fileSizeBytes, hardFsize);
        if (fsize != lastFsize) {
            try {
                setLimit(pid, Posix.RLIMIT_FSIZE, fsize, fsize);
                lastFsize = fsize;
            } catch (SandboxException e) {
                if (lastFsize < 0 || fsize < lastFsize) throw e;
                // a raise refused (no CAP_SYS_RESOURCE): the lower cap of an earlier call stays
            }
        }
        return lastFsize;
    }

    /** The hard limit of one resource from /proc/PID/limits ("unlimited" → Long.MAX_VALUE). */
    static long hardLimit(long pid, String name) throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/limits"))) {
            if (!line.startsWith(name)) continue;
            String[] f = line.substring(name.length()).trim().split("\\s+");
            return f[1].equals("unlimited") ? Long.MAX_VALUE : Long.parseLong(f[1]);
        }
        throw new IOException("no '" + name + "' in /proc/" + pid + "/limits");
    }

    @Override
    public boolean interrupt() {
        if (!process.isAlive()) return false;
        try {
            Posix.kill(programPid(), Posix.SIGINT);
            return true;
        } catch (Posix.Errno e) {
            return false;
        }
    }

    /**
     * The host pid of the program the sandbox started: the launcher itself (it execs into the program) or, in
     * a pid namespace, the only child of the namespace's init. Kept once found. Before the program exists (a
     * sandbox whose init waits for its command, {@link SandboxSpec#awaitsCommand()}), the init: limits set on it
     * are the ones the program inherits when the init starts it.
     */
    private synchronized long programPid() {
        if (programPid != 0) return programPid;
        if (!pidNamespace) return programPid = process.pid();
        long init = firstChild(process.pid());
        long program = init < 0 ? -1 : firstChild(init);
        if (program >= 0) return programPid = program;
        return init >= 0 ? init : process.pid();
    }

    /**
     * The first child of a single-threaded process, from /proc/PID/task/PID/children: one small read, where
     * {@link ProcessHandle#children()} scans every process of the host (milliseconds of CPU on a busy machine,
     * paid for each warm sandbox).
     */
    static long firstChild(long pid) {
        try {
            String s = Files.readString(Path.of("/proc/" + pid + "/task/" + pid + "/children")).trim();
            if (!s.isEmpty()) return Long.parseLong(s.split(" ")[0]);
            return -1;
        } catch (IOException | NumberFormatException e) {
            return ProcessHandle.of(pid).flatMap(h -> h.children().findFirst()).map(ProcessHandle::pid).orElse(-1L);
        }
    }

    /** Real uid and gid of a process, from /proc/PID/status. */
    static int[] owner(long pid) throws IOException {
        int uid = -1, gid = -1;
        for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
            if (line.startsWith("Uid:")) uid = Integer.parseInt(line.split("\\s+")[1]);
            if (line.startsWith("Gid:")) gid = Integer.parseInt(line.split("\\s+")[1]);
        }
        if (uid < 0 || gid < 0) throw new IOException("no uid/gid for process " + pid);
        return new int[] {uid, gid};
    }

    /** utime + stime of one process from /proc/PID/stat, in seconds (USER_HZ is 100 on Linux). */
    static double cpuSecondsUsed(long pid) throws IOException {
        String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return (Long.parseLong(f[11]) + Long.parseLong(f[12])) / 100.0;
    }

    @Override
    public OutputStream stdin() {
        return process.getOutputStream();
    }

    @Override
    public InputStream stdout() {
        return process.getInputStream();
    }

    @Override
    public InputStream stderr() {
        return process.getErrorStream();
    }

    @Override
    public boolean waitFor(Duration timeout) throws InterruptedException {
        return process.waitFor(timeout.toNanos(), TimeUnit.NANOSECONDS);
    }

    /**
     * The init's report on the status pipe where there is one (bwrap with codeexec-helper); for a program that is
     * the launcher's process itself (no pid namespace), its own wait status; else the exit status read by the
     * 128+N convention. An init the server killed reports nothing: bwrap then exits 137, read as SIGKILL.
     */
    @Override
    public Termination termination() {
        int status = process.exitValue();
        Termination reported = Termination.fromReport(Spawn.statusReport(process));
        if (reported != null) return reported;
        if (!pidNamespace) {
            java.util.OptionalInt signal = Spawn.killedBySignal(process);
            if (signal.isPresent()) return signal.getAsInt() == 0 ? new Termination.Exited(status, true)
                    : new Termination.Signaled(signal.getAsInt(), true);
        }
        return Termination.fromExitStatus(status);
    }

    @Override
    public void kill() {
        killedByUs = true;
        // Killing must finish even on an interrupted thread (a cancelled run): waits below would throw at once.
        boolean interrupted = Thread.interrupted();
        try {
            killTree();
        } finally {
            if (interrupted) Thread.currentThread().interrupt();
        }
    }

    private void killTree() {
        if (pidNamespace && process.isAlive()) {
            // SIGKILL to the namespace's pid 1 makes the kernel kill every process in it at once, fork bombs
            // included. bwrap, still alive, then reaps it and exits: killing bwrap itself would orphan its child
            // as a zombie on the host.
            // Repeated because a kill right after start may come before bwrap has forked that init.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
            try {
                while (System.nanoTime() < deadline) {
                    process.children().forEach(ProcessHandle::destroyForcibly);
                    if (process.waitFor(20, TimeUnit.MILLISECONDS)) {
                        cgroup.killAll();
                        return;
                    }
                }
            } catch (InterruptedException e) {
                // interrupted again while killing: fall through to the unconditional kill below
            }
        }
        // Everything that is left, wherever it is: the cgroup loop returns only when the kernel emptied the run.
        cgroup.killAll();
        process.descendants().forEach(ProcessHandle::destroyForcibly);
        process.destroyForcibly();
    }

    @Override
    public synchronized boolean memoryLimitHit() {
        return closed ? oom : cgroup.oomKilled();
    }

    /**
     * For a launched program that reports its sandbox's fatal signal n as exit code 128 + n (gVisor's runsc, whose
     * kernel the CPU limit ends with SIGXCPU): {@link #cpuLimitHit()} reads such a code as the signal when the run
     * used its CPU budget (a program cannot fake it by exiting 152 early). The budget is compared with the whole
     * cgroup's CPU (gVisor's own processes too) while RLIMIT_CPU counts per process: a program that spent about its
     * budget and then ended itself by exit code 152 or 137 is labelled cpu_limit, which is near enough the truth.
     */
    LaunchedProcess reportingSignalsAsExitCodes() {
        signalsAsExitCodes = true;
        return this;
    }

    @Override
    public boolean cpuLimitHit() {
        if (process.isAlive() || killedByUs) return false;
        Termination t = termination();
        OptionalDouble used = cpuTimeMs();
        boolean spent = used.isPresent() && used.getAsDouble() >= cpuSeconds * 1000.0;
        if (signalsAsExitCodes && t instanceof Termination.Exited e)
            return (e.code() == 128 + SIGXCPU || e.code() == 128 + 9) && spent && !memoryLimitHit();
        if (!(t instanceof Termination.Signaled s)) return false;
        if (s.signal() == SIGXCPU) return true;
        // SIGKILL at the hard limit (program caught SIGXCPU): only plausible if the run used that much CPU.
        return s.signal() == 9 && !memoryLimitHit() && spent;
    }

    @Override
    public synchronized OptionalLong peakMemoryBytes() {
        return closed ? peak : cgroup.peakMemoryBytes();
    }

    @Override
    public synchronized OptionalDouble cpuTimeMs() {
        return closed ? cpu : cgroup.cpuTimeMs();
    }

    @Override
    public synchronized void close() {
        if (closed) return;
        // Cleanup must complete on an interrupted thread too; the flag is restored at the end.
        boolean interrupted = Thread.interrupted();
        try {
            if (process.isAlive()) {
                killedByUs = true;
                killTree();
            }
            else cgroup.killAll(); // stragglers after the main program ended are not "killed by us" for its exit
            try {
                if (!process.waitFor(5, TimeUnit.SECONDS)) process.destroyForcibly();
            } catch (InterruptedException e) {
                interrupted = true;
            }
            cgroup.killAll();
            oom = cgroup.oomKilled();
            peak = cgroup.peakMemoryBytes();
            cpu = cgroup.cpuTimeMs();
        } finally {
            closed = true;
            closeQuietly(process.getOutputStream());
            closeQuietly(process.getInputStream());
            closeQuietly(process.getErrorStream());
            control.ifPresent(ControlChannel::close);
            // Nothing of the run is left once the cgroup is empty, or once the pid namespace died with its pid 1
            // (bwrap reaped it, so it is dead): then its uid is free at once; else after a look in /proc.
            boolean gone = !process.isAlive() && (pidNamespace || cgroup.isEmpty());
            Reaper.later(() -> {
                cgroup.remove();
                if (lateWorkDir != null) mounts.release(lateWorkDir);
                if (lateReadOnlyDir != null) mounts.release(lateReadOnlyDir);
                if (lease != null) lease.giveBack(gone);
            });
            cleanup.run();
            if (interrupted) Thread.currentThread().interrupt();
        }
    }

    private static void closeQuietly(AutoCloseable c) {
        try {
            c.close();
        } catch (Exception e) {
            // nothing more to do for a pipe to a dead process
        }
    }
}
