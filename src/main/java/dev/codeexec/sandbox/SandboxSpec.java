package dev.codeexec.sandbox;

import dev.codeexec.engine.Limits;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * What to start inside a sandbox.
 *
 * @param runId        unique id of the run (names the cgroup and staging files; [a-z0-9-] only)
 * @param command      argv as seen inside the sandbox (absolute program path or a name on the sandbox PATH)
 * @param workDir      working directory inside the sandbox; a fresh size-capped (limits.diskBytes) tmpfs
 * @param readOnlyFiles files to place into the sandbox read-only: path inside the sandbox → host path
 * @param readOnlyDirs extra host directories bound read-only at the same path (e.g. the shared Go build cache)
 * @param env          the complete environment of the program (the sandbox adds nothing from the host)
 * @param limits       limits to enforce in the kernel
 * @param workDirSource a host directory bound read-write at workDir (a persistent workspace, owned by the sandbox
 *                     uid) instead of the fresh tmpfs; files written there outlive the run
 */
public record SandboxSpec(String runId, List<String> command, String workDir, Map<String, Path> readOnlyFiles,
        List<Path> readOnlyDirs, Map<String, String> env, Limits limits, Optional<Path> workDirSource) {

    /** A run in a fresh tmpfs working directory. */
    public SandboxSpec(String runId, List<String> command, String workDir, Map<String, Path> readOnlyFiles,
            List<Path> readOnlyDirs, Map<String, String> env, Limits limits) {
        this(runId, command, workDir, readOnlyFiles, readOnlyDirs, env, limits, Optional.empty());
    }

    public SandboxSpec {
        if (!runId.matches("[a-z0-9-]{1,64}")) throw new IllegalArgumentException("bad runId: " + runId);
        if (command.isEmpty()) throw new IllegalArgumentException("empty command");
        command = List.copyOf(command);
        readOnlyFiles = Map.copyOf(readOnlyFiles);
        readOnlyDirs = List.copyOf(readOnlyDirs);
        env = Map.copyOf(env);
        workDirSource = workDirSource == null ? Optional.empty() : workDirSource;
    }
}
