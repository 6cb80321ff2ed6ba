package dev.codeexec.worker;

import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.config.Config;
import dev.codeexec.job.Jobs;
import dev.codeexec.config.ConfigException;
import dev.codeexec.config.Ids;
import dev.codeexec.engine.Executor;
import dev.codeexec.wire.v1.WorkerGrpc;
import dev.codeexec.workspace.Workspaces;
import io.grpc.Server;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.HealthStatusManager;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * The worker role ({@code java -jar code-exec-mcp.jar worker}): a gRPC server with the Worker service of
 * worker.proto over a local engine, the standard health service, and ORCA load reports in every Worker call's
 * trailers.
 *
 * <p>Transport settings, and why: gateways ping every 5 s to notice a hung worker, so pings are permitted every
 * {@value #PERMIT_KEEPALIVE_SECONDS} s, idle connections included (otherwise the server answers with GOAWAY
 * too_many_pings). Connections are recycled after WORKER_MAX_CONNECTION_AGE_SECONDS so that gateways re-resolve
 * their target and find new workers; a recycled connection's calls may finish for as long as the longest run can
 * take (queue wait + timeout + slack). Messages may be as large as {@value #MAX_MESSAGE_MB} MB (code, stdin and
 * results are far below; the cap only bounds memory).
 */
public final class WorkerServer implements AutoCloseable {

    static final int PERMIT_KEEPALIVE_SECONDS = 3;
    static final int MAX_MESSAGE_MB = 64;
    private static final Logger log = LoggerFactory.getLogger(WorkerServer.class);

    private final Config config;
    private final Executor executor;
    private final Server server;
    private final WorkerService service;
    private final HealthStatusManager health;
    private final LoadReport load;
    private final WorkerService.Identity identity;
    private final Jobs jobs;
    private final java.util.concurrent.atomic.AtomicBoolean terminal = new java.util.concurrent.atomic.AtomicBoolean();

    private WorkerServer(Config config, Executor executor, Server server, WorkerService service,
            HealthStatusManager health, LoadReport load, WorkerService.Identity identity, Jobs jobs) {
        this.config = config;
        this.jobs = jobs;
        this.executor = executor;
        this.server = server;
        this.service = service;
        this.health = health;
        this.load = load;
        this.identity = identity;
    }

    /** A worker over the given engine, assuming its sandbox works (tests; the configured sandbox's name). */
    public static WorkerServer start(Config config, Executor executor, Workspaces workspaces, String version)
            throws IOException {
        return start(config, executor, workspaces, version, new Sandbox.Status(config.get(Config.SANDBOX), Optional.empty()));
    }

    /**
     * Starts serving on WORKER_HOST:WORKER_PORT. A worker whose sandbox cannot run code still starts (its Status
     * and RuntimeInfo say why) but reports NOT_SERVING, so gateways send it nothing.
     *
     * @throws ConfigException the security settings do not allow this address, or the TLS files cannot be used
     * @throws IOException     the port cannot be bound
     */
    public static WorkerServer start(Config config, Executor executor, Workspaces workspaces, String version,
            Sandbox.Status sandbox) throws IOException {
        WorkerSecurity.check(config);
        WorkerService.Identity identity = new WorkerService.Identity(name(config), Ids.hex(16),
                version, sandbox.name(), Instant.now());
        LoadReport load = new LoadReport(executor);
        // a job's id carries this process's instance id: a gateway routes a later call about it here
        var resultMap = dev.codeexec.surface.ServerSetup.resultMap(config);
        Jobs jobs = Jobs.open(config, executor, (request, result) -> {
            java.util.Map<String, Object> m = new java.util.LinkedHashMap<>(resultMap.apply(request, result));
            m.put("worker", identity.name());
            return m;
        }, identity.instanceId() + "-", "the worker " + identity.name());
        // the previews of this worker's sandboxes: tokens start with its instance id, which routes a gateway to it;
        // URLs are the gateways' to make (their preview listeners)
        dev.codeexec.surface.Previews previews = new dev.codeexec.surface.Previews(config, executor,
                () -> java.util.Optional.of(jobs), java.time.Clock.systemUTC(), identity.instanceId().substring(0, 16));
        previews.address().listening("");
        WorkerService service = new WorkerService(config, executor, workspaces, identity, load, jobs, previews);
        HealthStatusManager health = new HealthStatusManager();
        ServingStatus serving = sandbox.available() ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
        health.setStatus(HealthStatusManager.SERVICE_NAME_ALL_SERVICES, serving);
        health.setStatus(WorkerGrpc.SERVICE_NAME, serving);

        // Applied last to first: the token check runs before anything else, so a refused call gets no load report.
        List<ServerInterceptor> interceptors = new ArrayList<>();
        interceptors.add(load.interceptor());
        String token = config.get(Config.WORKER_TOKEN);
        if (!token.isEmpty()) interceptors.add(new TokenInterceptor(token));

        // a background job's run is a call too: it must outlive a connection's age as well
        long longestRunMs = (long) Math.max(config.get(Config.MAX_TIMEOUT_MS), config.get(Config.JOB_MAX_TIMEOUT_MS))
                + config.get(Config.QUEUE_TIMEOUT_MS) + 60_000;
        NettyServerBuilder builder;
        InetSocketAddress address = new InetSocketAddress(config.get(Config.WORKER_HOST), config.get(Config.WORKER_PORT));
        try {
            builder = NettyServerBuilder.forAddress(address, WorkerSecurity.credentials(config));
        } catch (IllegalArgumentException | IllegalStateException e) {
            // Netty parses the PEM files here: a file that is not a certificate or key ends the start, named.
            load.close();
            jobs.close();
            throw new ConfigException("WORKER_TLS_CERT / WORKER_TLS_KEY / WORKER_TLS_CA cannot be used: "
                    + e.getMessage());
        }
        Server server = builder
                .addService(ServerInterceptors.intercept(service, interceptors))
                .addService(health.getHealthService())
                .permitKeepAliveTime(PERMIT_KEEPALIVE_SECONDS, TimeUnit.SECONDS)
                .permitKeepAliveWithoutCalls(true)
                .keepAliveTime(20, TimeUnit.SECONDS)
                .keepAliveTimeout(10, TimeUnit.SECONDS)
                .maxConnectionAge(config.get(Config.WORKER_MAX_CONNECTION_AGE_SECONDS), TimeUnit.SECONDS)
                .maxConnectionAgeGrace(longestRunMs, TimeUnit.MILLISECONDS)
                .maxInboundMessageSize(MAX_MESSAGE_MB * 1024 * 1024)
                .build();
        try {
            server.start();
        } catch (IOException | RuntimeException e) {
            load.close();
            jobs.close();
            throw e;
        }
        if (!sandbox.available()) {
            log.error("sandbox {} cannot run code here ({}): health is NOT_SERVING, gateways will send no runs",
                    sandbox.name(), sandbox.unavailableReason().orElse(""));
        }
        return new WorkerServer(config, executor, server, service, health, load, identity, jobs);
    }

