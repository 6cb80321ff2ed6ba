package dev.codeexec;

import dev.codeexec.boot.Version;
import dev.codeexec.boot.Logging;
import dev.codeexec.local.LocalEngine;
import dev.codeexec.codemode.CodeTools;
import dev.codeexec.config.Config;
import dev.codeexec.egress.EgressSettings;
import dev.codeexec.auth.ApiKeys;
import dev.codeexec.auth.KeysCommand;
import dev.codeexec.config.ConfigException;
import dev.codeexec.gateway.RemoteExecutor;
import dev.codeexec.http.HttpServer;
import dev.codeexec.workspace.WorkspaceExpiry;
import dev.codeexec.engine.Executor;
import dev.codeexec.lang.Languages;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.mcp.McpExtension;
import dev.codeexec.surface.ServerSetup;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.mcp.StdioServer;
import dev.codeexec.worker.WorkerMain;
import dev.codeexec.workspace.Workspaces;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.PrintStream;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.function.Function;

/**
 * Starts code-exec-mcp: configuration from the environment, logging, the engine, then the HTTP server or stdio.
 * Exit codes: 0 after a clean shutdown, 2 for bad configuration, 1 when the server could not start.
 * With arguments it runs a command instead ({@code keys add TENANT [--admin]}, see {@link KeysCommand}), or
 * {@code worker}: the worker role of a gateway's pool ({@link WorkerMain}).
 */
public final class Main {

    private static final Logger LOG = LoggerFactory.getLogger(Main.class);

    private Main() {
    }

    public static void main(String[] args) {
        jettyCacheLineHint();
        if (args.length > 0 && args[0].equals("worker")) System.exit(WorkerMain.run(System.getenv()));
        if (args.length > 0 && args[0].equals("train-aot")) System.exit(AotTraining.run(System.getenv()));
        if (args.length > 0) System.exit(KeysCommand.run(List.of(args), System.getenv(), System.out, System.err));
        preinitialize();
        System.exit(run(System.getenv(), Main::wire));
    }

    /**
     * Work of the start that is slow, needed later in it, and independent of the configuration, done on a second
     * thread while the main one reads the configuration and languages: the foreign-function handles of the system
     * calls (one, see Sys) and of posix_spawn (their code is generated at run time, the JVM's AOT cache cannot hold
     * it); the JSON mapper the languages table is read with; the
     * MCP SDK's default JSON-schema validator (built once and kept by the SDK; the tool schemas are checked with
     * it); Jetty's server and its MIME table (which lists the JDK's locales); the IDN tables host names are
     * normalized with. Only static set-up and cached defaults: each catches its own failure, and the main thread
     * waits for one still running when it gets there (the JVM's class initialization lock, the SDK's synchronized
     * getter), so the order and outcome of the start are unchanged.
     */
    private static void preinitialize() {
        List<Runnable> steps = List.of(() -> initialize("dev.codeexec.linux.Sys"), () -> initialize("dev.codeexec.linux.Posix"),
                () -> initialize("dev.codeexec.linux.Spawn"), tools.jackson.databind.json.JsonMapper::shared,
                () -> initialize("com.networknt.schema.SchemaRegistry"),
                io.modelcontextprotocol.json.McpJsonDefaults::getSchemaValidator,
                () -> initialize("org.eclipse.jetty.server.Server"), () -> initialize("org.eclipse.jetty.http.MimeTypes"),
                () -> initialize("java.net.IDN"));
        Thread.ofPlatform().daemon().name("preinit").start(() -> {
            for (Runnable step : steps) {
                try {
                    step.run();
                } catch (RuntimeException | LinkageError e) {
                    // the main thread meets the same step itself and reports what matters
                }
            }
        });
    }

    private static void initialize(String className) {
        try {
            Class.forName(className, true, Main.class.getClassLoader());
        } catch (ClassNotFoundException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * Jetty's thread pool queue pads its fields by the references per cache line, and without this property
     * Jetty learns whether oops are compressed from the platform MBean server, which it creates for that alone
     * (about a tenth of a fresh start's main-thread CPU). The same answer from the heap size: the JVM compresses
     * oops below a 32 GiB heap unless told otherwise, and a wrong guess costs padding only. A value set with
     * {@code -D} is kept.
     */
    private static void jettyCacheLineHint() {
        String key = "org.eclipse.jetty.util.referencesPerCacheLine";
        if (System.getProperty(key) != null) return;
        int cacheLine = Integer.getInteger("org.eclipse.jetty.util.cacheLineBytes", 64);
        boolean compressedOops = Runtime.getRuntime().maxMemory() < 32L * 1024 * 1024 * 1024;
        System.setProperty(key, String.valueOf(cacheLine / (compressedOops ? 4 : 8)));
    }

    /**
     * The whole start-up with the engine wiring passed in, so tests can start the real entry point (stdio in a
     * subprocess, say) around a fake executor.
     */
    public static int run(Map<String, String> env, Function<Config, ServerSetup> wiring) {
        Config config;
        try {
            config = Config.load(env);
        } catch (ConfigException e) {
            System.err.println("code-exec-mcp: configuration error: " + e.getMessage());
            return 2;
        }
        Logging.configure(config);
        boolean stdio = "stdio".equals(config.get(Config.TRANSPORT));
        // In stdio mode stdout is the protocol channel: keep it for the transport, send every stray print to stderr.
        PrintStream protocolOut = System.out;
        if (stdio) System.setOut(System.err);
        try {
            // Read before the engine starts: a bad API_KEYS_FILE line stops the start at once, naming file:line.
            ApiKeys keys = stdio ? null : ApiKeys.load(config);
            if (!stdio) config.checkPreviewHost();
            ServerSetup setup = wiring.apply(config);
            logStart(setup);
            WorkspaceExpiry expiry = WorkspaceExpiry.start(setup.workspaces(), WorkspaceExpiry.PERIOD);
            try {
                return stdio ? serveStdio(setup, protocolOut) : serveHttp(setup, keys);
            } finally {
                expiry.close();
            }
        } catch (ConfigException e) {
            System.err.println("code-exec-mcp: configuration error: " + e.getMessage());
            return 2;
        } catch (Exception e) {
            LOG.error("server could not start: {}", e.toString(), e);
            return 1;
        }
    }

    private static int serveHttp(ServerSetup setup, ApiKeys keys) throws Exception {
        HttpServer server = HttpServer.start(setup, keys);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            LOG.info("shutting down: no new requests; running executions get up to {} s",
                    setup.config().get(Config.SHUTDOWN_GRACE_SECONDS));
            server.close();
            stopped.countDown();
        }, "shutdown"));
        stopped.await();
        return 0;
    }

