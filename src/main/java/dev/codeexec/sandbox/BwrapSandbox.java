package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.TreeMap;

import org.slf4j.LoggerFactory;

/**
 * bubblewrap, started as the real unprivileged uid: root-side launcher (cgroup, rlimits, fds, then drop to uid/gid,
 * no groups, no_new_privs) → {@code bwrap} (all namespaces, read-only system, tmpfs work area, seccomp) → an init as
 * pid 1 → the program. Never a root-started bwrap with {@code --uid}: that is host root inside a user namespace.
 *
 * <p>The launcher and the init are {@code codeexec-helper} (src/main/c, built into the jar, installed in
 * DATA_DIR/helper): one static exec each; the init is executed through a descriptor the launcher opened on it
 * ({@code /proc/self/fd/10}), so no host path is bound into the sandbox for it. Where it is missing from the jar or
 * cannot run here (another CPU architecture, a noexec DATA_DIR), the same steps are a dash script, {@code setpriv}
 * and a dash init with {@code env}: about 2 ms more CPU per run, same behaviour (the sandbox self-test decides,
 * {@link #info()} says which).
 */
final class BwrapSandbox implements Sandbox {

    static final String BWRAP = "/usr/bin/bwrap";
    static final String SETPRIV = "/usr/bin/setpriv";

    /**
     * Pid 1 inside the sandbox, instead of bwrap's own init: bwrap's outer process exits without reaping its
     * init, which leaves one zombie per run on the host (reparented to host pid 1, or to the JVM when that is
     * pid 1 in a container). With {@code --as-pid-1} bwrap reaps its direct child, and this dash reaps orphans
     * inside while it waits ({@code wait} reaps any child). The program keeps the real stdin (a background job
     * would get /dev/null) and its exit status, 128+N for signal N, becomes the run's. fd 3 (bwrap has consumed the
     * seccomp program on it) holds stdin meanwhile: 8 and 9 are the control channel's. A non-interactive shell starts
     * background jobs with SIGINT and SIGQUIT ignored, and an ignored signal stays ignored across exec: env puts
     * them back to default, so the program gets them as it would from a terminal (sessions are interrupted by
     * SIGINT). umask 0002: what a run leaves in a workspace is writable by the tenant's later runs (other host uids,
     * the same group).
     */
    static final String INIT = "umask 0002; exec 3<&0; /usr/bin/env --default-signal=INT,QUIT \"$@\" <&3 3<&- & wait $!";

    /** The uid and gid sandboxed code sees itself as (SANDBOX_UID, SANDBOX_GID); the gid is also its host gid. */
    private final int uid;
    private final int gid;
    /** Host uids, one per sandbox; null when every sandbox runs as {@link #uid} on the host too (or as the user). */
    private final UidPool uids;
    /**
     * Normal-user mode: the server is not root, so there is no uid to drop to. Every sandbox runs as the server's
     * own host uid and gid ({@link #own}), which bwrap maps to {@link #uid}/{@link #gid} inside its unprivileged
     * user namespace; the process limit is set inside that namespace (init --nproc), where the kernel counts only
     * the sandbox's own processes, never the user's.
     */
    private final boolean userMode;
    /** The server's own ids (what sandboxes run as on the host in {@link #userMode}). */
    private final dev.codeexec.linux.OwnIds own;
    private final Path seccomp;
    private final Cgroups cgroups;
    private final List<String> systemBinds;
    private final String version;
    private final Optional<String> unavailable;
    private final Path controlDir;
    private final Optional<WorkDirMounts> lateWorkDirs;
    private final Optional<String> lateWorkDirsUnavailable;
    /** codeexec-helper, or null: the dash launcher, setpriv and the dash init instead. */
    private final Path helper;
    /** Why the helper is not used, or empty. */
    private final String helperNote;
    /** The mount namespace runs start in (with the helper only), or null: the server's. */
    private final TrimmedMounts mountNamespace;
    /** Why there is no {@link #mountNamespace}, or empty. */
    private final String mountNamespaceNote;
    /** Whether the native parts are used (see the constructor's {@code useHelper}). */
    private final boolean useHelper;

