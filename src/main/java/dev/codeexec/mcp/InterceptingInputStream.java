package dev.codeexec.mcp;

import dev.codeexec.auth.Principal;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.core.JacksonException;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;

/**
 * Stdin for the SDK's stdio transport, passed through {@link MessageInterceptor} one line at a time.
 *
 * <p>Why a stream: {@code StdioServerTransportProvider} reads lines from the InputStream it is given and offers no
 * hook before it dispatches (and it drops {@code notifications/cancelled}). Wrapping the stream is the one place
 * where every message can be seen, in order, before the SDK parses it, without copying any SDK code. Lines that
 * are not JSON pass through unchanged, so the SDK reports them exactly as it would have.
 */
public final class InterceptingInputStream extends InputStream {

    private static final Logger LOG = LoggerFactory.getLogger(InterceptingInputStream.class);

    private final InputStream in;
    private final MessageInterceptor interceptor;
    private final String session;
    private final Runnable onEof;
    private final java.util.function.Consumer<String> modern;
    private byte[] line = new byte[0];
    private int pos;
    private boolean eof;
    private boolean eofReported;

    /**
     * @param onEof called once when stdin ends (the client went away), so the process can shut down
     */
    public InterceptingInputStream(InputStream in, MessageInterceptor interceptor, String session, Runnable onEof) {
        this(in, interceptor, session, onEof, null);
    }

    /**
     * @param modern where the messages of revision 2026-07-28 go instead ({@link #isModern}), already intercepted;
     *               null: every message is the SDK's
     */
    public InterceptingInputStream(InputStream in, MessageInterceptor interceptor, String session, Runnable onEof,
            java.util.function.Consumer<String> modern) {
        this.in = in;
        this.interceptor = interceptor;
        this.session = session;
        this.onEof = onEof;
        this.modern = modern;
    }

    /** The request's (or notification's) revision key in {@code _meta}, which only revision 2026-07-28 and later send. */
    static final String PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion";

    /**
     * Whether a message is of revision 2026-07-28 or later: {@code server/discover}, or a request or notification
     * whose {@code _meta} names such a revision (a 2025-11-25 client never sends that key).
     */
    static boolean isModern(String message) {
        if (!message.contains("server/discover") && !message.contains(PROTOCOL_VERSION_META)) return false;
        try {
            tools.jackson.databind.JsonNode m = tools.jackson.databind.json.JsonMapper.shared().readTree(message);
            if (m.path("method").asString("").equals("server/discover")) return true;
            String v = m.path("params").path("_meta").path(PROTOCOL_VERSION_META).asString("");
            return !v.isEmpty() && v.compareTo(ModernMcp.REVISION) >= 0;
        } catch (JacksonException e) {
            return false;
        }
    }

    @Override
    public int read() throws IOException {
        if (!fill()) return -1;
        return line[pos++] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
        if (len == 0) return 0;
        if (!fill()) return -1;
        int n = Math.min(len, line.length - pos);
        System.arraycopy(line, pos, b, off, n);
        pos += n;
        return n;
    }

    private boolean fill() throws IOException {
        if (pos < line.length) return true;
        while (true) { // until a line for the SDK, or the end (a 2026-07-28 message goes elsewhere and is not one)
            if (eof) {
                if (!eofReported) {
                    eofReported = true;
                    onEof.run();
                }
                return false;
            }
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            int c;
            while ((c = in.read()) != -1 && c != '\n') buf.write(c);
            if (c == -1) {
                eof = true;
                if (buf.size() == 0) continue;
            }
            String text = buf.toString(StandardCharsets.UTF_8);
            String out = text;
            if (!text.isBlank()) {
                try {
                    out = interceptor.intercept(session, Principal.DEFAULT, text);
                } catch (JacksonException | MessageInterceptor.NotAMessage e) {
                    LOG.debug("stdin line is not a JSON-RPC object; passing it to the SDK as is");
                }
                if (modern != null && isModern(out)) {
                    modern.accept(out);
                    continue;
                }
            }
            line = (out + "\n").getBytes(StandardCharsets.UTF_8);
            pos = 0;
            return true;
        }
    }

    @Override
    public void close() throws IOException {
        in.close();
    }
}
