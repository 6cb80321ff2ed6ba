package dev.codeexec.worker;

import dev.codeexec.boot.Version;
import dev.codeexec.boot.Logging;
import dev.codeexec.local.LocalEngine;
import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

/**
 * {@code java -jar code-exec-mcp.jar worker}: configuration from the environment, the same logging and the same
 * local engine as the server (sandbox checks, warm pool, sessions), then the gRPC worker until SIGTERM/SIGINT,
 * which drains it. No workspace expiry here: workspaces live on a volume shared with the gateways, which expire
 * them. Exit codes as the server's: 2 bad configuration, 1 could not start, 0 after a drain.
 */
public final class WorkerMain {

    private static final Logger LOG = LoggerFactory.getLogger(WorkerMain.class);

    private WorkerMain() {
    }

    public static int run(Map<String, String> env) {
        Config config;
        try {
            config = Config.load(env);
            // Before the engine starts (it prepares DATA_DIR, warms sandboxes): a refusal costs nothing.
            WorkerSecurity.check(config);
        } catch (ConfigException e) {
            System.err.println("code-exec-mcp worker: configuration error: " + e.getMessage());
            return 2;
        }
        Logging.configure(config);
        LocalEngine engine = null;
        WorkerServer server;
        try {
            engine = LocalEngine.create(config);
            server = WorkerServer.start(config, engine.executor(), engine.workspaces(),
                    Version.of(WorkerMain.class), engine.sandbox().status());
        } catch (ConfigException e) {
            if (engine != null) engine.executor().close();
            System.err.println("code-exec-mcp worker: configuration error: " + e.getMessage());
            return 2;
        } catch (Exception e) {
            if (engine != null) engine.executor().close();
            LOG.error("worker could not start: {}", e.toString(), e);
            return 1;
        }
        LOG.info("code-exec-mcp {} worker {} ({}) listening on {}:{}: TLS {}, token {}, sandbox {}, {} slots, queue {}",
                Version.of(WorkerMain.class), server.name(), server.instanceId(), config.get(Config.WORKER_HOST), server.port(),
                server.tls() ? (WorkerSecurity.mutualTls(config) ? "on (client certificates required)" : "on") : "off",
                config.get(Config.WORKER_TOKEN).isEmpty() ? "off" : "on", engine.sandbox().name(),
                config.get(Config.MAX_CONCURRENT), config.get(Config.QUEUE_SIZE));
        if ("none".equals(engine.sandbox().name())) {
            LOG.warn("WARNING: SANDBOX=none: code runs WITHOUT ISOLATION, with the worker's own rights.");
        }
        // The bound port on stdout, for whoever started the worker with WORKER_PORT=0 (tests, scripts).
        System.out.println("worker listening on port " + server.port());
        System.out.flush();

        Duration grace = Duration.ofSeconds(config.get(Config.SHUTDOWN_GRACE_SECONDS));
        CountDownLatch drained = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            LOG.info("signal received: draining (running runs get up to {} s)", grace.toSeconds());
            server.drain(grace);
            drained.countDown();
            // The JVM would exit with the signal's status (143); a worker that drained cleanly reports 0.
            System.err.flush();
            Runtime.getRuntime().halt(0);
        }, "worker-drain"));
        try {
            drained.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return 0;
    }
}
