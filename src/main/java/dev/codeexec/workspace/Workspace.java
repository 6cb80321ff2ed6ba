package dev.codeexec.workspace;

import dev.codeexec.workspace.WorkspaceException.Kind;

import java.io.InputStream;
import java.nio.file.attribute.FileTime;

/**
 * One tenant's workspace: its name, its safe file access, and the quota. API writes are checked against the
 * quota here; runs are bounded in the kernel (RLIMIT_FSIZE set to the space left) and accounted after.
 */
public final class Workspace {

    private final String tenant;
    private final String name;
    private final WorkspaceFs fs;
    private final Workspaces owner;

    Workspace(String tenant, String name, WorkspaceFs fs, Workspaces owner) {
        this.tenant = tenant;
        this.name = name;
        this.fs = fs;
        this.owner = owner;
    }

    public String tenant() {
        return tenant;
    }

    public String name() {
        return name;
    }

    public WorkspaceFs fs() {
        return fs;
    }

    public long quotaBytes() {
        return owner.quotaBytes();
    }

    /** Bytes of regular files in the workspace now. */
    public long usage() {
        return fs.tally(Long.MAX_VALUE).bytes();
    }

    /** Space left under the quota (0 when at or over it). */
    public long remaining() {
        return Math.max(0, owner.quotaBytes() - usage());
    }

    /** Marks the workspace busy (expiry skips it) until the handle is closed. */
    public Workspaces.Hold hold() {
        return owner.hold(fs.root());
    }

    /**
     * Writes a file within the quota: the new content may use the space left plus what the file it replaces
     * used. Over that: QUOTA_EXCEEDED (507), and the old file is untouched.
     */
    public long write(RelPath path, InputStream data, long maxBytes) {
        long replaced = 0;
        try {
            WorkspaceFs.Entry old = fs.stat(path);
            if (!old.isDirectory()) replaced = old.size();
        } catch (WorkspaceException e) {
            if (e.kind() != Kind.NOT_FOUND) throw e;
        }
        long allowed = remaining() + replaced;
        long written;
        if (allowed < maxBytes) {
            written = fs.write(path, data, allowed, Kind.QUOTA_EXCEEDED,
                    "workspace quota of " + (owner.quotaBytes() >> 20) + " MB exceeded");
        } else {
            written = fs.write(path, data, maxBytes, Kind.TOO_LARGE, "file larger than " + (maxBytes >> 20) + " MB");
        }
        fs.touch();
        return written;
    }

    /** Last use: the directory's modification time. */
    public FileTime lastUsed() {
        return fs.stat(RelPath.ROOT).modified();
    }

    /** File and directory counts, size, quota and last use. */
    public record Info(String name, long sizeBytes, long quotaBytes, int files, int directories, FileTime lastUsed) {
    }

    /** Counted to the bottom of the tree, however deep, without recursion. */
    public Info info() {
        WorkspaceFs.Tally t = fs.tally(Long.MAX_VALUE);
        return new Info(name, t.bytes(), owner.quotaBytes(), t.files(), t.directories(), lastUsed());
    }
}
