package dev.codeexec.gateway;

import dev.codeexec.surface.ServerSetup;
import dev.codeexec.config.Config;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionRequest.AuditInfo;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.lang.Languages;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.engine.SessionControl;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.engine.WorkerStatus;
import dev.codeexec.testing.Poll;
import dev.codeexec.wire.v1.ExecuteEvent;
import dev.codeexec.wire.v1.Output;
import io.grpc.Status;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The gateway's executor against fake workers on loopback: balancing, retries, losses, cancel, sessions. */
@Tag("slow")
class RemoteExecutorTest {

    private final List<AutoCloseable> toClose = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (int i = toClose.size() - 1; i >= 0; i--) toClose.get(i).close();
    }

    private FakeWorker worker(String name) throws Exception {
        FakeWorker w = new FakeWorker(name);
        toClose.add(w);
        return w;
    }

    private RemoteExecutor gateway(List<FakeWorker> workers, String... extra) {
        List<String> pairs = new ArrayList<>(List.of("WORKERS",
                "static:///" + workers.stream().map(FakeWorker::address).collect(Collectors.joining(",")),
                "QUEUE_TIMEOUT_MS", "100", "SHUTDOWN_GRACE_SECONDS", "1"));
        pairs.addAll(Arrays.asList(extra));
        RemoteExecutor e = RemoteExecutor.create(Config.of(pairs.toArray(String[]::new)), Languages.load(),
                Duration.ofSeconds(1));
        toClose.add(e);
        return e;
    }

    static ExecutionRequest request(Duration timeout) {
        return ExecutionRequest.builder("python", "print(1)", new Limits(timeout, 10, 256L << 20, 64, 64 * 1024, 64L << 20))
                .build();
    }

    static ExecutionResult run(RemoteExecutor e, ExecutionRequest r) throws Exception {
        return e.submit(r, OutputListener.NONE).result().get(20, TimeUnit.SECONDS);
    }

    /** The gateway's session pins (test-only reflection: it offers no view of them). */
    private static Map<?, ?> pins(RemoteExecutor gw) throws Exception {
        java.lang.reflect.Field f = RemoteExecutor.class.getDeclaredField("pins");
        f.setAccessible(true);
        return (Map<?, ?>) f.get(gw);
    }

    private static Throwable failureOf(RunHandle h) throws Exception {
        try {
            h.result().get(20, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            return e.getCause();
        }
        throw new AssertionError("the run did not fail");
    }

    @Test
    void statelessRunsSpreadOverThreeHealthyWorkers() throws Exception {
        List<FakeWorker> ws = List.of(worker("w1"), worker("w2"), worker("w3"));
        RemoteExecutor gw = gateway(ws);
        for (int i = 0; i < 6; i++) run(gw, request(Duration.ofSeconds(5)));
        Map<String, Integer> before = new HashMap<>();
        ws.forEach(w -> before.put(w.name, w.ran.get()));
        Set<String> names = new HashSet<>();
        for (int i = 0; i < 30; i++) {
            ExecutionResult r = run(gw, request(Duration.ofSeconds(5)));
            assertThat(r.outcome()).isEqualTo(Outcome.EXITED);
            names.add(r.worker().orElseThrow());
        }
        assertThat(names).containsExactlyInAnyOrder("w1", "w2", "w3");
        for (FakeWorker w : ws) assertThat(w.ran.get() - before.get(w.name)).as(w.name).isGreaterThanOrEqualTo(5);
    }

    @Test
    void aFreshGatewayIsConnectedBeforeItsFirstCallAndSpreadsItsFirstBurst() throws Exception {
        List<FakeWorker> ws = List.of(worker("w1"), worker("w2"), worker("w3"));
        RemoteExecutor gw = gateway(ws);
        // connected once the workers are healthy, not on the first call (which gave a burst to the first READY one)
        Poll.until("the stateless channel connected without a call",
                () -> gw.statelessState() == io.grpc.ConnectivityState.READY);
        assertThat(ws.stream().mapToInt(w -> w.calls.get()).sum()).as("no Execute call yet").isZero();
        // every worker's connection, not only the first: each worker answered its health watch
        Poll.until("every worker's connection of the stateless channel is up",
                () -> ws.stream().allMatch(w -> w.healthWatchAnswers.get() > 0));
        List<RunHandle> burst = new ArrayList<>();
        for (int i = 0; i < 30; i++) burst.add(gw.submit(request(Duration.ofSeconds(5)), OutputListener.NONE));
        Map<String, Integer> counts = new HashMap<>();
        for (RunHandle h : burst) counts.merge(h.result().get(20, TimeUnit.SECONDS).worker().orElseThrow(), 1, Integer::sum);
        assertThat(counts).as("no worker got more than half of the first burst: %s", counts)
                .containsOnlyKeys("w1", "w2", "w3").allSatisfy((w, n) -> assertThat(n).isLessThanOrEqualTo(15));
    }

    @Test
    void aNotServingWorkerGetsNoRuns() throws Exception {
        FakeWorker w1 = worker("w1"), w2 = worker("w2"), w3 = worker("w3");
        w2.serving(false);
        RemoteExecutor gw = gateway(List.of(w1, w2, w3));
        for (int i = 0; i < 20; i++) {
            ExecutionResult r = run(gw, request(Duration.ofSeconds(5)));
            assertThat(r.outcome()).as("run %d: %s", i, r.stderr()).isEqualTo(Outcome.EXITED);
            assertThat(r.worker()).isNotEqualTo(Optional.of("w2"));
        }
        assertThat(w2.calls.get()).isZero();
        assertThat(w1.ran.get() + w3.ran.get()).isEqualTo(20);
        // Each accepted call was answered with start: the go-ahead that lets a worker begin the run. (Polled: CI
        // once read 19 here right after the 20th result.)
        Poll.until("20 starts counted", () -> w1.starts.get() + w3.starts.get() == 20);
    }

    @Test
    void aRefusalBeforeAcceptedIsRetriedElsewhereAndNeverRanOnTheRefusingWorker() throws Exception {
        FakeWorker refusing = worker("refusing"), good = worker("good");
        refusing.behaviour = (w, req, out) -> out.onError(Status.UNAVAILABLE.withDescription("draining").asRuntimeException());
        RemoteExecutor gw = gateway(List.of(refusing, good));
        for (int i = 0; i < 12; i++) {
            ExecutionResult r = run(gw, request(Duration.ofSeconds(5)));
            assertThat(r.outcome()).isEqualTo(Outcome.EXITED);
            assertThat(r.worker()).contains("good");
        }
        assertThat(refusing.calls.get()).as("calls that reached the refusing worker").isPositive();
        assertThat(refusing.ran.get()).isZero();
        assertThat(good.ran.get()).isEqualTo(12);
    }

    @Test
    void aWorkerThatDiesAfterAcceptingGivesWorkerLostWithPartialOutputAndIsNotRetried() throws Exception {
        // The worker dies once the gateway has passed both outputs on to the caller.
        CountDownLatch bothOutputsSeen = new CountDownLatch(2);
        FakeWorker.Behaviour dies = (w, req, out) -> {
            w.accept(out);
            out.onNext(ExecuteEvent.newBuilder().setOutput(Output.newBuilder().setText("partial\n")).build());
            out.onNext(ExecuteEvent.newBuilder().setOutput(Output.newBuilder().setStream(Output.Stream.STDERR)
                    .setText("warn")).build());
            Thread.ofVirtual().start(() -> {
                try {
                    bothOutputsSeen.await();
                } catch (InterruptedException ignored) {
                    return;
                }
                w.kill();
            });
        };
        FakeWorker a = worker("a"), b = worker("b");
        a.behaviour = dies;
        b.behaviour = dies;
        RemoteExecutor gw = gateway(List.of(a, b));
        List<String> seen = new java.util.concurrent.CopyOnWriteArrayList<>();
        CountDownLatch started = new CountDownLatch(1);
        RunHandle h = gw.submit(request(Duration.ofSeconds(5)), new OutputListener() {
            @Override
            public void onOutput(Stream stream, String text) {
                seen.add(text);
                bothOutputsSeen.countDown();
            }

            @Override
            public boolean onStart(String runId) {
                started.countDown();
                return true;
            }
        });
        ExecutionResult r = h.result().get(20, TimeUnit.SECONDS);
        assertThat(started.getCount()).isZero();
        assertThat(r.outcome()).isEqualTo(Outcome.WORKER_LOST);
        assertThat(r.exitCode()).isEqualTo(-1);
        assertThat(r.stdout()).isEqualTo("partial\n");
        assertThat(r.stderr()).startsWith("warn\n[terminated] worker lost: ")
                .endsWith("; the run's outcome is unknown and it was not re-run\n");
        assertThat(r.worker()).isPresent();
        assertThat(r.stderr()).contains(r.worker().get());
        assertThat(seen).containsExactly("partial\n", "warn");
        // Nothing of the run is left at the gateway (it forgets a run before publishing its result), so no retry
        // can still be on its way to a worker: the count of accepted runs is final.
        assertThat(gw.running() + gw.queued()).isZero();
        assertThat(a.ran.get() + b.ran.get()).as("runs started in total").isEqualTo(1);
    }

    @Test
    void cancelReachesTheWorkerAndTheResultSaysCancelled() throws Exception {
        FakeWorker w = worker("w");
        w.behaviour = (fw, req, out) -> {
            fw.accept(out);
            out.onNext(ExecuteEvent.newBuilder().setOutput(Output.newBuilder().setText("working\n")).build());
        };
        RemoteExecutor gw = gateway(List.of(w));
        CountDownLatch output = new CountDownLatch(1);
        RunHandle h = gw.submit(request(Duration.ofSeconds(30)), (stream, text) -> output.countDown());
        assertThat(output.await(10, TimeUnit.SECONDS)).isTrue();
        assertThat(gw.running()).isEqualTo(1);
        h.cancel();
        ExecutionResult r = h.result().get(10, TimeUnit.SECONDS);
        assertThat(r.outcome()).isEqualTo(Outcome.CANCELLED);
        assertThat(r.exitCode()).isEqualTo(-1);
        assertThat(r.stdout()).isEqualTo("working\n");
        assertThat(r.stderr()).endsWith("[terminated] cancelled\n");
        assertThat(r.worker()).contains("w");
        Poll.until("the worker sees its call cancelled", () -> w.cancelled.get() == 1);
    }

    @Test
    void aWorkerThatNeverAcceptsEndsUnavailableAtTheDeadline() throws Exception {
        FakeWorker silent = worker("silent");
        silent.behaviour = (w, req, out) -> { };
        RemoteExecutor gw = gateway(List.of(silent));
        // deadline = 300 ms timeout + 100 ms QUEUE_TIMEOUT_MS + 1 s slack (this test's)
        Throwable t = failureOf(gw.submit(request(Duration.ofMillis(300)), OutputListener.NONE));
        assertThat(t).isInstanceOf(ExecutionException.Unavailable.class)
                .hasMessageContaining("no worker could take the run").hasMessageContaining("before its deadline");
        assertThat(silent.ran.get()).isZero();
        // The expired call is cancelled at the worker, so nothing there keeps waiting on it. On a loaded machine the
        // deadline can pass before the call reached the worker at all; then gRPC never starts its handler there, and
        // there is nothing to cancel: every call that reached the worker is cancelled, whichever happened.
        Poll.until("every call that reached the worker is cancelled there", () -> silent.cancelled.get() == silent.opened.get());
    }

    @Test
    void aWorkerThatAcceptsAndHangsEndsWorkerLostAtTheDeadline() throws Exception {
        FakeWorker hung = worker("hung");
        hung.behaviour = (w, req, out) -> w.accept(out);
        RemoteExecutor gw = gateway(List.of(hung));
        ExecutionResult r = run(gw, request(Duration.ofMillis(300)));
        assertThat(r.outcome()).isEqualTo(Outcome.WORKER_LOST);
        assertThat(r.stderr()).contains("worker lost: hung").contains("within its deadline");
        Poll.until("the worker sees the deadline", () -> hung.cancelled.get() == 1);
    }

    @Test
    void invalidArgumentAndResourceExhaustedBecomeTheEngineExceptions() throws Exception {
        FakeWorker w = worker("w");
        RemoteExecutor gw = gateway(List.of(w));
        w.behaviour = (fw, req, out) -> out.onError(Status.INVALID_ARGUMENT.withDescription("unknown language 'cobol'")
                .asRuntimeException());
        assertThat(failureOf(gw.submit(request(Duration.ofSeconds(5)), OutputListener.NONE)))
                .isInstanceOf(ExecutionException.InvalidRequest.class).hasMessage("unknown language 'cobol'");
        w.behaviour = (fw, req, out) -> out.onError(Status.RESOURCE_EXHAUSTED.withDescription("queue full")
                .asRuntimeException());
        int before = w.calls.get();
        assertThat(failureOf(gw.submit(request(Duration.ofSeconds(5)), OutputListener.NONE)))
                .isInstanceOf(ExecutionException.Busy.class).hasMessageContaining("queue full");
        assertThat(w.calls.get() - before).as("RESOURCE_EXHAUSTED is retried (5 attempts)").isEqualTo(5);
    }

    @Test
    void sessionsArePinnedAndTwoGatewaysAgree() throws Exception {
        List<FakeWorker> ws = List.of(worker("w1"), worker("w2"), worker("w3"));
        RemoteExecutor a = gateway(ws);
        RemoteExecutor b = gateway(ws);
        Map<String, Integer> perWorker = new HashMap<>();
        for (int i = 0; i < 50; i++) {
            ExecutionRequest r = request(Duration.ofSeconds(5)).inSession(new SessionRef("tenant-a", "s" + i));
            String first = run(a, r).worker().orElseThrow();
            assertThat(run(a, r).worker()).as("s" + i + " again").contains(first);
            assertThat(run(b, r).worker()).as("s" + i + " at the other gateway").contains(first);
            perWorker.merge(first, 1, Integer::sum);
        }
        assertThat(perWorker.keySet()).as("sessions spread").hasSizeGreaterThan(1);
        // The second call at gateway a named the worker process it expects; b (no pin yet) did not.
        assertThat(ws.stream().flatMap(w -> w.requests.stream()).filter(q -> !q.getSessionWorker().isEmpty())
                .count()).isEqualTo(50);
    }

    @Test
    void aSessionWhoseWorkerRestartedIsReportedLostOnceThenStartsAfresh() throws Exception {
        FakeWorker w = worker("w1");
        RemoteExecutor gw = gateway(List.of(w));
        ExecutionRequest r = request(Duration.ofSeconds(5)).inSession(new SessionRef("t", "notebook"));
        assertThat(run(gw, r).outcome()).isEqualTo(Outcome.EXITED);
        String oldInstance = w.instanceId;
        w.restart();
        ExecutionResult lost = run(gw, r);
        assertThat(lost.outcome()).isEqualTo(Outcome.FAILED_TO_START);
        assertThat(lost.exitCode()).isEqualTo(-1);
        assertThat(lost.stderr()).contains("the session 'notebook' was lost with its worker")
                .contains(oldInstance).contains("its state is gone; the next call starts a new session");
        assertThat(lost.session()).hasValueSatisfying(s -> {
            assertThat(s.name()).isEqualTo("notebook");
            assertThat(s.created()).isFalse();
        });
        int before = w.requests.size();
        assertThat(run(gw, r).outcome()).isEqualTo(Outcome.EXITED);
        assertThat(w.requests.get(before).getSessionWorker()).as("no stale session_worker after the notice").isEmpty();
        assertThat(w.requests.get(before - 1).getSessionWorker()).isEqualTo(oldInstance);
    }

    @Test
    void sessionListFansOutAndCloseGoesToTheSessionsWorker() throws Exception {
        List<FakeWorker> ws = List.of(worker("w1"), worker("w2"), worker("w3"));
        RemoteExecutor gw = gateway(ws);
        for (int i = 0; i < 8; i++) run(gw, request(Duration.ofSeconds(5)).inSession(new SessionRef("t", "s" + i)));
        run(gw, request(Duration.ofSeconds(5)).inSession(new SessionRef("other", "x")));
        assertThat(ws.stream().filter(w -> !w.sessions.isEmpty()).count()).isGreaterThan(1);
        List<SessionControl.SessionInfo> list = gw.sessions().list("t");
        assertThat(list).extracting(SessionControl.SessionInfo::name)
                .containsExactly("s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7");
        assertThat(gw.sessions().close("t", "s3")).isTrue();
        assertThat(gw.sessions().close("t", "s3")).isFalse();
        assertThat(gw.sessions().reset("t", "s4")).isTrue();
        assertThat(gw.sessions().list("t")).extracting(SessionControl.SessionInfo::name).doesNotContain("s3");
        gw.pollNow();
        assertThat(gw.sessions().count()).isEqualTo(8);
    }

    @Test
    void theTokenTravelsInEveryCallAndAWrongOneIsRefusedWithoutRunning() throws Exception {
        FakeWorker w = worker("w");
        w.requiredToken = "s3cret";
        RemoteExecutor good = gateway(List.of(w), "WORKER_TOKEN", "s3cret");
        assertThat(run(good, request(Duration.ofSeconds(5))).outcome()).isEqualTo(Outcome.EXITED);
        assertThat(w.authHeaders).contains("Bearer s3cret");
        assertThat(good.workers()).allMatch(WorkerStatus::healthy);

        RemoteExecutor wrong = gateway(List.of(w), "WORKER_TOKEN", "guess");
        int ranBefore = w.ran.get();
        assertThat(failureOf(wrong.submit(request(Duration.ofSeconds(5)), OutputListener.NONE)))
                .isInstanceOf(ExecutionException.Unavailable.class).hasMessageContaining("credentials")
                .hasMessageNotContaining("guess");
        RemoteExecutor none = gateway(List.of(w));
        assertThat(failureOf(none.submit(request(Duration.ofSeconds(5)), OutputListener.NONE)))
                .isInstanceOf(ExecutionException.Unavailable.class);
        assertThat(w.ran.get()).isEqualTo(ranBefore);
        assertThat(none.workers()).as("status is refused without the token").noneMatch(WorkerStatus::healthy);
    }

    @Test
    void workersShowHealthLoadAndWarmPoolAndFollowAWorkerGoingUnhealthy() throws Exception {
        FakeWorker w1 = worker("w1"), w2 = worker("w2"), w3 = worker("w3");
        RemoteExecutor gw = gateway(List.of(w1, w2, w3));
        List<WorkerStatus> all = gw.workers();
        assertThat(all).extracting(WorkerStatus::address)
                .containsExactlyElementsOf(List.of(w1, w2, w3).stream().map(FakeWorker::address).sorted().toList());
        assertThat(all).allMatch(WorkerStatus::healthy);
        assertThat(all).extracting(s -> s.name().orElseThrow()).containsExactlyInAnyOrder("w1", "w2", "w3");
        assertThat(gw.maxConcurrent()).isEqualTo(12);
        assertThat(gw.warmPoolLevels()).isEqualTo(Map.of("python", Map.of("ready", 3, "target", 6)));
        assertThat(gw.runtimeInfo()).containsEntry("mode", "gateway").containsKey("languages");

        w2.serving(false);
        Poll.until("w2 shown unhealthy",
                () -> gw.workers().stream().anyMatch(s -> s.name().equals(Optional.of("w2")) && !s.healthy()));
        assertThat(gw.maxConcurrent()).isEqualTo(8);
        w3.kill();
        Poll.until("w3 shown unhealthy after it died",
                () -> gw.workers().stream().filter(WorkerStatus::healthy).count() == 1);
        assertThat(gw.workers().stream().filter(s -> s.address().equals(w3.address())).findFirst().orElseThrow().error())
                .isPresent();
    }

    @Test
    void withNoWorkerReachableRuntimeInfoStillAnswersAndRunsAreUnavailable() throws Exception {
        FakeWorker w = worker("w");
        w.kill();
        RemoteExecutor gw = gateway(List.of(w));
        Map<String, Object> info = gw.runtimeInfo();
        assertThat(info).containsEntry("mode", "gateway").containsKey("note");
        assertThat(((Map<?, ?>) info.get("languages")).containsKey("python")).isTrue();
        assertThat(gw.maxConcurrent()).isZero();
        assertThatThrownBy(() -> gw.submit(request(Duration.ofSeconds(1)), OutputListener.NONE).result().get(20, TimeUnit.SECONDS))
                .hasCauseInstanceOf(ExecutionException.Unavailable.class);
    }

    @Test
    void closeCancelsRunsThatOutliveTheGrace() throws Exception {
        FakeWorker w = worker("w");
        w.behaviour = (fw, req, out) -> fw.accept(out);
        RemoteExecutor gw = gateway(List.of(w));
        CountDownLatch started = new CountDownLatch(1);
        RunHandle h = gw.submit(request(Duration.ofSeconds(60)), new OutputListener() {
            @Override
            public void onOutput(Stream stream, String text) {
            }

            @Override
            public boolean onStart(String runId) {
                started.countDown();
                return true;
            }
        });
        assertThat(started.await(10, TimeUnit.SECONDS)).isTrue();
        gw.close();
        assertThat(h.result().get(5, TimeUnit.SECONDS).outcome()).isEqualTo(Outcome.CANCELLED);
        Poll.until("the worker sees the cancel", () -> w.cancelled.get() == 1);
        assertThatThrownBy(() -> gw.submit(request(Duration.ofSeconds(1)), OutputListener.NONE))
                .isInstanceOf(ExecutionException.Unavailable.class);
    }

    @Test
    void leastRequestBalancingAlsoSpreadsAndSkipsANotServingWorker() throws Exception {
        FakeWorker w1 = worker("w1"), w2 = worker("w2"), w3 = worker("w3");
        w3.serving(false);
        RemoteExecutor gw = gateway(List.of(w1, w2, w3), "WORKER_BALANCING", "least_request");
        Set<String> names = new HashSet<>();
        for (int i = 0; i < 30; i++) names.add(run(gw, request(Duration.ofSeconds(5))).worker().orElseThrow());
        assertThat(names).containsExactlyInAnyOrder("w1", "w2");
        assertThat(w3.calls.get()).isZero();
    }

    @Test
    void productionWiringUsesTheWorkersWhenWorkersIsSet(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
            throws Exception {
        FakeWorker w = worker("w");
        dev.codeexec.surface.ServerSetup setup = dev.codeexec.Main.wire(Config.of("WORKERS", "static:///" + w.address(),
                "WORKSPACE_ROOT", dir.toString(), "SHUTDOWN_GRACE_SECONDS", "1"), List.of());
        toClose.add(setup.executor());
        assertThat(setup.executor()).isInstanceOf(RemoteExecutor.class);
        assertThat(setup.sandbox().name()).isEqualTo("workers");
        assertThat(setup.sandbox().available()).isTrue();
        assertThat(setup.languages()).contains("python");
        assertThatThrownBy(() -> setup.arguments().parse(Map.of("language", "cobol", "code", "x"), null))
                .as("requests are validated at the gateway").isInstanceOf(ExecutionException.InvalidRequest.class);
        assertThat(run((RemoteExecutor) setup.executor(), request(Duration.ofSeconds(5))).worker()).contains("w");
    }

    @Test
    void aDnsTargetFindsItsWorkersByLookingTheNameUp() throws Exception {
        FakeWorker w = worker("w");
        RemoteExecutor gw = RemoteExecutor.create(Config.of("WORKERS", "dns:///localhost:" + w.port,
                "SHUTDOWN_GRACE_SECONDS", "1"), Languages.load(), Duration.ofSeconds(1));
        toClose.add(gw);
        assertThat(run(gw, request(Duration.ofSeconds(5))).worker()).contains("w");
        // localhost may also resolve to ::1, where nothing listens: that address is listed, not healthy
        assertThat(gw.workers()).filteredOn(WorkerStatus::healthy).extracting(WorkerStatus::address)
                .containsExactly(w.address());
    }

    @Test
    void aKilledWorkerIsAvoidedAndRejoinsAfterItsRestart() throws Exception {
        FakeWorker w1 = worker("w1"), w2 = worker("w2"), w3 = worker("w3");
        RemoteExecutor gw = gateway(List.of(w1, w2, w3));
        for (int i = 0; i < 6; i++) run(gw, request(Duration.ofSeconds(5)));
        w1.kill();
        for (int i = 0; i < 20; i++) {
            ExecutionResult r = run(gw, request(Duration.ofSeconds(5)));
            assertThat(r.outcome()).isEqualTo(Outcome.EXITED);
            assertThat(r.worker()).isNotEqualTo(Optional.of("w1"));
        }
        Poll.until("w1 shown unhealthy",
                () -> gw.workers().stream().anyMatch(s -> s.address().equals(w1.address()) && !s.healthy()));
        // Connects to w1's address fail several times, so grpc's reconnect backoff has grown: a listener on its
        // port counts them, resetting each at once (SO_LINGER 0: nothing of them is left on the port).
        w1.close();
        try (ServerSocket refuser = new ServerSocket()) {
            refuser.setReuseAddress(true);
            refuser.bind(new InetSocketAddress("127.0.0.1", w1.port));
            AtomicInteger connects = new AtomicInteger();
            Thread.ofVirtual().start(() -> {
                while (true) {
                    try (Socket accepted = refuser.accept()) {
                        accepted.setSoLinger(true, 0);
                        connects.incrementAndGet();
                    } catch (IOException closed) {
                        return;
                    }
                }
            });
            Poll.until("four failed connects to w1's address", () -> connects.get() >= 4);
        }
        int before = w1.ran.get();
        w1.restart();
        Poll.until("runs reach the restarted w1", () -> {
            run(gw, request(Duration.ofSeconds(5)));
            return w1.ran.get() > before;
        });
    }

    @Test
    void aSessionCallWhoseWorkerDiesIsLostAndTheNextCallSaysTheSessionIsGone() throws Exception {
        FakeWorker w = worker("w1");
        RemoteExecutor gw = gateway(List.of(w));
        ExecutionRequest r = request(Duration.ofSeconds(5)).inSession(new SessionRef("t", "nb"));
        assertThat(run(gw, r).outcome()).isEqualTo(Outcome.EXITED);
        w.behaviour = (fw, req, out) -> {
            fw.accept(out);
            Thread.ofVirtual().start(fw::kill);
        };
        ExecutionResult lost = run(gw, r);
        assertThat(lost.outcome()).isEqualTo(Outcome.WORKER_LOST);
        assertThat(lost.session()).hasValueSatisfying(s -> assertThat(s.name()).isEqualTo("nb"));
        w.behaviour = FakeWorker.NORMAL;
        w.restart();
        ExecutionResult notice = run(gw, r);
        assertThat(notice.outcome()).as(notice.stderr()).isEqualTo(Outcome.FAILED_TO_START);
        assertThat(notice.stderr()).contains("the session 'nb' was lost with its worker");
        assertThat(run(gw, r).outcome()).isEqualTo(Outcome.EXITED);
    }

    @Test
    void gatewayExpiryLeavesAWorkspaceAloneWhileAWorkerRunsInIt(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp)
            throws Exception {
        java.nio.file.Files.setPosixFilePermissions(tmp,
                java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        dev.codeexec.workspace.Workspaces spaces = new dev.codeexec.workspace.Workspaces(tmp.resolve("ws"), 1 << 20,
                Duration.ofHours(1), 65534, 65534);
        dev.codeexec.workspace.Workspace ws = spaces.open("alice", "proj", true);
        java.nio.file.Path dir = tmp.resolve("ws/alice/proj");
        java.time.Instant old = java.time.Instant.now().minus(Duration.ofDays(2));
        java.nio.file.Files.setLastModifiedTime(dir, java.nio.file.attribute.FileTime.from(old));
        FakeWorker w = worker("w1");
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        w.behaviour = (fw, req, out) -> {
            fw.accept(out);
            Thread.ofVirtual().start(() -> {
                try {
                    release.await();
                } catch (InterruptedException e) {
                    return;
                }
                out.onNext(ExecuteEvent.newBuilder().setResult(fw.result(req, "done\n")).build());
                out.onCompleted();
            });
        };
        RemoteExecutor gw = gateway(List.of(w));
        RunHandle h = gw.submit(request(Duration.ofSeconds(10)).inWorkspace(ws), OutputListener.NONE);
        Poll.until("the worker accepted the run", () -> w.ran.get() == 1);
        // Idle for two days by its mtime, but a worker runs in it: the gateway's sweep must skip it.
        assertThat(spaces.expire(java.time.Instant.now())).isZero();
        assertThat(dir).isDirectory();
        release.countDown();
        assertThat(h.result().get(10, TimeUnit.SECONDS).outcome()).isEqualTo(Outcome.EXITED);
        java.nio.file.Files.setLastModifiedTime(dir, java.nio.file.attribute.FileTime.from(old));
        assertThat(spaces.expire(java.time.Instant.now())).isEqualTo(1);
    }

    @Test
    void callsOnOrPinnedToAWorkerThatStopsAnsweringEndWithoutWaitingForTheirDeadline() throws Exception {
        FakeWorker w = worker("w1");
        RemoteExecutor gw = gateway(List.of(w));
        SessionRef ref = new SessionRef("t", "nb");
        assertThat(run(gw, request(Duration.ofSeconds(5)).inSession(ref)).outcome()).isEqualTo(Outcome.EXITED);
        // Accepts, then goes silent with its status too: a hung process whose connection looks alive.
        w.behaviour = (fw, req, out) -> fw.accept(out);
        RunHandle accepted = gw.submit(request(Duration.ofSeconds(60)), OutputListener.NONE);
        Poll.until("the stateless run was accepted", () -> w.ran.get() >= 2);
        w.behaviour = (fw, req, out) -> { };
        w.hung = true;
        RunHandle pinned = gw.submit(request(Duration.ofSeconds(60)).inSession(ref), OutputListener.NONE);
        ExecutionResult lost = accepted.result().get(60, TimeUnit.SECONDS);
        ExecutionResult unreachable = pinned.result().get(60, TimeUnit.SECONDS);
        // Deadlines are 60 s + queue + slack: these ended because the polls saw the silence (10 s of it), as the
        // message says; at the deadline it would say so.
        assertThat(lost.outcome()).isEqualTo(Outcome.WORKER_LOST);
        assertThat(lost.stderr()).contains("worker lost").contains("has not answered");
        assertThat(unreachable.outcome()).isEqualTo(Outcome.FAILED_TO_START);
        assertThat(unreachable.stderr()).contains("[session unavailable]").contains("has not answered");
        // The session keeps its pin: once the worker answers again, the session goes on there.
        w.hung = false;
        w.behaviour = FakeWorker.NORMAL;
        Poll.until("the worker is healthy again", () -> gw.workers().getFirst().healthy());
        ExecutionResult again = run(gw, request(Duration.ofSeconds(5)).inSession(ref));
        assertThat(again.outcome()).isEqualTo(Outcome.EXITED);
        assertThat(w.requests.getLast().getSessionWorker()).isEqualTo(w.instanceId);
    }

    @Test
    void aPinOlderThanTheSessionIdleTimeIsForgotten() throws Exception {
        FakeWorker w = worker("w1");
        RemoteExecutor gw = gateway(List.of(w), "SESSION_IDLE_SECONDS", "1");
        SessionRef ref = new SessionRef("t", "idle");
        assertThat(run(gw, request(Duration.ofSeconds(5)).inSession(ref)).outcome()).isEqualTo(Outcome.EXITED);
        assertThat(w.requests.getLast().getSessionWorker()).isEmpty();
        // The session idled out on its worker long ago, then the worker restarted (a new process): the next call
        // is a plain new session, not a "[session lost]" about state that had expired anyway.
        Poll.until("a status poll after SESSION_IDLE_SECONDS dropped the pin", () -> pins(gw).isEmpty());
        w.instanceId = java.util.UUID.randomUUID().toString();
        w.sessions.clear();
        ExecutionResult r = run(gw, request(Duration.ofSeconds(5)).inSession(ref));
        assertThat(r.outcome()).isEqualTo(Outcome.EXITED);
        assertThat(w.requests.getLast().getSessionWorker()).isEmpty();
        // Fresh pins still count: right away, the next call names the instance it was just seen on.
        run(gw, request(Duration.ofSeconds(5)).inSession(ref));
        assertThat(w.requests.getLast().getSessionWorker()).isEqualTo(w.instanceId);
    }
}
