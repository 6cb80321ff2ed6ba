package dev.codeexec.linux;

import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.foreign.AddressLayout;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Stream;

/**
 * Starts a program with glibc's {@code posix_spawn} directly, for the sandbox launchers, which start one process
 * per run. The JDK's {@link ProcessBuilder} spawns its {@code jspawnhelper}, which then executes the program: one
 * exec more per run (~0.8 ms of CPU measured per sandboxed run at concurrency 4, of ~22), and a reaper thread per
 * process. Here the child is spawned with a clean signal state (nothing blocked, every signal at its default
 * disposition), the three pipes on 0-2 and every other descriptor closed ({@code closefrom}); one platform thread
 * waits for all children on their pidfds ({@code epoll}) and reaps them ({@code waitid(P_PIDFD)}).
 *
 * <p>The result is a {@link Process} with the JDK's conventions: exit value 128+N for a program killed by signal
 * N; {@code destroy} is SIGTERM, {@code destroyForcibly} SIGKILL, both no-ops once the process is reaped (it is
 * reaped under the same lock, so a signal can never reach a recycled pid). Where a needed function is missing
 * (not glibc 2.34+, not Linux 5.3+), {@link #available()} is false and callers use {@link ProcessBuilder}.
 */
public final class Spawn {

    private static final int O_CLOEXEC = 0x80000;
    private static final short POSIX_SPAWN_SETSIGDEF = 0x04;
    private static final short POSIX_SPAWN_SETSIGMASK = 0x08;
    private static final int P_PID = 1;
    private static final int P_PIDFD = 3;
    private static final int WEXITED = 4;
    private static final int CLD_EXITED = 1;
    private static final int EPOLL_CTL_ADD = 1;
    private static final int EPOLL_CTL_DEL = 2;
    private static final int EPOLLIN = 1;
    /** struct epoll_event: packed on x86-64 (u32 events, u64 data: 12 bytes), naturally aligned elsewhere (16). */
    private static final boolean PACKED_EPOLL_EVENT = System.getProperty("os.arch").equals("amd64");
    private static final long EVENT_SIZE = PACKED_EPOLL_EVENT ? 12 : 16;
    private static final long EVENT_DATA = PACKED_EPOLL_EVENT ? 4 : 8;
    private static final int EINTR = 4;
    /** Generous for glibc's posix_spawn_file_actions_t (80 bytes), posix_spawnattr_t (336) and sigset_t (128). */
    private static final long OPAQUE = 1024;
    private static final int SIGTERM = 15;
    private static final int SIGKILL = 9;

    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT;
    private static final AddressLayout PTR = ValueLayout.ADDRESS;

    private static final Handles H = Handles.load();

    private Spawn() {
    }

    /** The glibc functions, or null when one is missing. */
    private record Handles(MethodHandle faInit, MethodHandle faDup2, MethodHandle faClose, MethodHandle faClosefrom,
            MethodHandle faChdir, MethodHandle faDestroy, MethodHandle attrInit, MethodHandle attrSetflags,
            MethodHandle attrSetsigmask, MethodHandle attrSetsigdefault, MethodHandle attrDestroy,
            MethodHandle sigemptyset, MethodHandle sigfillset, MethodHandle posixSpawn) {

        static Handles load() {
            try {
                return new Handles(
                        Posix.plain("posix_spawn_file_actions_init", FunctionDescriptor.of(INT, PTR)),
                        Posix.plain("posix_spawn_file_actions_adddup2", FunctionDescriptor.of(INT, PTR, INT, INT)),
                        Posix.plain("posix_spawn_file_actions_addclose", FunctionDescriptor.of(INT, PTR, INT)),
                        Posix.plain("posix_spawn_file_actions_addclosefrom_np", FunctionDescriptor.of(INT, PTR, INT)),
                        Posix.plain("posix_spawn_file_actions_addchdir_np", FunctionDescriptor.of(INT, PTR, PTR)),
                        Posix.plain("posix_spawn_file_actions_destroy", FunctionDescriptor.of(INT, PTR)),
                        Posix.plain("posix_spawnattr_init", FunctionDescriptor.of(INT, PTR)),
                        Posix.plain("posix_spawnattr_setflags", FunctionDescriptor.of(INT, PTR, ValueLayout.JAVA_SHORT)),
                        Posix.plain("posix_spawnattr_setsigmask", FunctionDescriptor.of(INT, PTR, PTR)),
                        Posix.plain("posix_spawnattr_setsigdefault", FunctionDescriptor.of(INT, PTR, PTR)),
                        Posix.plain("posix_spawnattr_destroy", FunctionDescriptor.of(INT, PTR)),
                        Posix.plain("sigemptyset", FunctionDescriptor.of(INT, PTR)),
                        Posix.plain("sigfillset", FunctionDescriptor.of(INT, PTR)),
                        Posix.plain("posix_spawn", FunctionDescriptor.of(INT, PTR, PTR, PTR, PTR, PTR, PTR)));
            } catch (RuntimeException | LinkageError e) {
                return null;
            }
        }
    }

