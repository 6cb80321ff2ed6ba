package dev.codeexec.ops;

import dev.codeexec.engine.RunEnd;
import dev.codeexec.codemode.ToolCall;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.ExecutorStatus;
import dev.codeexec.engine.RunObserver;
import dev.codeexec.engine.WorkerStatus;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MultiGauge;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.jvm.ClassLoaderMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmGcMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.core.instrument.binder.system.UptimeMetrics;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.ToIntFunction;

/**
 * The server's Prometheus metrics (served at /metrics): runs as an {@link RunObserver} and a sandbox
 * {@link ExecutorStatus.StartListener}, engine levels as gauges read at scrape time, HTTP requests as the edge reports
 * them, and the JVM's own binders. Every tag value comes from a small fixed set (language ids, outcomes, route
 * groups, methods, status classes, worker addresses), never from a URI or other client text, so the number of
 * series stays bounded.
 *
 * <p>Meters (Prometheus names):
 * <ul>
 *   <li>{@code codeexec_executions_total{language,outcome}}: every run that ended, by how; runs refused before
 *   they could start (queue full, queue timeout, server unavailable) count with {@code outcome="rejected"}.</li>
 *   <li>{@code codeexec_execution_duration_seconds{language}}: how long programs ran (the run's own wall time,
 *   not its wait in the queue), histogram with buckets from 10 ms to 120 s.</li>
 *   <li>{@code codeexec_sandbox_start_seconds{language,start="warm"|"cold"}}: from a run beginning to start its
 *   sandbox (slot held) until its program was running; buckets from 1 ms to 10 s.</li>
 *   <li>{@code codeexec_queue_depth}, {@code codeexec_running}, {@code codeexec_max_concurrent}.</li>
 *   <li>{@code codeexec_warm_pool_ready{language}}, {@code codeexec_warm_pool_target{language}}.</li>
 *   <li>{@code codeexec_sessions_active}.</li>
 *   <li>Gateway only: {@code codeexec_worker_up{worker}} (1 healthy, 0 not), {@code codeexec_worker_running{worker}},
 *   {@code codeexec_worker_queued{worker}}, {@code codeexec_worker_slots{worker}} ({@code worker} = the address
 *   the gateway connects to), and {@code codeexec_workers{state="healthy"|"unhealthy"}}. They follow the
 *   executor's current worker list at each scrape: a worker that is dropped (gone from DNS) loses its series.</li>
 *   <li>{@code codeexec_egress_connections_total{decision,reason}}: every connection a run asked the egress proxy
 *   for ({@code allowed}/{@code refused}/{@code failed}, reason codes of {@code egress.ConnectionRecord});
 *   {@code codeexec_egress_bytes_total{tenant,direction="out"|"in"}}: bytes through it. Tenants come from the
 *   server's own key file, so their number is the operator's.</li>
 *   <li>{@code codeexec_tool_calls_total{server,tool,outcome}}: code mode's tool calls ({@code ok}, or the reason
 *   it failed: {@code not_allowed}, {@code call_limit}, {@code timeout}, ...), from the first 100 calls a run
 *   records; the rest of a run's calls count as {@code server="-",tool="-",outcome="unrecorded"}.</li>
 *   <li>{@code codeexec_http_requests_seconds{method,status,route}}: status as a class ({@code 2xx}), route as a
 *   {@link Route} group.</li>
 *   <li>{@code jvm_*}, {@code process_*}, {@code system_cpu_*}: memory, GC, threads, class loading, CPU, uptime.</li>
 * </ul>
 */
public final class Metrics implements RunObserver, ExecutorStatus.StartListener, AutoCloseable {

    /** The Prometheus text exposition format, as /metrics answers it. */
    public static final String CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

    /** Outcome tag of a run refused before it could start. */
    static final String REJECTED = "rejected";