    /**
     * Launchers start with {@link dev.codeexec.linux.Spawn}, not the JDK's ProcessBuilder. Asked when a launcher
     * starts, not when the sandbox is built: Spawn's foreign-function handles are still being made on the start's
     * second thread then, and the set-up before the first launch (seccomp filter, /etc snapshot) need not wait.
     */
    private boolean spawnDirect() {
        return useHelper && dev.codeexec.linux.Spawn.available();
    }

    BwrapSandbox(int uid, int gid, Path dataDir) {
        this(uid, gid, dataDir, Cgroups.detect());
    }

    /** With the given cgroup support (tests use {@link Cgroups#none} to exercise the rlimit fallback). */
    BwrapSandbox(int uid, int gid, Path dataDir, Cgroups cgroups) {
        this(uid, gid, dataDir, cgroups, true);
    }

    /**
     * @param useHelper false: everything a server falls back to where its native parts do not work (tests): the
     *                  dash launcher, setpriv and dash init instead of codeexec-helper, the JDK's ProcessBuilder
     *                  instead of {@link dev.codeexec.linux.Spawn}, the server's own mount namespace
     */
    BwrapSandbox(int uid, int gid, Path dataDir, Cgroups cgroups, boolean useHelper) {
        this(uid, gid, dataDir, cgroups, useHelper, Sandboxes.uidPool("auto", Sandboxes.readUidMap()));
    }

    /**
     * @param uids the host uids sandboxes run as, one each (SANDBOX_UID_RANGE); null: every sandbox runs as
     *             {@code uid}. Inside, every sandbox sees {@code uid}/{@code gid} (bwrap maps its host uid to it).
     */
    BwrapSandbox(int uid, int gid, Path dataDir, Cgroups cgroups, boolean useHelper, UidPool uids) {
        this.uid = uid;
        this.gid = gid;
        this.own = dev.codeexec.linux.OwnIds.read();
        this.userMode = !own.root();
        this.uids = userMode ? null : uids;
        this.cgroups = cgroups;
        this.useHelper = useHelper;
        this.version = bwrapVersion();
        DataDir data = DataDir.at(dataDir);
        Path filter = null;
        List<String> binds = List.of();
        String why = null;
        try {
            data.prepareRoot();
            filter = SeccompFilter.writeTo(data.seccompFilter());
            binds = systemBinds(EtcSnapshot.build(Path.of("/etc"), data));
        } catch (IOException e) {
            why = "cannot prepare " + dataDir + " (seccomp filter, /etc snapshot): " + e.getMessage();
        }
        this.seccomp = filter;
        this.systemBinds = binds;
        this.controlDir = data.control();
        WorkDirMounts.Result late = why != null ? new WorkDirMounts.Result(Optional.empty(), Optional.of(why))
                : userMode ? new WorkDirMounts.Result(Optional.empty(),
                        Optional.of("mounting a working directory into a started sandbox needs root (normal-user mode)"))
                : WorkDirMounts.prepare(data, uid, gid);
        this.lateWorkDirs = late.mounts();
        this.lateWorkDirsUnavailable = late.unavailable();
        try {
            data.prepareControl();
        } catch (IOException e) {
            // start() reports it when a control channel is asked for
        }
        Path h = null;
        String note = "";
        String broken = why;
        TrimmedMounts ns = null;
        String nsNote = "needs codeexec-helper";
        if (broken == null) {
            if (useHelper) {
                try {
                    h = installHelper(data);
                    if (userMode) {
                        nsNote = "a trimmed mount namespace needs root (normal-user mode)";
                    } else {
                        TrimmedMounts.Result trimmed = TrimmedMounts.create(h, List.of(data.root()));
                        ns = trimmed.mounts().orElse(null);
                        nsNote = trimmed.note();
                    }
                    if (ns != null) {
                        String nsBroken = selfTest(h, ns);
                        if (nsBroken != null) {
                            nsNote = "runs fail in it (" + nsBroken + ")";
                            ns.close();
                            ns = null;
                        }
                    }
                    String helperBroken = ns != null ? null : selfTest(h, null);
                    if (helperBroken != null) {
                        note = "codeexec-helper does not work here (" + helperBroken + ")";
                        h = null;
                    }
                } catch (SandboxException e) {
                    note = e.getMessage();
                }
            }
            if (h == null) {
                if (ns != null) ns.close();
                ns = null;
                nsNote = "needs codeexec-helper";
            }
            if (h == null) broken = selfTest(null, null);
            if (broken == null && !note.isEmpty()) {
                note += "; dash and setpriv instead";
                LoggerFactory.getLogger(BwrapSandbox.class).warn("sandbox: {}", note);
            }
        }
        this.helper = h;
        this.helperNote = note;
        this.mountNamespace = ns;
        this.mountNamespaceNote = ns == null && !nsNote.isEmpty() ? nsNote : "";
        if (ns == null && h != null && !nsNote.isEmpty())
            LoggerFactory.getLogger(BwrapSandbox.class).info("sandbox: runs start in the server's mount namespace: {}", nsNote);
        this.unavailable = Optional.ofNullable(broken);
    }

