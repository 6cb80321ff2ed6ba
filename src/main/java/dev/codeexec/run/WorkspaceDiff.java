package dev.codeexec.run;

import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.workspace.MimeTypes;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.WorkspaceFs;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * What a run (or a session call) did to its workspace: a scan before it starts, with the workspace's usage, which
 * says how much of the quota is left for it (a workspace over its entry limit starts no run), and a scan after,
 * whose difference is the result's {@code files}. Both scans look at no more than {@link #SCAN_LIMIT} entries and
 * {@link WorkspaceFs#MAX_WALK_DEPTH} levels; {@code filesTruncated} says when a workspace had more. While the run
 * writes, {@link #watch} bounds it where the kernel does not.
 */
public final class WorkspaceDiff {

    /** Most entries a scan looks at. */
    static final int SCAN_LIMIT = 10_000;
    /** A workspace at its quota still lets a run start; its files may then grow by this much at most. */
    static final long MIN_SPACE = 64 * 1024;

    private final Workspace workspace;
    private final Map<String, WorkspaceFs.Entry> before;
    private final boolean beforeTruncated;
    private final Workspace.Usage usage;

    private WorkspaceDiff(Workspace workspace, Map<String, WorkspaceFs.Entry> before, boolean beforeTruncated,
            Workspace.Usage usage) {
        this.workspace = workspace;
        this.before = before;
        this.beforeTruncated = beforeTruncated;
        this.usage = usage;
    }

    /** Scans the workspace as it is before the run; a workspace over its entry limit: QUOTA_EXCEEDED. */
    public static WorkspaceDiff before(Workspace ws) {
        Workspace.Usage usage = ws.checkCanRun();
        Map<String, WorkspaceFs.Entry> entries = new HashMap<>();
        boolean complete = ws.fs().walkTree(RelPath.ROOT, SCAN_LIMIT, e -> entries.put(e.path().toString(), e)).complete();
        return new WorkspaceDiff(ws, entries, !complete, usage);
    }

    /** The bytes the run may still write under the quota (at least {@link #MIN_SPACE}). */
    public long spaceLeft() {
        return Math.max(MIN_SPACE, workspace.quotaBytes() - usage.bytes());
    }

    /**
     * Bounds the run's writes while it runs where the kernel does not ({@link Workspace#watch}): {@code stop} is
     * called once the workspace holds more than its entry limit, or more bytes than it held plus {@link #spaceLeft}.
     */
    public Workspace.Watch watch(Runnable stop) {
        return workspace.watch(usage, usage.bytes() + spaceLeft(), stop);
    }

    /** Scans again after the run and marks the workspace used: what the run created or changed. */
    public Changes after() {
        Map<String, WorkspaceFs.Entry> now = new HashMap<>();
        boolean complete = workspace.fs().walkTree(RelPath.ROOT, SCAN_LIMIT, e -> now.put(e.path().toString(), e)).complete();
        workspace.fs().touch();
        return new Changes(changedFiles(before, now), beforeTruncated || !complete);
    }

    /** The files a run created or changed, and whether a scan stopped at its limit. */
    public record Changes(List<ExecutionResult.FileArtifact> files, boolean truncated) {
    }

    /** Regular files that are new, or whose size or modification time changed, sorted by path. */
    static List<ExecutionResult.FileArtifact> changedFiles(Map<String, WorkspaceFs.Entry> before,
            Map<String, WorkspaceFs.Entry> after) {
        List<ExecutionResult.FileArtifact> out = new ArrayList<>();
        for (WorkspaceFs.Entry e : after.values()) {
            if (!e.type().equals("file")) continue;
            WorkspaceFs.Entry old = before.get(e.path().toString());
            String status = old == null || !old.type().equals("file") ? "created"
                    : old.size() != e.size() || !old.modified().equals(e.modified()) ? "modified" : null;
            if (status != null) out.add(new ExecutionResult.FileArtifact(e.path().toString(), e.size(),
                    MimeTypes.of(e.name()), status));
        }
        out.sort(Comparator.comparing(ExecutionResult.FileArtifact::path));
        return out;
    }
}
