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

/**
 * A worker whose sandbox cannot run code starts, says why, and tells health checks NOT_SERVING; a worker restarted on
 * its port starts while its last instance's connections are in TIME_WAIT.
 */
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

    /**
     * A container restarted in its pod keeps the pod's address and finds the connections its last instance closed in
     * TIME_WAIT for a minute. gRPC's Netty server sets SO_REUSEADDR, so the bind succeeds (a plain socket without it
     * fails here with "Address already in use"): this pins that for the worker.
     */
    @Test
    void aWorkerRestartedOnItsPortBindsItWhileTheLastInstancesConnectionsAreInTimeWait() throws Exception {
        int port;
        try (java.net.ServerSocket last = new java.net.ServerSocket()) {
            // the last instance was a worker like this one: its sockets allow reuse (Linux lets a port be bound
            // over TIME_WAIT only when both sides set SO_REUSEADDR)
            last.setReuseAddress(true);
            last.bind(new java.net.InetSocketAddress("127.0.0.1", 0));
            port = last.getLocalPort();
            try (java.net.Socket client = new java.net.Socket("127.0.0.1", port)) {
                // the server's side closes first, as a stopping worker does: its end stays in TIME_WAIT on the port
                last.accept().close();
                assertThat(client.getInputStream().read()).as("the server's close reached the client").isEqualTo(-1);
            }
        }
        FakeExecutor executor = new FakeExecutor();
        WorkerServer server = WorkerServer.start(WorkerTesting.config(tmp, "WORKER_PORT", Integer.toString(port)),
                executor, new Workspaces(tmp, 1 << 20, Duration.ofHours(1), 65534, 65534), "test",
                new Sandbox.Status("bwrap", Optional.empty()));
        ManagedChannel ch = WorkerTesting.plaintext(server.port());
        try {
            assertThat(server.port()).isEqualTo(port);
            assertThat(WorkerTesting.health(ch, "")).isEqualTo(ServingStatus.SERVING);
        } finally {
            ch.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            server.close();
            executor.close();
        }
    }
}