    /** The helper from the jar, installed root-owned and world-executable ({@link DataDir#helper}); throws why it cannot run. */
    private static Path installHelper(DataDir data) throws SandboxException {
        try (java.io.InputStream in = BwrapSandbox.class.getResourceAsStream(HELPER_RESOURCE)) {
            if (in == null) throw new SandboxException("codeexec-helper is not in this build");
            byte[] binary = in.readAllBytes();
            // Names the build's helper, so that a server of another build installs its own beside it. CRC-32 and
            // the length: a checksum the JDK computes natively (SHA-256 of the 0.8 MB ran in the interpreter at
            // every start, ~30 ms), and the file is the jar's own, not a download to verify.
            java.util.zip.CRC32 crc = new java.util.zip.CRC32();
            crc.update(binary);
            String hash = String.format("%08x-%d", crc.getValue(), binary.length);
            data.prepareHelperDir();
            Path target = data.helper(hash);
            if (!Files.isRegularFile(target, LinkOption.NOFOLLOW_LINKS) || Files.size(target) != binary.length)
                DataDir.write(target, binary, "rwxr-xr-x");
            Process p = new ProcessBuilder(target.toString(), "--version").redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
            if (p.waitFor() != 0 || !out.startsWith("codeexec-helper "))
                throw new SandboxException("codeexec-helper does not run here (" + out + ")");
            return target;
        } catch (IOException e) {
            throw new SandboxException("codeexec-helper cannot be installed (" + e.getMessage() + ")", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new SandboxException("interrupted while installing codeexec-helper");
        }
    }

    static final String HELPER_RESOURCE = "/native/codeexec-helper";

    /** Whether runs start through codeexec-helper (tests, runtime_info). */
    boolean usesHelper() {
        return helper != null;
    }

    @Override
    public Optional<String> lateWorkDirUnavailable() {
        return lateWorkDirsUnavailable;
    }

    @Override
    public boolean supportsControl() {
        return true;
    }

    /** With codeexec-helper: its init waits for the command ({@code init --await-exec}). */
    @Override
    public boolean awaitsCommands() {
        return helper != null;
    }

    @Override
    public void close() {
        Reaper.drain();
        lateWorkDirs.ifPresent(WorkDirMounts::close);
        if (mountNamespace != null) mountNamespace.close();
    }

    @Override
    public String name() {
        return "bwrap";
    }

    @Override
    public Optional<String> unavailableReason() {
        return unavailable;
    }

    @Override
    public Map<String, Object> info() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("kind", "bwrap");
        m.put("uid", uid);
        m.put("gid", gid);
        m.put("mode", userMode ? "normal user" : "root");
        m.put("hostUids", userMode ? "every sandbox runs as the server's own uid " + own.uid()
                + " (normal-user mode), mapped to " + uid + " inside"
                : uids == null ? "every sandbox runs as uid " + uid : uids.info());
        m.put("cgroup", cgroups.label());
        if (!cgroups.note().isEmpty()) m.put("cgroupNote", cgroups.note());
        m.put("limits", limitGuarantees());
        m.put("seccomp", seccomp != null);
        m.put("network", "none");
        m.put("namespaces", List.of("user", "pid", "net", "ipc", "uts", "mount", "cgroup"));
        m.put("bwrapVersion", version);
        m.put("launcher", helper != null ? "codeexec-helper" : "dash+setpriv");
        if (!helperNote.isEmpty()) m.put("launcherNote", helperNote);
        m.put("spawn", spawnDirect() ? "posix_spawn" : "ProcessBuilder");
        m.put("mountNamespace", mountNamespace != null ? mountNamespace.describe() : "the server's (" + mountNamespaceNote + ")");
        unavailable.ifPresent(r -> m.put("unavailable", r));
        return m;
    }

