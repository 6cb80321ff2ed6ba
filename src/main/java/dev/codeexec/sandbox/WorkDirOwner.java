package dev.codeexec.sandbox;

/**
 * Gives a persistent working directory (a workspace) to the host uid a sandbox runs as, before its program can
 * touch it. Every sandbox has a host uid of its own (SANDBOX_UID_RANGE), so what an earlier run, a session call or
 * the file API left in the directory belongs to another uid; handed over, the program owns all of it, as a program
 * owns its home directory (it can write, chmod and delete what it finds). Implemented by whoever owns the directory
 * (the engine, through the workspace's safe file access); the sandbox only says when and to whom.
 */
@FunctionalInterface
public interface WorkDirOwner {

    /** For a sandbox without a persistent working directory. */
    WorkDirOwner NONE = hostUid -> { };

    /**
     * Hands the directory's tree to {@code hostUid}. A failure must not stop the run: the program then finds the
     * files as they were (group SANDBOX_GID, which every sandbox has).
     */
    void handTo(int hostUid);
}
