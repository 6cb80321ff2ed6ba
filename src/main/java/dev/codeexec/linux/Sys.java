package dev.codeexec.linux;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The Linux system calls this package makes, by number on x86_64 and on aarch64, all through glibc's
 * {@code syscall()} and one foreign-function handle: every argument a {@code long} (a pointer as its address), the
 * result the kernel's, -1 with errno in the capture state on failure.
 *
 * <p>Why one handle: the JDK generates the code of a downcall for each call shape when it is bound, at run time
 * (the JDK 25 AOT cache cannot hold it), some 8 ms a shape on a fresh start here. A handle per C function was about
 * 25 shapes, 0.2 s of CPU in every start, and the sandbox's construction waited for them. The kernel's calls do
 * what glibc's wrappers of them do, with these spelled out where they are used: {@code mkfifo} is {@code mknodat}
 * with {@code S_IFIFO}; {@code prlimit} is {@code prlimit64}; {@code epoll_wait} is {@code epoll_pwait} without a
 * signal mask (aarch64 has no {@code epoll_wait}). Not here: {@code fchmodat} with {@code AT_SYMLINK_NOFOLLOW},
 * which the kernel's call lacks (glibc emulates it), and the {@code posix_spawn} family, which are glibc's own.
 */
enum Sys {
    LSEEK(8, 62), CLOSE(3, 57), IOCTL(16, 29), KILL(62, 129), FCHMOD(91, 52), FCHOWN(93, 55), SETRESUID(117, 147),
    SETRESGID(119, 149), FSTATFS(138, 44), MOUNT(165, 40), UMOUNT2(166, 39),
    GETDENTS64(217, 61), EPOLL_CTL(233, 21), WAITID(247, 95), OPENAT(257, 56), MKDIRAT(258, 34), MKNODAT(259, 33),
    FCHOWNAT(260, 54), UNLINKAT(263, 35), EPOLL_PWAIT(281, 22), EPOLL_CREATE1(291, 20), PIPE2(293, 59),
    PRLIMIT64(302, 261), RENAMEAT2(316, 276), STATX(332, 291), PIDFD_OPEN(434, 434), QUOTACTL_FD(443, 443);

    /** The architecture and the handle: a nested class, since an enum's constructor cannot read its own statics. */
    private static final class Native {
        static final boolean AMD64 = switch (System.getProperty("os.arch")) {
            case "amd64", "x86_64" -> true;
            case "aarch64" -> false;
            default -> throw new ExceptionInInitializerError(
                    "system call numbers are known for x86_64 and aarch64 only, not " + System.getProperty("os.arch"));
        };
        static final MethodHandle SYSCALL;

        static {
            ValueLayout.OfLong j = ValueLayout.JAVA_LONG;
            Linker linker = Linker.nativeLinker();
            SYSCALL = linker.downcallHandle(linker.defaultLookup().find("syscall").orElseThrow(),
                    FunctionDescriptor.of(j, j, j, j, j, j, j, j), Linker.Option.firstVariadicArg(1),
                    Linker.Option.captureCallState("errno"));
        }
    }

    /** The numbers, from the kernel's arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h. */
    final int x8664;
    final int aarch64;
    private final long nr;

    Sys(int x8664, int aarch64) {
        this.x8664 = x8664;
        this.aarch64 = aarch64;
        this.nr = Native.AMD64 ? x8664 : aarch64;
    }

    /** The call with up to six arguments (unused ones 0); {@code state} receives errno (see {@link Posix#CAPTURE}). */
    long call(MemorySegment state, long a, long b, long c, long d, long e, long f) {
        try {
            return (long) Native.SYSCALL.invokeExact(state, nr, a, b, c, d, e, f);
        } catch (Throwable t) {
            throw new IllegalStateException(name().toLowerCase(java.util.Locale.ROOT) + " failed", t);
        }
    }

    long call(MemorySegment state, long a) {
        return call(state, a, 0, 0, 0, 0, 0);
    }

    long call(MemorySegment state, long a, long b) {
        return call(state, a, b, 0, 0, 0, 0);
    }

    long call(MemorySegment state, long a, long b, long c) {
        return call(state, a, b, c, 0, 0, 0);
    }

    long call(MemorySegment state, long a, long b, long c, long d) {
        return call(state, a, b, c, d, 0, 0);
    }

    long call(MemorySegment state, long a, long b, long c, long d, long e) {
        return call(state, a, b, c, d, e, 0);
    }

}
