package dev.codeexec.workspace;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * The few Linux calls that Java's file API lacks for race-free access below a directory we hold open:
 * {@code openat} and {@code mkdirat} relative to a directory file descriptor, with {@code O_NOFOLLOW}. Everything
 * else is done by the JDK on {@code /proc/self/fd/N/name}, which the kernel resolves through descriptor N itself
 * (no path walk that a planted symlink could redirect). Bound through the FFM API (no JNI, no native build).
 */
final class Posix {

    static final int O_RDONLY = 0;
    static final int O_NONBLOCK = 0x800;
    static final int O_NOFOLLOW = 0x20000;
    static final int O_DIRECTORY = 0x10000;
    static final int O_CLOEXEC = 0x80000;
    static final int O_PATH = 0x200000;
    static final int AT_FDCWD = -100;

    static final int ENOENT = 2;
    static final int EEXIST = 17;
    static final int ENOTDIR = 20;
    static final int ENXIO = 6;
    static final int ELOOP = 40;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE.varHandle(MemoryLayoutPath.ERRNO);
    private static final MethodHandle OPENAT = bind("openat", FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
    private static final MethodHandle MKDIRAT = bind("mkdirat", FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
    private static final MethodHandle CLOSE = LINKER.downcallHandle(LINKER.defaultLookup().find("close").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));

    private Posix() {
    }

    /** A failed call: errno and the name it was about. */
    static final class Errno extends Exception {
        final int errno;

        Errno(int errno, String what) {
            super(what + ": errno " + errno, null, false, false);
            this.errno = errno;
        }
    }

    private static MethodHandle bind(String name, FunctionDescriptor fd) {
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(), fd,
                Linker.Option.captureCallState("errno"));
    }

    static int openat(int dirFd, String name, int flags) throws Errno {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CAPTURE);
            int fd = (int) OPENAT.invokeExact(state, dirFd, arena.allocateFrom(name), flags | O_CLOEXEC, 0);
            if (fd < 0) throw new Errno((int) ERRNO.get(state, 0L), name);
            return fd;
        } catch (Errno e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("openat failed", t);
        }
    }

    static void mkdirat(int dirFd, String name, int mode) throws Errno {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CAPTURE);
            int rc = (int) MKDIRAT.invokeExact(state, dirFd, arena.allocateFrom(name), mode);
            if (rc < 0) throw new Errno((int) ERRNO.get(state, 0L), name);
        } catch (Errno e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("mkdirat failed", t);
        }
    }

    static void close(int fd) {
        try {
            int ignored = (int) CLOSE.invokeExact(fd);
        } catch (Throwable t) {
            throw new IllegalStateException("close failed", t);
        }
    }

    /** The layout path of errno in the capture state. */
    private static final class MemoryLayoutPath {
        static final java.lang.foreign.MemoryLayout.PathElement ERRNO =
                java.lang.foreign.MemoryLayout.PathElement.groupElement("errno");
    }
}
