package dev.codeexec.local;

import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunHandle;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static dev.codeexec.local.TestSupport.await;
import static dev.codeexec.local.TestSupport.request;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The kernel counts epoll watches, inotify instances and pipe buffer pages per host uid, across every namespace.
 * One tenant's run that fills them must not break another tenant's Node, TypeScript, asyncio or {@code fs.watch}:
 * each sandbox runs as a host uid of its own (SANDBOX_UID_RANGE). The filler holds what it took while the other
 * runs go. To fill epoll watches quickly, the test lowers {@code fs.epoll.max_user_watches} (5.4 million here,
 * which an attacker fills with two processes of 2,040 × 2,040) for its duration and restores it. The filler keeps
 * taking what others free, as an attacker would, so the outcome does not depend on what ends when.
 */
@Tag("sandbox")
class PerUidLimitsTest {

    private static final Path EPOLL_MAX = Path.of("/proc/sys/fs/epoll/max_user_watches");
    /** Far above what root's own processes use, far below what a run can register. */
    private static final int LOWERED_EPOLL_MAX = 40_000;

    /** Takes every inotify instance, every pipe page above the soft limit and every epoll watch, then holds them. */
    static final String FILLER = """
            import ctypes, fcntl, os, select, time
            libc = ctypes.CDLL(None, use_errno=True)
            inotify = []
            while len(inotify) < 1000:
                fd = libc.inotify_init1(0)
                if fd < 0:
                    break
                inotify.append(fd)
            pipes = []
            while len(pipes) < 1000:
                r, w = os.pipe()
                pipes.append((r, w))
                try:
                    fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ: refused once the uid is over its soft limit
                except OSError:
                    break
            events = [os.eventfd(0) for _ in range(500)]
            polls, full = [], None
            while full is None and len(polls) < 1000:
                ep = select.epoll()
                polls.append(ep)
                for e in events:
                    try:
                        ep.register(e, select.EPOLLIN)
                    except OSError as x:
                        full = x.errno
                        break
            print("full", len(inotify), len(pipes), len(polls), full, flush=True)
            # hold on like an attacker would: whatever another process of the uid frees is taken again at once
            # (without this, a watch freed by a process that ends after the fill lets a victim through)
            ep, spare = polls[-1], 0
            while True:
                took = False
                fd = libc.inotify_init1(0)
                if fd >= 0:
                    inotify.append(fd)
                    took = True
                try:
                    ep.register(events[spare], select.EPOLLIN)
                    spare += 1
                    took = True
                except FileExistsError:
                    spare += 1
                except OSError:
                    pass
                if spare == len(events):
                    ep, spare = select.epoll(), 0
                    polls.append(ep)
                if not took:
                    time.sleep(0.002)
            """;

    /** What the other tenant runs, each needing a little of what the filler took. */
    static final Map<String, String[]> VICTIMS = victims();

    private static Map<String, String[]> victims() {
        Map<String, String[]> m = new LinkedHashMap<>();
        m.put("node timers (libuv's epoll)", new String[]{"nodejs", "setTimeout(() => console.log('ok'), 10)"});
        m.put("node fs.watch (inotify)", new String[]{"nodejs",
                "const w = require('fs').watch('.'); w.close(); console.log('ok')"});
        m.put("typescript", new String[]{"typescript", "const n: number = 1; setTimeout(() => console.log('ok'), n)"});
        m.put("python asyncio (epoll)", new String[]{"python",
                "import asyncio\nasyncio.run(asyncio.sleep(0.01))\nprint('ok')"});
        m.put("a 1 MB pipe", new String[]{"python",
                "import fcntl, os\nr, w = os.pipe()\nfcntl.fcntl(w, 1031, 1 << 20)\nprint('ok')"});
        return m;
    }

    @RegisterExtension
    final RealExecutors executors = new RealExecutors();

