package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;

import static dev.codeexec.sandbox.SandboxTesting.*;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * What one pass of the memory watchdog costs for one watched run (medians and 90th percentiles of 300 passes), for
 * a plain run, a run of many processes holding many descriptors, and a run that maps shared memory and fills its
 * tmpfs. A measurement, not a test: {@code ./mvnw test -Dtest=MemoryWatchdogBench -Dsandbox.bench=true}.
 *
 * <p>Measured 2026-12-05 on the project's noisy 2-core machine, two rounds each, before and after the watchdog
 * counted shared memory and tmpfs files (issue 35, finding 4), medians: one python process 0.26-0.41 ms before,
 * 0.49-0.75 ms after; 32 processes holding ~4,200 descriptors 2.4 ms before, 20-24 ms after (a statx of each
 * descriptor's /proc link, about 4 µs each here, most of it in the kernel: a C loop of statx or readlink over
 * /proc/PID/fd took 8-10 µs a descriptor); python mapping memfds and shared memory with files in /tmp and /dev/shm
 * 0.5-0.6 ms before (counting 3 of its 147 MiB), 1.3-2.4 ms after (its /proc/PID/smaps is read to take the mapped
 * memfds off).
 */
@EnabledIfSystemProperty(named = "sandbox.bench", matches = "true")
class MemoryWatchdogBench {

    static final int PASSES = 300;

    @Test
    void measure() throws Exception {
        Path data = Files.createTempDirectory("bench-data-");
        BwrapSandbox sandbox = new BwrapSandbox(UID, UID, data, Cgroups.none("bench"));
        Limits l = new Limits(Duration.ofSeconds(120), 100, 2048L << 20, 128, 1 << 20, 256L << 20);
        String ready = "print('ready', flush=True)\nimport time; time.sleep(100)\n";
        measure(sandbox, l, "one python process", "import os\n" + ready);
        measure(sandbox, l, "32 processes, 4096 descriptors", String.join("\n",
                "import os, time",
                "fds = [os.open('/dev/null', os.O_RDONLY) for i in range(128)]",
                "for i in range(31):",
                "    if os.fork() == 0:",
                "        time.sleep(100); os._exit(0)",
                "") + ready);
        measure(sandbox, l, "shared memory mapped, tmpfs filled", String.join("\n",
                "import os, mmap",
                "keep = []",
                "for i in range(4):",
                "    fd = os.memfd_create('m%d' % i); os.ftruncate(fd, 16 << 20); m = mmap.mmap(fd, 16 << 20)",
                "    m[::4096] = b'x' * ((16 << 20) // 4096); keep.append((fd, m))",
                "a = mmap.mmap(-1, 16 << 20); a[::4096] = b'x' * ((16 << 20) // 4096)",
                "open('/tmp/f', 'wb').write(b'x' * (32 << 20)); open('/dev/shm/f', 'wb').write(b'x' * (32 << 20))",
                "") + ready);
        sandbox.close();
        DataDir.deleteTree(data);
    }

    private static void measure(BwrapSandbox sandbox, Limits l, String what, String code) throws Exception {
        try (SandboxProcess p = sandbox.start(spec(l, PY, "-c", code))) {
            String line = new BufferedReader(new InputStreamReader(p.stdout(), StandardCharsets.UTF_8)).readLine();
            assertThat(line).isEqualTo("ready");
            long[] ns = new long[PASSES];
            for (int i = 0; i < PASSES; i++) {
                long t0 = System.nanoTime();
                MemoryWatchdog.tick(Path.of("/proc"));
                ns[i] = System.nanoTime() - t0;
            }
            Arrays.sort(ns);
            System.out.printf("BENCH watchdog pass, %-36s median %7.1f us, p90 %7.1f us, counted %d MiB%n", what,
                    ns[PASSES / 2] / 1e3, ns[PASSES * 9 / 10] / 1e3, p.memoryBytes().orElse(0) >> 20);
            p.kill();
        }
    }
}
