package dev.codeexec.workspace;

import dev.codeexec.workspace.WorkspaceException.Kind;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.InputStream;
import java.nio.file.attribute.FileTime;
import java.util.List;
import java.util.Optional;

/**
 * One tenant's workspace: its name, its safe file access, and its limits: bytes (WORKSPACE_QUOTA_MB) and entries
 * (WORKSPACE_MAX_ENTRIES). API writes are checked against both here and change nothing when refused; runs are
 * bounded as {@link Quota} describes (the kernel, or a watchdog: {@link #watch}).
 */
public final class Workspace {

    private static final Logger LOG = LoggerFactory.getLogger(Workspace.class);

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

    public long maxEntries() {
        return owner.maxEntries();
    }

    /**
     * Bytes and entries in the workspace now.
     *
     * @param exact false when a walk stopped after WORKSPACE_MAX_ENTRIES + 1 entries: the workspace has more
     *              entries than that and more bytes than {@code bytes}
     */
    public record Usage(long bytes, long entries, boolean exact) {
    }

    /** From the kernel's quota where it keeps one, else by a walk bounded by the entry limit. */
    public Usage usage() {
        return owner.quota().usage(this);
    }

    /** Space left under the quota (0 when at or over it). */
    public long remaining() {
        return Math.max(0, owner.quotaBytes() - usage().bytes());
    }

    /**
     * Gives the workspace's tree to the host uid a sandbox runs as ({@link WorkspaceFs#handOver}) before its program
     * starts. A failure (a tree a concurrent run moves around) is logged and the run goes on with the files as they
     * are: group SANDBOX_GID, writable by the group where their modes allow.
     */
    public void handOver(int hostUid) {
        try {
            fs.handOver(hostUid, maxEntries());
        } catch (WorkspaceException e) {
            LOG.warn("workspace {}/{}: cannot hand its files to uid {}: {}", tenant, name, hostUid, e.getMessage());
        }
    }

    /** Marks the workspace busy (expiry skips it) until the handle is closed. */
    public Workspaces.Hold hold() {
        return owner.hold(fs.root());
    }

    /**
     * Checks that files may be written to {@code targets} with {@code bytes} in all, before any is written: the new
     * content may use the space left plus what the files it replaces used, and the entries it adds (new files and
     * missing parent directories) must fit under the entry limit. Over either: QUOTA_EXCEEDED (507).
     */
    public void checkRoom(List<RelPath> targets, long bytes) {
        Room room = room(targets);
        Usage u = usage();
        checkEntries(u, room.added());
        if (bytes > Math.max(0, quotaBytes() - u.bytes()) + room.replaced()) throw overQuota();
    }

    /** What writing to these targets would replace (bytes) and add (entries). */
    private record Room(long replaced, int added) {
    }

    private Room room(List<RelPath> targets) {
        long replaced = 0;
        java.util.Set<RelPath> added = new java.util.HashSet<>();
        for (RelPath target : targets) {
            for (RelPath p = target; !p.isRoot() && !added.contains(p); p = p.parent()) {
                try {
                    WorkspaceFs.Entry old = fs.stat(p);
                    if (p == target && !old.isDirectory()) replaced += old.size();
                    break; // it exists, and so do its parents
                } catch (WorkspaceException e) {
                    if (e.kind() != Kind.NOT_FOUND) throw e;
                    added.add(p);
                }
            }
        }
        return new Room(replaced, added.size());
    }

    private void checkEntries(Usage u, int added) {
        if (added > 0 && (!u.exact() || u.entries() + added > maxEntries()))
            throw new WorkspaceException(Kind.QUOTA_EXCEEDED, "the workspace's limit of " + maxEntries()
                    + " files and directories (WORKSPACE_MAX_ENTRIES) would be exceeded");
    }

    private WorkspaceException overQuota() {
        return new WorkspaceException(Kind.QUOTA_EXCEEDED, "workspace quota of " + (owner.quotaBytes() >> 20) + " MB exceeded");
    }

