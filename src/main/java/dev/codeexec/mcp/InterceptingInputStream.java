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
    private byte[] line = new byte[0];
    private int pos;
    private boolean eof;
    private boolean eofReported;

    /**
     * @param onEof called once when stdin ends (the client went away), so the process can shut down
     */
    public InterceptingInputStream(InputStream in, MessageInterceptor interceptor, String session, Runnable onEof) {
        this.in = in;
        this.interceptor = interceptor;
        this.session = session;
        this.onEof = onEof;
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
            if (buf.size() == 0) return fill();
        }
        String text = buf.toString(StandardCharsets.UTF_8);
        String out = text;
        if (!text.isBlank()) {
            try {
                out = interceptor.intercept(session, Principal.DEFAULT, text);
            } catch (JacksonException | MessageInterceptor.NotAMessage e) {
                LOG.debug("stdin line is not a JSON-RPC object; passing it to the SDK as is");
            }
        }
        line = (out + "\n").getBytes(StandardCharsets.UTF_8);
        pos = 0;
        return true;
    }

    @Override
    public void close() throws IOException {
        in.close();
    }
}