    /**
     * How a process this class started ended, from its real wait status: the signal that killed it, 0 when it
     * exited; empty for a process started elsewhere or not ended yet. (Its exit value alone cannot tell a program
     * that did {@code exit 137} from one killed by SIGKILL.)
     */
    public static java.util.OptionalInt killedBySignal(Process p) {
        if (!(p instanceof SpawnedProcess s) || !s.exit.isDone()) return java.util.OptionalInt.empty();
        return java.util.OptionalInt.of(s.signal);
    }

    /**
     * What was written on the process's status descriptor ({@link #start(List, Map, Path, int)}); empty for a
     * process without one, and empty before it ended. Reads what the pipe holds without waiting (its writers write
     * before they exit, in one write of less than PIPE_BUF, so once the process has ended it is all there), closes
     * the pipe, and gives the same text on every later call.
     */
    public static String statusReport(Process p) {
        if (!(p instanceof SpawnedProcess s) || !s.exit.isDone()) return "";
        return s.readReport();
    }

    /** Whether {@link #start} works here (glibc with the functions above, pidfds); decided once. */
    public static boolean available() {
        return Waiter.INSTANCE != null;
    }

    /**
     * Starts {@code argv} (argv[0] an absolute path, not searched on PATH) with exactly {@code env}, in {@code dir}
     * (null: the server's), stdin/stdout/stderr as pipes to the returned process. The caller's thread is the
     * child's parent thread (what PR_SET_PDEATHSIG follows).
     */
    public static Process start(List<String> argv, Map<String, String> env, Path dir) throws IOException {
        return start(argv, env, dir, 0);
    }

    /**
     * Like {@link #start(List, Map, Path)}, and when {@code statusFd} is above 2 the child also gets the write end
     * of a fourth pipe on that descriptor: a channel for a report from inside (the sandbox's init writes its
     * program's wait status there), read with {@link #statusReport} once the process has ended.
     */
    public static Process start(List<String> argv, Map<String, String> env, Path dir, int statusFd) throws IOException {
        if (!available()) throw new IOException("posix_spawn is not available here");
        if (argv.isEmpty() || !argv.getFirst().startsWith("/")) throw new IOException("argv[0] must be an absolute path");
        if (statusFd != 0 && (statusFd < 3 || statusFd > 64)) throw new IOException("status descriptor out of range: " + statusFd);
        int[] in = pipe(), out = null, err = null, status = null;
        try {
            out = pipe();
            err = pipe();
            if (statusFd > 0) status = pipe();
            int pid = spawn(argv, env, dir, in[0], out[1], err[1], status == null ? -1 : status[1], statusFd);
            List<java.io.Closeable> streams = new ArrayList<>();
            try {
                // Descriptors of our own for the streams, opened through /proc while the child's ends are still
                // open here (opening a pipe's end waits for the other end to be open), then the child's ends closed.
                OutputStream stdin = new PipeOut(new FileOutputStream("/proc/self/fd/" + in[1]));
                streams.add(stdin);
                InputStream stdout = new PipeIn(new FileInputStream("/proc/self/fd/" + out[0]));
                streams.add(stdout);
                InputStream stderr = new PipeIn(new FileInputStream("/proc/self/fd/" + err[0]));
                streams.add(stderr);
                FileInputStream report = null;
                if (status != null) {
                    report = new FileInputStream("/proc/self/fd/" + status[0]);
                    streams.add(report);
                }
                SpawnedProcess p = new SpawnedProcess(pid, stdin, stdout, stderr, report);
                Waiter.INSTANCE.watch(p);
                return p;
            } catch (IOException | RuntimeException e) {
                // nobody would wait for it: kill and reap it here
                Waiter.INSTANCE.killAndReap(pid);
                for (java.io.Closeable c : streams) {
                    try {
                        c.close();
                    } catch (IOException ignored) {
                        // closing a pipe end
                    }
                }
                throw e;
            }
        } finally {
            for (int[] p : new int[][] {in, out, err, status})
                if (p != null) {
                    Posix.close(p[0]);
                    Posix.close(p[1]);
                }
        }
    }

