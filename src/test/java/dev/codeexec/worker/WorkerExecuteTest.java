package dev.codeexec.worker;

import dev.codeexec.local.LocalEngine;
import dev.codeexec.config.Config;
import dev.codeexec.testing.Poll;
import dev.codeexec.wire.v1.ExecuteEvent;
import dev.codeexec.wire.v1.ListSessionsRequest;
import dev.codeexec.wire.v1.RuntimeInfoRequest;
import dev.codeexec.wire.v1.SessionRequest;
import dev.codeexec.wire.v1.StatusRequest;
import dev.codeexec.wire.v1.StatusResponse;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.stub.MetadataUtils;
import io.grpc.xds.shaded.com.github.xds.data.orca.v3.OrcaLoadReport;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.ByteArrayInputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static dev.codeexec.worker.WorkerTesting.execute;
import static dev.codeexec.worker.WorkerTesting.holding;
import static dev.codeexec.worker.WorkerTesting.release;
import static dev.codeexec.worker.WorkerTesting.request;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The Execute stream and the other Worker calls against a real worker: gRPC server on a loopback port over the
 * production engine (bubblewrap), one execution slot so that queueing can be observed.
 */
@Tag("sandbox")
class WorkerExecuteTest {

    @TempDir
    static Path tmp;
    static LocalEngine engine;
    static WorkerServer server;
    static ManagedChannel channel;

    @BeforeAll
    static void start() throws Exception {
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        Config config = WorkerTesting.config(tmp.resolve("ws"), "MAX_CONCURRENT", "1", "WORKER_NAME", "w-test");
        engine = WorkerTesting.realEngine(config);
        server = WorkerServer.start(config, engine.executor(), engine.workspaces(), "test-version",
                engine.sandbox().status());
        channel = WorkerTesting.plaintext(server.port());
    }

    @AfterAll
    static void stop() throws Exception {
        if (channel != null) channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        if (server != null) server.close();
        if (engine != null) engine.executor().close();
    }

    private static boolean idle() {
        return engine.executor().status().running() == 0 && engine.executor().status().queued() == 0;
    }

    @Test
    void streamsAcceptedThenOutputThenResult() throws Exception {
        WorkerTesting.Recorded call = execute(channel, null, request("python",
                "import sys, time\nprint('one', flush=True)\ntime.sleep(0.3)\nprint('two', flush=True)\n"
                        + "sys.stderr.write('err\\n')").build());
        assertThat(call.await().getCode()).isEqualTo(Status.Code.OK);
        List<ExecuteEvent> events = call.events;
        assertThat(events.getFirst().hasAccepted()).isTrue();
        assertThat(events.getFirst().getAccepted().getWorker()).isEqualTo("w-test");
        assertThat(events.getFirst().getAccepted().getInstanceId()).isEqualTo(server.instanceId());
        assertThat(events.getFirst().getAccepted().getRunId()).startsWith("run-");
        assertThat(events.getLast().hasResult()).isTrue();
        assertThat(events.subList(1, events.size() - 1)).allMatch(ExecuteEvent::hasOutput).isNotEmpty();
        assertThat(call.stdout()).isEqualTo("one\ntwo\n");
        assertThat(events.stream().filter(e -> e.hasOutput()
                && e.getOutput().getStream() == dev.codeexec.wire.v1.Output.Stream.STDERR)
                .map(e -> e.getOutput().getText())).containsExactly("err\n");
        dev.codeexec.wire.v1.Result r = call.result();
        assertThat(r.getOutcome()).isEqualTo("exited");
        assertThat(r.getExitCode()).isZero();
        assertThat(r.getStdout()).isEqualTo("one\ntwo\n");
        assertThat(r.getWorker()).isEqualTo("w-test");
        assertThat(r.getSandbox()).isEqualTo(engine.sandbox().name());
    }

