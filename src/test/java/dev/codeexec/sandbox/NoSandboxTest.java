package dev.codeexec.sandbox;

import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static dev.codeexec.sandbox.SandboxTesting.*;
import static org.assertj.core.api.Assertions.assertThat;

/** The development-only "none" sandbox still drops to the sandbox uid, clears the environment and cleans up. */
@Tag("sandbox")
class NoSandboxTest {

    final NoSandbox sandbox = new NoSandbox(UID, UID);

    @AfterEach
    void nothingLeftBehind() throws Exception {
        Poll.until("no live process of uid 65534", SandboxTesting::liveProcessesOfSandboxUid, List::isEmpty);
        try (var s = Files.list(Path.of(System.getProperty("java.io.tmpdir")))) {
            assertThat(s.filter(p -> p.getFileName().toString().startsWith("code-exec-none-")).toList()).isEmpty();
        }
    }

    @Test
    void warnsLoudly() {
        assertThat(sandbox.unavailableReason()).isEmpty();
        assertThat(sandbox.info()).containsEntry("kind", "none").containsEntry("network", "host")
                .containsEntry("warning", NoSandbox.WARNING);
    }

    @Test
    void runsAsTheSandboxUidInAFreshDirectoryWithOnlyTheGivenEnvironment() throws Exception {
        Path code = Files.createTempFile("code-", ".sh");
        Files.writeString(code, "id -u; pwd; cat /work/data.txt 2>/dev/null || echo mapped; env | sort\n");
        try {
            Result r = run(sandbox, SandboxSpec.builder(runId(), List.of("/bin/sh", "/work/main.sh"), "/work", limits())
                    .readOnlyFiles(Map.of("/work/main.sh", code)).env(Map.of("PATH", "/usr/bin:/bin", "X", "/work/y"))
                    .build());
            List<String> lines = r.out().lines().toList();
            assertThat(lines.get(0)).isEqualTo("65534");
            assertThat(lines.get(1)).startsWith(System.getProperty("java.io.tmpdir") + "/code-exec-none-");
            assertThat(lines.get(2)).isEqualTo("mapped");
            assertThat(lines.subList(3, lines.size())).containsExactly("PATH=/usr/bin:/bin", "PWD=" + lines.get(1),
                    "X=" + lines.get(1) + "/y");
        } finally {
            Files.delete(code);
        }
    }

    @Test
    void limitsAndKillStillApply() throws Exception {
        var l = new Limits(java.time.Duration.ofSeconds(10), 1, 256L << 20, 32, 1 << 20, 1 << 20);
        Result r = run(sandbox, spec(l, PY, "-c", "while True: pass"));
        assertThat(r.process().cpuLimitHit()).isTrue();
        Result bg = run(sandbox, spec("/bin/sh", "-c", "setsid sleep 1000 >/dev/null 2>&1 & echo ok"));
        assertThat(bg.out()).isEqualTo("ok\n");
    }
}