    /**
     * How each limit is held in this mode, in words for runtime_info and the operator: what a cgroup holds, what an
     * rlimit or the watchdog holds instead, and what a normal user's sandboxes share with that user.
     */
    Map<String, String> limitGuarantees() {
        Map<String, String> g = new LinkedHashMap<>();
        g.put("memory", cgroups.limitsMemory()
                ? "cgroup " + cgroups.label() + ": all of the run's memory (its tmpfs files included), enforced by the kernel"
                : cgroups.watchesMemory()
                        ? "no cgroup: RLIMIT_AS caps each process at once; every " + MemoryWatchdog.TICK_MS + " ms ("
                                + MemoryWatchdog.NEAR_TICK_MS + " ms once it is over half its limit) a watchdog adds up, each "
                                + "page once, the anonymous and the mapped shared memory of the run's processes, the memfds "
                                + "they hold open and the files of the run's tmpfs mounts (/tmp, /dev/shm, the work area), "
                                + "and kills the run over its limit; it can overshoot by what the run allocates in one tick, "
                                + "and cannot see shared memory that no process of the run maps or holds open (the unmapped "
                                + "rest of a shared mapping, a detached SysV segment, a memfd in flight in a socket)"
                        : "no cgroup: RLIMIT_AS per process only");
        g.put("processes", cgroups.limitsPids() ? "cgroup " + cgroups.label() + " pids.max: the run's processes and threads"
                : userMode ? "RLIMIT_NPROC set inside the sandbox's user namespace: counts the run's own processes "
                        + "and threads only, never the user's"
                : uids != null ? "RLIMIT_NPROC: counts the processes of the run's own host uid"
                : "RLIMIT_NPROC: counts every process of uid " + uid + " on the host (all sandboxes together)");
        g.put("cpu", "RLIMIT_CPU per process (SIGXCPU, then SIGKILL a second later) and the run's wall-clock timeout");
        g.put("disk", "size-capped tmpfs for the work area, /tmp and /dev/shm; RLIMIT_FSIZE per file");
        if (userMode)
            g.put("perUserKernelLimits", "shared with the user's own processes: sandboxes run as the user's host uid "
                    + own.uid() + ", so inotify instances, epoll watches and pipe buffers count against that user's limits");
        return g;
    }

    @Override
    public SandboxProcess start(SandboxSpec spec) throws SandboxException {
        if (unavailable.isPresent()) throw new SandboxException("sandbox unavailable: " + unavailable.get());
        return launch(spec, helper, mountNamespace);
    }

    /**
     * @param helper codeexec-helper, or null for the dash launcher, setpriv and dash init
     * @param ns     the mount namespace to start in (with the helper only), or null for the server's
     */
    private SandboxProcess launch(SandboxSpec spec, Path helper, TrimmedMounts ns) throws SandboxException {
        Path workDir = checkWorkDir(spec.workDir());
        if (spec.readOnlyFiles().size() > Launcher.LAST_FILE_FD - Launcher.FIRST_FILE_FD + 1)
            throw new SandboxException("at most " + (Launcher.LAST_FILE_FD - Launcher.FIRST_FILE_FD + 1)
                    + " read-only files per run; put more into a read-only directory");
        Limits limits = spec.limits();
        UidPool.Lease lease = uids == null ? null : uids.take();
        try {
            return launch(spec, helper, ns, workDir, limits, lease);
        } catch (SandboxException | RuntimeException e) {
            // what was started has been killed; the pool checks /proc before it hands the uid out again
            if (lease != null) Reaper.later(() -> lease.giveBack(false));
            throw e;
        }
    }