    /**
     * Not even response headers while the run waits for the slot: the gateway's retry must still be possible for a
     * job that has not started. (A queued call that never gets the slot gets nothing at all before the worker ends
     * it: {@link #aQueueTimeoutIsNotRetriedButAFullQueueIs}.)
     */
    @Test
    void aQueuedRunIsNotAcknowledgedUntilItTakesTheSlot() throws Exception {
        Workspace ws = engine.workspaces().open("alice", "slot", true);
        WorkerTesting.Recorded first = execute(channel, null, holding(ws));
        Poll.until("the first run accepted", first::accepted);
        WorkerTesting.Recorded second = execute(channel, null, request("python", "print('second')").build());
        Poll.until("the second run queued", () -> engine.executor().status().queued() == 1);
        assertThat(second.headers).isFalse();
        assertThat(second.events).isEmpty();

        release(ws);
        assertThat(first.await().getCode()).isEqualTo(Status.Code.OK);
        assertThat(second.await().getCode()).isEqualTo(Status.Code.OK);
        assertThat(second.events.getFirst().hasAccepted()).isTrue();
        assertThat(second.result().getStdout()).isEqualTo("second\n");
    }

    @Test
    void aCallCancelledWhileQueuedNeverRuns() throws Exception {
        Workspace ws = engine.workspaces().open("alice", "queue", true);
        WorkerTesting.Recorded first = execute(channel, null, holding(ws));
        Poll.until("the first run accepted", first::accepted);
        WorkerTesting.Recorded second = execute(channel, null,
                request("bash", "touch ran").setWorkspace("queue").build());
        Poll.until("the second run queued", () -> engine.executor().status().queued() == 1);
        second.call.cancel("gateway gave up", null);
        assertThat(second.await().getCode()).isEqualTo(Status.Code.CANCELLED);
        assertThat(second.events).isEmpty();
        Poll.until("the cancelled run out of the queue", () -> engine.executor().status().queued() == 0);
        release(ws);
        assertThat(first.await().getCode()).isEqualTo(Status.Code.OK);
        // The slot was free after the first run: had the second still been waiting for it, it would have run.
        Poll.until("the worker idle", WorkerExecuteTest::idle);
        assertThat(Files.exists(ws.fs().root().resolve("ran"))).isFalse();
    }

    @Test
    void anAcceptedRunStartsOnlyWhenTheClientSaysStart() throws Exception {
        Workspace ws = engine.workspaces().open("alice", "nostart", true);
        // The client saw accepted but never answers (it died, or the connection broke before it could): the run
        // must not start — the gateway may have retried it elsewhere. Ending the call drops it unstarted.
        WorkerTesting.Recorded silent = new WorkerTesting.Recorded(channel, null, io.grpc.CallOptions.DEFAULT,
                request("bash", "touch ran; echo ran").setWorkspace("nostart").build(), false);
        Poll.until("the run accepted", silent::accepted);
        silent.call.halfClose();
        // The worker's own answer: the run ended cancelled having printed nothing, and left no file once idle.
        assertThat(silent.await().getCode()).isEqualTo(Status.Code.OK);
        assertThat(silent.result().getOutcome()).isEqualTo("cancelled");
        assertThat(silent.stdout()).isEmpty();
        Poll.until("the worker idle", WorkerExecuteTest::idle);
        assertThat(Files.exists(ws.fs().root().resolve("ran"))).as("started without start").isFalse();

        // The same request with start runs.
        WorkerTesting.Recorded normal = execute(channel, null,
                request("bash", "touch ran; echo ran").setWorkspace("nostart").build());
        assertThat(normal.await().getCode()).isEqualTo(Status.Code.OK);
        assertThat(normal.result().getStdout()).isEqualTo("ran\n");
        assertThat(Files.exists(ws.fs().root().resolve("ran"))).isTrue();
    }

