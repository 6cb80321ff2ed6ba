package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;


/**
 * gVisor: the program talks to gVisor's user-space kernel, not to the host's. The launcher enters a private
 * mount namespace (as root) and builds the run's root filesystem there (tmpfs; /usr, the /etc snapshot and the
 * read-only directories bound read-only; the run's files copied in), then starts
 * {@code setpriv (sandbox uid) → runsc --rootless --network=none --platform=ptrace do --root <that tree>}.
 * gVisor adds a writable in-memory overlay. The ptrace platform because KVM hangs on the development machines.
 *
 * <p>The run's cgroup holds gVisor's own processes (given {@link #GVISOR_OWN_PIDS} extra pids); RLIMIT_CPU
 * applies to gVisor's sentry, i.e. to the whole run's CPU time; RLIMIT_FSIZE is not set, as it breaks the sentry.
 *
 * <p>Warm sandboxes: with {@link SandboxSpec#control()} the program's stdin and stdout are its control channel
 * ({@link #controlOverStdio()}); the working directory is then the root filesystem's own empty {@code /work}
 * (stateless runs only: nothing can be mounted into a running gVisor sandbox).
 */
final class GvisorSandbox implements Sandbox {

    static final String RUNSC = "/usr/bin/runsc";
    static final int GVISOR_OWN_PIDS = 256;
    static final String UNSHARE = "/usr/bin/unshare";

    private final int uid;
    private final int gid;
    private final Cgroups cgroups;
    private final Path etc;
    private final String version;
    private final Optional<String> unavailable;

    GvisorSandbox(int uid, int gid, Path dataDir) {
        this.uid = uid;
        this.gid = gid;
        this.cgroups = Cgroups.detect();
        this.version = runscVersion();
        Path etcDir = null;
        String why = null;
        try {
            DataDir data = DataDir.at(dataDir);
            data.prepareRoot();
            etcDir = EtcSnapshot.build(Path.of("/etc"), data);
        } catch (IOException e) {
            why = "cannot prepare " + dataDir + " (/etc snapshot): " + e.getMessage();
        }
        this.etc = etcDir;
        this.unavailable = Optional.ofNullable(why != null ? why : selfTest());
    }

    @Override
    public String name() {
        return "gvisor";
    }

    @Override
    public Optional<String> unavailableReason() {
        return unavailable;
    }

    /**
     * runsc passes the sandbox no descriptor beyond 0–2, so a warm sandbox's interpreter takes its run on stdin and
     * says it is ready on stdout (a pre-started gVisor sandbox: runsc's start, ~150–200 ms here, off the request path).
     * Sessions stay unavailable: they talk to their interpreter for their whole life.
     */
    @Override
    public boolean controlOverStdio() {
        return true;
    }

