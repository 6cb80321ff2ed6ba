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
 * @param background   a background job's sandbox: its processes get a lower CPU weight than interactive runs (the
 *                     run cgroup's {@code cpu.weight} where cgroup v2 has the cpu controller, and a nice value)
 * @param previewDir   a host directory (the server's, made for this sandbox) bound into the sandbox, where its init
 *                     listens on a unix socket that reaches 127.0.0.1:PORT inside ({@link #PREVIEW_SOCKET} in it):
 *                     port previews of a session's or a job's servers. Empty: none
 */
public record SandboxSpec(String runId, List<String> command, String workDir, Map<String, Path> readOnlyFiles,
        List<Path> readOnlyDirs, Map<String, String> env, Limits limits, Optional<Path> workDirSource,
        boolean control, boolean lateWorkDir, WorkDirOwner workDirOwner, Optional<Path> egressSocket,
        Map<String, Path> readOnlyMounts, Optional<String> lateReadOnlyDir, boolean background, Optional<Path> previewDir) {

    /** The socket's name in {@link #previewDir}. */
    public static final String PREVIEW_SOCKET = "preview.sock";

    /** The program's end of the control channel: server → program. */
    public static final int CONTROL_IN_FD = 8;
    /** The program's end of the control channel: program → server. */
    public static final int CONTROL_OUT_FD = 9;

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
        previewDir = previewDir == null ? Optional.empty() : previewDir;
        if (lateReadOnlyDir.isPresent() && !lateWorkDir)
            throw new IllegalArgumentException("a late read-only directory needs a late working directory");
        if (lateWorkDir && workDirSource.isPresent())
            throw new IllegalArgumentException("a late working directory is mounted later, not given at start");
    }

    /** Whether the command comes later, over the control channel. */
    public boolean awaitsCommand() {
        return command.isEmpty();
    }

    /** The same spec with a control channel, and optionally a working directory mounted later. */
    public SandboxSpec withControl(boolean lateWorkDir) {
        return toBuilder().control(true).lateWorkDir(lateWorkDir).build();
    }

    /** The same spec with the given owner of its workDirSource. */
    public SandboxSpec withWorkDirOwner(WorkDirOwner owner) {
        return toBuilder().workDirOwner(owner).build();
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
        return toBuilder().readOnlyFiles(mergedFiles).readOnlyDirs(mergedDirs).env(mergedEnv)
                .egressSocket(Optional.of(socket)).build();
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
        return toBuilder().env(mergedEnv).readOnlyMounts(merged).build();
    }

    /** The same spec with a late read-only directory at {@code inside} (it must have a late working directory). */
    public SandboxSpec withLateReadOnlyDir(String inside) {
        return toBuilder().lateReadOnlyDir(Optional.of(inside)).build();
    }

    /** A spec running {@code command} in {@code workDir} under {@code limits}; the rest as the builder is told. */
    public static Builder builder(String runId, List<String> command, String workDir, Limits limits) {
        return new Builder(runId, command, workDir, limits);
    }

    /** A builder holding this spec, to change some of it. */
    public Builder toBuilder() {
        return new Builder(runId, command, workDir, limits).readOnlyFiles(readOnlyFiles).readOnlyDirs(readOnlyDirs)
                .env(env).workDirSource(workDirSource).control(control).lateWorkDir(lateWorkDir)
                .workDirOwner(workDirOwner).egressSocket(egressSocket).readOnlyMounts(readOnlyMounts)
                .lateReadOnlyDir(lateReadOnlyDir).background(background).previewDir(previewDir);
    }

    /**
     * Builds a spec; what it is not told is that of a run in a fresh tmpfs working directory, with no files, no
     * control channel, no way out and nothing mounted later.
     */
    public static final class Builder {
        private final String runId;
        private final List<String> command;
        private final String workDir;
        private final Limits limits;
        private Map<String, Path> readOnlyFiles = Map.of();
        private List<Path> readOnlyDirs = List.of();
        private Map<String, String> env = Map.of();
        private Optional<Path> workDirSource = Optional.empty();
        private boolean control;
        private boolean lateWorkDir;
        private WorkDirOwner workDirOwner = WorkDirOwner.NONE;
        private Optional<Path> egressSocket = Optional.empty();
        private Map<String, Path> readOnlyMounts = Map.of();
        private Optional<String> lateReadOnlyDir = Optional.empty();
        private boolean background;
        private Optional<Path> previewDir = Optional.empty();

        private Builder(String runId, List<String> command, String workDir, Limits limits) {
            this.runId = runId;
            this.command = command;
            this.workDir = workDir;
            this.limits = limits;
        }

        public Builder readOnlyFiles(Map<String, Path> readOnlyFiles) {
            this.readOnlyFiles = readOnlyFiles;
            return this;
        }

        public Builder readOnlyDirs(List<Path> readOnlyDirs) {
            this.readOnlyDirs = readOnlyDirs;
            return this;
        }

        public Builder env(Map<String, String> env) {
            this.env = env;
            return this;
        }

        public Builder workDirSource(Optional<Path> workDirSource) {
            this.workDirSource = workDirSource;
            return this;
        }

        public Builder control(boolean control) {
            this.control = control;
            return this;
        }

        public Builder lateWorkDir(boolean lateWorkDir) {
            this.lateWorkDir = lateWorkDir;
            return this;
        }

        public Builder workDirOwner(WorkDirOwner workDirOwner) {
            this.workDirOwner = workDirOwner;
            return this;
        }

        public Builder egressSocket(Optional<Path> egressSocket) {
            this.egressSocket = egressSocket;
            return this;
        }

        public Builder readOnlyMounts(Map<String, Path> readOnlyMounts) {
            this.readOnlyMounts = readOnlyMounts;
            return this;
        }

        public Builder lateReadOnlyDir(Optional<String> lateReadOnlyDir) {
            this.lateReadOnlyDir = lateReadOnlyDir;
            return this;
        }

        /** A background job's sandbox (see the record's {@code background}). */
        public Builder background(boolean background) {
            this.background = background;
            return this;
        }

        /** Port previews through a socket in this host directory (see the record's {@code previewDir}). */
        public Builder previewDir(Optional<Path> previewDir) {
            this.previewDir = previewDir;
            return this;
        }

        public SandboxSpec build() {
            return new SandboxSpec(runId, command, workDir, readOnlyFiles, readOnlyDirs, env, limits, workDirSource,
                    control, lateWorkDir, workDirOwner, egressSocket, readOnlyMounts, lateReadOnlyDir, background,
                    previewDir);
        }
    }
}
