package dev.codeexec.worker;

import dev.codeexec.local.LocalEngine;
import dev.codeexec.config.Config;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.testing.Poll;
import dev.codeexec.workspace.Workspace;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static dev.codeexec.worker.WorkerTesting.execute;
import static dev.codeexec.worker.WorkerTesting.holding;
import static dev.codeexec.worker.WorkerTesting.release;
import static dev.codeexec.worker.WorkerTesting.request;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Drain (the SIGTERM path) on a real engine with one slot: health flips, the running job finishes, the queued
 * one is sent back unstarted, new calls are refused, and a job outliving the grace is killed.
 */
@Tag("sandbox")
class WorkerDrainTest {

    @TempDir
    Path tmp;
    LocalEngine engine;
    WorkerServer server;
    ManagedChannel channel;

    private void start(int graceSeconds) throws Exception {
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        Config config = WorkerTesting.config(tmp.resolve("ws"), "MAX_CONCURRENT", "1", "SHUTDOWN_GRACE_SECONDS",
                Integer.toString(graceSeconds));
        engine = WorkerTesting.realEngine(config);
        server = WorkerServer.start(config, engine.executor(), engine.workspaces(), "test", engine.sandbox().status());
        channel = WorkerTesting.plaintext(server.port());
    }

    @AfterEach
    void stop() throws Exception {
        if (channel != null) channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        if (server != null) server.close();
        if (engine != null) engine.executor().close();
    }

    @Test
    void drainFinishesTheRunningJobAndSendsBackTheRest() throws Exception {
        start(30);
        Workspace ws = engine.workspaces().open("alice", "drain", true);
        WorkerTesting.Recorded running = execute(channel, null, holding(ws));
        Poll.until("the running job accepted", running::accepted);
        WorkerTesting.Recorded queued = execute(channel, null, request("python", "print('queued')").build());
        Poll.until("the second job queued", () -> engine.executor().status().queued() == 1);

        CompletableFuture<Void> drained = CompletableFuture.runAsync(() -> server.drain(Duration.ofSeconds(30)));
        Poll.until("health NOT_SERVING", () -> WorkerTesting.health(channel, "") == ServingStatus.NOT_SERVING);
        assertThat(WorkerTesting.health(channel, "codeexec.worker.v1.Worker")).isEqualTo(ServingStatus.NOT_SERVING);

        Status back = queued.await();
        assertThat(back.getCode()).isEqualTo(Status.Code.UNAVAILABLE);
        assertThat(queued.events).isEmpty(); // never accepted: the gateway may run it elsewhere
        WorkerTesting.Recorded late = execute(channel, null, request("python", "print('late')").build());
        assertThat(late.await().getCode()).isEqualTo(Status.Code.UNAVAILABLE);
        assertThat(late.events).isEmpty();

        // The running job held its slot through all of this; now it finishes.
        release(ws);
        assertThat(running.await().getCode()).isEqualTo(Status.Code.OK);
        assertThat(running.result().getOutcome()).isEqualTo("exited");
        assertThat(running.result().getStdout()).isEqualTo("holding\nreleased\n");
        drained.get(60, TimeUnit.SECONDS);
        assertThat(server.draining()).isTrue();
        // The engine is closed too.
        assertThatThrownBy(() -> engine.executor().submit(
                new dev.codeexec.engine.RequestValidator(Config.of(), dev.codeexec.lang.Languages.load())
                        .validate("python", "print(1)", null, null, null, null, null), null))
                .isInstanceOf(ExecutionException.Unavailable.class);
    }

    @Test
    void aJobOutlivingTheGraceIsKilled() throws Exception {
        start(1);
        WorkerTesting.Recorded running = execute(channel, null,
                request("bash", "echo go; sleep 60; echo finished").build());
        Poll.until("the running job accepted", running::accepted);
        CompletableFuture<Void> drained = CompletableFuture.runAsync(() -> server.drain(Duration.ofSeconds(1)));
        assertThat(running.await().getCode()).isEqualTo(Status.Code.OK);
        assertThat(running.result().getOutcome()).isEqualTo("cancelled");
        assertThat(running.result().getStdout()).doesNotContain("finished");
        drained.get(60, TimeUnit.SECONDS);
    }
}