    @Test
    void aQueueTimeoutIsNotRetriedButAFullQueueIs() throws Exception {
        Path own = tmp.resolve("qt");
        Files.createDirectories(own);
        Config config = WorkerTesting.config(own.resolve("ws"), "MAX_CONCURRENT", "1", "QUEUE_SIZE", "1",
                "QUEUE_TIMEOUT_MS", "300", "WORKER_NAME", "w-queue");
        LocalEngine small = WorkerTesting.realEngine(config);
        WorkerServer s = WorkerServer.start(config, small.executor(), small.workspaces(), "test", small.sandbox().status());
        ManagedChannel ch = WorkerTesting.plaintext(s.port());
        try {
            Workspace ws = small.workspaces().open("alice", "qt", true);
            WorkerTesting.Recorded holder = execute(ch, null, holding(ws));
            Poll.until("the holding run accepted", holder::accepted);
            // Two calls while the only slot is held and the queue holds one: whichever comes second is refused at
            // once (a full queue), the other waits out QUEUE_TIMEOUT_MS of its deadline.
            WorkerTesting.Recorded a = execute(ch, null, request("bash", "echo a").build());
            WorkerTesting.Recorded b = execute(ch, null, request("bash", "echo b").build());
            try {
                assertThat(a.await().getCode()).isEqualTo(Status.Code.RESOURCE_EXHAUSTED);
                assertThat(b.await().getCode()).isEqualTo(Status.Code.RESOURCE_EXHAUSTED);
            } finally {
                release(ws);
            }
            // Refused at once: may be retried on another worker. Refused after its wait: "do not retry" pushback.
            assertThat(java.util.stream.Stream.of(a, b).map(r -> r.trailers.get(ExecuteCall.NO_RETRY)))
                    .containsExactlyInAnyOrder(null, "-1");
            WorkerTesting.Recorded waited = "-1".equals(a.trailers.get(ExecuteCall.NO_RETRY)) ? a : b;
            // The worker itself ended the waiting call, having sent nothing, not even headers: what a worker sends
            // on a stream reaches the client before the stream's end.
            assertThat(waited.headers).isFalse();
            assertThat(waited.events).isEmpty();
            assertThat(holder.await().getCode()).isEqualTo(Status.Code.OK);
        } finally {
            ch.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            s.close();
            small.executor().close();
        }
    }

    @Test
    void cancellingTheCallKillsTheRun() throws Exception {
        WorkerTesting.Recorded call = execute(channel, null,
                request("bash", "echo started; sleep 30; echo never").build());
        Poll.until("the run printed started", () -> call.stdout().contains("started"));
        assertThat(engine.executor().status().running()).isEqualTo(1);
        call.call.cancel("client gave up", null);
        assertThat(call.await().getCode()).isEqualTo(Status.Code.CANCELLED);
        // The run's result holds its slot until it has ended: idle again, so the sleep 30 was killed.
        Poll.until("the worker idle", WorkerExecuteTest::idle);
    }

    @Test
    void aPassedDeadlineKillsTheRun() throws Exception {
        WorkerTesting.Recorded r = new WorkerTesting.Recorded(channel, null,
                io.grpc.CallOptions.DEFAULT.withDeadlineAfter(3, TimeUnit.SECONDS),
                request("bash", "echo started; sleep 30; echo never").build());
        assertThat(r.await().getCode()).isEqualTo(Status.Code.DEADLINE_EXCEEDED);
        assertThat(r.events.getFirst().hasAccepted()).isTrue();
        assertThat(r.stdout()).isEqualTo("started\n");
        Poll.until("the worker idle", WorkerExecuteTest::idle);
    }

