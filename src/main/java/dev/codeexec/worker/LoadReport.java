package dev.codeexec.worker;

import dev.codeexec.engine.Executor;
import io.grpc.ServerInterceptor;
import io.grpc.services.MetricRecorder;
import io.grpc.xds.orca.OrcaMetricReportingServerInterceptor;

import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The load this worker reports to gateways in every Worker call's trailers (ORCA, {@code endpoint-load-metrics-bin}),
 * which weighted_round_robin turns into weights (qps / utilization).
 *
 * <p>Application utilization is (running + queued) / slots, not capped: a worker with a queue is more loaded than a
 * full one, and WRR should see it. It is smoothed (sampled every {@value #TICK_MS} ms, exponential average with a
 * time constant of about 2 s) because a sample taken when a call closes is biased: the closing run has just left
 * its slot, so a worker serving one caller back to back would always report 0. qps counts Execute calls over the
 * last {@value #WINDOW_SECONDS} s.
 */
final class LoadReport implements AutoCloseable {

    static final long TICK_MS = 200;
    static final int WINDOW_SECONDS = 10;
    private static final double ALPHA = 0.1;
    private static final double IDLE = 0.01;

    private final Executor executor;
    private final MetricRecorder recorder = MetricRecorder.newInstance();
    private final AtomicLong arrived = new AtomicLong();
    private final long[] perTick = new long[(int) (WINDOW_SECONDS * 1000 / TICK_MS)];
    private final ScheduledExecutorService sampler;
    private long lastArrived;
    private int tick;
    private double utilization;

    LoadReport(Executor executor) {
        this.executor = executor;
        this.sampler = Executors.newSingleThreadScheduledExecutor(
                Thread.ofPlatform().name("worker-load").daemon(true).factory());
        sampler.scheduleAtFixedRate(this::sample, 0, TICK_MS, TimeUnit.MILLISECONDS);
    }

    /** The interceptor that writes the report into the trailers of the calls it wraps. */
    ServerInterceptor interceptor() {
        return OrcaMetricReportingServerInterceptor.create(recorder);
    }

    void callArrived() {
        arrived.incrementAndGet();
    }

    /** Runs on the sampler thread only. */
    private void sample() {
        double now = (double) (executor.status().running() + executor.status().queued()) / Math.max(1, executor.status().maxConcurrent());
        utilization += ALPHA * (now - utilization);
        long total = arrived.get();
        perTick[tick] = total - lastArrived;
        lastArrived = total;
        tick = (tick + 1) % perTick.length;
        long inWindow = 0;
        for (long n : perTick) inWindow += n;
        // A decayed average is never quite 0, and WRR's weight is qps / utilization: an idle worker would get an
        // absurd weight. Reported as 0, WRR gives it the mean weight of the others instead.
        recorder.setApplicationUtilizationMetric(utilization < IDLE ? 0 : utilization);
        recorder.setQpsMetric((double) inWindow / WINDOW_SECONDS);
    }

    @Override
    public void close() {
        sampler.shutdownNow();
    }
}
