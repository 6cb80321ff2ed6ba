package dev.codeexec.http;

import dev.codeexec.agent.Agent;
import dev.codeexec.agent.ChatSettings;
import dev.codeexec.auth.ApiKeys;
import dev.codeexec.mcp.InProcessTools;
import dev.codeexec.config.Config;
import dev.codeexec.config.DataDir;
import dev.codeexec.engine.ObservedExecutor;
import dev.codeexec.engine.RunObserver;
import dev.codeexec.auth.Principal;
import dev.codeexec.mcp.DirectToolsServer;
import dev.codeexec.mcp.McpServers;
import dev.codeexec.mcp.ModernMcp;
import dev.codeexec.mcp.MessageInterceptor;
import dev.codeexec.mcp.RunRegistry;
import dev.codeexec.surface.ServerSetup;
import dev.codeexec.ops.Metrics;
import dev.codeexec.ops.RunHistory;
import io.modelcontextprotocol.server.McpSyncServer;
import io.modelcontextprotocol.common.McpTransportContext;
import io.modelcontextprotocol.modern.server.transport.HttpServletMcpTransport;
import io.modelcontextprotocol.server.transport.HttpServletStreamableServerTransportProvider;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.MultipartConfigElement;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.http.UriCompliance;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.HttpConfiguration;
import org.eclipse.jetty.server.HttpConnectionFactory;
import org.eclipse.jetty.server.NetworkConnector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.util.thread.QueuedThreadPool;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import dev.codeexec.preview.PreviewProxy;
import java.util.ArrayList;
import java.util.Optional;
import java.util.List;
import java.util.EnumSet;
import java.util.concurrent.Executors;

/**
 * The HTTP server: Jetty 12 with one servlet context holding the edge filter, the /mcp filter and the SDK's
 * Streamable HTTP servlet (and the same pair for /mcp-no-code-execute, {@link DirectToolsServer}), the REST file API
 * under /api ({@link ApiServlet}), the admin console at /admin ({@link AdminConsoleServlet}), /healthz and /metrics; around it all {@link RequestTracker} (request ids, HTTP
 * metrics). Requests run on virtual threads, so a tool call that waits minutes for its run costs no platform
 * thread. Start with {@link #start}; {@link #close()} shuts down in order.
 */
