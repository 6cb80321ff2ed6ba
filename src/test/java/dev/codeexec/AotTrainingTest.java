package dev.codeexec;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The AOT cache's training workload runs through the real surfaces against the real engine: every call it makes
 * must be answered (a refused call would train the error path instead of the one users take), and it leaves
 * nothing behind.
 */
class AotTrainingTest {

    /**
     * The training sets the process's logging as the server does (LOG_LEVEL=warn): the test JVM's later classes get
     * the server's defaults back, so that what they wait for in the logs (the audit lines, at INFO) is written.
     */
    @AfterAll
    static void restoreLogging() {
        dev.codeexec.boot.Logging.configure(dev.codeexec.config.Config.load(Map.of()));
    }

    @Test
    void theWorkloadIsAnsweredInEveryLanguageAndLeavesNothingBehind() throws Exception {
        Map<String, String> env = new HashMap<>(System.getenv());
        env.put("API_KEY", "the host's key must not matter");
        env.put("API_KEYS_FILE", "/nonexistent/keys");
        long before;
        try (var tmp = Files.list(Path.of(System.getProperty("java.io.tmpdir")))) {
            before = tmp.filter(p -> p.getFileName().toString().startsWith("code-exec-aot-training-")).count();
        }
        AotTraining.Outcome o = AotTraining.train(env);
        assertThat(o.sandboxProblem()).isEmpty();
        assertThat(o.refused()).as("refused calls").isZero();
        assertThat(o.answered()).as("answered calls").isGreaterThanOrEqualTo(200);
        try (var tmp = Files.list(Path.of(System.getProperty("java.io.tmpdir")))) {
            assertThat(tmp.filter(p -> p.getFileName().toString().startsWith("code-exec-aot-training-")).count())
                    .as("temporary DATA_DIRs left").isEqualTo(before);
        }
    }
}