    @Override
    public Map<String, Object> info() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("kind", "gvisor");
        m.put("uid", uid);
        m.put("cgroup", cgroups.label());
        m.put("network", "none");
        m.put("platform", "ptrace");
        m.put("runscVersion", version);
        unavailable.ifPresent(r -> m.put("unavailable", r));
        return m;
    }

    @Override
    public SandboxProcess start(SandboxSpec spec) throws SandboxException {
        if (spec.lateWorkDir() || spec.awaitsCommand() || spec.lateReadOnlyDir().isPresent())
            throw new SandboxException("the '" + name() + "' sandbox cannot mount into a running sandbox or wait for a command");
        if (spec.egressSocket().isPresent())
            throw new SandboxException("the '" + name() + "' sandbox cannot give runs network access (SANDBOX=bwrap can)");
        if (!spec.readOnlyMounts().isEmpty())
            throw new SandboxException("the '" + name() + "' sandbox cannot mount declared packages (SANDBOX=bwrap can)");
        if (unavailable.isPresent()) throw new SandboxException("sandbox unavailable: " + unavailable.get());
        return launch(spec);
    }

    private SandboxProcess launch(SandboxSpec spec) throws SandboxException {
        String workDir = BwrapSandbox.checkWorkDir(spec.workDir()).toString();
        Path staging;
        try {
            // gVisor's gofer (running as the sandbox uid) must be able to open every directory on the path
            staging = HostDirs.create("code-exec-gvisor-", "rwxr-xr-x");
        } catch (IOException e) {
            throw new SandboxException("cannot create the staging directory: " + e.getMessage(), e);
        }
        Cgroups.RunCgroup cg = Cgroups.RunCgroup.NONE;
        try {
            Path root = Files.createDirectory(staging.resolve("root"));
            Path state = Files.createDirectory(staging.resolve("state"));
            HostDirs.chown(state, uid, gid);
            List<String> argv = new ArrayList<>(List.of(UNSHARE, "--mount", "--propagation", "private", "--",
                    "/bin/sh", "-c", rootfsScript(spec, root, workDir), "sh",
                    BwrapSandbox.SETPRIV, "--reuid=" + uid, "--regid=" + gid, "--clear-groups", "--no-new-privs",
                    "--", "/usr/bin/env", "-i"));
            for (Map.Entry<String, String> e : new TreeMap<>(spec.env()).entrySet()) {
                BwrapSandbox.checkEnv(e.getKey(), e.getValue());
                argv.add(e.getKey() + "=" + e.getValue());
            }
            argv.addAll(List.of(RUNSC, "--rootless", "--network=none", "--platform=ptrace", "--root=" + state,
                    // runsc checks --cwd on the host side too, where the sandbox's /work need not exist (a
                    // container): start in / and let coreutils' env change into the work dir inside the sandbox.
                    "do", "--quiet", "--root", root.toString(), "--cwd", "/", "/usr/bin/env", "-C", workDir));
            argv.addAll(spec.command());
            Limits limits = spec.limits();
            // The sandboxed program's processes live inside gVisor's sentry; the host pids are gVisor's own
            // (about 60 threads and processes on the ptrace platform), which a run's process limit must not starve.
            cg = cgroups.create(spec.runId(), new Limits(limits.timeout(), limits.cpuSeconds(), limits.memoryBytes(),
                    limits.maxProcesses() + GVISOR_OWN_PIDS, limits.outputBytes(), limits.diskBytes()));
            // no RLIMIT_FSIZE: it applies to gVisor's sentry, whose memory file is larger than a run's disk limit
            Launcher.Rlimits rlimits = Launcher.Rlimits.of(limits).withoutFsize();
            List<String> cmd = Launcher.command(cg.procsFiles(), rlimits, Map.of(), argv);
            Process p = Launcher.start(cmd, Map.of("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), staging.toFile());
            Optional<ControlChannel> control = spec.control()
                    ? Optional.of(ControlChannel.overStdio(p.getOutputStream(), p.getInputStream())) : Optional.empty();
            return new LaunchedProcess(p, cg, limits.cpuSeconds(), false, () -> DataDir.deleteTree(staging), control,
                    null, null, java.util.OptionalInt.empty(), null).reportingSignalsAsExitCodes();
        } catch (SandboxException | IOException | RuntimeException e) {
            cg.killAll();
            cg.remove();
            DataDir.deleteTree(staging);
            if (e instanceof SandboxException se) throw se;
            throw new SandboxException("cannot start: " + e.getMessage(), e);
        }
    }

    /**
     * Root-side, in the run's private mount namespace: a size-capped tmpfs as the sandbox's root filesystem with
     * /usr, the /etc snapshot and the read-only directories bound read-only, and the run's files copied in. The
     * namespace, and with it every mount, ends with the run's last process.
     */
    private String rootfsScript(SandboxSpec spec, Path root, String workDir) throws SandboxException {
        String r = Launcher.quote(root.toString());
        StringBuilder sc = new StringBuilder("set -e\n");
        sc.append("mount -t tmpfs -o size=").append(spec.limits().diskBytes()).append(",mode=755 tmpfs ").append(r).append('\n');
        sc.append("cd ").append(r).append(" && mkdir -p usr etc proc dev sys tmp && mkdir -p ")
                .append(Launcher.quote("." + workDir)).append('\n');
        for (String top : List.of("bin", "sbin", "lib", "lib64")) {
            Path host = Path.of("/" + top);
            if (Files.isSymbolicLink(host)) {
                try {
                    sc.append("ln -s ").append(Launcher.quote(Files.readSymbolicLink(host).toString())).append(' ').append(top).append('\n');
                } catch (IOException e) {
                    // leave it out
                }
            }
        }
        if (spec.workDirSource().isPresent()) {
            sc.append("mount --bind ").append(Launcher.quote(spec.workDirSource().get().toString())).append(' ')
                    .append(Launcher.quote("." + workDir)).append('\n');
        }
        sc.append("mount --bind -o ro /usr usr\n");
        sc.append("mount --bind -o ro ").append(Launcher.quote(etc.toString())).append(" etc\n");
        for (Path d : spec.readOnlyDirs()) {
            String in = Launcher.quote("." + BwrapSandbox.checkInside(d.toString()));
            sc.append("mkdir -p ").append(in).append(" && mount --bind -o ro ").append(Launcher.quote(d.toString()))
                    .append(' ').append(in).append('\n');
        }
        for (Map.Entry<String, Path> f : new TreeMap<>(spec.readOnlyFiles()).entrySet()) {
            String in = Launcher.quote("." + BwrapSandbox.checkInside(f.getKey()));
            sc.append("mkdir -p \"$(dirname ").append(in).append(")\" && cp ").append(Launcher.quote(f.getValue().toString()))
                    .append(' ').append(in).append(" && chmod 0444 ").append(in).append('\n');
        }
        sc.append("cd / && exec \"$@\"");
        return sc.toString();
    }

    private String selfTest() {
        if (uid == 0 || gid == 0) return "SANDBOX_UID/SANDBOX_GID must not be 0";
        if (!Files.isExecutable(Path.of(RUNSC))) return "gVisor is not installed (" + RUNSC + " missing; apt-get install runsc)";
        if (!Files.isExecutable(Path.of(BwrapSandbox.SETPRIV))) return "setpriv is not installed";
        if (!BwrapSandbox.isRoot()) return "the server must run as root to drop sandboxed code to uid " + uid;
        Limits l = new Limits(Duration.ofSeconds(30), 10, 512L << 20, 512, 1 << 16, 1 << 20);
        SandboxSpec spec = SandboxSpec.builder("gvisor-selftest-" + ProcessHandle.current().pid() + "-" + System.nanoTime(),
                List.of("/bin/echo", "ok"), "/work", l)
                .env(Map.of("PATH", "/usr/bin:/bin")).build();
        try (SandboxProcess p = launch(spec)) {
            p.stdin().close();
            String out = new String(p.stdout().readAllBytes(), StandardCharsets.UTF_8).trim();
            String err = new String(p.stderr().readAllBytes(), StandardCharsets.UTF_8).trim();
            if (!p.waitFor(Duration.ofSeconds(30))) return "a trivial gVisor program did not finish within 30 s";
            if (p.exitCode() != 0 || !out.equals("ok"))
                return "a trivial gVisor program failed (exit " + p.exitCode() + "): " + err;
            return null;
        } catch (SandboxException | IOException | RuntimeException e) {
            return "cannot start a gVisor program: " + e.getMessage();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "interrupted during the gVisor self-test";
        }
    }

    private static String runscVersion() {
        if (!Files.isExecutable(Path.of(RUNSC))) return "not installed";
        try {
            Process p = new ProcessBuilder(RUNSC, "--version").redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            p.waitFor();
            return out.lines().findFirst().orElse("unknown").replaceFirst("^runsc version\\s*", "");
        } catch (IOException e) {
            return "unknown";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "unknown";
        }
    }
}
