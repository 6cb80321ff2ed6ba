package dev.codeexec.ops;

import dev.codeexec.codemode.ApiCall;
import dev.codeexec.codemode.ToolCall;
import dev.codeexec.egress.NetworkReport;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.config.Config;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.ExecutorStatus;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.engine.RunObserver;
import dev.codeexec.engine.SessionControl;
import dev.codeexec.engine.WorkerStatus;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

/** What each engine event and HTTP request does to the meters, read back in the Prometheus text. */
class MetricsMetersTest {

    final AtomicInteger ready = new AtomicInteger(2);
    final AtomicInteger sessions = new AtomicInteger(0);
    volatile List<WorkerStatus> workers = List.of();
    volatile boolean remote;
    ExecutorStatus.StartListener registered;
    final StubExecutor executor = new StubExecutor();
    final Metrics metrics = Metrics.create(executor);

    @AfterEach
    void close() {
        metrics.close();
    }

    @Test
    void runsCountByOutcomeRefusedRunsAsRejectedAndOnlyRunsThatRanHaveADuration() {
        metrics.finished(end("python", Optional.of(result("python", Outcome.EXITED, 40)), Optional.empty()));
        metrics.finished(end("python", Optional.of(result("python", Outcome.TIMEOUT, 3000)), Optional.empty()));
        metrics.finished(end("nodejs", Optional.empty(), Optional.of(new ExecutionException.Busy("queue full"))));
        metrics.finished(end("nodejs", Optional.empty(), Optional.of(new ExecutionException.Unavailable("closing"))));

        String text = metrics.scrape();
        assertThat(text).contains("codeexec_executions_total{language=\"python\",outcome=\"exited\"} 1.0")
                .contains("codeexec_executions_total{language=\"python\",outcome=\"timeout\"} 1.0")
                .contains("codeexec_executions_total{language=\"nodejs\",outcome=\"rejected\"} 2.0");
        assertThat(text).contains("codeexec_execution_duration_seconds_count{language=\"python\"} 2")
                .contains("codeexec_execution_duration_seconds_bucket{language=\"python\",le=\"0.05\"} 1")
                .contains("codeexec_execution_duration_seconds_bucket{language=\"python\",le=\"5.0\"} 2")
                .doesNotContain("codeexec_execution_duration_seconds_count{language=\"nodejs\"}");
    }

    @Test
    void egressConnectionsCountByDecisionAndReasonAndBytesByTenant() {
        NetworkReport n = new NetworkReport(List.of("pypi.org"), List.of(), 0,
                Map.of("allowed/closed", 3, "refused/not_allowed", 2, "refused/loopback", 1), 1000, 250_000);
        Config config = Config.of();
        ExecutionRequest request = ExecutionRequest.builder("python", "x", RequestValidator.defaultLimits(config, Duration.ofSeconds(1)))
                .audit(new ExecutionRequest.AuditInfo(Optional.of("team-a"), Optional.empty(), Optional.empty()))
                .build();
        metrics.finished(new RunObserver.RunEnd(new RunObserver.RunStart("run-2", Instant.now(), request), Instant.now(),
                Optional.of(result("python", Outcome.EXITED, 40).withNetwork(n)), Optional.empty()));
        metrics.finished(end("python", Optional.of(result("python", Outcome.EXITED, 40)), Optional.empty()));
        String text = metrics.scrape();
        assertThat(text).contains("codeexec_egress_connections_total{decision=\"allowed\",reason=\"closed\"} 3.0")
                .contains("codeexec_egress_connections_total{decision=\"refused\",reason=\"not_allowed\"} 2.0")
                .contains("codeexec_egress_connections_total{decision=\"refused\",reason=\"loopback\"} 1.0")
                .contains("codeexec_egress_bytes_total{direction=\"out\",tenant=\"team-a\"} 1000.0")
                .contains("codeexec_egress_bytes_total{direction=\"in\",tenant=\"team-a\"} 250000.0");
    }

    @Test
    void sandboxStartsAreTimedByLanguageAndWarmth() {
        assertThat(registered).isSameAs(metrics);
        registered.started("python", true, Duration.ofMillis(3));
        registered.started("python", false, Duration.ofMillis(400));
        String text = metrics.scrape();
        assertThat(text).contains("codeexec_sandbox_start_seconds_bucket{language=\"python\",start=\"warm\",le=\"0.005\"} 1")
                .contains("codeexec_sandbox_start_seconds_bucket{language=\"python\",start=\"cold\",le=\"0.25\"} 0")
                .contains("codeexec_sandbox_start_seconds_bucket{language=\"python\",start=\"cold\",le=\"0.5\"} 1");
    }