    private static final Duration[] RUN_BUCKETS = durations(10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000,
            30_000, 60_000, 120_000);
    private static final Duration[] START_BUCKETS = durations(1, 2, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500,
            5_000, 10_000);
    private static final Set<String> METHODS = Set.of("GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH");

    /** Where a request went, by the first segment of its path: the only path information a metric carries. */
    public enum Route {
        MCP, API, ADMIN, HEALTHZ, METRICS, OTHER;

        /** "/mcp" → MCP, "/api/workspaces/x" → API, "/admin/..." → ADMIN, anything unknown → OTHER. */
        public static Route of(String path) {
            if (path == null) return OTHER;
            return switch (firstSegment(path)) {
                case "mcp" -> MCP;
                case "api" -> API;
                case "admin" -> ADMIN;
                case "healthz" -> HEALTHZ;
                case "metrics" -> METRICS;
                default -> OTHER;
            };
        }

        private static String firstSegment(String path) {
            int from = path.startsWith("/") ? 1 : 0;
            int end = path.indexOf('/', from);
            return end < 0 ? path.substring(from) : path.substring(from, end);
        }

        String tag() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    private final JvmGcMetrics gc = new JvmGcMetrics();
    private final Executor executor;
    private final MultiGauge workerUp;
    private final MultiGauge workerRunning;
    private final MultiGauge workerQueued;
    private final MultiGauge workerSlots;
    private final MultiGauge workersByState;
    /** Whether the worker meters exist yet: a local server never gets them; a gateway keeps them once it had them. */
    private boolean workerMeters;

    private Metrics(Executor executor) {
        this.executor = executor;
        new ClassLoaderMetrics().bindTo(registry);
        new JvmMemoryMetrics().bindTo(registry);
        gc.bindTo(registry);
        new JvmThreadMetrics().bindTo(registry);
        new ProcessorMetrics().bindTo(registry);
        new UptimeMetrics().bindTo(registry);

        Gauge.builder("codeexec.queue.depth", executor, e -> e.status().queued()).strongReference(true)
                .description("Runs waiting for an execution slot").register(registry);
        Gauge.builder("codeexec.running", executor, e -> e.status().running()).strongReference(true)
                .description("Runs executing now").register(registry);
        Gauge.builder("codeexec.max.concurrent", executor, e -> e.status().maxConcurrent()).strongReference(true)
                .description("Runs that may execute at once (MAX_CONCURRENT)").register(registry);
        Gauge.builder("codeexec.sessions.active", executor, e -> e.sessions().count()).strongReference(true)
                .description("Stateful sessions open now, all tenants").register(registry);
        // The pool's languages are fixed when the executor starts; only their levels change.
        for (String language : executor.status().warmPoolLevels().keySet()) {
            Gauge.builder("codeexec.warm.pool.ready", executor, e -> level(e, language, "ready")).strongReference(true)
                    .tag("language", language).description("Warm sandboxes ready to take a run").register(registry);
            Gauge.builder("codeexec.warm.pool.target", executor, e -> level(e, language, "target")).strongReference(true)
                    .tag("language", language).description("Warm sandboxes the pool keeps ready").register(registry);
        }
        executor.status().packageStore().ifPresent(store -> {
            // Prometheus names: codeexec_package_installs_total, codeexec_package_store_{hits,misses,evictions}_total,
            // codeexec_package_install_failures_total, codeexec_package_store_bytes
            io.micrometer.core.instrument.FunctionCounter.builder("codeexec.package.installs", store, st -> st.counter("installs"))
                    .description("Package sets installed into the store").register(registry);
            io.micrometer.core.instrument.FunctionCounter.builder("codeexec.package.install.failures", store, st -> st.counter("failures"))
                    .description("Package installs that failed (nothing stored)").register(registry);
            io.micrometer.core.instrument.FunctionCounter.builder("codeexec.package.store.hits", store, st -> st.counter("hits"))
                    .description("Runs whose package set came from the store").register(registry);
            io.micrometer.core.instrument.FunctionCounter.builder("codeexec.package.store.misses", store, st -> st.counter("misses"))
                    .description("Runs whose package set had to be installed").register(registry);
            io.micrometer.core.instrument.FunctionCounter.builder("codeexec.package.store.evictions", store, st -> st.counter("evictions"))
                    .description("Store entries evicted to stay under PACKAGE_STORE_MB").register(registry);
            Gauge.builder("codeexec.package.store", store, dev.codeexec.packages.PackageStore::bytes).baseUnit("bytes").strongReference(true)
                    .description("Bytes the package store holds").register(registry);
        });
        workerUp = MultiGauge.builder("codeexec.worker.up").description("1 when the worker is healthy, else 0")
                .register(registry);
        workerRunning = MultiGauge.builder("codeexec.worker.running").description("Runs executing on the worker")
                .register(registry);
        workerQueued = MultiGauge.builder("codeexec.worker.queued").description("Runs waiting for a slot on the worker")
                .register(registry);
        workerSlots = MultiGauge.builder("codeexec.worker.slots").description("The worker's MAX_CONCURRENT")
                .register(registry);
        workersByState = MultiGauge.builder("codeexec.workers").description("Workers the gateway knows, by health")
                .register(registry);
        executor.status().addStartListener(this);
    }


