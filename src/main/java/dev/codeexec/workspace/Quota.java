package dev.codeexec.workspace;

import dev.codeexec.config.Ids;
import dev.codeexec.linux.DeepWalk;
import dev.codeexec.linux.Posix;
import dev.codeexec.linux.ProjectQuota;
import dev.codeexec.workspace.WorkspaceException.Kind;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;

/**
 * How each workspace's bytes (WORKSPACE_QUOTA_MB) and entries (WORKSPACE_MAX_ENTRIES) are bounded, decided once
 * per WORKSPACE_ROOT when the server starts ({@link #detect}). A run writes into its workspace directly, so what
 * bounds it must work while it writes, for any uid and inside a user namespace.
 *
 * <p><b>The decision.</b> The kernel's per-directory-tree quota is the standard tool: XFS project quotas
 * ({@link Kernel}). Where WORKSPACE_ROOT is on XFS mounted with {@code prjquota} and the kernel has XFS quota
 * support, each workspace is a project with hard limits of bytes and inodes, so the kernel refuses the write or
 * the new file past them (EDQUOT, "Disk quota exceeded") during the run, for any uid, and usage is read from the
 * quota in O(1). A start-up self-check (a probe project that must refuse its third inode) proves the mode before it
 * is used. Everywhere else ({@link Measured}) there is no per-directory quota to use: ext4's needs the quota file
 * format (CONFIG_QFMT_V2), tmpfs's CONFIG_TMPFS_QUOTA, btrfs qgroups bound bytes only, and a loop-mounted image per
 * workspace would add a mount per workspace to the table every sandbox start copies. The project's own machine is
 * such a case: its kernel has neither CONFIG_QFMT_V2 nor CONFIG_XFS_QUOTA ({@code mount -o prjquota} of an XFS image
 * fails with "quota support not available in this kernel").
 *
 * <p><b>What holds without a kernel quota.</b> A watchdog ({@link Watchdog}) measures a running program's workspace
 * (walks bounded by the entry limit, any depth) and stops the run past either limit (outcome {@code
 * workspace_limit}); each file is still capped by RLIMIT_FSIZE at the space left; the scans before and after a run
 * and every API write check both limits; a workspace over its entry limit starts no run until entries are deleted.
 * What does not hold: a run can go past the limits by what it writes before the watchdog sees it (measured: a
 * program making 200,000 empty files as fast as it can, about 20,000 a second, was stopped at 50,400 to 56,400 files
 * with a limit of 50,000), and those inodes come from whatever file system holds WORKSPACE_ROOT — which should
 * therefore be a file system of its own (a partition, or a loop-mounted image), never the host's root.
 */
sealed interface Quota permits Quota.Kernel, Quota.Measured {

    /** For runtime_info and workspace_info: {@code xfs-project-quota} or {@code measured}. */
    String name();

    /** Why this mode, in a sentence for operators. */
    String note();

    /** Prepares a workspace directory (once per process) and returns where its API writes stage, or null. */
    WorkspaceFs.Staging attach(Path dir);

    /** Bytes and entries of a workspace, exactly when it can be told cheaply, else by a bounded walk. */
    Workspace.Usage usage(Workspace ws);

    /** Whether the kernel bounds a run's writes (else the watchdog does). */
    boolean kernel();

    /** The mode WORKSPACE_ROOT allows; {@code root} exists. */
    static Quota detect(Path root, long quotaBytes, long maxEntries) {
        int fd;
        try {
            fd = Posix.openat(Posix.AT_FDCWD, root.toString(), Posix.O_RDONLY | Posix.O_DIRECTORY);
        } catch (Posix.Errno e) {
            return new Measured("WORKSPACE_ROOT cannot be opened (errno " + e.errno + ")");
        }
        try {
            long type = Posix.fstatfs(fd).type();
            if (type != ProjectQuota.XFS_SUPER_MAGIC)
                return new Measured("WORKSPACE_ROOT is on " + fsName(type) + ", which offers no per-directory quota here");
            try {
                if (!ProjectQuota.enforced(fd))
                    return new Measured("WORKSPACE_ROOT is on XFS mounted without prjquota");
            } catch (Posix.Errno e) {
                return new Measured(e.errno == Posix.ENOSYS || e.errno == Posix.EOPNOTSUPP
                        ? "WORKSPACE_ROOT is on XFS, but this kernel has no XFS quota support (CONFIG_XFS_QUOTA)"
                        : "XFS project quotas cannot be queried (errno " + e.errno + (e.errno == Posix.EPERM
                        ? ": the server is not root" : "") + ")");
            }
            Kernel k = new Kernel(root, quotaBytes, maxEntries);
            String failed = k.selfCheck(fd);
            return failed == null ? k : new Measured("XFS project quotas failed the start-up check: " + failed);
        } catch (Posix.Errno e) {
            return new Measured("WORKSPACE_ROOT's file system cannot be examined (errno " + e.errno + ")");
        } finally {
            Posix.close(fd);
        }
    }

