package dev.codeexec.linux;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * The few Linux calls the JDK lacks, bound through the FFM API (no JNI, no native build):
 * <ul>
 * <li>the {@code *at} calls relative to a directory descriptor ({@code openat}, {@code mkdirat}, {@code unlinkat},
 * {@code renameat2}, {@code fchownat}, {@code fchmodat}, {@code statx}) and {@code getdents64}, for race-free access
 * below a workspace directory we hold open. Names are raw bytes: a file name on Linux is any bytes but '/' and NUL,
 * not necessarily UTF-8, and the JDK's own file API would decode and re-encode it (lossily, and in the C locale
 * every non-ASCII name);</li>
 * <li>{@code fstatfs};</li>
 * <li>{@code mkfifo}, {@code kill}, {@code prlimit}, {@code mount} and {@code umount2}, for warm sandboxes and
 * sessions: a control channel into a sandbox, interrupting its program, resetting its CPU and file-size budget
 * when a run is handed to it, and mounting the run's working directory into it after it started;</li>
 * <li>what {@link Spawn} builds on: handles bound with and without errno capture, and {@link #call}.</li>
 * </ul>
 * The system calls go through {@link Sys} (one foreign-function handle for all of them); glibc's own functions
 * through handles of their own.
 */
public final class Posix {

    public static final int O_RDONLY = 0;
    public static final int O_WRONLY = 1;
    public static final int O_CREAT = 0x40;
    public static final int O_EXCL = 0x80;
    public static final int O_NONBLOCK = 0x800;
    public static final int O_NOFOLLOW = 0x20000;
    public static final int O_DIRECTORY = 0x10000;
    public static final int O_CLOEXEC = 0x80000;
    public static final int O_PATH = 0x200000;
    public static final int AT_FDCWD = -100;
    public static final int AT_SYMLINK_NOFOLLOW = 0x100;
    public static final int AT_REMOVEDIR = 0x200;
    public static final int AT_EMPTY_PATH = 0x1000;
    public static final int RENAME_NOREPLACE = 1;

    public static final int EPERM = 1;
    public static final int ENOENT = 2;
    public static final int EACCES = 13;
    public static final int EEXIST = 17;
    public static final int EXDEV = 18;
    public static final int ENOTDIR = 20;
    public static final int EISDIR = 21;
    public static final int EFBIG = 27;
    public static final int ENOSPC = 28;
    public static final int ENAMETOOLONG = 36;
    public static final int ENOSYS = 38;
    public static final int ENOTEMPTY = 39;
    public static final int ELOOP = 40;
    public static final int EOPNOTSUPP = 95;
    public static final int EDQUOT = 122;

    /** File types of {@link Stat#mode} ({@code S_IFMT}) and of {@code getdents64}'s {@code d_type}. */
    public static final int S_IFMT = 0170000;
    public static final int S_IFDIR = 0040000;
    public static final int S_IFREG = 0100000;
    public static final int S_IFLNK = 0120000;
    public static final int S_IFIFO = 0010000;
    public static final int S_ISGID = 02000;
    public static final int DT_UNKNOWN = 0;
    public static final int DT_DIR = 4;
    public static final int DT_REG = 8;

    public static final int SIGINT = 2;
    public static final int RLIMIT_CPU = 0;
    public static final int RLIMIT_FSIZE = 1;

    public static final long MS_RDONLY = 1;
    public static final long MS_NOSUID = 2;
    public static final long MS_NODEV = 4;
    public static final long MS_REMOUNT = 32;
    public static final long MS_BIND = 4096;
    public static final long MS_SHARED = 1 << 20;
    public static final int MNT_DETACH = 2;

    private static final Linker LINKER = Linker.nativeLinker();
    static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT;
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG;
    private static final ValueLayout PTR = ValueLayout.ADDRESS;
    /** fchmodat with AT_SYMLINK_NOFOLLOW: glibc's own (the kernel's call has no flags; see {@link Sys}). */
    private static final MethodHandle FCHMODAT = bind("fchmodat", FunctionDescriptor.of(INT, INT, PTR, INT, INT));
    private static final OwnIds SELF = OwnIds.read();

    /** The one thread that ever changes its own credentials (see {@link #prlimitAs}). */
    private static final java.util.concurrent.ExecutorService CREDENTIAL_THREAD =
            java.util.concurrent.Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "prlimit-as-owner");
                t.setDaemon(true);
                return t;
            });

    private Posix() {
    }

    /** A failed call: errno and what it was about. */
    public static final class Errno extends Exception {
        public final int errno;

        public Errno(int errno, String what) {
            super(what + ": errno " + errno, null, false, false);
            this.errno = errno;
        }
    }

    /** A libc function whose errno is captured: its handle takes the capture state first. */
    static MethodHandle bind(String name, FunctionDescriptor fd) {
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(), fd,
                Linker.Option.captureCallState("errno"));
    }

    /** A libc function that returns its error (posix_spawn and friends). */
    static MethodHandle plain(String name, FunctionDescriptor fd) {
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(), fd);
    }

    /** A call through one of the handles above: arguments after the capture state; negative result → Errno. */
    @FunctionalInterface
    interface Call {
        int invoke(Arena arena, MemorySegment state) throws Throwable;
    }

    /** errno from a capture state. */
    static int errno(MemorySegment state) {
        return (int) ERRNO.get(state, 0L);
    }

    /** A short description of an errno value, for messages. */
    static String strerror(int errno) {
        String name = switch (errno) {
            case ENOENT -> "No such file or directory";
            case 7 -> "Argument list too long";
            case 8 -> "Exec format error";
            case 11 -> "Resource temporarily unavailable";
            case 12 -> "Cannot allocate memory";
            case 13 -> "Permission denied";
            case ENOTDIR -> "Not a directory";
            case 24 -> "Too many open files";
            default -> null;
        };
        return name == null ? "errno " + errno : name + " (errno " + errno + ")";
    }

    static int call(String what, Call c) throws Errno {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CAPTURE);
            int rc = c.invoke(arena, state);
            if (rc < 0) throw new Errno((int) ERRNO.get(state, 0L), what);
            return rc;
        } catch (Errno e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(what + " failed", t);
        }
    }

    private static MemorySegment str(Arena arena, String s) {
        return s == null ? MemorySegment.NULL : arena.allocateFrom(s);
    }

    public static int openat(int dirFd, String name, int flags) throws Errno {
        return call(name, (a, s) -> (int) Sys.OPENAT.call(s, dirFd, a.allocateFrom(name).address(), flags | O_CLOEXEC, 0));
    }

    /** {@code openat} of a raw name; {@code mode} matters with O_CREAT only. Always O_CLOEXEC. */
    public static int openat(int dirFd, byte[] name, int flags, int mode) throws Errno {
        return call("openat", (a, s) -> (int) Sys.OPENAT.call(s, dirFd, cstr(a, name).address(), flags | O_CLOEXEC, mode));
    }

    public static void mkdirat(int dirFd, String name, int mode) throws Errno {
        call(name, (a, s) -> (int) Sys.MKDIRAT.call(s, dirFd, a.allocateFrom(name).address(), mode));
    }

    public static void mkdirat(int dirFd, byte[] name, int mode) throws Errno {
        call("mkdirat", (a, s) -> (int) Sys.MKDIRAT.call(s, dirFd, cstr(a, name).address(), mode));
    }

    /** Removes a name: a directory (empty) with {@link #AT_REMOVEDIR}, anything else without; links are not followed. */
    public static void unlinkat(int dirFd, byte[] name, int flags) throws Errno {
        call("unlinkat", (a, s) -> (int) Sys.UNLINKAT.call(s, dirFd, cstr(a, name).address(), flags));
    }

    /** rename(2) between two directory descriptors; {@link #RENAME_NOREPLACE} fails with EEXIST instead of replacing. */
    public static void renameat2(int fromDir, byte[] from, int toDir, byte[] to, int flags) throws Errno {
        call("renameat2", (a, s) -> (int) Sys.RENAMEAT2.call(s, fromDir, cstr(a, from).address(), toDir,
                cstr(a, to).address(), flags));
    }

    /** Owner and group of a name without following a link ({@code -1} leaves one as it is). */
    public static void fchownat(int dirFd, byte[] name, int uid, int gid) throws Errno {
        call("fchownat", (a, s) -> (int) Sys.FCHOWNAT.call(s, dirFd, cstr(a, name).address(), uid, gid,
                AT_SYMLINK_NOFOLLOW));
    }

    /** Mode of a name; a link is refused (EOPNOTSUPP), never followed. */
    public static void fchmodat(int dirFd, byte[] name, int mode) throws Errno {
        call("fchmodat", (a, s) -> (int) FCHMODAT.invokeExact(s, dirFd, cstr(a, name), mode, AT_SYMLINK_NOFOLLOW));
    }

    /** Owner and group of an open file (not an O_PATH descriptor). */
    public static void fchown(int fd, int uid, int gid) throws Errno {
        call("fchown", (a, s) -> (int) Sys.FCHOWN.call(s, fd, uid, gid));
    }

    /** Mode of an open file (not an O_PATH descriptor). */
    public static void fchmod(int fd, int mode) throws Errno {
        call("fchmod", (a, s) -> (int) Sys.FCHMOD.call(s, fd, mode));
    }

    /**
     * What {@code statx} says about a name (or, with an empty name and {@link #AT_EMPTY_PATH}, about the descriptor
     * itself). The struct statx layout is the same on every architecture.
     *
     * @param mode type and permission bits ({@link #S_IFMT})
     */
    public record Stat(int mode, long size, long mtimeSeconds, int mtimeNanos, long ino, long dev, int uid, int gid) {
        public int type() {
            return mode & S_IFMT;
        }

        public boolean isDirectory() {
            return type() == S_IFDIR;
        }

        public boolean isRegularFile() {
            return type() == S_IFREG;
        }
    }

    private static final int STATX_BASIC_STATS = 0x7ff;

    /** {@code statx(dirFd, name, AT_SYMLINK_NOFOLLOW | extraFlags)}: a link is described, never followed. */
    public static Stat statx(int dirFd, byte[] name, int extraFlags) throws Errno {
        try (Stats s = new Stats()) {
            return s.statx(dirFd, name, extraFlags);
        }
    }

    /**
     * {@link #statx} for many names in a row on one thread (a walk): the native buffers are allocated once, which
     * halves the cost per name.
     */
    public static final class Stats implements AutoCloseable {
        private final Arena arena = Arena.ofConfined();
        private final MemorySegment state = arena.allocate(CAPTURE);
        private final MemorySegment buf = arena.allocate(256, 8);
        private MemorySegment name = arena.allocate(256);

        public Stat statx(int dirFd, byte[] raw, int extraFlags) throws Errno {
            long dev = call(dirFd, raw, AT_SYMLINK_NOFOLLOW | extraFlags);
            return new Stat(Short.toUnsignedInt(buf.get(ValueLayout.JAVA_SHORT, 28)), buf.get(LONG, 40),
                    buf.get(LONG, 112), buf.get(INT, 120), buf.get(LONG, 32), dev, buf.get(INT, 20), buf.get(INT, 24));
        }

        /**
         * What a name stands for, following links ({@code AT_EMPTY_PATH} and an empty name: the file {@code dirFd}
         * is open on): its device, inode and the bytes it holds ({@code st_blocks} × 512).
         */
        public Allocation allocation(int dirFd, byte[] raw, int extraFlags) throws Errno {
            long dev = call(dirFd, raw, extraFlags);
            return new Allocation(Short.toUnsignedInt(buf.get(ValueLayout.JAVA_SHORT, 28)),
                    Integer.toUnsignedLong(buf.get(INT, 16)), dev, buf.get(LONG, 32), buf.get(LONG, 48) * 512);
        }

        /** The call; returns the device ({@link Stat#dev}'s encoding), the rest stays in {@link #buf}. */
        private long call(int dirFd, byte[] raw, int flags) throws Errno {
            if (name.byteSize() <= raw.length) name = arena.allocate(raw.length + 1L);
            for (int i = 0; i < raw.length; i++) {
                if (raw[i] == 0) throw new IllegalArgumentException("a file name cannot hold NUL");
                name.set(ValueLayout.JAVA_BYTE, i, raw[i]);
            }
            name.set(ValueLayout.JAVA_BYTE, raw.length, (byte) 0);
            long rc = Sys.STATX.call(state, dirFd, name.address(), flags, STATX_BASIC_STATS, buf.address());
            if (rc < 0) throw new Errno(errno(state), "statx");
            return ((long) buf.get(INT, 136) << 32) | (buf.get(INT, 140) & 0xffffffffL);
        }

        @Override
        public void close() {
            arena.close();
        }
    }

    /**
     * What a file is and the memory or disk it holds: {@code mode} its type and permission bits ({@link #S_IFMT}),
     * {@code links} its names (0 once deleted, or never named: a memfd), {@code dev} as in {@link Stat#dev} (major
     * in the high 32 bits, minor in the low), {@code bytes} its allocated blocks × 512 (less than its size where it
     * is sparse).
     */
    public record Allocation(int mode, long links, long dev, long ino, long bytes) {
    }

    /** One name of a directory as {@code getdents64} returns it: raw bytes and {@code d_type} ({@link #DT_DIR}, ...). */
    public record DirEntry(byte[] name, int type) {
    }

    /**
     * Names read from a directory, without "." and "..".
     *
     * @param next where the next read continues ({@code d_off} of the last record read), for {@link #readDir}
     * @param end  the end of the directory was reached
     */
    public record DirBatch(java.util.List<DirEntry> entries, long next, boolean end) {
    }

    /**
     * Reads names from a directory opened for reading (not O_PATH) from position {@code from} (0: the start; else
     * a {@link DirBatch#next}): at least {@code max} unless the directory ends first (a full buffer may add a few).
     */
    public static DirBatch readDir(int dirFd, long from, int max) throws Errno {
        java.util.List<DirEntry> out = new java.util.ArrayList<>();
        long next = from;
        boolean end = false;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CAPTURE);
            MemorySegment buf = arena.allocate(32 * 1024, 8);
            if (Sys.LSEEK.call(state, dirFd, from, 0) < 0) throw new Errno(errno(state), "lseek");
            while (out.size() < max) {
                long n = Sys.GETDENTS64.call(state, dirFd, buf.address(), buf.byteSize());
                if (n < 0) throw new Errno(errno(state), "getdents64");
                if (n == 0) {
                    end = true;
                    break;
                }
                // one bulk copy, then plain array reads: quick even before the JIT compiled this loop
                java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(buf.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE))
                        .order(java.nio.ByteOrder.nativeOrder());
                byte[] data = b.array();
                for (int off = 0; off < n; ) {
                    // struct linux_dirent64: u64 d_ino, s64 d_off, u16 d_reclen, u8 d_type, char d_name[]
                    next = b.getLong(off + 8);
                    int reclen = Short.toUnsignedInt(b.getShort(off + 16));
                    int type = Byte.toUnsignedInt(data[off + 18]);
                    int start = off + 19;
                    int stop = start;
                    while (data[stop] != 0) stop++;
                    if (!(stop - start == 1 && data[start] == '.') && !(stop - start == 2 && data[start] == '.' && data[start + 1] == '.'))
                        out.add(new DirEntry(java.util.Arrays.copyOfRange(data, start, stop), type));
                    off += reclen;
                }
            }
        }
        return new DirBatch(out, next, end);
    }

    /** {@code fstatfs}: the file system's magic number ({@code f_type}), and its inode and block counts. */
    public record FsStat(long type, long blockSize, long blocks, long freeBlocks, long files, long freeFiles) {
    }

    public static FsStat fstatfs(int fd) throws Errno {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CAPTURE);
            MemorySegment buf = arena.allocate(128, 8);
            if (Sys.FSTATFS.call(state, fd, buf.address()) < 0) throw new Errno(errno(state), "fstatfs");
            // struct statfs on 64-bit Linux: f_type, f_bsize, f_blocks, f_bfree, f_bavail, f_files, f_ffree (8 bytes each)
            return new FsStat(buf.get(LONG, 0), buf.get(LONG, 8), buf.get(LONG, 16), buf.get(LONG, 24),
                    buf.get(LONG, 40), buf.get(LONG, 48));
        }
    }

    /** A NUL-terminated copy of raw name bytes; a NUL inside would cut the name short, so it is refused. */
    private static MemorySegment cstr(Arena a, byte[] name) {
        MemorySegment m = a.allocate(name.length + 1L);
        for (int i = 0; i < name.length; i++) {
            if (name[i] == 0) throw new IllegalArgumentException("a file name cannot hold NUL");
            m.set(ValueLayout.JAVA_BYTE, i, name[i]);
        }
        m.set(ValueLayout.JAVA_BYTE, name.length, (byte) 0);
        return m;
    }

    /** Closes a descriptor; an error is ignored (the descriptor is released whatever close returns). */
    public static void close(int fd) {
        try (Arena arena = Arena.ofConfined()) {
            long ignored = Sys.CLOSE.call(arena.allocate(CAPTURE), fd);
        }
    }

    public static void mkfifo(String path, int mode) throws Errno {
        call("mkfifo " + path, (a, s) -> (int) Sys.MKNODAT.call(s, AT_FDCWD, a.allocateFrom(path).address(),
                S_IFIFO | mode, 0));
    }

    public static void kill(long pid, int signal) throws Errno {
        call("kill " + pid, (a, s) -> (int) Sys.KILL.call(s, pid, signal));
    }

    /** Sets soft and hard limit of {@code resource} for another process (root may raise as well as lower). */
    public static void prlimit(long pid, int resource, long soft, long hard) throws Errno {
        call("prlimit " + pid, (a, s) -> {
            MemorySegment lim = a.allocate(LONG, 2);
            lim.setAtIndex(LONG, 0, soft);
            lim.setAtIndex(LONG, 1, hard);
            return (int) Sys.PRLIMIT64.call(s, pid, resource, lim.address(), 0);
        });
    }

    /**
     * {@link #prlimit} for a process of another user without CAP_SYS_RESOURCE (container hosts often withhold it
     * from root): the kernel also allows it when the caller's real uid and gid equal the target's. So one
     * dedicated platform thread sets its own real uid/gid to the target's with raw syscalls — which, unlike the
     * libc wrappers, change only the calling thread — calls prlimit and puts them back (about 0.1-0.5 ms). The
     * effective uid stays 0, so the thread keeps its capabilities; nothing else runs on it, so the rest of the JVM
     * never sees a change; and between calls no thread of the server has a real uid that another user's process
     * could signal. Only lowering a hard limit works this way (raising one needs the capability).
     */
    public static void prlimitAs(int uid, int gid, long pid, int resource, long soft, long hard) throws Errno {
        if (uid == SELF.uid() && gid == SELF.gid()) {
            // a server run by a normal user: its sandboxes run as its own ids, nothing to switch (and no way to)
            prlimit(pid, resource, soft, hard);
            return;
        }
        try {
            CREDENTIAL_THREAD.submit(() -> {
                setRealIds(uid, gid);
                try {
                    prlimit(pid, resource, soft, hard);
                } finally {
                    setRealIds(0, 0);
                }
                return null;
            }).get();
        } catch (java.util.concurrent.ExecutionException e) {
            if (e.getCause() instanceof Errno errno) throw errno;
            throw new IllegalStateException("prlimit failed", e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Errno(4, "prlimit " + pid + " interrupted");
        }
    }

    /** setresgid(gid, -1, -1) then setresuid(uid, -1, -1) on this thread only; restoring 0 goes uid first. */
    private static void setRealIds(int uid, int gid) throws Errno {
        if (uid == 0) {
            call("setresuid", (a, s) -> (int) Sys.SETRESUID.call(s, 0, -1, -1));
            call("setresgid", (a, s) -> (int) Sys.SETRESGID.call(s, 0, -1, -1));
        } else {
            call("setresgid", (a, s) -> (int) Sys.SETRESGID.call(s, gid, -1, -1));
            call("setresuid", (a, s) -> (int) Sys.SETRESUID.call(s, uid, -1, -1));
        }
    }

    public static void mount(String source, String target, String type, long flags, String data) throws Errno {
        call("mount " + target, (a, s) -> (int) Sys.MOUNT.call(s, str(a, source).address(),
                a.allocateFrom(target).address(), str(a, type).address(), flags, str(a, data).address()));
    }

    public static void umount2(String target, int flags) throws Errno {
        call("umount " + target, (a, s) -> (int) Sys.UMOUNT2.call(s, a.allocateFrom(target).address(), flags));
    }
}
