package dev.codeexec.sandbox;


import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * What to start inside a sandbox.
 *
 * @param runId        unique id of the run (names the cgroup and staging files; [a-z0-9-] only)
 * @param command      argv as seen inside the sandbox (absolute program path or a name on the sandbox PATH); empty
 *                     with {@code control}: the command arrives later, in the run message on the control channel
 *                     ({@link Sandbox#awaitsCommands()}: a warm sandbox for a language without a warm interpreter)
 * @param workDir      working directory inside the sandbox; a fresh size-capped (limits.diskBytes) tmpfs
 * @param readOnlyFiles files to place into the sandbox read-only: path inside the sandbox → host path
 * @param readOnlyDirs extra host directories bound read-only at the same path (e.g. the shared Go build cache)
 * @param env          the complete environment of the program (the sandbox adds nothing from the host)
 * @param limits       limits to enforce in the kernel
 * @param workDirSource a host directory bound read-write at workDir (a persistent workspace, owned by the sandbox
 *                     uid) instead of the fresh tmpfs; files written there outlive the run
 * @param control      give the program a control channel: fd {@value #CONTROL_IN_FD} reads what the server sends,
 *                     fd {@value #CONTROL_OUT_FD} writes to the server ({@link SandboxProcess#control()}); for
 *                     interpreters started ahead of their code (warm sandboxes, sessions); where the sandbox has
 *                     its {@linkplain Sandbox#controlOverStdio() control over stdio}, the program's stdin and stdout
 * @param lateWorkDir  leave workDir empty at start and mount the run's working directory (a fresh tmpfs or a
 *                     workspace) into the running sandbox later, with {@link SandboxProcess#mountWorkDir}
 * @param workDirOwner hands workDirSource's tree to the host uid the sandbox runs as, just before the program
 *                     starts ({@link WorkDirOwner}); does nothing without a workDirSource
 * @param egressSocket a unix socket of the server's (its egress proxy) to bind into the sandbox, given to the
 *                     sandbox's uid; the sandbox's init then relays 127.0.0.1:3128 inside to it. Empty: no way out
 * @param readOnlyMounts host directories bound read-only at another path: path inside the sandbox → host directory
 *                     (a declared package set's sealed store entry). bwrap opens them as the sandbox's host uid, so
 *                     they must be readable by every uid
 * @param lateReadOnlyDir with {@code lateWorkDir}: a path inside the sandbox, empty at start, where a host
 *                     directory can be mounted read-only later ({@link SandboxProcess#mountReadOnly}): a warm
 *                     sandbox that gets a run's declared packages
 */
public record SandboxSpec(String runId, List<String> command, String workDir, Map<String, Path> readOnlyFiles,
        List<Path> readOnlyDirs, Map<String, String> env, Limits limits, Optional<Path> workDirSource,
        boolean control, boolean lateWorkDir, WorkDirOwner workDirOwner, Optional<Path> egressSocket,
        Map<String, Path> readOnlyMounts, Optional<String> lateReadOnlyDir) {

    /** Without a late read-only directory. */
    public SandboxSpec(String runId, List<String> command, String workDir, Map<String, Path> readOnlyFiles,
            List<Path> readOnlyDirs, Map<String, String> env, Limits limits, Optional<Path> workDirSource,
            boolean control, boolean lateWorkDir, WorkDirOwner workDirOwner, Optional<Path> egressSocket,
            Map<String, Path> readOnlyMounts) {
        this(runId, command, workDir, readOnlyFiles, readOnlyDirs, env, limits, workDirSource, control, lateWorkDir,
                workDirOwner, egressSocket, readOnlyMounts, Optional.empty());
    }

    /** Without read-only mounts at other paths. */
    public SandboxSpec(String runId, List<String> command, String workDir, Map<String, Path> readOnlyFiles,
            List<Path> readOnlyDirs, Map<String, String> env, Limits limits, Optional<Path> workDirSource,
            boolean control, boolean lateWorkDir, WorkDirOwner workDirOwner, Optional<Path> egressSocket) {
        this(runId, command, workDir, readOnlyFiles, readOnlyDirs, env, limits, workDirSource, control, lateWorkDir,
                workDirOwner, egressSocket, Map.of());
    }

    /** The program's end of the control channel: server → program. */
    public static final int CONTROL_IN_FD = 8;
    /** The program's end of the control channel: program → server. */
    public static final int CONTROL_OUT_FD = 9;

    /** A run without control channel. */
    public SandboxSpec(String runId, List<String> command, String workDir, Map<String, Path> readOnlyFiles,
            List<Path> readOnlyDirs, Map<String, String> env, Limits limits, Optional<Path> workDirSource) {
        this(runId, command, workDir, readOnlyFiles, readOnlyDirs, env, limits, workDirSource, false, false,
                WorkDirOwner.NONE, Optional.empty());
    }

    /** A run in a fresh tmpfs working directory. */
    public SandboxSpec(String runId, List<String> command, String workDir, Map<String, Path> readOnlyFiles,
            List<Path> readOnlyDirs, Map<String, String> env, Limits limits) {
        this(runId, command, workDir, readOnlyFiles, readOnlyDirs, env, limits, Optional.empty());
    }

    public SandboxSpec {
        if (!runId.matches("[a-z0-9-]{1,64}")) throw new IllegalArgumentException("bad runId: " + runId);
        if (command.isEmpty() && !control) throw new IllegalArgumentException("empty command");
        command = List.copyOf(command);
        readOnlyFiles = Map.copyOf(readOnlyFiles);
        readOnlyDirs = List.copyOf(readOnlyDirs);
        env = Map.copyOf(env);
        workDirSource = workDirSource == null ? Optional.empty() : workDirSource;
        workDirOwner = workDirOwner == null ? WorkDirOwner.NONE : workDirOwner;
        egressSocket = egressSocket == null ? Optional.empty() : egressSocket;
        readOnlyMounts = readOnlyMounts == null ? Map.of() : Map.copyOf(readOnlyMounts);
        lateReadOnlyDir = lateReadOnlyDir == null ? Optional.empty() : lateReadOnlyDir;
        if (lateReadOnlyDir.isPresent() && !lateWorkDir)
            throw new IllegalArgumentException("a late read-only directory needs a late working directory");
        if (lateWorkDir && workDirSource.isPresent())
            throw new IllegalArgumentException("a late working directory is mounted later, not given at start");
    }

    /** The same spec with a control channel, and optionally a working directory mounted later. */
    /** Whether the command comes later, over the control channel. */
    public boolean awaitsCommand() {
        return command.isEmpty();
    }

    public SandboxSpec withControl(boolean lateWorkDir) {
        return new SandboxSpec(runId, command, workDir, readOnlyFiles, readOnlyDirs, env, limits, workDirSource, true,
                lateWorkDir, workDirOwner, egressSocket, readOnlyMounts, lateReadOnlyDir);
    }

    /** The same spec with the given owner of its workDirSource. */
    public SandboxSpec withWorkDirOwner(WorkDirOwner owner) {
        return new SandboxSpec(runId, command, workDir, readOnlyFiles, readOnlyDirs, env, limits, workDirSource,
                control, lateWorkDir, owner, egressSocket, readOnlyMounts, lateReadOnlyDir);
    }

    /** Search paths that a channel's variables and a language's own are joined in (the channel's first). */
    private static final java.util.Set<String> JOINED = java.util.Set.of("PYTHONPATH", "NODE_PATH");

    /**
     * The same spec with a way out through the egress proxy listening on {@code socket}, plus what a program needs
     * to use it: {@code egressEnv} under the spec's own variables (which win, except the search paths in
     * {@link #JOINED}, which are joined), {@code egressFiles} beside its files, {@code egressDirs} beside its
     * read-only directories.
     */
    public SandboxSpec withEgress(Path socket, Map<String, String> egressEnv, Map<String, Path> egressFiles,
            List<Path> egressDirs) {
        Map<String, String> mergedEnv = new java.util.LinkedHashMap<>(egressEnv);
        env.forEach((k, v) -> mergedEnv.merge(k, v, (mine, theirs) ->
                JOINED.contains(k) && !theirs.isEmpty() ? mine + ":" + theirs : theirs));
        Map<String, Path> mergedFiles = new java.util.LinkedHashMap<>(egressFiles);
        mergedFiles.putAll(readOnlyFiles);
        List<Path> mergedDirs = new java.util.ArrayList<>(readOnlyDirs);
        mergedDirs.addAll(egressDirs);
        return new SandboxSpec(runId, command, workDir, mergedFiles, mergedDirs, mergedEnv, limits, workDirSource,
                control, lateWorkDir, workDirOwner, Optional.of(socket), readOnlyMounts, lateReadOnlyDir);
    }

    /**
     * The same spec with {@code mounts} (path inside → host directory) bound read-only and {@code mountEnv} put
     * ahead of its variables: the search paths in {@link #JOINED} are joined with the mounts' first (a declared
     * package set goes before the preinstalled libraries), any other variable of the spec's own wins.
     */
    public SandboxSpec withMounts(Map<String, Path> mounts, Map<String, String> mountEnv) {
        Map<String, String> mergedEnv = new java.util.LinkedHashMap<>(mountEnv);
        env.forEach((k, v) -> mergedEnv.merge(k, v, (mine, theirs) ->
                JOINED.contains(k) && !theirs.isEmpty() ? mine + ":" + theirs : theirs));
        Map<String, Path> merged = new java.util.LinkedHashMap<>(readOnlyMounts);
        merged.putAll(mounts);
        return new SandboxSpec(runId, command, workDir, readOnlyFiles, readOnlyDirs, mergedEnv, limits, workDirSource,
                control, lateWorkDir, workDirOwner, egressSocket, merged, lateReadOnlyDir);
    }

    /** The same spec with a late read-only directory at {@code inside} (it must have a late working directory). */
    public SandboxSpec withLateReadOnlyDir(String inside) {
        return new SandboxSpec(runId, command, workDir, readOnlyFiles, readOnlyDirs, env, limits, workDirSource,
                control, lateWorkDir, workDirOwner, egressSocket, readOnlyMounts, Optional.of(inside));
    }
}