    private static String fsName(long magic) {
        return switch ((int) magic) {
            case 0xEF53 -> "ext4";
            case 0x01021994 -> "tmpfs";
            case 0x9123683E -> "btrfs";
            case 0x794C7630 -> "overlayfs";
            default -> "a file system of type 0x" + Long.toHexString(magic);
        };
    }

    /** XFS project quotas: one project per workspace, the kernel's hard limits. */
    final class Kernel implements Quota {
        private static final Logger LOG = LoggerFactory.getLogger(Quota.class);
        private static final String STAGING = ".staging";

        private final Path root;
        private final long quotaBytes;
        private final long maxEntries;
        /** Workspace directory → its project, once attached in this process. */
        private final Map<Path, Integer> projects = new ConcurrentHashMap<>();
        private int stagingFd = -1;

        Kernel(Path root, long quotaBytes, long maxEntries) {
            this.root = root;
            this.quotaBytes = quotaBytes;
            this.maxEntries = maxEntries;
        }

        @Override
        public String name() {
            return "xfs-project-quota";
        }

        @Override
        public String note() {
            return "the kernel refuses writes and new files past the limits (XFS project quota per workspace)";
        }

        @Override
        public boolean kernel() {
            return true;
        }

        /**
         * A probe project must take exactly the limits set, count its inodes and refuse the third; then the API's
         * staging directory (outside every project, root only) is made. Null when all of it worked.
         */
        String selfCheck(int rootFd) {
            byte[] probe = (".quota-check-" + Ids.hex(8)).getBytes();
            int id = -1;
            try {
                Posix.mkdirat(rootFd, probe, 0700);
                int dir = Posix.openat(rootFd, probe, Posix.O_RDONLY | Posix.O_DIRECTORY | Posix.O_NOFOLLOW, 0);
                try {
                    id = freeProject(rootFd);
                    ProjectQuota.assign(dir, id, true);
                    ProjectQuota.setLimits(dir, id, 1 << 20, 3);
                    long[] limits = ProjectQuota.limits(dir, id);
                    if (limits[0] != 1 << 20 || limits[1] != 3)
                        return "limits read back as " + limits[0] + " bytes, " + limits[1] + " inodes";
                    for (int i = 0; i < 2; i++) Posix.close(Posix.openat(dir, ("f" + i).getBytes(), Posix.O_WRONLY | Posix.O_CREAT, 0600));
                    long inodes = ProjectQuota.usage(dir, id).inodes();
                    if (inodes != 3) return "the probe project counts " + inodes + " inodes instead of 3";
                    try {
                        Posix.close(Posix.openat(dir, "f2".getBytes(), Posix.O_WRONLY | Posix.O_CREAT, 0600));
                        return "the inode limit was not enforced";
                    } catch (Posix.Errno e) {
                        if (e.errno != Posix.EDQUOT) return "the inode limit answered errno " + e.errno + " instead of EDQUOT";
                    }
                } finally {
                    WorkspaceFs.clear(dir);
                    Posix.close(dir);
                    Posix.unlinkat(rootFd, probe, Posix.AT_REMOVEDIR);
                    if (id > 0) ProjectQuota.setLimits(rootFd, id, 0, 0);
                }
                try {
                    Posix.mkdirat(rootFd, STAGING.getBytes(), 0700);
                } catch (Posix.Errno e) {
                    if (e.errno != Posix.EEXIST) throw e;
                }
                stagingFd = Posix.openat(rootFd, STAGING.getBytes(), Posix.O_PATH | Posix.O_DIRECTORY | Posix.O_NOFOLLOW, 0);
                int staging = Posix.openat(rootFd, STAGING.getBytes(), Posix.O_RDONLY | Posix.O_DIRECTORY | Posix.O_NOFOLLOW, 0);
                try {
                    if (ProjectQuota.projectOf(staging) != 0) ProjectQuota.assign(staging, 0, false);
                } finally {
                    Posix.close(staging);
                }
                return null;
            } catch (Posix.Errno | RuntimeException e) {
                return e.getMessage();
            }
        }

        /** A project id no inode is charged to and no limit is set on. */
        private static synchronized int freeProject(int anyFd) throws Posix.Errno {
            while (true) {
                int id = ThreadLocalRandom.current().nextInt(1 << 20, Integer.MAX_VALUE);
                ProjectQuota.Usage u = ProjectQuota.usage(anyFd, id);
                long[] limits = ProjectQuota.limits(anyFd, id);
                if (u.inodes() == 0 && limits[0] == 0 && limits[1] == 0) return id;
            }
        }