    private static int[] pipe() throws IOException {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment fds = a.allocate(INT, 2);
            try {
                Posix.call("pipe2", (arena, s) -> (int) Sys.PIPE2.call(s, fds.address(), O_CLOEXEC));
            } catch (Posix.Errno e) {
                throw new IOException("cannot create a pipe: " + e.getMessage(), e);
            }
            return new int[] {fds.getAtIndex(INT, 0), fds.getAtIndex(INT, 1)};
        }
    }

    /**
     * @param status   the write end of the status pipe, or -1
     * @param statusFd where the child gets it: placed on fd 3 before every other descriptor is closed, then moved
     *                 there (file actions run in order, and closefrom would close it anywhere above 3)
     */
    private static int spawn(List<String> argv, Map<String, String> env, Path dir, int stdin, int stdout, int stderr,
            int status, int statusFd) throws IOException {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment fa = a.allocate(OPAQUE, 16);
            MemorySegment attr = a.allocate(OPAQUE, 16);
            MemorySegment none = a.allocate(OPAQUE, 16);
            MemorySegment all = a.allocate(OPAQUE, 16);
            check("posix_spawn_file_actions_init", (int) H.faInit.invokeExact(fa));
            check("posix_spawnattr_init", (int) H.attrInit.invokeExact(attr));
            try {
                check("adddup2", (int) H.faDup2.invokeExact(fa, stdin, 0));
                check("adddup2", (int) H.faDup2.invokeExact(fa, stdout, 1));
                check("adddup2", (int) H.faDup2.invokeExact(fa, stderr, 2));
                if (status >= 0) {
                    check("adddup2", (int) H.faDup2.invokeExact(fa, status, 3));
                    check("addclosefrom", (int) H.faClosefrom.invokeExact(fa, 4));
                    if (statusFd != 3) {
                        check("adddup2", (int) H.faDup2.invokeExact(fa, 3, statusFd));
                        check("addclose", (int) H.faClose.invokeExact(fa, 3));
                    }
                } else {
                    check("addclosefrom", (int) H.faClosefrom.invokeExact(fa, 3));
                }
                if (dir != null) check("addchdir", (int) H.faChdir.invokeExact(fa, a.allocateFrom(dir.toString())));
                check("sigemptyset", (int) H.sigemptyset.invokeExact(none));
                check("sigfillset", (int) H.sigfillset.invokeExact(all));
                check("setsigmask", (int) H.attrSetsigmask.invokeExact(attr, none));
                check("setsigdefault", (int) H.attrSetsigdefault.invokeExact(attr, all));
                check("setflags", (int) H.attrSetflags.invokeExact(attr, (short) (POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK)));
                MemorySegment pid = a.allocate(INT);
                int rc = (int) H.posixSpawn.invokeExact(pid, a.allocateFrom(argv.getFirst()), fa, attr,
                        strings(a, argv), strings(a, env.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue()).toList()));
                if (rc != 0) throw new IOException("cannot run " + argv.getFirst() + ": " + Posix.strerror(rc));
                return pid.get(INT, 0);
            } finally {
                int ignored = (int) H.faDestroy.invokeExact(fa);
                ignored = (int) H.attrDestroy.invokeExact(attr);
            }
        } catch (IOException | RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new IOException("posix_spawn failed: " + t, t);
        }
    }

    private static void check(String what, int rc) throws IOException {
        if (rc != 0) throw new IOException(what + " failed: " + Posix.strerror(rc));
    }

    /** A NULL-terminated array of C strings. */
    private static MemorySegment strings(Arena a, List<String> list) {
        MemorySegment arr = a.allocate(PTR, list.size() + 1L);
        for (int i = 0; i < list.size(); i++) arr.setAtIndex(PTR, i, a.allocateFrom(list.get(i)));
        arr.setAtIndex(PTR, list.size(), MemorySegment.NULL);
        return arr;
    }

    /**
     * Platform threads for blocking pipe I/O of virtual threads. A virtual thread blocked in a read of a file
     * descriptor holds its carrier (the JDK compensates only in its own process pipes and in sockets), and a run
     * has two readers: on a 2-core machine two runs would take every carrier while their programs wait for stdin
     * that a third virtual thread cannot write. So a virtual thread hands each blocking call to one of these and
     * parks; platform threads call directly.
     */
    private static final java.util.concurrent.ExecutorService PIPE_IO = Executors.newCachedThreadPool(
            Thread.ofPlatform().name("sandbox-pipe-io-", 0).daemon(true).factory());

    @FunctionalInterface
    private interface Blocking<T> {
        T call() throws IOException;
    }

    private static <T> T blocking(Blocking<T> op) throws IOException {
        if (!Thread.currentThread().isVirtual()) return op.call();
        Future<T> f = PIPE_IO.submit(op::call);
        try {
            return f.get();
        } catch (ExecutionException e) {
            if (e.getCause() instanceof IOException io) throw io;
            if (e.getCause() instanceof RuntimeException r) throw r;
            throw new IOException(e.getCause());
        } catch (InterruptedException e) {
            // the call goes on until the pipe is closed (the run is being torn down)
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException("interrupted while waiting for a pipe");
        }
    }

    /** The read end of a child's stdout or stderr. */
    private static final class PipeIn extends InputStream {
        private final FileInputStream in;

        PipeIn(FileInputStream in) {
            this.in = in;
        }

        @Override
        public int read() throws IOException {
            byte[] one = new byte[1];
            int n = read(one, 0, 1);
            return n < 0 ? -1 : one[0] & 0xff;
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            java.util.Objects.checkFromIndexSize(off, len, b.length);
            if (len == 0) return 0;
            return blocking(() -> in.read(b, off, len));
        }

        @Override
        public int available() throws IOException {
            return in.available();
        }

        @Override
        public void close() throws IOException {
            in.close();
        }
    }

    /** The write end of a child's stdin. */
    private static final class PipeOut extends OutputStream {
        private final FileOutputStream out;

        PipeOut(FileOutputStream out) {
            this.out = out;
        }

        @Override
        public void write(int b) throws IOException {
            write(new byte[] {(byte) b}, 0, 1);
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            java.util.Objects.checkFromIndexSize(off, len, b.length);
            if (len == 0) return;
            blocking(() -> {
                out.write(b, off, len);
                return null;
            });
        }

        @Override
        public void close() throws IOException {
            out.close();
        }
    }

    /** The one thread that waits for every spawned child: an epoll set of their pidfds. */
    private static final class Waiter {

        static final Waiter INSTANCE = create();

        private final int epfd;
        private final Map<Integer, SpawnedProcess> byPidfd = new ConcurrentHashMap<>();

        private Waiter(int epfd) {
            this.epfd = epfd;
        }

        private static Waiter create() {
            if (H == null) return null;
            try {
                int epfd = Posix.call("epoll_create1", (a, s) -> (int) Sys.EPOLL_CREATE1.call(s, O_CLOEXEC));
                // pidfd_open exists (Linux 5.3+): try it on ourselves
                int self = pidfdOpen(ProcessHandle.current().pid());
                Posix.close(self);
                Waiter w = new Waiter(epfd);
                Thread.ofPlatform().name("sandbox-waiter").daemon(true).start(w::loop);
                return w;
            } catch (Posix.Errno | RuntimeException e) {
                return null;
            }
        }

        private static int pidfdOpen(long pid) throws Posix.Errno {
            return Posix.call("pidfd_open", (a, s) -> (int) Sys.PIDFD_OPEN.call(s, pid, 0));
        }

        /** Adds the child to the epoll set; throws (the caller kills and reaps it) when that fails. */
        void watch(SpawnedProcess p) throws IOException {
            int pidfd;
            try {
                pidfd = pidfdOpen(p.pid);
            } catch (Posix.Errno e) {
                throw new IOException("cannot watch process " + p.pid + ": " + e.getMessage(), e);
            }
            byPidfd.put(pidfd, p);
            try {
                Posix.call("epoll_ctl", (a, s) -> {
                    MemorySegment ev = a.allocate(EVENT_SIZE, 4);
                    ev.set(INT, 0, EPOLLIN);
                    ev.set(ValueLayout.JAVA_LONG_UNALIGNED, EVENT_DATA, pidfd);
                    return (int) Sys.EPOLL_CTL.call(s, epfd, EPOLL_CTL_ADD, pidfd, ev.address());
                });
            } catch (Posix.Errno e) {
                byPidfd.remove(pidfd);
                Posix.close(pidfd);
                throw new IOException("cannot watch process " + p.pid + ": " + e.getMessage(), e);
            }
        }

        /** SIGKILL and a blocking reap, for a child that cannot be watched. */
        void killAndReap(int pid) {
            try {
                Posix.kill(pid, SIGKILL);
            } catch (Posix.Errno e) {
                // gone already; it still has to be reaped
            }
            try (Arena a = Arena.ofConfined()) {
                MemorySegment info = a.allocate(128, 8);
                MemorySegment state = a.allocate(Posix.CAPTURE);
                long rc;
                do {
                    rc = Sys.WAITID.call(state, P_PID, pid, info.address(), WEXITED, 0);
                } while (rc < 0 && Posix.errno(state) == EINTR);
            }
        }

        private void loop() {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment events = a.allocate(EVENT_SIZE * 16, 8);
                MemorySegment info = a.allocate(128, 8);
                MemorySegment state = a.allocate(Posix.CAPTURE);
                while (true) {
                    // epoll_wait: epoll_pwait without a signal mask (see Sys)
                    int n = (int) Sys.EPOLL_PWAIT.call(state, epfd, events.address(), 16, -1, 0, 8);
                    if (n < 0) continue; // EINTR
                    for (int i = 0; i < n; i++) {
                        int pidfd = (int) events.get(ValueLayout.JAVA_LONG_UNALIGNED, EVENT_SIZE * i + EVENT_DATA);
                        SpawnedProcess p = byPidfd.remove(pidfd);
                        if (p != null) reap(p, pidfd, info, state);
                    }
                }
            }
        }

        private void reap(SpawnedProcess p, int pidfd, MemorySegment info, MemorySegment state) {
            int code;
            synchronized (p) {
                long rc;
                do {
                    info.fill((byte) 0);
                    rc = Sys.WAITID.call(state, P_PIDFD, pidfd, info.address(), WEXITED, 0);
                } while (rc < 0 && Posix.errno(state) == EINTR);
                // siginfo_t: si_signo, si_errno, si_code, (pad), si_pid, si_uid, si_status. A failed waitid would
                // mean someone else reaped our child (nothing in the server does): reported as SIGKILL.
                int siCode = info.get(INT, 8), status = info.get(INT, 24);
                code = rc < 0 ? 128 + SIGKILL : siCode == CLD_EXITED ? status : 128 + status;
                p.signal = rc < 0 ? SIGKILL : siCode == CLD_EXITED ? 0 : status;
                p.reaped = true;
                // now, while reaping: the pipe is closed with the process even when nobody asks for the report
                p.readReport();
            }
            // an error is ignored: closing the pidfd below removes it from the set anyway
            long ignored = Sys.EPOLL_CTL.call(state, epfd, EPOLL_CTL_DEL, pidfd, 0);
            Posix.close(pidfd);
            p.exit.complete(code);
        }
    }

    /** A child started by {@link #start}. */
    private static final class SpawnedProcess extends Process {

        final int pid;
        private final OutputStream stdin;
        private final InputStream stdout;
        private final InputStream stderr;
        private final FileInputStream report;
        final CompletableFuture<Integer> exit = new CompletableFuture<>();
        /** Set by the waiter, under this object's lock, when the pid is no longer ours. */
        boolean reaped;
        /** The signal that killed it (set by the waiter before {@link #exit} completes), or 0 when it exited. */
        volatile int signal;

        SpawnedProcess(int pid, OutputStream stdin, InputStream stdout, InputStream stderr, FileInputStream report) {
            this.pid = pid;
            this.stdin = stdin;
            this.stdout = stdout;
            this.stderr = stderr;
            this.report = report;
        }

        private String reportText;

        /** See {@link Spawn#statusReport}. */
        synchronized String readReport() {
            if (reportText != null) return reportText;
            reportText = "";
            if (report == null) return reportText;
            try (report) {
                int n = Math.min(report.available(), 4096);
                reportText = new String(report.readNBytes(n), java.nio.charset.StandardCharsets.US_ASCII);
            } catch (IOException e) {
                // no report: the caller falls back to the exit value
            }
            return reportText;
        }

        @Override
        public OutputStream getOutputStream() {
            return stdin;
        }

        @Override
        public InputStream getInputStream() {
            return stdout;
        }

        @Override
        public InputStream getErrorStream() {
            return stderr;
        }

        @Override
        public int waitFor() throws InterruptedException {
            try {
                return exit.get();
            } catch (ExecutionException e) {
                throw new IllegalStateException(e.getCause());
            }
        }

        @Override
        public boolean waitFor(long timeout, TimeUnit unit) throws InterruptedException {
            if (exit.isDone()) return true;
            if (timeout <= 0) return false;
            try {
                exit.get(timeout, unit);
                return true;
            } catch (TimeoutException e) {
                return false;
            } catch (ExecutionException e) {
                throw new IllegalStateException(e.getCause());
            }
        }

        @Override
        public int exitValue() {
            if (!exit.isDone()) throw new IllegalThreadStateException("process " + pid + " has not exited");
            return exit.join();
        }

        @Override
        public boolean isAlive() {
            return !exit.isDone();
        }

        @Override
        public long pid() {
            return pid;
        }

        @Override
        public void destroy() {
            signal(SIGTERM);
        }

        @Override
        public Process destroyForcibly() {
            signal(SIGKILL);
            return this;
        }

        @Override
        public boolean supportsNormalTermination() {
            return true;
        }

        private synchronized void signal(int sig) {
            if (reaped) return;
            try {
                Posix.kill(pid, sig);
            } catch (Posix.Errno e) {
                // already gone (a zombie not reaped yet takes no signal)
            }
        }

        @Override
        public CompletableFuture<Process> onExit() {
            return exit.thenApply(code -> this);
        }

        @Override
        public ProcessHandle toHandle() {
            return ProcessHandle.of(pid).orElseThrow(() -> new IllegalStateException("process " + pid + " is gone"));
        }

        /** Listed while the pid is still ours (not reaped), so never another process's children. */
        @Override
        public synchronized Stream<ProcessHandle> children() {
            if (reaped) return Stream.empty();
            return ProcessHandle.of(pid).map(h -> h.children().toList().stream()).orElse(Stream.empty());
        }

        @Override
        public synchronized Stream<ProcessHandle> descendants() {
            if (reaped) return Stream.empty();
            return ProcessHandle.of(pid).map(h -> h.descendants().toList().stream()).orElse(Stream.empty());
        }

        @Override
        public String toString() {
            return "Process[pid=" + pid + ", exitValue=" + (exit.isDone() ? exit.join() : "\"not exited\"") + "]";
        }
    }
}
