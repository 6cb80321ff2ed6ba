package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * No isolation, for development only: the program runs as a plain child process on the host, sees the host
 * filesystem and network. It still gets a cleared environment, a fresh working directory (removed on close), the
 * cgroup/rlimit limits, and — when the server is root — the sandbox uid via setpriv. Paths under
 * {@link SandboxSpec#workDir()} in the command, the environment and the read-only files are mapped onto that
 * fresh directory, as there is no mount namespace to put it at its real place.
 */
final class NoSandbox implements Sandbox {

    static final String WARNING = "NO SANDBOX: code runs directly on the host with access to its files and network. Development only.";

    private final int uid;
    private final int gid;
    private final boolean root;
    private final Cgroups cgroups;

    NoSandbox(int uid, int gid) {
        this.uid = uid;
        this.gid = gid;
        this.root = BwrapSandbox.isRoot();
        this.cgroups = root ? Cgroups.detect() : Cgroups.none("not root");
        org.slf4j.LoggerFactory.getLogger(NoSandbox.class).warn(WARNING);
    }

    @Override
    public String name() {
        return "none";
    }

    @Override
    public Optional<String> unavailableReason() {
        return Optional.empty();
    }

    @Override
    public Map<String, Object> info() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("kind", "none");
        m.put("warning", WARNING);
        m.put("uid", root ? uid : "server's own");
        m.put("cgroup", cgroups.label());
        m.put("seccomp", false);
        m.put("network", "host");
        return m;
    }

    @Override
    public SandboxProcess start(SandboxSpec spec) throws SandboxException {
        if (spec.control() || spec.lateWorkDir())
            throw new SandboxException("the '" + name() + "' sandbox does not support warm sandboxes or sessions");
        if (spec.egressSocket().isPresent())
            throw new SandboxException("the '" + name() + "' sandbox cannot give runs network access (SANDBOX=bwrap can)");
        if (!spec.readOnlyMounts().isEmpty())
            throw new SandboxException("the '" + name() + "' sandbox cannot mount declared packages (SANDBOX=bwrap can)");
        String workDir = BwrapSandbox.checkInside(spec.workDir()).toString();
        Path dir;
        boolean ownDir = spec.workDirSource().isEmpty(); // a workspace is never ours to delete
        try {
            if (ownDir) {
                dir = HostDirs.create("code-exec-none-", "rwx------");
                if (root) HostDirs.chown(dir, uid, gid);
            } else {
                dir = spec.workDirSource().get();
            }
        } catch (IOException e) {
            throw new SandboxException("cannot create the working directory: " + e.getMessage(), e);
        }
        Cgroups.RunCgroup cg = Cgroups.RunCgroup.NONE;
        try {
            for (Map.Entry<String, Path> f : spec.readOnlyFiles().entrySet()) {
                String dest = f.getKey();
                if (!dest.startsWith(workDir + "/"))
                    throw new SandboxException("without a sandbox, read-only files must lie under the working directory: " + dest);
                HostDirs.copyReadOnly(f.getValue(), dir.resolve(dest.substring(workDir.length() + 1)));
            }
            List<String> argv = new ArrayList<>();
            if (root) argv.addAll(List.of(BwrapSandbox.SETPRIV, "--reuid=" + uid, "--regid=" + gid,
                    "--clear-groups", "--no-new-privs", "--"));
            for (String a : spec.command()) argv.add(remap(a, workDir, dir));
            Map<String, String> env = new LinkedHashMap<>();
            spec.env().forEach((k, v) -> env.put(k, remap(v, workDir, dir)));
            cg = cgroups.create(spec.runId(), spec.limits());
            List<String> cmd = Launcher.command(cg.procsFiles(), Launcher.Rlimits.of(spec.limits()).standingInFor(cgroups),
                    Map.of(), argv);
            Process p = Launcher.start(cmd, env, dir.toFile());
            cg.attach(p.pid());
            return new LaunchedProcess(p, cg, spec.limits().cpuSeconds(), false, () -> {
                if (ownDir) DataDir.deleteTree(dir);
            });
        } catch (SandboxException | IOException | RuntimeException e) {
            cg.killAll();
            cg.remove();
            if (ownDir) DataDir.deleteTree(dir);
            if (e instanceof SandboxException se) throw se;
            throw new SandboxException("cannot start: " + e.getMessage(), e);
        }
    }

    static String remap(String s, String workDir, Path dir) {
        if (s.equals(workDir)) return dir.toString();
        return s.replace(workDir + "/", dir + "/");
    }
}