    @Test
    void workspaceRunsSeeTheSharedFilesAndBadNamesAreRefused() throws Exception {
        Workspace ws = engine.workspaces().open("alice", "proj", true);
        ws.write(RelPath.parse("data.txt"), new ByteArrayInputStream("hello from the volume".getBytes()), 1000);
        WorkerTesting.Recorded ok = execute(channel, null, request("python",
                "print(open('data.txt').read()); open('out.txt', 'w').write('back')").setWorkspace("proj").build());
        assertThat(ok.await().getCode()).isEqualTo(Status.Code.OK);
        assertThat(ok.result().getStdout()).isEqualTo("hello from the volume\n");
        assertThat(Files.readString(ws.fs().root().resolve("out.txt"))).isEqualTo("back");

        WorkerTesting.Recorded missing = execute(channel, null,
                request("python", "print(1)").setWorkspace("nope").build());
        assertThat(missing.await().getCode()).isEqualTo(Status.Code.NOT_FOUND);
        assertThat(missing.events).isEmpty();
        assertThat(Files.exists(tmp.resolve("ws/alice/nope"))).isFalse(); // a worker never creates one

        for (String[] bad : new String[][] {{"alice", "../x"}, {"../alice", "proj"}, {"alice", "a/b"}}) {
            WorkerTesting.Recorded r = execute(channel, null,
                    request("python", "print(1)").setTenant(bad[0]).setWorkspace(bad[1]).build());
            assertThat(r.await().getCode()).as(String.join(" ", bad)).isEqualTo(Status.Code.INVALID_ARGUMENT);
            assertThat(r.events).isEmpty();
        }
    }

    @Test
    void aSessionWhoseWorkerIsGoneIsRefusedBeforeAnythingRuns() throws Exception {
        Workspace ws = engine.workspaces().open("alice", "sess", true);
        WorkerTesting.Recorded refused = execute(channel, null, request("python", "open('ran', 'w').write('x')")
                .setWorkspace("sess").setSession("s1").setSessionWorker("instance-that-died").build());
        Status st = refused.await();
        assertThat(st.getCode()).isEqualTo(Status.Code.FAILED_PRECONDITION);
        assertThat(st.getDescription()).contains("state is lost");
        assertThat(refused.events).isEmpty();
        assertThat(Files.exists(ws.fs().root().resolve("ran"))).isFalse();

        // A new session (no session_worker) starts here, and later calls naming this instance reach it.
        WorkerTesting.Recorded created = execute(channel, null,
                request("python", "x = 41").setWorkspace("sess").setSession("s1").build());
        assertThat(created.await().getCode()).isEqualTo(Status.Code.OK);
        assertThat(created.result().getSession().getCreated()).isTrue();
        WorkerTesting.Recorded again = execute(channel, null, request("python", "print(x + 1)")
                .setWorkspace("sess").setSession("s1").setSessionWorker(server.instanceId()).build());
        assertThat(again.await().getCode()).isEqualTo(Status.Code.OK);
        assertThat(again.result().getStdout()).isEqualTo("42\n");
        // A gateway that knew s1 on the dead instance is refused even though a session s1 lives here now (another
        // gateway started it after the first was lost): its client's state is gone and must hear so. Nothing runs.
        WorkerTesting.Recorded stale = execute(channel, null, request("python", "x = 0")
                .setWorkspace("sess").setSession("s1").setSessionWorker("instance-that-died").build());
        assertThat(stale.await().getCode()).isEqualTo(Status.Code.FAILED_PRECONDITION);
        WorkerTesting.Recorded kept = execute(channel, null, request("python", "print(x)")
                .setWorkspace("sess").setSession("s1").setSessionWorker(server.instanceId()).build());
        assertThat(kept.await().getCode()).isEqualTo(Status.Code.OK);
        assertThat(kept.result().getStdout()).isEqualTo("41\n");

        var stub = WorkerTesting.blocking(channel, null);
        var list = stub.listSessions(ListSessionsRequest.newBuilder().setTenant("alice").build());
        assertThat(list.getSessionsList()).extracting(dev.codeexec.wire.v1.SessionInfo::getName).contains("s1");
        assertThat(list.getInstanceId()).isEqualTo(server.instanceId());
        assertThat(stub.listSessions(ListSessionsRequest.newBuilder().setTenant("bob").build()).getSessionsList())
                .isEmpty();
        SessionRequest s1 = SessionRequest.newBuilder().setTenant("alice").setName("s1").build();
        assertThat(stub.resetSession(s1).getFound()).isTrue();
        assertThat(stub.closeSession(s1).getFound()).isTrue();
        assertThat(stub.closeSession(s1).getFound()).isFalse();
    }