    /** WORKER_NAME, else the host name (a pod's name in Kubernetes). */
    private static String name(Config config) {
        String n = config.get(Config.WORKER_NAME);
        if (!n.isEmpty()) return n;
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            return "worker";
        }
    }

    /** The bound port (the free port chosen when WORKER_PORT is 0). */
    public int port() {
        return server.getPort();
    }

    public String name() {
        return identity.name();
    }

    public String instanceId() {
        return identity.instanceId();
    }

    public boolean tls() {
        return WorkerSecurity.tls(config);
    }

    public boolean draining() {
        return service.draining();
    }

    /**
     * The SIGTERM path: health NOT_SERVING (gateways stop choosing this worker), new runs refused with
     * UNAVAILABLE, runs that have not taken a slot sent back at once (UNAVAILABLE before {@code accepted}: the
     * gateway retries them elsewhere instead of waiting here), running ones given up to {@code grace} to finish,
     * then the rest killed, the engine closed and the server stopped. Closes the executor.
     */
    public void drain(Duration grace) {
        log.info("draining: health NOT_SERVING, new runs refused; {} running, {} queued", executor.status().running(),
                executor.status().queued());
        notServing();
        int bounced = service.startDraining();
        if (bounced > 0) log.info("draining: {} queued runs sent back to their gateways to run elsewhere", bounced);
        long end = System.nanoTime() + grace.toNanos();
        try {
            while (service.inFlight() > 0 && System.nanoTime() < end) {
                // A call that passed the draining check just before it was set may have queued since.
                service.bounceQueued();
                Thread.sleep(50);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        int left = service.inFlight();
        if (left > 0) {
            log.info("draining: {} runs still going after {} s; killing them", left, grace.toSeconds());
            service.cancelAll();
        } else {
            log.info("draining: every run has finished");
        }
        // jobs are not waited for (they may run for hours): queued ones end lost now, running ones as the engine's
        // close kills them; their records and output stay in DATA_DIR/jobs for a restart on the same volume
        if (jobs.running() + jobs.queued() > 0)
            log.info("draining: {} background jobs running, {} queued: they end lost", jobs.running(), jobs.queued());
        jobs.close();
        executor.close();
        log.info("draining: engine closed; stopping the gRPC server");
        server.shutdown();
        try {
            if (!server.awaitTermination(10, TimeUnit.SECONDS)) server.shutdownNow();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            server.shutdownNow();
        }
        load.close();
        log.info("drained: worker stopped");
    }

    /** Every health service name NOT_SERVING for good (the health manager warns when told twice). */
    private void notServing() {
        if (terminal.compareAndSet(false, true)) health.enterTerminalState();
    }

    /** Stops serving at once, cancelling calls in flight; the executor is the caller's to close. */
    @Override
    public void close() {
        notServing();
        jobs.close();
        server.shutdownNow();
        try {
            server.awaitTermination(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        load.close();
    }
}
