package dev.codeexec.local;

import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.OutputListener;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

import static dev.codeexec.local.TestSupport.await;
import static dev.codeexec.local.TestSupport.request;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Outcomes only the real sandbox can produce (the kernel enforces memory and CPU limits) and process-tree
 * behaviour only it guarantees. Skipped when the configured sandbox cannot run here.
 */
@Tag("sandbox")
class RealSandboxLimitsTest {

    @RegisterExtension
    final RealExecutors executors = new RealExecutors();

    @Test
    void memoryHogEndsWithMemoryLimit() throws Exception {
        LocalExecutor e = executors.start("MEMORY_LIMIT_MB", "64");
        String code = "x = []\nwhile True: x.append(bytearray(16 * 1024 * 1024))";
        ExecutionResult r = await(e.submit(request(e.config, "python", code), OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.MEMORY_LIMIT);
        assertThat(r.stderr()).endsWith("[terminated] memory limit 64 MB exceeded\n");
        assertThat(r.peakMemoryBytes()).isPresent();
    }

    @Test
    void busyLoopEndsWithCpuLimit() throws Exception {
        LocalExecutor e = executors.start("CPU_LIMIT_SECONDS", "1");
        ExecutionResult r = await(e.submit(request(e.config, "python", "while True: pass", "", List.of(), Map.of(),
                30_000L), OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.CPU_LIMIT);
        assertThat(r.stderr()).endsWith("[terminated] CPU time limit 1 s exceeded\n");
        assertThat(r.cpuTimeMs()).isPresent();
        assertThat(r.cpuTimeMs().getAsDouble()).isGreaterThan(500);
    }

    @Test
    void backgroundChildHoldingStdoutDoesNotHoldTheRun() throws Exception {
        LocalExecutor e = executors.start();
        long t0 = System.nanoTime();
        ExecutionResult r = await(e.submit(request(e.config, "shell", "(sleep 30; echo late) &\necho early", "",
                List.of(), Map.of(), 60_000L), OutputListener.NONE));
        assertThat(r.stdout()).isEqualTo("early\n");
        assertThat((System.nanoTime() - t0) / 1_000_000).isLessThan(20_000);
    }

    @Test
    void timeoutKillsTheWholeTree() throws Exception {
        LocalExecutor e = executors.start();
        ExecutionResult r = await(e.submit(request(e.config, "bash", "sleep 61.5 & sleep 61.5 & wait", "", List.of(),
                Map.of(), 500L), OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.TIMEOUT);
        // Seen from the host: nothing of the run is left.
        assertThat(ProcessHandle.allProcesses()
                .filter(p -> p.info().commandLine().orElse("").contains("sleep 61.5"))).isEmpty();
    }

    @Test
    void codeCannotSeeTheServersEnvironmentOrWriteTheGoCache() throws Exception {
        LocalExecutor e = executors.start();
        ExecutionResult env = await(e.submit(request(e.config, "shell", "env"), OutputListener.NONE));
        assertThat(env.stdout()).doesNotContain("JAVA_HOME").doesNotContain("MAVEN").contains("HOME=/tmp");
        String goCache = e.placeholders.get("goCache");
        ExecutionResult w = await(e.submit(request(e.config, "shell", "touch " + goCache + "/x && echo wrote || echo refused"),
                OutputListener.NONE));
        assertThat(w.stdout()).isEqualTo("refused\n");
    }
}
