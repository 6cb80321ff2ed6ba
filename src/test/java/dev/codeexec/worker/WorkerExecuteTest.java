package dev.codeexec.worker;

import dev.codeexec.engine.LocalEngine;
import dev.codeexec.config.Config;
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

import static dev.codeexec.worker.WorkerTesting.eventually;
import static dev.codeexec.worker.WorkerTesting.execute;
import static dev.codeexec.worker.WorkerTesting.request;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The Execute stream and the other Worker calls against a real worker: gRPC server on a loopback port over the
 * production engine (bubblewrap), one execution slot so that queueing can be observed.
 */
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
        return engine.executor().running() == 0 && engine.executor().queued() == 0;
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

    @Test
    void aQueuedRunIsNotAcknowledgedUntilItTakesTheSlot() throws Exception {
        WorkerTesting.Recorded first = execute(channel, null, request("bash", "echo first; sleep 4").build());
        assertThat(eventually(30_000, first::accepted)).isTrue();
        WorkerTesting.Recorded second = execute(channel, null, request("python", "print('second')").build());
        assertThat(eventually(10_000, () -> engine.executor().queued() == 1)).isTrue();
        Thread.sleep(500);
        // Not even response headers: the gateway's retry must still be possible for a job that has not started.
        assertThat(first.closed).isNotDone();
        assertThat(second.headers).isFalse();
        assertThat(second.events).isEmpty();

        assertThat(first.await().getCode()).isEqualTo(Status.Code.OK);
        assertThat(second.await().getCode()).isEqualTo(Status.Code.OK);
        assertThat(second.events.getFirst().hasAccepted()).isTrue();
        assertThat(second.result().getStdout()).isEqualTo("second\n");
    }

    @Test
    void aCallCancelledWhileQueuedNeverRuns() throws Exception {
        Workspace ws = engine.workspaces().open("alice", "queue", true);
        WorkerTesting.Recorded first = execute(channel, null, request("bash", "sleep 2").build());
        assertThat(eventually(30_000, first::accepted)).isTrue();
        WorkerTesting.Recorded second = execute(channel, null,
                request("bash", "touch ran").setWorkspace("queue").build());
        assertThat(eventually(10_000, () -> engine.executor().queued() == 1)).isTrue();
        second.call.cancel("gateway gave up", null);
        assertThat(second.await().getCode()).isEqualTo(Status.Code.CANCELLED);
        assertThat(second.events).isEmpty();
        assertThat(eventually(5_000, () -> engine.executor().queued() == 0)).isTrue();
        assertThat(first.await().getCode()).isEqualTo(Status.Code.OK);
        assertThat(eventually(15_000, WorkerExecuteTest::idle)).isTrue();
        assertThat(Files.exists(ws.fs().root().resolve("ran"))).isFalse();
    }

    @Test
    void anAcceptedRunStartsOnlyWhenTheClientSaysStart() throws Exception {
        Workspace ws = engine.workspaces().open("alice", "nostart", true);
        // The client saw accepted but never answers (it died, or the connection broke before it could): the run
        // must not start — the gateway may have retried it elsewhere. Ending the call drops it unstarted.
        WorkerTesting.Recorded silent = new WorkerTesting.Recorded(channel, null, io.grpc.CallOptions.DEFAULT,
                request("bash", "touch ran; echo ran").setWorkspace("nostart").build(), false);
        assertThat(eventually(30_000, silent::accepted)).isTrue();
        Thread.sleep(1500);
        assertThat(Files.exists(ws.fs().root().resolve("ran"))).as("started without start").isFalse();
        silent.call.halfClose();
        assertThat(silent.await().getCode()).isEqualTo(Status.Code.OK);
        assertThat(silent.result().getOutcome()).isEqualTo("cancelled");
        assertThat(silent.stdout()).isEmpty();
        assertThat(eventually(15_000, WorkerExecuteTest::idle)).isTrue();
        assertThat(Files.exists(ws.fs().root().resolve("ran"))).isFalse();

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
            WorkerTesting.Recorded holder = execute(ch, null, request("bash", "sleep 3").build());
            assertThat(eventually(30_000, holder::accepted)).isTrue();
            WorkerTesting.Recorded waited = execute(ch, null, request("bash", "echo late").build());
            assertThat(eventually(5_000, () -> small.executor().queued() == 1)).isTrue();
            WorkerTesting.Recorded full = execute(ch, null, request("bash", "echo full").build());
            // The queue holds one: the third call is refused at once, and may be retried on another worker.
            assertThat(full.await().getCode()).isEqualTo(Status.Code.RESOURCE_EXHAUSTED);
            assertThat(full.trailers.get(ExecuteCall.NO_RETRY)).isNull();
            // The second waited out QUEUE_TIMEOUT_MS of its deadline: refused with "do not retry" pushback.
            assertThat(waited.await().getCode()).isEqualTo(Status.Code.RESOURCE_EXHAUSTED);
            assertThat(waited.trailers.get(ExecuteCall.NO_RETRY)).isEqualTo("-1");
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
        assertThat(eventually(30_000, () -> call.stdout().contains("started"))).isTrue();
        assertThat(engine.executor().running()).isEqualTo(1);
        call.call.cancel("client gave up", null);
        assertThat(call.await().getCode()).isEqualTo(Status.Code.CANCELLED);
        // The run's sleep 30 is gone long before it would have ended.
        assertThat(eventually(15_000, WorkerExecuteTest::idle)).isTrue();
    }

    @Test
    void aPassedDeadlineKillsTheRun() throws Exception {
        WorkerTesting.Recorded r = new WorkerTesting.Recorded(channel, null,
                io.grpc.CallOptions.DEFAULT.withDeadlineAfter(3, TimeUnit.SECONDS),
                request("bash", "echo started; sleep 30; echo never").build());
        assertThat(r.await().getCode()).isEqualTo(Status.Code.DEADLINE_EXCEEDED);
        assertThat(r.events.getFirst().hasAccepted()).isTrue();
        assertThat(r.stdout()).isEqualTo("started\n");
        assertThat(eventually(15_000, WorkerExecuteTest::idle)).isTrue();
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

    @Test
    void trailersCarryOrcaLoadWhileTheWorkerIsBusy() throws Exception {
        WorkerTesting.Recorded busy = execute(channel, null, request("bash", "sleep 3").build());
        assertThat(eventually(30_000, busy::accepted)).isTrue();
        Thread.sleep(1000); // the load is a smoothed average: let it rise
        AtomicReference<Metadata> headers = new AtomicReference<>();
        AtomicReference<Metadata> trailers = new AtomicReference<>();
        StatusResponse status = WorkerTesting.blocking(channel, null)
                .withInterceptors(MetadataUtils.newCaptureMetadataInterceptor(headers, trailers))
                .status(StatusRequest.getDefaultInstance());
        assertThat(status.getRunning()).isEqualTo(1);
        byte[] raw = trailers.get().get(Metadata.Key.of("endpoint-load-metrics-bin", Metadata.BINARY_BYTE_MARSHALLER));
        assertThat(raw).isNotNull();
        OrcaLoadReport report = OrcaLoadReport.parseFrom(raw);
        assertThat(report.getApplicationUtilization()).isGreaterThan(0.1);
        assertThat(report.getRpsFractional()).isGreaterThan(0);
        busy.await();
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
