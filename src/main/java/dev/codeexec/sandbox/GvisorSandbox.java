package dev.codeexec.sandbox;

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

import dev.codeexec.engine.Limits;

/**
 * gVisor: the program talks to gVisor's user-space kernel, not to the host's. Started as
 * {@code setpriv (sandbox uid) → runsc --rootless --network=none --platform=ptrace do}: the host filesystem is
 * seen read-only (with a writable in-memory overlay) through a gofer that runs as the sandbox uid, so only
 * world-readable host files are visible. The ptrace platform because KVM hangs on the development machines.
 *
 * <p>Read-only files are staged in a per-run host directory with a random name and copied into the working
 * directory inside the sandbox before the program starts. Caveat of {@code runsc do}: every world-readable host
 * file is visible (read-only) inside, including the staging directories of concurrent gVisor runs. The run's cgroup holds gVisor's own processes;
 * RLIMIT_CPU applies to gVisor's sentry, i.e. to the whole run's CPU time.
 */
final class GvisorSandbox implements Sandbox {

    static final String RUNSC = "/usr/bin/runsc";
    static final int GVISOR_OWN_PIDS = 256;

    private final int uid;
    private final int gid;
    private final Cgroups cgroups;
    private final String version;
    private final Optional<String> unavailable;

    GvisorSandbox(int uid, int gid, Path dataDir) {
        this.uid = uid;
        this.gid = gid;
        this.cgroups = Cgroups.detect();
        this.version = runscVersion();
        this.unavailable = Optional.ofNullable(selfTest());
    }

    @Override
    public String name() {
        return "gvisor";
    }

    @Override
    public Optional<String> unavailableReason() {
        return unavailable;
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
            Path files = staging.resolve("files");
            Path state = staging.resolve("state");
            Files.createDirectory(files);
            Files.createDirectory(state);
            HostDirs.chown(state, uid, gid);
            // The in-sandbox prologue: make the working directory, copy the staged files to their places.
            StringBuilder prologue = new StringBuilder("set -e; mkdir -p ").append(Launcher.quote(workDir)).append('\n');
            int i = 0;
            for (Map.Entry<String, Path> f : spec.readOnlyFiles().entrySet()) {
                String dest = BwrapSandbox.checkInside(f.getKey()).toString();
                Path staged = files.resolve("f" + i++);
                HostDirs.copyReadOnly(f.getValue(), staged);
                prologue.append("mkdir -p \"$(dirname ").append(Launcher.quote(dest)).append(")\"; cp ")
                        .append(Launcher.quote(staged.toString())).append(' ').append(Launcher.quote(dest))
                        .append("; chmod 0444 ").append(Launcher.quote(dest)).append('\n');
            }
            Files.setPosixFilePermissions(files, java.nio.file.attribute.PosixFilePermissions.fromString("rwxr-xr-x"));
            prologue.append("cd ").append(Launcher.quote(workDir)).append("\nunset OLDPWD PWD\nexec \"$@\"");

            List<String> argv = new ArrayList<>(List.of(BwrapSandbox.SETPRIV, "--reuid=" + uid, "--regid=" + gid,
                    "--clear-groups", "--no-new-privs", "--", RUNSC, "--rootless", "--network=none",
                    "--platform=ptrace", "--root=" + state, "do", "--quiet", "--cwd", "/",
                    "/bin/sh", "-c", prologue.toString(), "sh"));
            argv.addAll(spec.command());
            Limits limits = spec.limits();
            // The sandboxed program's processes live inside gVisor's sentry; the host pids are gVisor's own
            // (about 60 threads and processes on the ptrace platform), which a run's process limit must not starve.
            cg = cgroups.create(spec.runId(), new Limits(limits.timeout(), limits.cpuSeconds(), limits.memoryBytes(),
                    limits.maxProcesses() + GVISOR_OWN_PIDS, limits.outputBytes(), limits.diskBytes()));
            List<String> cmd = Launcher.command(cg.procsFiles(), limits, false, false, false, Map.of(), argv);
            Map<String, String> env = new LinkedHashMap<>(spec.env());
            for (String k : env.keySet()) BwrapSandbox.checkEnv(k, env.get(k));
            Process p = Launcher.start(cmd, env, staging.toFile());
            return new LaunchedProcess(p, cg, limits.cpuSeconds(), false, () -> HostDirs.deleteTree(staging));
        } catch (SandboxException | IOException | RuntimeException e) {
            cg.killAll();
            cg.remove();
            HostDirs.deleteTree(staging);
            if (e instanceof SandboxException se) throw se;
            throw new SandboxException("cannot start: " + e.getMessage(), e);
        }
    }

    private String selfTest() {
        if (uid == 0 || gid == 0) return "SANDBOX_UID/SANDBOX_GID must not be 0";
        if (!Files.isExecutable(Path.of(RUNSC))) return "gVisor is not installed (" + RUNSC + " missing; apt-get install runsc)";
        if (!Files.isExecutable(Path.of(BwrapSandbox.SETPRIV))) return "setpriv is not installed";
        if (!BwrapSandbox.isRoot()) return "the server must run as root to drop sandboxed code to uid " + uid;
        Limits l = new Limits(Duration.ofSeconds(30), 10, 512L << 20, 512, 1 << 16, 1 << 20);
        SandboxSpec spec = new SandboxSpec("gvisor-selftest-" + ProcessHandle.current().pid() + "-" + System.nanoTime(),
                List.of("/bin/echo", "ok"), "/work", Map.of(), List.of(), Map.of("PATH", "/usr/bin:/bin"), l);
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