    @Test
    void codeModeCallsCountToolCallsByOutcomeAndApiCallsByApiAndStatusClass() {
        ToolCall.Report calls = new ToolCall.Report(
                List.of(new ToolCall("github", "search", 12, true, 100, 20, Optional.empty()),
                        new ToolCall("github", "search", 5, false, 0, 20, Optional.of("timeout"))), 3,
                List.of(new ApiCall("gh", "GET", "/user", 200, 40, 500, 0), new ApiCall("gh", "GET", "/repos", 204, 10, 0, 0),
                        new ApiCall("gh", "DELETE", "/repos/o/r", 403, 0, 0, 0), new ApiCall("ci", "POST", "/x", 502, 9, 0, 10)), 2);
        metrics.finished(end("python", Optional.of(result("python", Outcome.EXITED, 40).withToolCalls(calls)), Optional.empty()));
        assertThat(metrics.scrape())
                .contains("codeexec_tool_calls_total{outcome=\"ok\",server=\"github\",tool=\"search\"} 1.0")
                .contains("codeexec_tool_calls_total{outcome=\"timeout\",server=\"github\",tool=\"search\"} 1.0")
                .contains("codeexec_tool_calls_total{outcome=\"unrecorded\",server=\"-\",tool=\"-\"} 3.0")
                .contains("codeexec_api_calls_total{api=\"gh\",status=\"2xx\"} 2.0")
                .contains("codeexec_api_calls_total{api=\"gh\",status=\"4xx\"} 1.0")
                .contains("codeexec_api_calls_total{api=\"ci\",status=\"5xx\"} 1.0")
                .contains("codeexec_api_calls_total{api=\"-\",status=\"unrecorded\"} 2.0");
    }

    @Test
    void gaugesReadTheEngineAtScrapeTime() {
        assertThat(metrics.scrape()).contains("codeexec_warm_pool_ready{language=\"python\"} 2.0")
                .contains("codeexec_warm_pool_target{language=\"python\"} 2.0").contains("codeexec_sessions_active 0.0")
                .contains("codeexec_queue_depth 3.0").contains("codeexec_running 1.0").contains("codeexec_max_concurrent 4.0");
        ready.set(0);
        sessions.set(5);
        assertThat(metrics.scrape()).contains("codeexec_warm_pool_ready{language=\"python\"} 0.0")
                .contains("codeexec_sessions_active 5.0");
    }

    @Test
    void workerGaugesFollowTheCurrentListAndADroppedWorkerLosesItsSeries() {
        remote = true;
        workers = List.of(worker("10.0.0.1:30031", true, 2, 1, 4), worker("10.0.0.2:30031", true, 0, 0, 4));
        String text = metrics.scrape();
        assertThat(text).contains("codeexec_worker_up{worker=\"10.0.0.1:30031\"} 1.0")
                .contains("codeexec_worker_up{worker=\"10.0.0.2:30031\"} 1.0")
                .contains("codeexec_worker_running{worker=\"10.0.0.1:30031\"} 2.0")
                .contains("codeexec_worker_queued{worker=\"10.0.0.1:30031\"} 1.0")
                .contains("codeexec_worker_slots{worker=\"10.0.0.2:30031\"} 4.0")
                .contains("codeexec_workers{state=\"healthy\"} 2.0")
                .contains("codeexec_workers{state=\"unhealthy\"} 0.0");

        // the first goes down and the second is dropped (gone from DNS); a third appears
        workers = List.of(worker("10.0.0.1:30031", false, 0, 0, 4), worker("10.0.0.3:30031", true, 3, 0, 8));
        text = metrics.scrape();
        assertThat(text).contains("codeexec_worker_up{worker=\"10.0.0.1:30031\"} 0.0")
                .contains("codeexec_worker_running{worker=\"10.0.0.1:30031\"} 0.0")
                .contains("codeexec_worker_up{worker=\"10.0.0.3:30031\"} 1.0")
                .contains("codeexec_worker_running{worker=\"10.0.0.3:30031\"} 3.0")
                .contains("codeexec_worker_slots{worker=\"10.0.0.3:30031\"} 8.0")
                .contains("codeexec_workers{state=\"healthy\"} 1.0")
                .contains("codeexec_workers{state=\"unhealthy\"} 1.0")
                .doesNotContain("10.0.0.2");

        workers = List.of();
        text = metrics.scrape();
        assertThat(text).doesNotContain("codeexec_worker_up{").doesNotContain("codeexec_worker_slots{")
                .contains("codeexec_workers{state=\"healthy\"} 0.0")
                .contains("codeexec_workers{state=\"unhealthy\"} 0.0");
    }

    @Test
    void aLocalServerHasNoWorkerMetersAndCountsLostRunsByOutcome() {
        assertThat(metrics.scrape()).doesNotContain("codeexec_worker").doesNotContain("codeexec_workers");
        metrics.finished(end("python", Optional.of(result("python", Outcome.WORKER_LOST, 900)), Optional.empty()));
        assertThat(metrics.scrape()).contains("codeexec_executions_total{language=\"python\",outcome=\"worker_lost\"} 1.0");
    }