    private SandboxProcess launch(SandboxSpec spec, Path helper, TrimmedMounts ns, Path workDir, Limits limits,
            UidPool.Lease lease) throws SandboxException {
        int hostUid = userMode ? own.uid() : lease == null ? uid : lease.uid();
        int hostGid = userMode ? own.gid() : gid;
        List<String> argv = new ArrayList<>(List.of(BWRAP,
                "--unshare-all", "--unshare-user", "--disable-userns", "--unshare-cgroup-try",
                "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv"));
        // bwrap runs as the host uid (never root) and maps it to the ids every sandbox sees inside
        if (userMode || hostUid != uid) argv.addAll(List.of("--uid", Integer.toString(uid), "--gid", Integer.toString(gid)));
        for (Map.Entry<String, String> e : new TreeMap<>(spec.env()).entrySet()) {
            checkEnv(e.getKey(), e.getValue());
            argv.addAll(List.of("--setenv", e.getKey(), e.getValue()));
        }
        argv.addAll(systemBinds);
        argv.addAll(List.of("--proc", "/proc", "--dev", "/dev"));
        String size = Long.toString(limits.diskBytes());
        argv.addAll(List.of("--size", size, "--tmpfs", "/dev/shm", "--size", size, "--tmpfs", "/tmp"));
        List<String> tmpfs = new ArrayList<>(List.of("/dev/shm", "/tmp"));
        Path lateDir = null;
        Path lateRoDir = null;
        if (spec.lateWorkDir()) {
            WorkDirMounts mounts = lateWorkDirs.orElseThrow(() -> new SandboxException(lateWorkDirsUnavailable.orElse("")));
            lateDir = mounts.create(spec.runId(), hostUid);
            argv.addAll(List.of("--bind", lateDir.toString(), workDir.toString()));
            if (spec.lateReadOnlyDir().isPresent()) {
                // empty until a run's read-only directory is mounted on it (mountReadOnly); read-only either way
                lateRoDir = mounts.create(spec.runId(), hostUid);
                argv.addAll(List.of("--ro-bind", lateRoDir.toString(), checkInside(spec.lateReadOnlyDir().get()).toString()));
            }
        } else if (spec.workDirSource().isPresent()) {
            // a persistent workspace: bwrap opens the source as the host uid, a member of the workspace's group
            argv.addAll(List.of("--bind", spec.workDirSource().get().toString(), workDir.toString()));
        } else if (!workDir.equals(Path.of("/tmp"))) {
            argv.addAll(List.of("--size", size, "--tmpfs", workDir.toString()));
            tmpfs.add(workDir.toString());
        }

        Map<Integer, Path> fds = new LinkedHashMap<>();
        fds.put(3, seccomp);
        int fd = Launcher.FIRST_FILE_FD;
        for (Map.Entry<String, Path> e : new TreeMap<>(spec.readOnlyFiles()).entrySet()) {
            Path dest = checkInside(e.getKey());
            fds.put(fd, e.getValue());
            // a copy, made by bwrap from a file the root-side launcher opened: the host file's location and
            // permissions never matter to the sandbox uid
            argv.addAll(List.of("--perms", "0444", "--ro-bind-data", Integer.toString(fd), dest.toString()));
            fd++;
        }
        for (Path dir : spec.readOnlyDirs()) {
            Path d = checkInside(dir.toString());
            argv.addAll(List.of("--ro-bind", d.toString(), d.toString()));
        }
        for (Map.Entry<String, Path> m : new TreeMap<>(spec.readOnlyMounts()).entrySet()) {
            Path dest = checkInside(m.getKey());
            argv.addAll(List.of("--ro-bind", m.getValue().toString(), dest.toString()));
        }
        if (spec.egressSocket().isPresent()) {
            if (helper == null) throw new SandboxException("network access needs codeexec-helper, which does not run here");
            // the proxy's socket, for this sandbox's uid only; init relays 127.0.0.1:3128 to it
            giveSocket(spec.egressSocket().get(), hostUid);
            argv.addAll(List.of("--bind", spec.egressSocket().get().toString(), EGRESS_SOCKET));
        }
        boolean preview = spec.previewDir().isPresent() && helper != null;
        if (preview) {
            // the preview socket's directory, this sandbox's uid's only; init listens in it (PREVIEW_DIR inside)
            givePreviewDir(spec.previewDir().get(), hostUid, userMode);
            argv.addAll(List.of("--bind", spec.previewDir().get().toString(), PREVIEW_DIR));
        }
        // The root and /dev are bwrap's own tmpfs mounts: read-only, so nothing can be written outside the
        // capped areas (workDir, /tmp, /dev/shm).
        argv.addAll(List.of("--remount-ro", "/dev", "--remount-ro", "/", "--chdir", workDir.toString(), "--seccomp", "3", "--as-pid-1", "--"));
        // With posix_spawn the init gets the status pipe (the program's real wait status); the JDK's ProcessBuilder
        // cannot pass an extra descriptor, and the dash init cannot tell an exit from a signal anyway.
        boolean statusPipe = helper != null && spawnDirect();
        // In normal-user mode without a pids cgroup the process limit is set by init, inside the user namespace
        boolean nprocInside = userMode && !cgroups.limitsPids();
        if (helper == null) {
            // a background job's session gets its autogroup's nice value here (the helper's init --nice does it
            // otherwise); best effort, as there
            String autogroup = spec.background() ? "{ echo " + Launcher.BACKGROUND_NICE + " > /proc/self/autogroup; } 2>/dev/null; " : "";
            argv.addAll(List.of("/bin/sh", "-c", autogroup + (nprocInside ? "ulimit -u " + limits.maxProcesses() + " || exit "
                    + Launcher.SETUP_FAILED + "; " + INIT : INIT), "sh"));
        } else {
            argv.addAll(List.of("/proc/self/fd/" + Launcher.HELPER_FD, "init"));
            if (statusPipe) argv.addAll(List.of("--status-fd", Integer.toString(Launcher.STATUS_FD)));
            if (spec.egressSocket().isPresent()) argv.addAll(List.of("--relay", EGRESS_SOCKET));
            if (preview) argv.addAll(List.of("--preview", PREVIEW_DIR + "/" + SandboxSpec.PREVIEW_SOCKET));
            if (nprocInside) argv.addAll(List.of("--nproc", Integer.toString(limits.maxProcesses())));
            if (spec.background()) argv.addAll(List.of("--nice", Integer.toString(Launcher.BACKGROUND_NICE)));
        }
        if (spec.awaitsCommand()) {
            if (helper == null) throw new SandboxException("a sandbox that waits for its command needs codeexec-helper");
            argv.add("--await-exec");
        }
        argv.addAll(spec.command());

        Cgroups.RunCgroup cg = Cgroups.RunCgroup.NONE;
        ControlChannel.Fifos fifos = null;
        Process p = null;
        try {
            cg = cgroups.create(spec.runId(), limits, spec.background());
            cg.countTmpfs(tmpfs);
            Map<Integer, Path> writeFds = Map.of();
            if (spec.control()) {
                fifos = ControlChannel.Fifos.create(controlDir.resolve(spec.runId()));
                fds.put(SandboxSpec.CONTROL_IN_FD, fifos.in());
                writeFds = Map.of(SandboxSpec.CONTROL_OUT_FD, fifos.out());
            }
            Launcher.Rlimits rlimits = Launcher.Rlimits.of(limits).standingInFor(cgroups);
            if (nprocInside) rlimits = rlimits.withoutNproc();
            List<String> cmd;
            if (helper != null) {
                String mntns = ns != null && ns.covers(bindSources(argv)) ? ns.path() : null;
                cmd = Launcher.helperCommand(helper, cg.procsFiles(), rlimits, fds, writeFds, mntns, hostUid, hostGid, argv);
            } else if (userMode) {
                // nothing to drop: bwrap makes the user namespace itself
                cmd = Launcher.command(cg.procsFiles(), rlimits, fds, writeFds, argv);
            } else {
                List<String> dropped = new ArrayList<>(List.of(SETPRIV, "--reuid=" + hostUid, "--regid=" + gid,
                        "--clear-groups", "--no-new-privs", "--"));
                dropped.addAll(argv);
                cmd = Launcher.command(cg.procsFiles(), rlimits, fds, writeFds, dropped);
            }
            // without the helper: the nice value from the launch on (the session's autogroup keeps its default)
            if (spec.background() && helper == null) cmd = Launcher.niced(cmd);
            if (spec.workDirSource().isPresent()) spec.workDirOwner().handTo(hostUid);
            p = Launcher.start(cmd, Map.of("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), null, spawnDirect(),
                    statusPipe ? Launcher.STATUS_FD : 0);
            cg.attach(p.pid());
            Optional<ControlChannel> control = fifos == null ? Optional.empty()
                    : Optional.of(ControlChannel.open(fifos, p, CONTROL_OPEN_TIMEOUT));
            // the preview socket's directory goes with the sandbox (a preview of it answers "not running" from then on)
            Runnable cleanup = preview ? () -> dev.codeexec.config.DataDir.deleteTree(spec.previewDir().get()) : () -> { };
            return new LaunchedProcess(p, cg, limits.cpuSeconds(), true, cleanup, control,
                    lateWorkDirs.orElse(null), lateDir, OptionalInt.of(hostUid), lease, lateRoDir);
        } catch (SandboxException | RuntimeException e) {
            if (p != null) {
                p.descendants().forEach(ProcessHandle::destroyForcibly);
                p.destroyForcibly();
            }
            cg.killAll();
            cg.remove();
            if (fifos != null) fifos.delete();
            if (lateDir != null) lateWorkDirs.get().release(lateDir);
            if (lateRoDir != null) lateWorkDirs.get().release(lateRoDir);
            throw e;
        }
    }

    /**
     * The host paths bwrap binds (the source of each --bind / --ro-bind / --dev-bind and their -try forms), up to
     * the program's "--". Option values are absolute paths, names or numbers, never a bind option's name, except in
     * the two-value options skipped whole.
     */
    static List<Path> bindSources(List<String> argv) {
        List<Path> out = new ArrayList<>();
        for (int i = 0; i + 1 < argv.size() && !argv.get(i).equals("--"); i++) {
            String a = argv.get(i);
            if (a.equals("--bind") || a.equals("--ro-bind") || a.equals("--dev-bind") || a.endsWith("-bind-try"))
                out.add(Path.of(argv.get(++i)));
            else if (a.equals("--setenv") || a.equals("--symlink") || a.equals("--ro-bind-data")) i += 2;
        }
        return out;
    }

    /** Where a sandbox finds its egress proxy's socket (init's --relay connects there). */
    static final String EGRESS_SOCKET = "/run/codeexec/egress.sock";
    /** Where a sandbox's preview directory is bound (its init listens on the preview socket there). */
    static final String PREVIEW_DIR = "/run/codeexec/preview";

    /**
     * Makes the preview directory (mode 0700) and gives it to the sandbox's host uid, so that its init can make the
     * socket there and no other uid can reach it; a normal user's server owns it already.
     */
    private static void givePreviewDir(Path dir, int hostUid, boolean userMode) throws SandboxException {
        try {
            if (!Files.isDirectory(dir.getParent())) {
                // the sandboxes' bwrap (their uid) passes through it to bind their own; nobody lists it
                Files.createDirectories(dir.getParent());
                Files.setPosixFilePermissions(dir.getParent(), java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
            }
            Files.createDirectories(dir);
            Files.deleteIfExists(dir.resolve(SandboxSpec.PREVIEW_SOCKET)); // an earlier sandbox's (a session restarted)
            Files.setPosixFilePermissions(dir, java.nio.file.attribute.PosixFilePermissions.fromString("rwx------"));
            if (!userMode) Files.setAttribute(dir, "unix:uid", hostUid, LinkOption.NOFOLLOW_LINKS);
        } catch (IOException | RuntimeException e) {
            throw new SandboxException("the preview directory cannot be made (" + e.getMessage() + ")");
        }
    }

    private static void giveSocket(Path socket, int hostUid) throws SandboxException {
        try {
            Files.setAttribute(socket, "unix:uid", hostUid, LinkOption.NOFOLLOW_LINKS);
        } catch (IOException | RuntimeException e) {
            throw new SandboxException("the egress proxy's socket cannot be given to the sandbox (" + e.getMessage() + ")");
        }
    }

    /** A launcher normally opens its FIFOs within milliseconds; this much means something is wrong. */
    static final Duration CONTROL_OPEN_TIMEOUT = Duration.ofSeconds(10);

    /** Leftover run cgroups under this server's parent (tests, diagnostics). */
    List<Path> leftoverCgroups() {
        Reaper.drain();
        return cgroups.leftovers();
    }

    Cgroups cgroups() {
        return cgroups;
    }

    static Path checkWorkDir(String workDir) throws SandboxException {
        Path p = checkInside(workDir);
        for (String sys : List.of("/usr", "/proc", "/dev", "/etc", "/bin", "/lib", "/lib64", "/sbin"))
            if (p.startsWith(sys)) throw new SandboxException("workDir must not be a system directory: " + workDir);
        return p;
    }

    static Path checkInside(String path) throws SandboxException {
        Path p = Path.of(path);
        if (!p.isAbsolute() || !p.normalize().equals(p) || p.getNameCount() == 0)
            throw new SandboxException("sandbox path must be absolute and normalized: " + path);
        return p;
    }

    static void checkEnv(String name, String value) throws SandboxException {
        if (name.isEmpty() || name.contains("=") || name.indexOf('\0') >= 0 || value.indexOf('\0') >= 0)
            throw new SandboxException("invalid environment variable name or value: " + name);
    }

    /**
     * /usr read-only; the merged-usr top-level links recreated as links (or bound, on a split-usr host); the /etc
     * snapshot. Computed once: the host layout does not change while the server runs.
     */
    static List<String> systemBinds(Path etc) {
        List<String> a = new ArrayList<>(List.of("--ro-bind", "/usr", "/usr"));
        for (String top : List.of("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")) {
            Path p = Path.of(top);
            try {
                if (Files.isSymbolicLink(p)) a.addAll(List.of("--symlink", Files.readSymbolicLink(p).toString(), top));
                else if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) a.addAll(List.of("--ro-bind", top, top));
            } catch (IOException e) {
                // unreadable: leave it out
            }
        }
        a.addAll(List.of("--ro-bind", etc.toString(), "/etc"));
        return List.copyOf(a);
    }

    private static String bwrapVersion() {
        try {
            Process p = new ProcessBuilder(BWRAP, "--version").redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
            p.waitFor();
            return out.replaceFirst("^bubblewrap\\s*", "");
        } catch (IOException e) {
            return "unknown";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "unknown";
        }
    }

    /**
     * Runs {@code id -u} in a real sandbox: proves bwrap, setpriv, namespaces, seccomp and cgroups work together
     * and that the program really runs as the configured uid. Returns the reason it does not, or null.
     */
    private String selfTest(Path helper, TrimmedMounts ns) {
        if (uid == 0 || gid == 0) return "SANDBOX_UID/SANDBOX_GID must not be 0";
        if (!Files.isExecutable(Path.of(BWRAP))) return "bubblewrap is not installed (" + BWRAP + " missing)";
        if (!userMode && helper == null && !Files.isExecutable(Path.of(SETPRIV)))
            return "setpriv is not installed (" + SETPRIV + " missing; package util-linux)";
        if (userMode) {
            String userns = UserNamespaces.unavailableReason();
            if (userns != null) return userns;
        }
        // Without a pids cgroup the process limit is RLIMIT_NPROC, which counts every process of the sandbox uid on
        // the host (other runs, warm sandboxes, sessions): generous, so the self-test does not fail for them.
        Limits l = new Limits(Duration.ofSeconds(10), 5, 256L << 20, 1024, 1 << 16, 1 << 20);
        SandboxSpec spec = SandboxSpec.builder("selftest-" + ProcessHandle.current().pid() + "-" + System.nanoTime(),
                List.of("/usr/bin/id", "-u"), "/work", l)
                .build();
        try (SandboxProcess p = launch(spec, helper, ns)) {
            p.stdin().close();
            String out = new String(p.stdout().readAllBytes(), StandardCharsets.UTF_8).trim();
            String err = new String(p.stderr().readAllBytes(), StandardCharsets.UTF_8).trim();
            if (!p.waitFor(Duration.ofSeconds(10))) return "a trivial sandboxed program did not finish within 10 s";
            if (p.exitCode() != 0)
                return "a trivial sandboxed program failed (exit " + p.exitCode() + "): " + err
                        + (userMode ? UserNamespaces.hint() : "");
            if (!out.equals(Integer.toString(uid)))
                return "sandboxed program runs as uid " + out + " instead of " + uid;
            return null;
        } catch (SandboxException | IOException | RuntimeException e) {
            return "cannot start a sandboxed program: " + e.getMessage();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "interrupted during the sandbox self-test";
        }
    }

    static boolean isRoot() {
        return dev.codeexec.linux.OwnIds.read().root();
    }
}