    @Test
    void oneTenantFillingThePerUidKernelLimitsBreaksNoOtherTenantsRun() throws Exception {
        Map<String, String> failed = whileFilled(executors.start("MAX_CONCURRENT", "2"));
        assertThat(failed).isEmpty();
    }

    /** The attack this guards against, shown on a server whose sandboxes all share one host uid. */
    @Test
    void withOneHostUidForEverySandboxTheFillerBreaksTheOthers() throws Exception {
        Map<String, String> failed = whileFilled(executors.start("MAX_CONCURRENT", "2", "SANDBOX_UID_RANGE", "off"));
        // inotify instances and pipe pages break every victim every time. The epoll victims usually break too, but
        // not always on this kernel: in some runs all three registered their watches while the filler, holding on,
        // had just been refused with ENOSPC (seen 2026-12-02; not understood). The guarantee is the test above,
        // which stays strict; this one shows the attack with what it does every time.
        assertThat(failed).containsKeys("node fs.watch (inotify)", "a 1 MB pipe");
        assertThat(VICTIMS.keySet()).containsAll(failed.keySet());
    }

    /** Runs every victim while the filler holds what it took; returns the victims that failed, with their output. */
    private Map<String, String> whileFilled(LocalExecutor e) throws Exception {
        String saved = readSysctl(EPOLL_MAX);
        assertThat(Long.parseLong(saved)).as("the host's own setting").isGreaterThan(LOWERED_EPOLL_MAX);
        writeSysctl(EPOLL_MAX, Integer.toString(LOWERED_EPOLL_MAX));
        try {
            CountDownLatch full = new CountDownLatch(1);
            StringBuilder said = new StringBuilder();
            RunHandle filler = e.submit(request(e.config, "python", FILLER, "", List.of(), Map.of(), 120_000L),
                    (stream, text) -> {
                        synchronized (said) {
                            said.append(text);
                            // the line may arrive in pieces: wait for its end
                            if (said.toString().matches("(?s).*full [^\\n]*\\n.*")) full.countDown();
                        }
                    });
            try {
                assertThat(full.await(60, TimeUnit.SECONDS)).as("the filler took everything").isTrue();
                // inotify instances stop at 128, pipes at the soft limit, epoll watches with ENOSPC (28)
                assertThat(said.toString()).as("it reached every limit").endsWith(" 28\n");
                Map<String, String> failed = new LinkedHashMap<>();
                for (Map.Entry<String, String[]> v : VICTIMS.entrySet()) {
                    ExecutionResult r = await(e.submit(request(e.config, v.getValue()[0], v.getValue()[1], "",
                            List.of(), Map.of(), 60_000L), OutputListener.NONE));
                    if (r.exitCode() != 0 || !r.stdout().equals("ok\n"))
                        failed.put(v.getKey(), r.outcome().wireName() + " " + r.exitCode() + ": " + r.stderr());
                }
                return failed;
            } finally {
                filler.cancel();
                await(filler);
            }
        } finally {
            writeSysctl(EPOLL_MAX, saved);
        }
    }

    /**
     * One read(2): a sysctl file answers only a read at offset 0 (a second read returns nothing), and the JDK's
     * Files.readString reads a file that says it is empty a byte at a time, which gives its first digit only.
     */
    static String readSysctl(Path p) throws java.io.IOException {
        try (var in = new java.io.FileInputStream(p.toFile())) {
            byte[] b = new byte[64];
            int n = in.read(b);
            return new String(b, 0, Math.max(n, 0), java.nio.charset.StandardCharsets.US_ASCII).trim();
        }
    }

    /** One write(2), which is how a sysctl file takes a value. */
    static void writeSysctl(Path p, String value) throws java.io.IOException {
        try (var out = new java.io.FileOutputStream(p.toFile())) {
            out.write((value + "\n").getBytes(java.nio.charset.StandardCharsets.US_ASCII));
        }
        assertThat(readSysctl(p)).isEqualTo(value);
    }
}