        @Override
        public WorkspaceFs.Staging attach(Path dir) {
            int id = projects.computeIfAbsent(dir, this::project);
            return new WorkspaceFs.Staging() {
                @Override
                public int dirFd() {
                    return stagingFd;
                }

                @Override
                public void adopt(int fileFd) throws Posix.Errno {
                    ProjectQuota.assign(fileFd, id, false);
                }
            };
        }

        /**
         * The workspace's project: the one on its directory, or (a new workspace, or one from before project quotas)
         * a new one given to the directory and everything in it; limits set to the configured ones.
         */
        private int project(Path dir) {
            try {
                int fd = Posix.openat(Posix.AT_FDCWD, dir.toString(), Posix.O_RDONLY | Posix.O_DIRECTORY | Posix.O_NOFOLLOW);
                try {
                    int id = ProjectQuota.projectOf(fd);
                    if (id == 0 || !ProjectQuota.inherits(fd)) {
                        id = freeProject(fd);
                        charge(fd, id);
                        LOG.info("workspace {} is now XFS project {}", dir, id);
                    }
                    long[] limits = ProjectQuota.limits(fd, id);
                    if (limits[0] != roundUp(quotaBytes) || limits[1] != maxEntries + 1)
                        ProjectQuota.setLimits(fd, id, quotaBytes, maxEntries + 1); // + 1: the directory itself
                    return id;
                } finally {
                    Posix.close(fd);
                }
            } catch (Posix.Errno e) {
                throw new WorkspaceException(Kind.IO, "the workspace's quota cannot be set (errno " + e.errno + ")");
            }
        }

        private static long roundUp(long bytes) {
            return (bytes + 511) / 512 * 512;
        }

        /** Gives a tree to a project: files and directories (links and sockets cannot be opened and stay out). */
        private static void charge(int rootFd, int id) throws Posix.Errno {
            WorkspaceFs.walkTree(rootFd, new DeepWalk.Visitor() {
                @Override
                public boolean entry(int dirFd, byte[] name, int type) throws Posix.Errno {
                    if (type == Posix.DT_DIR) return true;
                    if (type != Posix.DT_REG && type != 1) return false; // regular files and FIFOs
                    int fd;
                    try {
                        fd = Posix.openat(dirFd, name, Posix.O_RDONLY | Posix.O_NOFOLLOW | Posix.O_NONBLOCK, 0);
                    } catch (Posix.Errno gone) {
                        return false;
                    }
                    try {
                        ProjectQuota.assign(fd, id, false);
                    } finally {
                        Posix.close(fd);
                    }
                    return false;
                }

                @Override
                public void entered(int fd) throws Posix.Errno {
                    ProjectQuota.assign(fd, id, true);
                }
            });
        }

        @Override
        public Workspace.Usage usage(Workspace ws) {
            int id = projects.computeIfAbsent(ws.fs().root(), this::project);
            try {
                int fd = Posix.openat(Posix.AT_FDCWD, ws.fs().root().toString(), Posix.O_RDONLY | Posix.O_DIRECTORY | Posix.O_NOFOLLOW);
                try {
                    ProjectQuota.Usage u = ProjectQuota.usage(fd, id);
                    return new Workspace.Usage(u.bytes(), Math.max(0, u.inodes() - 1), true);
                } finally {
                    Posix.close(fd);
                }
            } catch (Posix.Errno e) {
                if (e.errno == Posix.ENOENT) throw new WorkspaceException(Kind.NOT_FOUND, "workspace not found");
                throw new WorkspaceException(Kind.IO, "the workspace's quota cannot be read (errno " + e.errno + ")");
            }
        }
    }

    /** No kernel quota: measured by bounded walks, while runs write (a watchdog) and before every API write. */
    record Measured(String why) implements Quota {
        @Override
        public String name() {
            return "measured";
        }

        @Override
        public String note() {
            return why + ": a running program's workspace is measured while it runs and the run is stopped past the "
                    + "limits, so it can overshoot them by what it writes in between (a few thousand files)";
        }

        @Override
        public WorkspaceFs.Staging attach(Path dir) {
            return null;
        }

        @Override
        public Workspace.Usage usage(Workspace ws) {
            WorkspaceFs.Tally t = ws.fs().tally(ws.maxEntries());
            return new Workspace.Usage(t.bytes(), t.entries(), t.complete());
        }

        @Override
        public boolean kernel() {
            return false;
        }
    }
}
