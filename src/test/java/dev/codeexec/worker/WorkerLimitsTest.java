package dev.codeexec.worker;

import dev.codeexec.local.LocalEngine;
import dev.codeexec.config.Config;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.wire.v1.Result;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

import static dev.codeexec.worker.WorkerTesting.execute;
import static dev.codeexec.worker.WorkerTesting.request;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A caller holding the token gets no more than this worker's maxima: limits above them are clamped (not refused,
 * since gateways and workers may be configured apart), and the sandbox enforces the clamped values.
 */
@Tag("sandbox")
class WorkerLimitsTest {

    @TempDir
    static Path tmp;
    static LocalEngine engine;
    static WorkerServer server;
    static ManagedChannel channel;

    @BeforeAll
    static void start() throws Exception {
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        Config config = WorkerTesting.config(tmp.resolve("ws"), "MAX_TIMEOUT_MS", "2000", "DEFAULT_TIMEOUT_MS",
                "2000", "MAX_OUTPUT_KB", "1", "MEMORY_LIMIT_MB", "64");
        engine = WorkerTesting.realEngine(config);
        server = WorkerServer.start(config, engine.executor(), engine.workspaces(), "test", engine.sandbox().status());
        channel = WorkerTesting.plaintext(server.port());
    }

    @AfterAll
    static void stop() throws Exception {
        if (channel != null) channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        if (server != null) server.close();
        if (engine != null) engine.executor().close();
    }

    private static Result run(String language, String code, dev.codeexec.wire.v1.Limits limits) throws Exception {
        WorkerTesting.Recorded call = execute(channel, null, request(language, code).setLimits(limits).build());
        assertThat(call.await().getCode()).isEqualTo(Status.Code.OK);
        return call.result();
    }

    private static dev.codeexec.wire.v1.Limits.Builder generous() {
        return dev.codeexec.wire.v1.Limits.newBuilder().setTimeoutMs(600_000).setCpuSeconds(3600)
                .setMemoryBytes(64L << 30).setMaxProcesses(10_000).setOutputBytes(64L << 20).setDiskBytes(64L << 30);
    }

    @Test
    void aTimeoutAboveTheMaximumIsCutToIt() throws Exception {
        Result r = run("bash", "sleep 20; echo slept", generous().build());
        assertThat(r.getOutcome()).isEqualTo("timeout");
        assertThat(r.getStdout()).doesNotContain("slept");
    }

    @Test
    void outputAboveTheMaximumIsCutToIt() throws Exception {
        Result r = run("python", "print('x' * 100000)", generous().build());
        assertThat(r.getTruncated()).isTrue();
        // the worker's 1 KB: half the head, half the tail, and the marker between them
        assertThat(r.getStdout()).matches("x{512}\\n\\[\\.\\.\\. \\d+ bytes left out \\.\\.\\.\\]\\nx{511}\\n");
    }

    @Test
    void memoryAboveTheMaximumIsCutToIt() throws Exception {
        Result r = run("python", "b = bytearray(300 * 1024 * 1024)\nprint('allocated')", generous().build());
        assertThat(r.getStdout()).doesNotContain("allocated");
        assertThat(r.getOutcome()).isIn("memory_limit", "exited");
        assertThat(r.getExitCode()).isNotZero();
    }

    @Test
    void limitsBelowTheMaximaAreKept() {
        Limits max = new Limits(Duration.ofSeconds(2), 30, 64L << 20, 128, 1024, 512L << 20);
        Limits asked = new Limits(Duration.ofSeconds(1), 5, 32L << 20, 300, 4096, 1L << 20);
        Limits got = WorkerService.clamp(asked, max);
        assertThat(got).isEqualTo(new Limits(Duration.ofSeconds(1), 5, 32L << 20, 128, 1024, 1L << 20));
    }
}
