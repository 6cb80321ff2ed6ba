package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import dev.codeexec.http.BufferedBodyRequest;
import dev.codeexec.auth.Principal;
import io.modelcontextprotocol.client.McpClient;
import io.modelcontextprotocol.client.McpSyncClient;
import io.modelcontextprotocol.client.transport.HttpClientStreamableHttpTransport;
import io.modelcontextprotocol.server.McpSyncServer;
import io.modelcontextprotocol.server.transport.HttpServletStreamableServerTransportProvider;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpFilter;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.EnumSet;

/**
 * The MCP server of {@link McpServers#http} behind a stand-in for the authenticating edge: the tenant comes from a
 * test header, and the real {@link MessageInterceptor} stamps it into every request's {@code _meta} exactly as
 * the HTTP edge does after checking an API key. Lets one test talk as two tenants through real MCP clients.
 */
final class TenantServer implements AutoCloseable {

    static final String TENANT_HEADER = "X-Test-Tenant";

    private final Server jetty;
    private final McpSyncServer mcp;
    private final ServerConnector connector;

    TenantServer(ServerSetup setup) throws Exception {
        RunRegistry registry = new RunRegistry();
        MessageInterceptor interceptor = new MessageInterceptor(registry, (tenant, uri) -> McpServers.mayWatch(setup, tenant, uri));
        HttpServletStreamableServerTransportProvider transport = HttpServletStreamableServerTransportProvider.builder()
                .mcpEndpoint("/mcp").build();
        mcp = McpServers.http(transport, setup, registry);
        jetty = new Server();
        connector = new ServerConnector(jetty);
        connector.setHost("127.0.0.1");
        connector.setPort(0);
        jetty.addConnector(connector);
        ServletContextHandler context = new ServletContextHandler("/");
        FilterHolder stamp = new FilterHolder(new HttpFilter() {
            @Override
            protected void doFilter(HttpServletRequest req, HttpServletResponse res, FilterChain chain)
                    throws IOException, ServletException {
                if (!"POST".equals(req.getMethod())) {
                    chain.doFilter(req, res);
                    return;
                }
                String tenant = req.getHeader(TENANT_HEADER) == null ? "default" : req.getHeader(TENANT_HEADER);
                String body = new String(req.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                String stamped = interceptor.intercept(req.getHeader("Mcp-Session-Id"), new Principal(tenant, false), body);
                chain.doFilter(new BufferedBodyRequest(req, stamped.getBytes(StandardCharsets.UTF_8)), res);
            }
        });
        stamp.setAsyncSupported(true);
        context.addFilter(stamp, "/mcp", EnumSet.of(DispatcherType.REQUEST));
        ServletHolder servlet = new ServletHolder(transport);
        servlet.setAsyncSupported(true);
        context.addServlet(servlet, "/mcp");
        jetty.setHandler(context);
        jetty.start();
    }

    /** A client that always speaks as {@code tenant}. */
    McpSyncClient client(String tenant) {
        return client(tenant, spec -> spec);
    }

    /** The same, with more of the client set up ({@code more}: consumers of notifications, say). */
    McpSyncClient client(String tenant, java.util.function.UnaryOperator<McpClient.SyncSpec> more) {
        McpSyncClient c = more.apply(McpClient.sync(HttpClientStreamableHttpTransport.builder("http://127.0.0.1:" + connector.getLocalPort())
                        .httpRequestCustomizer((builder, method, uri, body, ctx) -> builder.header(TENANT_HEADER, tenant))
                        .build())
                // the client checks every structured result against its tool's output schema (the server does not)
                .enableCallToolSchemaCaching(true).requestTimeout(Duration.ofSeconds(30))).build();
        c.initialize();
        return c;
    }

    @Override
    public void close() throws Exception {
        mcp.closeGracefully();
        jetty.stop();
    }

}
