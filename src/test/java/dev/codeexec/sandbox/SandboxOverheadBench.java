package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static dev.codeexec.sandbox.SandboxTesting.*;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Per-start overhead of the sandbox against a bare spawn of the same program (start to close, medians). A
 * measurement, not a test: run with {@code ./mvnw test -Dtest=SandboxOverheadBench -Dsandbox.bench=true}.
 */
@EnabledIfSystemProperty(named = "sandbox.bench", matches = "true")
class SandboxOverheadBench {

    static final int N = 20;

    @Test
    void measure() throws Exception {
        java.nio.file.Path data = Files.createTempDirectory("bench-data-");
        BwrapSandbox bwrap = new BwrapSandbox(UID, UID, data);
        NoSandbox none = new NoSandbox(UID, UID);
        for (List<String> cmd : List.of(List.of("/bin/true"), List.of(PY, "-c", "pass"))) {
            double bare = median(() -> {
                Process p = new ProcessBuilder(cmd).start();
                p.getOutputStream().close();
                p.getInputStream().readAllBytes();
                p.waitFor();
            });
            double sandboxed = median(() -> runOnce(bwrap, cmd));
            double plain = median(() -> runOnce(none, cmd));
            System.out.printf("BENCH %-28s bare %6.1f ms | none(setpriv+cgroup) %6.1f ms | bwrap %6.1f ms | overhead %+.1f ms%n",
                    String.join(" ", cmd), bare, plain, sandboxed, sandboxed - bare);
        }
        DataDir.deleteTree(data);
    }

    static void runOnce(Sandbox sb, List<String> cmd) throws Exception {
        try (SandboxProcess p = sb.start(SandboxSpec.builder(runId(), cmd, "/work", limits()).env(ENV).build())) {
            p.stdin().close();
            p.stdout().readAllBytes();
            p.stderr().readAllBytes();
            assertThat(p.waitFor(Duration.ofSeconds(10))).isTrue();
            assertThat(p.exitCode()).isZero();
        }
    }

    interface Body {
        void run() throws Exception;
    }

    static double median(Body b) throws Exception {
        for (int i = 0; i < 3; i++) b.run();
        List<Double> t = new ArrayList<>();
        for (int i = 0; i < N; i++) {
            long s = System.nanoTime();
            b.run();
            t.add((System.nanoTime() - s) / 1e6);
        }
        t.sort(null);
        return (t.get(N / 2 - 1) + t.get(N / 2)) / 2;
    }
}