    private static WorkerStatus worker(String address, boolean healthy, int running, int queued, int slots) {
        return new WorkerStatus(address, Optional.of("w"), Optional.of("i"), healthy, false, running, queued, slots, 0,
                Map.of(), Optional.of(Instant.now()), healthy ? Optional.empty() : Optional.of("UNAVAILABLE"));
    }

    @Test
    void httpRequestsAreTaggedOnlyWithFixedValues() {
        metrics.httpRequest("GET", 200, Metrics.Route.of("/healthz"), Duration.ofMillis(1));
        metrics.httpRequest("PROPFIND", 405, Metrics.Route.of("/webdav/secret-name"), Duration.ofMillis(1));
        metrics.httpRequest("post", 0, Metrics.Route.of("/mcp"), Duration.ofMillis(1));
        String text = metrics.scrape();
        assertThat(text).contains("codeexec_http_requests_seconds_count{method=\"GET\",route=\"healthz\",status=\"2xx\"} 1")
                .contains("codeexec_http_requests_seconds_count{method=\"OTHER\",route=\"other\",status=\"4xx\"} 1")
                .contains("codeexec_http_requests_seconds_count{method=\"POST\",route=\"mcp\",status=\"unknown\"} 1")
                .doesNotContain("PROPFIND").doesNotContain("secret-name").doesNotContain("webdav");
    }

    @Test
    void routeGroupsGoByTheWholeFirstSegment() {
        assertThat(Metrics.Route.of("/mcp")).isEqualTo(Metrics.Route.MCP);
        assertThat(Metrics.Route.of("/mcp/x")).isEqualTo(Metrics.Route.MCP);
        assertThat(Metrics.Route.of("/mcpx")).isEqualTo(Metrics.Route.OTHER);
        assertThat(Metrics.Route.of("/api")).isEqualTo(Metrics.Route.API);
        assertThat(Metrics.Route.of("/api/admin/stats")).isEqualTo(Metrics.Route.API);
        assertThat(Metrics.Route.of("/admin")).isEqualTo(Metrics.Route.ADMIN);
        assertThat(Metrics.Route.of("/admin/assets/index-1a2b.js")).isEqualTo(Metrics.Route.ADMIN);
        assertThat(Metrics.Route.of("/healthz")).isEqualTo(Metrics.Route.HEALTHZ);
        assertThat(Metrics.Route.of("/metrics")).isEqualTo(Metrics.Route.METRICS);
        assertThat(Metrics.Route.of("/metricsz")).isEqualTo(Metrics.Route.OTHER);
        assertThat(Metrics.Route.of("/")).isEqualTo(Metrics.Route.OTHER);
        assertThat(Metrics.Route.of("")).isEqualTo(Metrics.Route.OTHER);
        assertThat(Metrics.Route.of(null)).isEqualTo(Metrics.Route.OTHER);
    }

    private static RunObserver.RunEnd end(String language, Optional<ExecutionResult> result,
            Optional<ExecutionException> error) {
        Config config = Config.of();
        ExecutionRequest request = ExecutionRequest.builder(language, "x", RequestValidator.defaultLimits(config, Duration.ofSeconds(1)))
                .build();
        return new RunObserver.RunEnd(new RunObserver.RunStart("run-1", Instant.now(), request), Instant.now(), result, error);
    }

    private static ExecutionResult result(String language, Outcome outcome, long durationMs) {
        return ExecutionResult.builder(language, outcome).exitCode(0).durationMs(durationMs).sandbox("fake").build();
    }

    /** Levels the test sets; records the start listener the metrics register. */
    final class StubExecutor implements Executor, ExecutorStatus {
        @Override
        public ExecutorStatus status() {
            return this;
        }

        @Override
        public RunHandle submit(ExecutionRequest request, OutputListener listener) {
            throw new UnsupportedOperationException();
        }

        @Override
        public Map<String, Object> runtimeInfo() {
            return Map.of();
        }

        @Override
        public int running() {
            return 1;
        }

        @Override
        public int queued() {
            return 3;
        }

        @Override
        public int maxConcurrent() {
            return 4;
        }

        @Override
        public Map<String, Map<String, Integer>> warmPoolLevels() {
            return Map.of("python", Map.of("ready", ready.get(), "target", 2));
        }

        @Override
        public SessionControl sessions() {
            return SessionControl.listing(tenant -> List.of(), sessions::get);
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
        public void addStartListener(ExecutorStatus.StartListener listener) {
            registered = listener;
        }

        @Override
        public void close() {
        }
    }
}