    /**
     * A request a preview answered: {@code codeexec_preview_requests_total{status}} by status class ({@code 2xx},
     * ..., {@code 5xx}), the proxy's own answers (404, 502, 503, ...) included.
     */
    public void previewRequest(int status) {
        String cls = status >= 100 && status < 600 ? (status / 100) + "xx" : "other";
        io.micrometer.core.instrument.Counter.builder("codeexec.preview.requests").tag("status", cls)
                .description("Requests through port previews, by status class").register(registry).increment();
    }

    /**
     * A chat answer ended ({@code outcome}: {@code answer}, {@code max_rounds} or an error's reason word):
     * {@code codeexec_chat_answers_total{mode,outcome}}, {@code codeexec_chat_rounds_total{mode}},
     * {@code codeexec_chat_tool_calls_total{mode}} and {@code codeexec_chat_tokens_total{direction}}.
     */
    public void chatAnswer(String mode, String outcome, long rounds, long toolCalls, long inputTokens, long outputTokens) {
        io.micrometer.core.instrument.Counter.builder("codeexec.chat.answers").tag("mode", mode).tag("outcome", outcome)
                .description("Chat answers, by mode and how they ended").register(registry).increment();
        io.micrometer.core.instrument.Counter.builder("codeexec.chat.rounds").tag("mode", mode)
                .description("Model calls of chat answers").register(registry).increment(rounds);
        io.micrometer.core.instrument.Counter.builder("codeexec.chat.tool.calls").tag("mode", mode)
                .description("Tool calls of chat answers").register(registry).increment(toolCalls);
        io.micrometer.core.instrument.Counter.builder("codeexec.chat.tokens").tag("direction", "input")
                .description("Tokens the model counted, by direction").register(registry).increment(inputTokens);
        io.micrometer.core.instrument.Counter.builder("codeexec.chat.tokens").tag("direction", "output")
                .description("Tokens the model counted, by direction").register(registry).increment(outputTokens);
    }

    /** {@code codeexec_preview_connections}: the preview listener's connections open now. */
    public void bindPreviewConnections(java.util.function.IntSupplier open) {
        Gauge.builder("codeexec.preview.connections", open, java.util.function.IntSupplier::getAsInt).strongReference(true)
                .description("Port preview connections open now").register(registry);
    }