    private static int serveStdio(ServerSetup setup, PrintStream protocolOut) throws InterruptedException {
        StdioServer server = StdioServer.start(setup, System.in, protocolOut);
        Runtime.getRuntime().addShutdownHook(new Thread(server::close, "shutdown"));
        server.awaitEnd();
        LOG.info("stdin closed: shutting down");
        server.close();
        return 0;
    }

    private static void logStart(ServerSetup setup) {
        Config c = setup.config();
        LOG.info("code-exec-mcp {} starting: transport {}, sandbox {}, max concurrent {}, queue {} (wait up to {} ms), "
                        + "timeout default {} ms / max {} ms, memory {} MB, cpu {} s, processes {}, output {} KB, disk {} MB",
                setup.version(), c.get(Config.TRANSPORT), setup.sandbox().name(), c.get(Config.MAX_CONCURRENT),
                c.get(Config.QUEUE_SIZE), c.get(Config.QUEUE_TIMEOUT_MS), c.get(Config.DEFAULT_TIMEOUT_MS),
                c.get(Config.MAX_TIMEOUT_MS), c.get(Config.MEMORY_LIMIT_MB), c.get(Config.CPU_LIMIT_SECONDS),
                c.get(Config.MAX_PROCESSES), c.get(Config.MAX_OUTPUT_KB), c.get(Config.MAX_DISK_MB));
        if ("none".equals(setup.sandbox().name())) {
            LOG.warn("WARNING: SANDBOX=none: code runs WITHOUT ISOLATION, with the server's own rights. "
                    + "Use only for development on a machine you do not care about.");
        }
        setup.sandbox().unavailableReason().ifPresent(reason -> LOG.error(
                "sandbox {} cannot run code on this machine: {}. The server starts so that /healthz and runtime_info "
                        + "can report it, but execute_code will refuse every call.", setup.sandbox().name(), reason));
        if (!c.hasKeys() && !Config.isLoopback(c.get(Config.HOST))) {
            LOG.warn("WARNING: listening on {} without API_KEY or API_KEYS_FILE (ALLOW_UNAUTHENTICATED=true)",
                    c.get(Config.HOST));
        }
    }

    /** Builds the engine for production: the configured sandbox, the local executor and the request validator. */
    static ServerSetup wire(Config config) {
        return wire(config, List.of());
    }

    /**
     * The production wiring plus MCP extensions (the conformance suite's fixtures register themselves this way,
     * in test scope only).
     */
    public static ServerSetup wire(Config config, List<McpExtension> extensions) {
        boolean local = config.get(Config.WORKERS).isBlank();
        CompletableFuture<Sandbox> sandbox = local ? LocalEngine.startSandbox(config) : null;
        Languages languages = Languages.load();
        Executor executor;
        Sandbox.Status sandboxStatus;
        Workspaces workspaces;
        Optional<CodeTools> codeTools;
        if (local) {
            LocalEngine engine = LocalEngine.create(config, sandbox, languages);
            executor = engine.executor();
            sandboxStatus = engine.sandbox().status();
            workspaces = engine.workspaces();
            codeTools = engine.codeTools();
        } else {
            // The gateway connects to the upstreams too, for list_code_tools; the calls are made by the worker
            // that runs the code, with the same UPSTREAM_MCP_FILE (the gateway reads its APIs for listing only).
            codeTools = CodeTools.forGateway(config);
            // Gateway: code runs on the workers, which have the sandbox; requests are validated here all the same,
            // and the workspaces (on a volume shared with the workers) are served here.
            executor = RemoteExecutor.create(config, languages);
            sandboxStatus = new Sandbox.Status("workers", Optional.empty());
            workspaces = Workspaces.configured(config);
        }
        return new ServerSetup(config, executor, new RequestValidator(config, languages), sandboxStatus,
                Version.of(Main.class), extensions, workspaces, EgressSettings.of(config), codeTools);
    }
}
