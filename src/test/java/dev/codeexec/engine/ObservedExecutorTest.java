package dev.codeexec.engine;

import dev.codeexec.local.TestSupport;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ObservedExecutorTest {

    /** Hands out runs whose results the test completes by hand. */
    private static final class ManualExecutor implements Executor, ExecutorStatus {
        @Override
        public ExecutorStatus status() {
            return this;
        }

        final List<CompletableFuture<ExecutionResult>> futures = new CopyOnWriteArrayList<>();
        boolean refuse;

        @Override
        public RunHandle submit(ExecutionRequest request, OutputListener listener) {
            if (refuse) throw new ExecutionException.Busy("queue full");
            CompletableFuture<ExecutionResult> f = new CompletableFuture<>();
            futures.add(f);
            String id = "r" + futures.size();
            return new RunHandle() {
                public String id() { return id; }
                public CompletableFuture<ExecutionResult> result() { return f; }
                public void cancel() { }
            };
        }

        public Map<String, Object> runtimeInfo() { return Map.of("k", "v"); }
        public int running() { return 3; }
        public int queued() { return 2; }
        public int maxConcurrent() { return 4; }
        public void close() { }
    }

    private static final class Recorder implements RunObserver {
        final List<RunStart> starts = new CopyOnWriteArrayList<>();
        final List<RunEnd> ends = new CopyOnWriteArrayList<>();

        @Override
        public void submitted(RunStart run) { starts.add(run); }

        @Override
        public void finished(RunEnd run) { ends.add(run); }
    }

    private static ExecutionRequest request(String tenant) {
        return ExecutionRequest.builder("python", "print(1)", RequestValidator.defaultLimits(TestSupport.config(), Duration.ofSeconds(5)))
                .audit(new ExecutionRequest.AuditInfo(Optional.of(tenant), Optional.empty(), Optional.of("req-1")))
                .build();
    }

    private static ExecutionResult result() {
        return ExecutionResult.builder("python", Outcome.EXITED).exitCode(0).stdout("1\n").durationMs(12)
                .sandbox("fake").build();
    }

    @Test
    void observersSeeTheStartAndTheResultOfEachRun() {
        ManualExecutor inner = new ManualExecutor();
        Recorder rec = new Recorder();
        ObservedExecutor ex = new ObservedExecutor(inner, List.of(rec));

        RunHandle h = ex.submit(request("alice"), OutputListener.NONE);
        assertThat(rec.starts).singleElement().satisfies(s -> {
            assertThat(s.id()).isEqualTo(h.id());
            assertThat(s.request().audit().tenant()).contains("alice");
        });
        assertThat(rec.ends).isEmpty();

        inner.futures.getFirst().complete(result());
        assertThat(rec.ends).singleElement().satisfies(e -> {
            assertThat(e.start().id()).isEqualTo(h.id());
            assertThat(e.result()).map(ExecutionResult::stdout).contains("1\n");
            assertThat(e.error()).isEmpty();
            assertThat(e.endedAt()).isAfterOrEqualTo(e.start().submittedAt());
        });
    }

    @Test
    void aRunThatFailsToBeAttemptedReachesObserversWithItsError() {
        ManualExecutor inner = new ManualExecutor();
        Recorder rec = new Recorder();
        ObservedExecutor ex = new ObservedExecutor(inner, List.of(rec));
        ex.submit(request("bob"), OutputListener.NONE);
        inner.futures.getFirst().completeExceptionally(new ExecutionException.Busy("queue timeout"));
        assertThat(rec.ends).singleElement().satisfies(e -> {
            assertThat(e.result()).isEmpty();
            assertThat(e.error()).get().isInstanceOf(ExecutionException.Busy.class);
        });
    }

    @Test
    void aRefusedSubmitStillThrowsToTheCallerAndIsObservedAsRejected() {
        ManualExecutor inner = new ManualExecutor();
        inner.refuse = true;
        Recorder rec = new Recorder();
        ObservedExecutor ex = new ObservedExecutor(inner, List.of(rec));
        assertThatThrownBy(() -> ex.submit(request("bob"), OutputListener.NONE))
                .isInstanceOf(ExecutionException.Busy.class);
        assertThat(rec.starts).singleElement().satisfies(s -> assertThat(s.id()).startsWith("rejected-"));
        assertThat(rec.ends).singleElement().satisfies(e -> {
            assertThat(e.result()).isEmpty();
            assertThat(e.error()).get().isInstanceOf(ExecutionException.Busy.class);
        });
    }

    @Test
    void aThrowingObserverDoesNotStopTheOthersOrTheRun() {
        ManualExecutor inner = new ManualExecutor();
        Recorder rec = new Recorder();
        RunObserver bad = new RunObserver() {
            @Override
            public void submitted(RunStart run) { throw new IllegalStateException("boom"); }

            @Override
            public void finished(RunEnd run) { throw new IllegalStateException("boom"); }
        };
        ObservedExecutor ex = new ObservedExecutor(inner, List.of(bad, rec));
        RunHandle h = ex.submit(request("carol"), OutputListener.NONE);
        inner.futures.getFirst().complete(result());
        assertThat(h.result()).isCompletedWithValueMatching(r -> r.exitCode() == 0);
        assertThat(rec.starts).hasSize(1);
        assertThat(rec.ends).hasSize(1);
    }

    @Test
    void everythingElseIsTheDelegates() {
        ManualExecutor inner = new ManualExecutor();
        ObservedExecutor ex = new ObservedExecutor(inner, List.of());
        assertThat(ex.status().running()).isEqualTo(3);
        assertThat(ex.status().queued()).isEqualTo(2);
        assertThat(ex.status().maxConcurrent()).isEqualTo(4);
        assertThat(ex.runtimeInfo()).containsEntry("k", "v");
        assertThat(ex.delegate()).isSameAs(inner);
    }

    @Test
    void whoeverWaitsForTheResultFindsTheObserversAlreadyTold() {
        ManualExecutor inner = new ManualExecutor();
        Recorder rec = new Recorder();
        ObservedExecutor ex = new ObservedExecutor(inner, List.of(rec));
        RunHandle h = ex.submit(request("dave"), OutputListener.NONE);
        List<Integer> endsSeenByTheCaller = new CopyOnWriteArrayList<>();
        h.result().thenRun(() -> endsSeenByTheCaller.add(rec.ends.size()));
        // a dependant registered on the engine's own future after ours runs before ours: the trap this avoids
        inner.futures.getFirst().thenRun(() -> { });
        inner.futures.getFirst().complete(result());
        assertThat(endsSeenByTheCaller).containsExactly(1);
    }

    @Test
    void anUnexpectedFailureReachesObserversWithoutItsInternalText() {
        ManualExecutor inner = new ManualExecutor();
        Recorder rec = new Recorder();
        ObservedExecutor ex = new ObservedExecutor(inner, List.of(rec));
        RunHandle h = ex.submit(request("erin"), OutputListener.NONE);
        inner.futures.getFirst().completeExceptionally(new IllegalStateException("/srv/secret/path exploded"));
        assertThat(rec.ends).singleElement().satisfies(e -> assertThat(e.error()).get()
                .satisfies(err -> assertThat(err.getMessage()).isEqualTo("the run failed inside the server")));
        assertThat(h.result()).isCompletedExceptionally();
    }
}
