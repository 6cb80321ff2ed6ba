package dev.codeexec.linux;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * XFS project quotas: a project id on a directory tree and the kernel's hard limits of bytes and inodes for it, so
 * that every write and every file created below the directory is refused with EDQUOT past the limits, whoever
 * writes (any uid, any user namespace) and while it happens. Through {@code ioctl(FS_IOC_FSGETXATTR/FSSETXATTR)}
 * (the project id and the PROJINHERIT flag new entries copy) and {@code quotactl_fd} (Linux 5.14+: the commands
 * take a descriptor on the file system instead of its block device). Needs CAP_SYS_ADMIN, an XFS file system
 * mounted with {@code prjquota} and a kernel built with CONFIG_XFS_QUOTA.
 *
 * <p>Only the initial user namespace may change a project id or PROJINHERIT ({@code fileattr_set_prepare}), so a
 * sandboxed program cannot move its files out of its workspace's project; rename and link across projects fail
 * with EXDEV.
 */
public final class ProjectQuota {

    public static final long XFS_SUPER_MAGIC = 0x58465342L;

    private static final int PRJQUOTA = 2;
    private static final int Q_XGETQUOTA = 0x5803;
    private static final int Q_XSETQLIM = 0x5804;
    private static final int Q_XGETQSTAT = 0x5805;
    private static final int FS_QUOTA_PDQ_ENFD = 1 << 5;
    private static final int FS_PROJ_QUOTA = 2;
    private static final int FS_DQ_IHARD = 1 << 1;
    private static final int FS_DQ_BHARD = 1 << 3;
    private static final long FS_IOC_FSGETXATTR = 0x801c581fL;
    private static final long FS_IOC_FSSETXATTR = 0x401c5820L;
    private static final int FS_XFLAG_PROJINHERIT = 0x200;
    /** struct fsxattr: u32 xflags, extsize, nextents, projid, cowextsize; 8 bytes of padding. */
    private static final long FSXATTR_SIZE = 28;
    /** struct fs_disk_quota (112 bytes); limits and counts in 512-byte basic blocks. */
    private static final long DISK_QUOTA_SIZE = 112;
    private static final long BASIC_BLOCK = 512;


    private ProjectQuota() {
    }

    /** Bytes (allocated, in 512-byte units) and inodes charged to a project. */
    public record Usage(long bytes, long inodes) {
    }

    /** Whether project quotas are accounted and enforced on the file system of {@code fd}. */
    public static boolean enforced(int fd) throws Posix.Errno {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment stat = a.allocate(128, 8);
            quotactl(a, fd, Q_XGETQSTAT, 0, stat);
            // struct fs_quota_stat: s8 qs_version, (pad), u16 qs_flags at offset 2
            return (stat.get(ValueLayout.JAVA_SHORT, 2) & FS_QUOTA_PDQ_ENFD) != 0;
        }
    }

    /** The project id of an open file or directory (not O_PATH); 0 is "no project". */
    public static int projectOf(int fd) throws Posix.Errno {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment x = a.allocate(FSXATTR_SIZE, 4);
            ioctl(a, fd, FS_IOC_FSGETXATTR, x);
            return x.get(ValueLayout.JAVA_INT, 12);
        }
    }

    /** Whether new entries of this directory inherit its project id. */
    public static boolean inherits(int fd) throws Posix.Errno {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment x = a.allocate(FSXATTR_SIZE, 4);
            ioctl(a, fd, FS_IOC_FSGETXATTR, x);
            return (x.get(ValueLayout.JAVA_INT, 0) & FS_XFLAG_PROJINHERIT) != 0;
        }
    }

    /**
     * Charges an open file or directory to project {@code id} (root may move it into a project past its limits);
     * a directory also gets PROJINHERIT, so what is created in it later is charged to the same project.
     */
    public static void assign(int fd, int id, boolean directory) throws Posix.Errno {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment x = a.allocate(FSXATTR_SIZE, 4);
            ioctl(a, fd, FS_IOC_FSGETXATTR, x);
            int flags = x.get(ValueLayout.JAVA_INT, 0);
            x.set(ValueLayout.JAVA_INT, 0, directory ? flags | FS_XFLAG_PROJINHERIT : flags);
            x.set(ValueLayout.JAVA_INT, 12, id);
            ioctl(a, fd, FS_IOC_FSSETXATTR, x);
        }
    }

    /** Sets the hard limits of a project (bytes rounded up to 512-byte units); 0 means none. */
    public static void setLimits(int fd, int id, long bytes, long inodes) throws Posix.Errno {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment q = a.allocate(DISK_QUOTA_SIZE, 8);
            q.set(ValueLayout.JAVA_BYTE, 0, (byte) 1); // FS_DQUOT_VERSION
            q.set(ValueLayout.JAVA_BYTE, 1, (byte) FS_PROJ_QUOTA);
            q.set(ValueLayout.JAVA_SHORT, 2, (short) (FS_DQ_BHARD | FS_DQ_IHARD));
            q.set(ValueLayout.JAVA_INT, 4, id);
            q.set(ValueLayout.JAVA_LONG, 8, (bytes + BASIC_BLOCK - 1) / BASIC_BLOCK);
            q.set(ValueLayout.JAVA_LONG, 24, inodes);
            quotactl(a, fd, Q_XSETQLIM, id, q);
        }
    }

    /** The hard limits of a project: {bytes, inodes}, {0, 0} when none is set. */
    public static long[] limits(int fd, int id) throws Posix.Errno {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment q = a.allocate(DISK_QUOTA_SIZE, 8);
            if (!get(a, fd, id, q)) return new long[]{0, 0};
            return new long[]{q.get(ValueLayout.JAVA_LONG, 8) * BASIC_BLOCK, q.get(ValueLayout.JAVA_LONG, 24)};
        }
    }

    /** What is charged to a project now; nothing for a project the file system has never seen. */
    public static Usage usage(int fd, int id) throws Posix.Errno {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment q = a.allocate(DISK_QUOTA_SIZE, 8);
            if (!get(a, fd, id, q)) return new Usage(0, 0);
            return new Usage(q.get(ValueLayout.JAVA_LONG, 40) * BASIC_BLOCK, q.get(ValueLayout.JAVA_LONG, 48));
        }
    }

    private static boolean get(Arena a, int fd, int id, MemorySegment q) throws Posix.Errno {
        try {
            quotactl(a, fd, Q_XGETQUOTA, id, q);
            return true;
        } catch (Posix.Errno e) {
            if (e.errno == Posix.ENOENT) return false;
            throw e;
        }
    }

    private static void quotactl(Arena a, int fd, int cmd, int id, MemorySegment addr) throws Posix.Errno {
        MemorySegment state = a.allocate(Posix.CAPTURE);
        if (Sys.QUOTACTL_FD.call(state, fd, (cmd << 8) | PRJQUOTA, id, addr.address()) < 0)
            throw new Posix.Errno(Posix.errno(state), "quotactl_fd");
    }

    private static void ioctl(Arena a, int fd, long request, MemorySegment arg) throws Posix.Errno {
        MemorySegment state = a.allocate(Posix.CAPTURE);
        if (Sys.IOCTL.call(state, fd, request, arg.address()) < 0)
            throw new Posix.Errno(Posix.errno(state), "ioctl");
    }
}
