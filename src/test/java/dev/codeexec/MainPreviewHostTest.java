package dev.codeexec;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * PREVIEW_HOST binds like HOST where a preview listener is started (the HTTP server), and only there: the image sets
 * it to 0.0.0.0, and a worker or a stdio server, which serve no previews, must start all the same.
 */
class MainPreviewHostTest {

    @TempDir
    Path data;

    @Test
    void anHttpServerWithANonLoopbackPreviewHostAndNoKeyStopsBeforeItsEngineStarts() {
        int code = Main.run(Map.of("DATA_DIR", data.toString(), "PREVIEW_HOST", "0.0.0.0"), config -> {
            throw new AssertionError("the engine must not start");
        });
        assertThat(code).isEqualTo(2);
    }

    @Test
    void aWorkerIsNotHeldToTheRule() {
        // refused for its own reason (WORKER_HOST without WORKER_TOKEN), never for PREVIEW_HOST
        java.io.ByteArrayOutputStream err = new java.io.ByteArrayOutputStream();
        java.io.PrintStream was = System.err;
        System.setErr(new java.io.PrintStream(err, true));
        int code;
        try {
            code = dev.codeexec.worker.WorkerMain.run(Map.of("DATA_DIR", data.toString(), "PREVIEW_HOST", "0.0.0.0",
                    "WORKER_HOST", "0.0.0.0"));
        } finally {
            System.setErr(was);
        }
        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).contains("WORKER_TOKEN").doesNotContain("PREVIEW_HOST");
    }
}