public final class HttpServer implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(HttpServer.class);
    /** After the runs have ended, how long their calls get to write their results. */
    private static final long RESULT_DELIVERY_MILLIS = 5000;

    private final Server jetty;
    private final ServerConnector connector;
    private final McpSyncServer mcp;
    /** /mcp-no-code-execute's server and filter. */
    private final McpSyncServer direct;
    private final McpEndpointFilter directEndpoint;
    private final ServerSetup setup;
    private final RunRegistry registry;
    private final McpEndpointFilter endpoint;
    private final Metrics metrics;
    private final Bodies bodies;
    /** The preview listener, when previews are served here. */
    private final Optional<PreviewProxy> previews;
    private boolean closed;

    private HttpServer(Server jetty, ServerConnector connector, McpSyncServer mcp, ServerSetup setup,
            RunRegistry registry, McpEndpointFilter endpoint, Metrics metrics, Bodies bodies,
            Optional<PreviewProxy> previews, McpSyncServer direct, McpEndpointFilter directEndpoint) {
        this.direct = direct;
        this.directEndpoint = directEndpoint;
        this.bodies = bodies;
        this.previews = previews;
        this.endpoint = endpoint;
        this.metrics = metrics;
        this.jetty = jetty;
        this.connector = connector;
        this.mcp = mcp;
        this.setup = setup;
        this.registry = registry;
    }

    /** Binds HOST:PORT (PORT=0 picks a free port, see {@link #port()}) and starts serving. */
    public static HttpServer start(ServerSetup setup) throws Exception {
        return start(setup, ApiKeys.load(setup.config()));
    }

    /** With the keys already loaded (Main loads them before the engine, so a bad key file fails fast). */
    public static HttpServer start(ServerSetup setup, ApiKeys keys) throws Exception {
        // Every surface of this server submits through one observed executor, so history and metrics see each run.
        List<RunObserver> observers = new ArrayList<>();
        Metrics metrics = Metrics.create(setup.executor());
        observers.add(metrics);
        RunHistory history = new RunHistory();
        observers.add(history);
        setup = setup.withExecutor(new ObservedExecutor(setup.executor(), observers)).withJobs().withPreviews();
        metrics.bindJobs(setup.jobsOrFail());
        Optional<PreviewProxy> previewListener = PreviewListener.start(setup.config(), setup.previews().orElseThrow(), keys, metrics);
        Config config = setup.config();
        RunRegistry registry = new RunRegistry();
        long maxBody = EdgeFilter.maxBodyBytes(config);
        Bodies bodies = new Bodies(config.get(Config.BODY_MEMORY_MB) * 1024L * 1024L,
                java.time.Duration.ofSeconds(config.get(Config.BODY_TIMEOUT_SECONDS)));

        HttpServletStreamableServerTransportProvider transport = HttpServletStreamableServerTransportProvider.builder()
                .mcpEndpoint(EdgeFilter.MCP_PATH)
                // The filter has already capped the body; the interceptor may add a few bytes of _meta to it.
                .maxRequestSize((int) Math.min(Integer.MAX_VALUE, maxBody + 65536))
                .build();
        McpSyncServer mcp = McpServers.http(transport, setup, registry);
        // The upstream tools one by one; the tenant each listing and call is for comes from the edge's principal.
        HttpServletStreamableServerTransportProvider directTransport = HttpServletStreamableServerTransportProvider.builder()
                .mcpEndpoint(DirectToolsServer.PATH)
                .maxRequestSize((int) Math.min(Integer.MAX_VALUE, maxBody + 65536))
                .contextExtractor(request -> DirectToolsServer.context(
                        request.getAttribute(Principal.ATTRIBUTE) instanceof Principal p ? p : Principal.DEFAULT))
                .build();
        McpSyncServer direct = DirectToolsServer.http(directTransport, setup);

        QueuedThreadPool threads = new QueuedThreadPool();
        threads.setName("http");
        threads.setVirtualThreadsExecutor(Executors.newThreadPerTaskExecutor(Thread.ofVirtual().name("http-v-", 0).factory()));
        Server jetty = new Server(threads);
        HttpConfiguration http = new HttpConfiguration();
        http.setSendServerVersion(false);
        http.setSendXPoweredBy(false);
        // Checked by ApiUriGuard instead, which answers with a JSON body (Jetty's own refusal has none).
        http.setUriCompliance(UriCompliance.UNSAFE);
        ServerConnector connector = new ServerConnector(jetty, new HttpConnectionFactory(http));
        connector.setHost(config.get(Config.HOST));
        connector.setPort(config.get(Config.PORT));
        // A run may print nothing for minutes while its call waits; the connection must outlive the longest call.
        connector.setIdleTimeout(setup.requestTimeout().toMillis());
        jetty.addConnector(connector);

        ServletContextHandler context = new ServletContextHandler("/");
        context.setErrorHandler(JsonErrorHandler.context());
        FilterHolder edge = new FilterHolder(new EdgeFilter(config, keys));
        edge.setAsyncSupported(true);
        context.addFilter(edge, "/*", EnumSet.of(DispatcherType.REQUEST));
        ServerSetup served = setup;
        // Revision 2026-07-28 on the same /mcp: the filter hands each of its requests to this servlet
        HttpServletMcpTransport stateless = HttpServletMcpTransport.builder(ModernMcp.server(setup, registry))
                .endpoint(EdgeFilter.MCP_PATH)
                .maxRequestSize((int) Math.min(Integer.MAX_VALUE, maxBody + 65536))
                .contextExtractor(request -> McpTransportContext.EMPTY)
                // Host and Origin are checked at the edge for every path (EdgeFilter), as for 2025-11-25
                .httpHeaderValidator(io.modelcontextprotocol.server.transport.ServerHttpHeaderValidator.NOOP)
                .build();
        McpEndpointFilter endpointFilter = new McpEndpointFilter(new MessageInterceptor(registry,
                (tenant, uri) -> dev.codeexec.mcp.McpServers.mayWatch(served, tenant, uri)), registry, maxBody,
                bodies, stateless);
        FilterHolder endpoint = new FilterHolder(endpointFilter);
        endpoint.setAsyncSupported(true);
        context.addFilter(endpoint, EdgeFilter.MCP_PATH, EnumSet.of(DispatcherType.REQUEST));
        ServletHolder mcpServlet = new ServletHolder(transport);
        mcpServlet.setAsyncSupported(true);
        context.addServlet(mcpServlet, EdgeFilter.MCP_PATH);
        // The same edge and the same endpoint checks as /mcp (session ownership by key, bodies); its own sessions.
        McpEndpointFilter directFilter = new McpEndpointFilter(new MessageInterceptor(registry), registry, maxBody, bodies);
        FilterHolder directHolder = new FilterHolder(directFilter);
        directHolder.setAsyncSupported(true);
        context.addFilter(directHolder, DirectToolsServer.PATH, EnumSet.of(DispatcherType.REQUEST));
        ServletHolder directServlet = new ServletHolder(directTransport);
        directServlet.setAsyncSupported(true);
        context.addServlet(directServlet, DirectToolsServer.PATH);
        DataDir data = DataDir.of(config);
        ServletHolder api = new ServletHolder(new ApiServlet(setup.workspaces(),
                new Uploads(setup.workspaces(), EdgeFilter.maxUploadBytes(config), data),
                new AdminApi(setup, history, maxBody, bodies), new JobsApi(setup, maxBody, bodies),
                new ChatApi(Agent.create(ChatSettings.of(config), InProcessTools.of(setup), setup.codeTools())
                        .observedBy(metrics::chatAnswer), bodies),
                bodies));
        // Parts over 64 KB are spooled to disk while the body is parsed, so memory stays bounded per upload.
        api.getRegistration().setMultipartConfig(new MultipartConfigElement(data.uploadSpool().toString(),
                EdgeFilter.maxUploadBytes(config), EdgeFilter.maxUploadBytes(config) + EdgeFilter.ENVELOPE_BYTES,
                64 * 1024));
        context.addServlet(api, JsonErrors.API_PATH + "/*");
        ServletHolder console = new ServletHolder(new AdminConsoleServlet("admin"));
        context.addServlet(console, AdminConsoleServlet.PATH);
        context.addServlet(console, AdminConsoleServlet.PATH + "/*");
        context.addServlet(new ServletHolder(new HealthServlet(setup.executor(), setup.sandbox(), setup.version())),
                EdgeFilter.HEALTH_PATH);
        context.addServlet(new ServletHolder(new MetricsServlet(metrics)), EdgeFilter.METRICS_PATH);
        ApiUriGuard guard = new ApiUriGuard();
        guard.setHandler(context);
        RequestTracker tracker = new RequestTracker(metrics);
        tracker.setHandler(guard);
        jetty.setHandler(tracker);
        jetty.setErrorHandler(JsonErrorHandler.server());
        jetty.setStopTimeout(5000);
        jetty.start();
        HttpServer server = new HttpServer(jetty, connector, mcp, setup, registry, endpointFilter, metrics,
                bodies, previewListener, direct, directFilter);
        LOG.info("listening on http://{}:{}/mcp (healthz at {}, metrics at {})", config.get(Config.HOST), server.port(),
                EdgeFilter.HEALTH_PATH, EdgeFilter.METRICS_PATH);
        return server;
    }

    /** The bound port (the real one when PORT=0). */
    public int port() {
        return connector.getLocalPort();
    }

    /** The budget of request bodies in memory (tests). */
    Bodies bodies() {
        return bodies;
    }

    /** Runs registered for cancellation now (tests). */
    public RunRegistry registry() {
        return registry;
    }

    /**
     * Stops accepting connections, lets the executor finish or kill its runs (it waits up to
     * SHUTDOWN_GRACE_SECONDS), so that calls in flight still get their result, then closes MCP sessions and Jetty.
     */
    @Override
    public synchronized void close() {
        if (closed) return;
        closed = true;
        for (Connector c : jetty.getConnectors()) {
            if (c instanceof NetworkConnector n) n.close();
        }
        previews.ifPresent(PreviewProxy::close);
        setup.closeEngine();
        try {
            endpoint.awaitIdle(RESULT_DELIVERY_MILLIS);
            directEndpoint.awaitIdle(RESULT_DELIVERY_MILLIS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            mcp.closeGracefully();
        } catch (RuntimeException e) {
            LOG.debug("MCP sessions did not close cleanly: {}", e.toString());
        }
        try {
            direct.closeGracefully();
        } catch (RuntimeException e) {
            LOG.debug("/mcp-no-code-execute sessions did not close cleanly: {}", e.toString());
        }
        try {
            jetty.stop();
        } catch (Exception e) {
            LOG.warn("HTTP server did not stop cleanly: {}", e.toString());
        }
        metrics.close();
    }
}
