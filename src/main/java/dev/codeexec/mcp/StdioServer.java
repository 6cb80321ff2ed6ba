package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import io.modelcontextprotocol.json.McpJsonDefaults;
import io.modelcontextprotocol.server.McpSyncServer;
import io.modelcontextprotocol.server.transport.StdioServerTransportProvider;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.modelcontextprotocol.modern.server.transport.StdioMcpTransport;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * MCP over stdin/stdout: one session, the client's process at the other end. Cancellation is seen on stdin by
 * {@link InterceptingInputStream}; the end of stdin ends the server.
 *
 * <p>Both revisions on the one pipe, message by message: a message of 2026-07-28 ({@code server/discover}, or a
 * request whose {@code _meta} names that revision) goes to the stateless server ({@link ModernMcp}), everything else
 * to the 2025-11-25 session. Their answers share stdout a whole line at a time.
 */
public final class StdioServer implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(StdioServer.class);

    private final McpSyncServer mcp;
    private final StdioMcpTransport modern;
    private final Lines modernIn;
    private final ServerSetup setup;
    private final CountDownLatch ended;
    private boolean closed;

    private StdioServer(McpSyncServer mcp, StdioMcpTransport modern, Lines modernIn, ServerSetup setup,
            CountDownLatch ended) {
        this.mcp = mcp;
        this.modern = modern;
        this.modernIn = modernIn;
        this.setup = setup;
        this.ended = ended;
    }

    /** Starts reading {@code in} and writing JSON-RPC lines to {@code out} (nothing else may write there). */
    public static StdioServer start(ServerSetup given, InputStream in, OutputStream out) {
        ServerSetup setup = given.withJobs();
        RunRegistry registry = new RunRegistry();
        CountDownLatch ended = new CountDownLatch(1);
        Lines modernIn = new Lines();
        Object writing = new Object();
        InputStream intercepted = new InterceptingInputStream(in, new MessageInterceptor(registry),
                RunRegistry.STDIO_SESSION, () -> {
                    modernIn.end();
                    ended.countDown();
                }, modernIn::add);
        StdioServerTransportProvider transport = new StdioServerTransportProvider(McpJsonDefaults.getMapper(),
                intercepted, new WholeLines(out, writing));
        McpSyncServer mcp = McpServers.stdio(transport, setup, registry);
        StdioMcpTransport modern = new StdioMcpTransport(ModernMcp.server(setup, registry), McpJsonDefaults.getMapper(),
                modernIn, new WholeLines(out, writing));
        modern.start().subscribe();
        LOG.info("serving MCP over stdio");
        return new StdioServer(mcp, modern, modernIn, setup, ended);
    }

    /** The 2026-07-28 messages, one line each, as the stateless server's stdin; ends when stdin ends. */
    static final class Lines extends InputStream {
        private static final byte[] END = new byte[0];
        private final BlockingQueue<byte[]> lines = new LinkedBlockingQueue<>();
        private byte[] line = new byte[0];
        private int pos;
        private boolean ended;

        void add(String message) {
            lines.add((message + "\n").getBytes(StandardCharsets.UTF_8));
        }

        void end() {
            lines.add(END);
        }

        @Override
        public int read() throws IOException {
            byte[] one = new byte[1];
            return read(one, 0, 1) == -1 ? -1 : one[0] & 0xff;
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            if (len == 0) return 0;
            while (pos >= line.length) {
                if (ended) return -1;
                try {
                    line = lines.take();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new java.io.InterruptedIOException();
                }
                pos = 0;
                if (line == END) ended = true;
            }
            int n = Math.min(len, line.length - pos);
            System.arraycopy(line, pos, b, off, n);
            pos += n;
            return n;
        }
    }

    /**
     * One writer's view of stdout: what it writes goes out a whole line at a time, under a lock shared with the
     * other writer, so the two servers' messages never interleave within a line.
     */
    static final class WholeLines extends OutputStream {
        private final OutputStream out;
        private final Object lock;
        private final ByteArrayOutputStream pending = new ByteArrayOutputStream();

        WholeLines(OutputStream out, Object lock) {
            this.out = out;
            this.lock = lock;
        }

        @Override
        public void write(int b) throws IOException {
            write(new byte[] {(byte) b}, 0, 1);
        }

        @Override
        public synchronized void write(byte[] b, int off, int len) throws IOException {
            int start = off;
            for (int i = off; i < off + len; i++) {
                if (b[i] != '\n') continue;
                pending.write(b, start, i + 1 - start);
                synchronized (lock) {
                    pending.writeTo(out);
                    out.flush();
                }
                pending.reset();
                start = i + 1;
            }
            pending.write(b, start, off + len - start);
        }

        @Override
        public void flush() {
            // a line goes out whole when it ends; a part of one waits for the rest
        }
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
        modernIn.end();
        try {
            modern.closeGracefully().block(java.time.Duration.ofSeconds(5));
        } catch (RuntimeException e) {
            LOG.debug("the 2026-07-28 stdio server did not close cleanly: {}", e.toString());
        }
    }
}
