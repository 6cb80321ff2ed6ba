package dev.codeexec.worker;

import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.mcp.FakeExecutor;
import dev.codeexec.wire.v1.StatusRequest;
import dev.codeexec.workspace.Workspaces;
import io.grpc.ManagedChannel;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** A worker whose sandbox cannot run code starts, says why, and tells health checks NOT_SERVING. */
class WorkerHealthTest {

    @TempDir
    Path tmp;

    @Test
    void aWorkerWithoutAWorkingSandboxIsNotServing() throws Exception {
        FakeExecutor executor = new FakeExecutor();
        WorkerServer server = WorkerServer.start(WorkerTesting.config(tmp), executor,
                new Workspaces(tmp, 1 << 20, Duration.ofHours(1), 65534, 65534), "test",
                new Sandbox.Status("bwrap", Optional.of("user namespaces are disabled")));
        ManagedChannel ch = WorkerTesting.plaintext(server.port());
        try {
            assertThat(WorkerTesting.health(ch, "")).isEqualTo(ServingStatus.NOT_SERVING);
            assertThat(WorkerTesting.health(ch, "codeexec.worker.v1.Worker")).isEqualTo(ServingStatus.NOT_SERVING);
            assertThat(WorkerTesting.blocking(ch, null).status(StatusRequest.getDefaultInstance()).getSandbox())
                    .isEqualTo("bwrap");
        } finally {
            ch.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            server.close();
            executor.close();
        }
    }
}
