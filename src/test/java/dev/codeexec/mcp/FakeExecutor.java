package dev.codeexec.mcp;

import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.ExecutorStatus;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.engine.SessionControl;
import dev.codeexec.engine.WorkerStatus;

import java.util.List;
import java.util.Map;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * An executor that "runs" by interpreting the code as a tiny script, so surface tests control output, timing and
 * outcomes without a sandbox:
 * <ul>
 *   <li>{@code print:TEXT} prints TEXT and exits 0</li>
 *   <li>{@code exit:N} prints "boom" on stderr and exits N</li>
 *   <li>{@code stream:N} prints "line i" N times, one every 100 ms, on stdout (odd i on stderr), then exits 0</li>
 *   <li>{@code block} runs until cancelled (outcome cancelled)</li>
 *   <li>{@code sleep:MS} prints nothing for MS milliseconds, then "done"</li>
 *   <li>{@code busy} / {@code unavailable}: submit throws Busy / Unavailable</li>
 *   <li>{@code crash}: submit fails as a bug would, with {@link #CRASH} in its message</li>
 * </ul>
 * Set {@link #workers}, {@link #remote} and {@link #worker} to look like a gateway to the surfaces.
 */
public final class FakeExecutor implements Executor, ExecutorStatus {
    @Override
    public ExecutorStatus status() {
        return this;
    }


    public final List<ExecutionRequest> requests = new CopyOnWriteArrayList<>();
    public final AtomicInteger cancels = new AtomicInteger();
    public volatile CountDownLatch blockStarted = new CountDownLatch(1);
    public volatile boolean closed;
    /** What {@link #workers()} answers. */
    public volatile List<WorkerStatus> workers = List.of();
    /** What {@link #remote()} answers. */
    public volatile boolean remote;
    /** When set, the worker name each result carries (as a gateway's results do). */
    public volatile String worker;
    /** Open sessions per tenant, as {@link #sessions()} lists them and {@link #runtimeInfo()} counts them. */
    public volatile Map<String, Integer> sessionsByTenant = Map.of();
    private final Map<String, FakeRun> active = new ConcurrentHashMap<>();
    private final AtomicInteger ids = new AtomicInteger();
    /** The message of the {@code crash} fault: a server's internals, which no client may see. */
    public static final String CRASH = "index 7 out of bounds in /srv/secret/Engine.java";

    @Override
    public RunHandle submit(ExecutionRequest request, OutputListener listener) {
        if (closed) throw new ExecutionException.Unavailable("the server is shutting down");
        String code = request.code();
        if (code.equals("busy")) throw new ExecutionException.Busy("all 4 slots are busy and the queue is full");
        if (code.equals("unavailable")) throw new ExecutionException.Unavailable("sandbox bwrap is not usable: no user namespaces");
        if (code.equals("crash")) throw new IllegalStateException(CRASH);
        requests.add(request);
        FakeRun run = new FakeRun("run-" + ids.incrementAndGet(), request, listener);
        active.put(run.id, run);
        Thread.ofVirtual().start(run::execute);
        return run;
    }

    /** A worker as a gateway's status poll would report it; an unhealthy one carries an error and has not answered. */
    public static WorkerStatus worker(String address, String name, boolean healthy, int running, int slots) {
        return new WorkerStatus(address, healthy ? java.util.Optional.of(name) : java.util.Optional.empty(),
                healthy ? java.util.Optional.of("inst-" + name) : java.util.Optional.empty(), healthy, false, running,
                0, slots, healthy ? 1 : 0, Map.of("python", Map.of("ready", 1, "target", 2)),
                healthy ? java.util.Optional.of(java.time.Instant.parse("2026-11-30T12:00:00Z")) : java.util.Optional.empty(),
                healthy ? java.util.Optional.empty() : java.util.Optional.of("UNAVAILABLE: connection refused to 10.9.8.7"));
    }

    public int activeRuns() {
        return active.size();
    }

    @Override
    public Map<String, Object> runtimeInfo() {
        Map<String, Object> info = new java.util.LinkedHashMap<>(Map.of("sandbox", Map.of("kind", "fake"),
                "languages", Map.of("python", Map.of("available", true))));
        if (!sessionsByTenant.isEmpty()) info.put("sessions", Map.of("maxPerTenant", 8,
                "count", sessionsByTenant.values().stream().mapToInt(Integer::intValue).sum()));
        return info;
    }

    @Override
    public SessionControl sessions() {
        java.time.Instant now = java.time.Instant.now();
        return SessionControl.listing(tenant -> java.util.stream.IntStream.range(0, sessionsByTenant.getOrDefault(tenant, 0))
                .mapToObj(i -> new SessionControl.SessionInfo("s" + i, "python", java.util.Optional.empty(), now, now,
                        OptionalLong.empty(), 0, false)).toList());
    }

    @Override
    public List<WorkerStatus> workers() {
        return workers;
    }

    @Override
    public boolean remote() {
        return remote;
    }

    @Override
    public int running() {
        return active.size();
    }

    @Override
    public int queued() {
        return 0;
    }

    @Override
    public int maxConcurrent() {
        return 4;
    }

    @Override
    public void close() {
        closed = true;
        active.values().forEach(FakeRun::cancel);
    }

    private final class FakeRun implements RunHandle {
        final String id;
        final ExecutionRequest request;
        final OutputListener listener;
        final CompletableFuture<ExecutionResult> result = new CompletableFuture<>();
        final CountDownLatch cancelled = new CountDownLatch(1);

        FakeRun(String id, ExecutionRequest request, OutputListener listener) {
            this.id = id;
            this.request = request;
            this.listener = listener;
        }

        void execute() {
            long start = System.nanoTime();
            String code = request.code();
            StringBuilder out = new StringBuilder();
            StringBuilder err = new StringBuilder();
            int exit = 0;
            Outcome outcome = Outcome.EXITED;
            try {
                if (code.startsWith("print:")) {
                    out.append(code.substring(6));
                    listener.onOutput(OutputListener.Stream.STDOUT, code.substring(6));
                } else if (code.startsWith("exit:")) {
                    exit = Integer.parseInt(code.substring(5));
                    err.append("boom\n");
                    listener.onOutput(OutputListener.Stream.STDERR, "boom\n");
                } else if (code.startsWith("stream:")) {
                    int n = Integer.parseInt(code.substring(7));
                    for (int i = 0; i < n; i++) {
                        String line = "line " + i + "\n";
                        boolean stderr = i % 2 == 1;
                        (stderr ? err : out).append(line);
                        listener.onOutput(stderr ? OutputListener.Stream.STDERR : OutputListener.Stream.STDOUT, line);
                        if (cancelled.await(100, java.util.concurrent.TimeUnit.MILLISECONDS)) {
                            outcome = Outcome.CANCELLED;
                            exit = 137;
                            break;
                        }
                    }
                } else if (code.startsWith("sleep:")) {
                    if (cancelled.await(Long.parseLong(code.substring(6)), java.util.concurrent.TimeUnit.MILLISECONDS)) {
                        outcome = Outcome.CANCELLED;
                    } else {
                        out.append("done");
                    }
                } else if (code.equals("block")) {
                    blockStarted.countDown();
                    cancelled.await();
                    outcome = Outcome.CANCELLED;
                    exit = 137;
                    err.append("[terminated] cancelled\n");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                active.remove(id);
                ExecutionResult r = ExecutionResult.builder(request.language(), outcome).exitCode(exit)
                        .stdout(out.toString()).stderr(err.toString())
                        .durationMs((System.nanoTime() - start) / 1_000_000).peakMemoryBytes(OptionalLong.of(1234567))
                        .sandbox("fake").build();
                String by = worker;
                result.complete(by == null ? r : r.withWorker(by));
            }
        }

        @Override
        public String id() {
            return id;
        }

        @Override
        public CompletableFuture<ExecutionResult> result() {
            return result;
        }

        @Override
        public void cancel() {
            cancels.incrementAndGet();
            cancelled.countDown();
        }
    }
}
