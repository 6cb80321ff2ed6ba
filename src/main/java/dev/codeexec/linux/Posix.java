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
 * <li>{@code openat}/{@code mkdirat} relative to a directory descriptor with {@code O_NOFOLLOW}, for race-free
 * access below a workspace directory we hold open (everything else is done by the JDK on
 * {@code /proc/self/fd/N/name}, which the kernel resolves through descriptor N itself);</li>
 * <li>{@code mkfifo}, {@code kill}, {@code prlimit}, {@code mount} and {@code umount2}, for warm sandboxes and
 * sessions: a control channel into a sandbox, interrupting its program, resetting its CPU and file-size budget
 * when a run is handed to it, and mounting the run's working directory into it after it started;</li>
 * <li>what {@link Spawn} builds on: handles bound with and without errno capture, and {@link #call}.</li>
 * </ul>
 */
public final class Posix {

    public static final int O_RDONLY = 0;
    public static final int O_NONBLOCK = 0x800;
    public static final int O_NOFOLLOW = 0x20000;
    public static final int O_DIRECTORY = 0x10000;
    public static final int O_CLOEXEC = 0x80000;
    public static final int O_PATH = 0x200000;
    public static final int AT_FDCWD = -100;

    public static final int ENOENT = 2;
    public static final int EEXIST = 17;
    public static final int ENOTDIR = 20;
    public static final int ELOOP = 40;

    public static final int SIGINT = 2;
    public static final int RLIMIT_CPU = 0;
    public static final int RLIMIT_FSIZE = 1;

    public static final long MS_NOSUID = 2;
    public static final long MS_NODEV = 4;
    public static final long MS_BIND = 4096;
    public static final long MS_SHARED = 1 << 20;
    public static final int MNT_DETACH = 2;

    private static final Linker LINKER = Linker.nativeLinker();
    static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT;
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG;
    private static final ValueLayout PTR = ValueLayout.ADDRESS;
    private static final MethodHandle OPENAT = bind("openat", FunctionDescriptor.of(INT, INT, PTR, INT, INT));
    private static final MethodHandle MKDIRAT = bind("mkdirat", FunctionDescriptor.of(INT, INT, PTR, INT));
    private static final MethodHandle MKFIFO = bind("mkfifo", FunctionDescriptor.of(INT, PTR, INT));
    private static final MethodHandle KILL = bind("kill", FunctionDescriptor.of(INT, INT, INT));
    private static final MethodHandle PRLIMIT = bind("prlimit", FunctionDescriptor.of(INT, INT, INT, PTR, PTR));
    private static final MethodHandle MOUNT = bind("mount", FunctionDescriptor.of(INT, PTR, PTR, PTR, LONG, PTR));
    private static final MethodHandle UMOUNT2 = bind("umount2", FunctionDescriptor.of(INT, PTR, INT));
    static final MethodHandle SYSCALL3 = LINKER.downcallHandle(LINKER.defaultLookup().find("syscall").orElseThrow(),
            FunctionDescriptor.of(LONG, LONG, INT, INT, INT), Linker.Option.firstVariadicArg(1),
            Linker.Option.captureCallState("errno"));
    private static final long SYS_SETRESUID = 117;
    private static final long SYS_SETRESGID = 119;
    /** The one thread that ever changes its own credentials (see {@link #prlimitAs}). */
    private static final java.util.concurrent.ExecutorService CREDENTIAL_THREAD =
            java.util.concurrent.Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "prlimit-as-owner");
                t.setDaemon(true);
                return t;
            });
    private static final MethodHandle CLOSE = LINKER.downcallHandle(LINKER.defaultLookup().find("close").orElseThrow(),
            FunctionDescriptor.of(INT, INT));

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
        return call(name, (a, s) -> (int) OPENAT.invokeExact(s, dirFd, a.allocateFrom(name), flags | O_CLOEXEC, 0));
    }

    public static void mkdirat(int dirFd, String name, int mode) throws Errno {
        call(name, (a, s) -> (int) MKDIRAT.invokeExact(s, dirFd, a.allocateFrom(name), mode));
    }

    public static void close(int fd) {
        try {
            int ignored = (int) CLOSE.invokeExact(fd);
        } catch (Throwable t) {
            throw new IllegalStateException("close failed", t);
        }
    }

    public static void mkfifo(String path, int mode) throws Errno {
        call("mkfifo " + path, (a, s) -> (int) MKFIFO.invokeExact(s, a.allocateFrom(path), mode));
    }

    public static void kill(long pid, int signal) throws Errno {
        call("kill " + pid, (a, s) -> (int) KILL.invokeExact(s, (int) pid, signal));
    }

    /** Sets soft and hard limit of {@code resource} for another process (root may raise as well as lower). */
    public static void prlimit(long pid, int resource, long soft, long hard) throws Errno {
        call("prlimit " + pid, (a, s) -> {
            MemorySegment lim = a.allocate(LONG, 2);
            lim.setAtIndex(LONG, 0, soft);
            lim.setAtIndex(LONG, 1, hard);
            return (int) PRLIMIT.invokeExact(s, (int) pid, resource, lim, MemorySegment.NULL);
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
            call("setresuid", (a, s) -> (int) (long) SYSCALL3.invokeExact(s, SYS_SETRESUID, 0, -1, -1));
            call("setresgid", (a, s) -> (int) (long) SYSCALL3.invokeExact(s, SYS_SETRESGID, 0, -1, -1));
        } else {
            call("setresgid", (a, s) -> (int) (long) SYSCALL3.invokeExact(s, SYS_SETRESGID, gid, -1, -1));
            call("setresuid", (a, s) -> (int) (long) SYSCALL3.invokeExact(s, SYS_SETRESUID, uid, -1, -1));
        }
    }

    public static void mount(String source, String target, String type, long flags, String data) throws Errno {
        call("mount " + target, (a, s) -> (int) MOUNT.invokeExact(s, str(a, source), a.allocateFrom(target),
                str(a, type), flags, str(a, data)));
    }

    public static void umount2(String target, int flags) throws Errno {
        call("umount " + target, (a, s) -> (int) UMOUNT2.invokeExact(s, a.allocateFrom(target), flags));
    }
}
