package dev.codeexec.worker;

import dev.codeexec.config.Config;
import dev.codeexec.mcp.FakeExecutor;
import dev.codeexec.wire.v1.ListSessionsRequest;
import dev.codeexec.wire.v1.SessionRequest;
import dev.codeexec.wire.v1.StatusRequest;
import dev.codeexec.workspace.Workspaces;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

import static dev.codeexec.worker.WorkerTesting.execute;
import static dev.codeexec.worker.WorkerTesting.request;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** WORKER_TOKEN: calls without it, or with a wrong one, never reach the engine; health stays open for probes. */
class WorkerAuthTest {

    static final String TOKEN = "s3cret-worker-token";

    @TempDir
    Path tmp;
    FakeExecutor executor;
    WorkerServer server;
    ManagedChannel channel;

    @BeforeEach
    void start() throws Exception {
        Config config = WorkerTesting.config(tmp, "WORKER_TOKEN", TOKEN);
        executor = new FakeExecutor();
        server = WorkerServer.start(config, executor, new Workspaces(tmp, 1 << 20, Duration.ofHours(1), 65534, 65534),
                "test");
        channel = WorkerTesting.plaintext(server.port());
    }

    @AfterEach
    void stop() throws Exception {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        server.close();
        executor.close();
    }

    @Test
    void executeWithoutOrWithAWrongTokenIsRefusedAndRunsNothing() throws Exception {
        for (String token : new String[] {null, "", "wrong", TOKEN.substring(1), TOKEN + "x", TOKEN.toUpperCase()}) {
            WorkerTesting.Recorded call = execute(channel, token, request("python", "print:ran").build());
            Status st = call.await();
            assertThat(st.getCode()).as("token %s", token).isEqualTo(Status.Code.UNAUTHENTICATED);
            assertThat(st.getDescription()).isEqualTo("missing or wrong worker token");
            assertThat(call.events).isEmpty();
        }
        assertThat(executor.requests).isEmpty();
    }

    @Test
    void theOtherWorkerCallsNeedTheTokenToo() {
        var anonymous = WorkerTesting.blocking(channel, null);
        var wrong = WorkerTesting.blocking(channel, "nope");
        for (var stub : new dev.codeexec.wire.v1.WorkerGrpc.WorkerBlockingStub[] {anonymous, wrong}) {
            assertUnauthenticated(() -> stub.status(StatusRequest.getDefaultInstance()));
            assertUnauthenticated(() -> stub.listSessions(ListSessionsRequest.newBuilder().setTenant("alice").build()));
            assertUnauthenticated(() -> stub.closeSession(SessionRequest.newBuilder().setTenant("alice").setName("s").build()));
            assertUnauthenticated(() -> stub.runtimeInfo(dev.codeexec.wire.v1.RuntimeInfoRequest.getDefaultInstance()));
        }
    }

    private static void assertUnauthenticated(Runnable call) {
        assertThatThrownBy(call::run).isInstanceOfSatisfying(StatusRuntimeException.class,
                e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.UNAUTHENTICATED));
    }

    @Test
    void theRightTokenRuns() throws Exception {
        WorkerTesting.Recorded call = execute(channel, TOKEN, request("python", "print:ran").build());
        assertThat(call.await().getCode()).isEqualTo(Status.Code.OK);
        assertThat(call.events.getFirst().hasAccepted()).isTrue();
        assertThat(call.result().getStdout()).isEqualTo("ran");
        assertThat(executor.requests).hasSize(1);
        assertThat(WorkerTesting.blocking(channel, TOKEN).status(StatusRequest.getDefaultInstance()).getSlots())
                .isEqualTo(4);
    }

    @Test
    void healthAnswersWithoutAToken() {
        assertThat(WorkerTesting.health(channel, "")).isEqualTo(ServingStatus.SERVING);
        assertThat(WorkerTesting.health(channel, "codeexec.worker.v1.Worker")).isEqualTo(ServingStatus.SERVING);
    }
}
