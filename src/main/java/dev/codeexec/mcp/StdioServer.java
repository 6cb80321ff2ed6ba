package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import io.modelcontextprotocol.json.McpJsonDefaults;
import io.modelcontextprotocol.server.McpSyncServer;
import io.modelcontextprotocol.server.transport.StdioServerTransportProvider;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.InputStream;
import java.io.OutputStream;
import java.util.concurrent.CountDownLatch;

/**
 * MCP over stdin/stdout: one session, the client's process at the other end. Cancellation is seen on stdin by
 * {@link InterceptingInputStream}; the end of stdin ends the server.
 */
public final class StdioServer implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(StdioServer.class);

    private final McpSyncServer mcp;
    private final ServerSetup setup;
    private final CountDownLatch ended;
    private boolean closed;

    private StdioServer(McpSyncServer mcp, ServerSetup setup, CountDownLatch ended) {
        this.mcp = mcp;
        this.setup = setup;
        this.ended = ended;
    }

    /** Starts reading {@code in} and writing JSON-RPC lines to {@code out} (nothing else may write there). */
    public static StdioServer start(ServerSetup given, InputStream in, OutputStream out) {
        ServerSetup setup = given.withJobs();
        RunRegistry registry = new RunRegistry();
        CountDownLatch ended = new CountDownLatch(1);
        InputStream intercepted = new InterceptingInputStream(in, new MessageInterceptor(registry),
                RunRegistry.STDIO_SESSION, ended::countDown);
        StdioServerTransportProvider transport = new StdioServerTransportProvider(McpJsonDefaults.getMapper(),
                intercepted, out);
        McpSyncServer mcp = McpServers.stdio(transport, setup, registry);
        LOG.info("serving MCP over stdio");
        return new StdioServer(mcp, setup, ended);
    }

    /** Blocks until the client closes stdin. */
    public void awaitEnd() throws InterruptedException {
        ended.await();
    }

    /** Finishes or kills the runs (executor grace), then closes the session. */
    @Override
    public synchronized void close() {
        if (closed) return;
        closed = true;
        setup.closeEngine();
        try {
            mcp.closeGracefully();
        } catch (RuntimeException e) {
            LOG.debug("MCP session did not close cleanly: {}", e.toString());
        }
    }
}