    /**
     * A preview connection is done with a preview, having carried {@code bytesIn} (client to app) and
     * {@code bytesOut}: {@code codeexec_preview_bytes_total{direction}}.
     */
    public void previewBytes(long bytesIn, long bytesOut) {
        io.micrometer.core.instrument.Counter.builder("codeexec.preview.bytes").baseUnit("bytes").tag("direction", "in")
                .description("Bytes through port previews, by direction").register(registry).increment(bytesIn);
        io.micrometer.core.instrument.Counter.builder("codeexec.preview.bytes").baseUnit("bytes").tag("direction", "out")
                .description("Bytes through port previews, by direction").register(registry).increment(bytesOut);
    }

    /**
     * The background jobs' meters: {@code codeexec_jobs_running}, {@code codeexec_jobs_queued} and
     * {@code codeexec_jobs_ended_total{status}} (each run outcome, {@code lost}, {@code failed}).
     */
    public void bindJobs(dev.codeexec.engine.JobControl<?> jobs) {
        Gauge.builder("codeexec.jobs.running", jobs, dev.codeexec.engine.JobControl::running).strongReference(true)
                .description("Background jobs running now (MAX_JOBS at most)").register(registry);
        Gauge.builder("codeexec.jobs.queued", jobs, dev.codeexec.engine.JobControl::queued).strongReference(true)
                .description("Background jobs waiting for a job slot").register(registry);
        List<String> statuses = new ArrayList<>();
        for (dev.codeexec.engine.Outcome o : dev.codeexec.engine.Outcome.values()) statuses.add(o.wireName());
        statuses.add(dev.codeexec.engine.JobState.LOST);
        statuses.add(dev.codeexec.engine.JobState.FAILED);
        for (String status : statuses)
            io.micrometer.core.instrument.FunctionCounter.builder("codeexec.jobs.ended", jobs,
                            j -> j.endedByStatus().getOrDefault(status, 0L)).tag("status", status)
                    .description("Background jobs that ended, by how").register(registry);
    }

    /** Metrics of this executor's runs and levels; the caller adds it to the executor's observers. */
    public static Metrics create(Executor executor) {
        return new Metrics(executor);
    }

    private static double level(Executor executor, String language, String which) {
        Map<String, Integer> levels = executor.status().warmPoolLevels().get(language);
        Integer v = levels == null ? null : levels.get(which);
        return v == null ? Double.NaN : v;
    }

    @Override
    public void finished(RunEnd run) {
        if (run.result().isEmpty()) {
            executions(run.start().request().language(), REJECTED).increment();
            return;
        }
        ExecutionResult r = run.result().get();
        executions(r.language(), r.outcome().wireName()).increment();
        Timer.builder("codeexec.execution.duration").description("Wall time of runs, from program start to end")
                .tag("language", r.language()).serviceLevelObjectives(RUN_BUCKETS).register(registry)
                .record(Duration.ofMillis(r.durationMs()));
        r.network().ifPresent(n -> {
            n.counts().forEach((key, count) -> {
                int slash = key.indexOf('/');
                Counter.builder("codeexec.egress.connections")
                        .description("Connections runs asked the egress proxy for, by decision and reason")
                        .tag("decision", key.substring(0, slash)).tag("reason", key.substring(slash + 1))
                        .register(registry).increment(count);
            });
            String tenant = run.start().request().audit().tenant().orElse("default");
            if (n.bytesOut() > 0) egressBytes(tenant, "out").increment(n.bytesOut());
            if (n.bytesIn() > 0) egressBytes(tenant, "in").increment(n.bytesIn());
        });
        r.toolCalls().ifPresent(t -> {
            for (ToolCall c : t.calls()) toolCalls(c.server(), c.tool(), c.ok() ? "ok" : c.reason().orElse("failed")).increment();
            if (t.leftOut() > 0) toolCalls("-", "-", "unrecorded").increment(t.leftOut());
            for (dev.codeexec.codemode.ApiCall c : t.apiCalls()) apiCalls(c.api(), c.status() / 100 + "xx").increment();
            if (t.apiLeftOut() > 0) apiCalls("-", "unrecorded").increment(t.apiLeftOut());
        });
    }