    /**
     * Writes a file within the limits: the new content may use the space left plus what the file it replaces
     * used, and a new file (and its missing parents) must fit under the entry limit. Over either: QUOTA_EXCEEDED
     * (507), and the old file is untouched.
     */
    public long write(RelPath path, InputStream data, long maxBytes) {
        Room room = room(List.of(path));
        Usage u = usage();
        checkEntries(u, room.added());
        long allowed = Math.max(0, quotaBytes() - u.bytes()) + room.replaced();
        long written;
        if (allowed < maxBytes) {
            written = fs.write(path, data, allowed, Kind.QUOTA_EXCEEDED, overQuota().getMessage());
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

    /**
     * What workspace_info, the REST API and the admin view show of a workspace.
     *
     * @param sizeBytes   bytes used: the kernel's count of allocated bytes under project quotas, else the sizes of
     *                    the regular files
     * @param entries     files and directories in it (the root not counted)
     * @param files       of them, entries that are not directories
     * @param complete    false when the count stopped at WORKSPACE_MAX_ENTRIES + 1: there are more entries, and
     *                    (without project quotas) more bytes, than shown
     * @param enforcement how its limits are enforced ({@link Quota#name})
     * @param error       why it could not be examined (the other fields are then zero); one broken workspace
     *                    never hides the others
     */
    public record Info(String name, long sizeBytes, long quotaBytes, long entries, long maxEntries, int files,
            int directories, boolean complete, FileTime lastUsed, String enforcement, Optional<String> error) {
    }

    /** Counts and sizes by a walk bounded by the entry limit (sizes and entries from the quota where it is kept). */
    public Info info() {
        WorkspaceFs.Tally t = fs.tally(maxEntries());
        long bytes = t.bytes();
        long entries = t.entries();
        if (owner.quota().kernel()) {
            Usage u = usage();
            bytes = u.bytes();
            entries = u.entries();
        }
        return new Info(name, bytes, quotaBytes(), entries, maxEntries(), t.files(), t.directories(), t.complete(),
                lastUsed(), owner.quota().name(), Optional.empty());
    }

    /** The info of a workspace that could not be examined. */
    Info unreadable(String why) {
        return new Info(name, 0, quotaBytes(), 0, maxEntries(), 0, 0, false, FileTime.fromMillis(0),
                owner.quota().name(), Optional.of(why));
    }

    /** A watch on a running program's workspace; closing it ends the watch. */
    @FunctionalInterface
    public interface Watch extends AutoCloseable {
        @Override
        void close();
    }

    /**
     * While a run writes: where the kernel does not enforce the limits ({@link Quota.Measured}), measures the
     * workspace (see {@link Workspaces#watch}) and calls {@code stop} once when it holds more than
     * WORKSPACE_MAX_ENTRIES entries or more than {@code bytesAllowed} bytes. Under kernel quotas it does nothing.
     *
     * @param before its usage when the run started
     */
    public Watch watch(Usage before, long bytesAllowed, Runnable stop) {
        return owner.quota().kernel() ? () -> { } : owner.watch(this, before, bytesAllowed, stop);
    }

    /**
     * Refuses a run in a workspace that holds more entries than WORKSPACE_MAX_ENTRIES (possible after the limit was
     * lowered, or, without kernel quotas, after a run overshot it): the watchdog could not tell its growth, and
     * deleting entries (delete_file, the REST API) is the way out. Returns the usage it measured.
     */
    public Usage checkCanRun() {
        Usage u = usage();
        if (!u.exact() || u.entries() > maxEntries())
            throw new WorkspaceException(Kind.QUOTA_EXCEEDED, "the workspace holds more than " + maxEntries()
                    + " files and directories (WORKSPACE_MAX_ENTRIES): delete some before running code in it");
        return u;
    }
}
