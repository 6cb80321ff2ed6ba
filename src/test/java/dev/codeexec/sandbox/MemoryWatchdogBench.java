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