    @Test
    void requestsTheWorkerCannotRunAreInvalidArguments() throws Exception {
        WorkerTesting.Recorded lang = execute(channel, null, request("cobol", "DISPLAY 'X'.").build());
        assertThat(lang.await().getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT);
        assertThat(lang.await().getDescription()).contains("unknown language");
        WorkerTesting.Recorded limits = execute(channel, null, request("python", "print(1)")
                .setLimits(dev.codeexec.wire.v1.Limits.newBuilder().setTimeoutMs(1000)).build());
        assertThat(limits.await().getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT);
        WorkerTesting.Recorded env = execute(channel, null,
                request("python", "print(1)").putEnv("BAD-NAME", "x").build());
        assertThat(env.await().getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT);
        assertThat(lang.events).isEmpty();
        assertThat(limits.events).isEmpty();
        assertThat(env.events).isEmpty();
    }

    private record StatusWithLoad(StatusResponse status, OrcaLoadReport load) {
    }

    /** A Status call and the ORCA load report in its trailers. */
    private static StatusWithLoad statusWithLoad() throws Exception {
        AtomicReference<Metadata> headers = new AtomicReference<>();
        AtomicReference<Metadata> trailers = new AtomicReference<>();
        StatusResponse status = WorkerTesting.blocking(channel, null)
                .withInterceptors(MetadataUtils.newCaptureMetadataInterceptor(headers, trailers))
                .status(StatusRequest.getDefaultInstance());
        byte[] raw = trailers.get().get(Metadata.Key.of("endpoint-load-metrics-bin", Metadata.BINARY_BYTE_MARSHALLER));
        assertThat(raw).as("ORCA load report in the trailers").isNotNull();
        return new StatusWithLoad(status, OrcaLoadReport.parseFrom(raw));
    }

    @Test
    void trailersCarryOrcaLoadWhileTheWorkerIsBusy() throws Exception {
        Workspace ws = engine.workspaces().open("alice", "busy", true);
        WorkerTesting.Recorded busy = execute(channel, null, holding(ws));
        try {
            Poll.until("the run accepted", busy::accepted);
            // The load is a smoothed average: it rises over the next reports while the run holds the only slot.
            StatusWithLoad s = Poll.until("the reported utilization rises", WorkerExecuteTest::statusWithLoad,
                    x -> x.load().getApplicationUtilization() > 0.1);
            assertThat(s.status().getRunning()).isEqualTo(1);
            assertThat(s.load().getRpsFractional()).isGreaterThan(0);
        } finally {
            release(ws);
        }
        assertThat(busy.await().getCode()).isEqualTo(Status.Code.OK);
    }

    @Test
    void statusAndRuntimeInfoDescribeThisWorker() throws Exception {
        var stub = WorkerTesting.blocking(channel, null);
        StatusResponse s = stub.status(StatusRequest.getDefaultInstance());
        assertThat(s.getWorker()).isEqualTo("w-test");
        assertThat(s.getInstanceId()).isEqualTo(server.instanceId());
        assertThat(s.getVersion()).isEqualTo("test-version");
        assertThat(s.getSlots()).isEqualTo(1);
        assertThat(s.getDraining()).isFalse();
        assertThat(s.getSandbox()).isEqualTo(engine.sandbox().name());
        assertThat(s.getStartedEpochMs()).isPositive();
        JsonNode info = JsonMapper.shared().readTree(stub.runtimeInfo(RuntimeInfoRequest.getDefaultInstance()).getJson());
        assertThat(info.path("languages").has("python")).isTrue();
        assertThat(info.path("concurrency").path("maxConcurrent").asInt()).isEqualTo(1);
        assertThat(WorkerTesting.health(channel, "")).isEqualTo(
                io.grpc.health.v1.HealthCheckResponse.ServingStatus.SERVING);
        assertThat(WorkerTesting.health(channel, "codeexec.worker.v1.Worker")).isEqualTo(
                io.grpc.health.v1.HealthCheckResponse.ServingStatus.SERVING);
    }
}