    private Counter toolCalls(String server, String tool, String outcome) {
        return Counter.builder("codeexec.tool.calls").description("Code mode: tool calls runs made, by server, tool and outcome")
                .tag("server", server).tag("tool", tool).tag("outcome", outcome).register(registry);
    }

    private Counter apiCalls(String api, String status) {
        return Counter.builder("codeexec.api.calls").description("Code mode: calls runs made through credentialed API routes, "
                + "by API and status class").tag("api", api).tag("status", status).register(registry);
    }

    private Counter egressBytes(String tenant, String direction) {
        return Counter.builder("codeexec.egress.bytes").description("Bytes runs moved through the egress proxy")
                .baseUnit("bytes").tag("tenant", tenant).tag("direction", direction).register(registry);
    }

    private Counter executions(String language, String outcome) {
        return Counter.builder("codeexec.executions").description("Runs that ended, by language and outcome")
                .tag("language", language).tag("outcome", outcome).register(registry);
    }

    @Override
    public void started(String language, boolean warm, Duration elapsed) {
        Timer.builder("codeexec.sandbox.start").description("From a run starting its sandbox to its program running")
                .tag("language", language).tag("start", warm ? "warm" : "cold")
                .serviceLevelObjectives(START_BUCKETS).register(registry).record(elapsed);
    }

    /** One HTTP request answered: method (unknown methods as "OTHER"), status class, route group. */
    public void httpRequest(String method, int status, Route route, Duration elapsed) {
        String m = method == null ? "OTHER" : method.toUpperCase(Locale.ROOT);
        Timer.builder("codeexec.http.requests").description("HTTP requests answered")
                .tag("method", METHODS.contains(m) ? m : "OTHER")
                .tag("status", status >= 100 && status < 600 ? (status / 100) + "xx" : "unknown")
                .tag("route", route.tag()).register(registry).record(elapsed);
    }

    /** Every meter in the Prometheus text format ({@link #CONTENT_TYPE}). */
    public String scrape() {
        refreshWorkers();
        return registry.scrape();
    }

    /**
     * Sets the worker gauges from the executor's list now. Rows are rewritten at each scrape (overwrite), so a
     * worker no longer listed loses its series instead of repeating its last value. Synchronized: two scrapes at
     * once would otherwise interleave their rewrites.
     */
    private synchronized void refreshWorkers() {
        List<WorkerStatus> workers = executor.status().workers();
        if (!workerMeters && workers.isEmpty() && !executor.status().remote()) return;
        workerMeters = true;
        workerUp.register(rows(workers, w -> w.healthy() ? 1 : 0), true);
        workerRunning.register(rows(workers, WorkerStatus::running), true);
        workerQueued.register(rows(workers, WorkerStatus::queued), true);
        workerSlots.register(rows(workers, WorkerStatus::slots), true);
        long healthy = workers.stream().filter(WorkerStatus::healthy).count();
        workersByState.register(List.of(MultiGauge.Row.of(Tags.of("state", "healthy"), healthy),
                MultiGauge.Row.of(Tags.of("state", "unhealthy"), workers.size() - healthy)), true);
    }

    private static List<MultiGauge.Row<?>> rows(List<WorkerStatus> workers, ToIntFunction<WorkerStatus> value) {
        List<MultiGauge.Row<?>> rows = new ArrayList<>(workers.size());
        for (WorkerStatus w : workers) rows.add(MultiGauge.Row.of(Tags.of("worker", w.address()), value.applyAsInt(w)));
        return rows;
    }

    @Override
    public void close() {
        gc.close();
        registry.close();
    }

    private static Duration[] durations(long... millis) {
        Duration[] d = new Duration[millis.length];
        for (int i = 0; i < millis.length; i++) d[i] = Duration.ofMillis(millis[i]);
        return d;
    }
}
