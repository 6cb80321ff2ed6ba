package dev.codeexec.egress;

import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLException;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;

/**
 * The server side of TLS over a blocking channel, as streams: what {@link SecretTunnel} speaks with the program.
 * An {@link SSLEngine} because the program's end is a unix socket, which {@code SSLSocket} cannot layer on. One
 * thread uses it at a time (the tunnel reads a request, then writes its response).
 */
final class TlsServerStream {

    private static final ByteBuffer EMPTY = ByteBuffer.allocate(0);

    private final SSLEngine engine;
    private final SocketChannel channel;
    private ByteBuffer netIn;
    private ByteBuffer appIn;
    private ByteBuffer netOut;

    /** @param early bytes the program sent already (its ClientHello, maybe more) */
    TlsServerStream(SSLEngine engine, SocketChannel channel, byte[] early) {
        this.engine = engine;
        this.channel = channel;
        int packet = engine.getSession().getPacketBufferSize();
        netIn = ByteBuffer.allocate(Math.max(packet, early.length));
        netIn.put(early);
        appIn = ByteBuffer.allocate(engine.getSession().getApplicationBufferSize());
        netOut = ByteBuffer.allocate(packet);
    }

    /** Completes the handshake; the program's first request may already be in {@link #in()} after it. */
    void handshake() throws IOException {
        engine.beginHandshake();
        while (true) {
            switch (engine.getHandshakeStatus()) {
                case NOT_HANDSHAKING, FINISHED -> {
                    return;
                }
                case NEED_TASK -> runTasks();
                case NEED_WRAP -> wrap(EMPTY);
                case NEED_UNWRAP, NEED_UNWRAP_AGAIN -> {
                    if (!unwrap()) throw new EOFException("the program closed the connection during the TLS handshake");
                }
            }
        }
    }

    /** The application protocol agreed on (ALPN), empty when none was asked for. */
    String protocol() {
        String p = engine.getApplicationProtocol();
        return p == null ? "" : p;
    }

    /** Reads and decrypts one step; false at the end of the stream or when TLS closed. */
    private boolean unwrap() throws IOException {
        while (true) {
            netIn.flip();
            SSLEngineResult r = engine.unwrap(netIn, appIn);
            netIn.compact();
            switch (r.getStatus()) {
                case OK -> {
                    if (r.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NEED_TASK) runTasks();
                    return true;
                }
                case BUFFER_OVERFLOW -> appIn = grow(appIn, engine.getSession().getApplicationBufferSize());
                case BUFFER_UNDERFLOW -> {
                    if (!netIn.hasRemaining()) netIn = grow(netIn, engine.getSession().getPacketBufferSize());
                    if (channel.read(netIn) < 0) return false;
                }
                case CLOSED -> {
                    return false;
                }
            }
        }
    }

    /** Encrypts and sends all of {@code src} (a handshake message when it is empty). */
    private void wrap(ByteBuffer src) throws IOException {
        while (true) {
            netOut.clear();
            SSLEngineResult r = engine.wrap(src, netOut);
            if (r.getStatus() == SSLEngineResult.Status.BUFFER_OVERFLOW) {
                netOut = ByteBuffer.allocate(Math.max(netOut.capacity() * 2, engine.getSession().getPacketBufferSize()));
                continue;
            }
            if (r.getStatus() == SSLEngineResult.Status.CLOSED && src.hasRemaining())
                throw new SSLException("the TLS connection to the program is closed");
            netOut.flip();
            while (netOut.hasRemaining()) channel.write(netOut);
            if (r.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NEED_TASK) runTasks();
            if (r.getStatus() == SSLEngineResult.Status.CLOSED || !src.hasRemaining()) return;
        }
    }

    private void runTasks() {
        Runnable task;
        while ((task = engine.getDelegatedTask()) != null) task.run();
    }

    private static ByteBuffer grow(ByteBuffer b, int at) {
        ByteBuffer bigger = ByteBuffer.allocate(Math.max(b.capacity() * 2, b.position() + at));
        b.flip();
        bigger.put(b);
        return bigger;
    }

    /** Sends close_notify (best effort). */
    void close() {
        try {
            engine.closeOutbound();
            while (!engine.isOutboundDone()) wrap(EMPTY);
        } catch (IOException e) {
            // the program went away first
        }
    }

    InputStream in() {
        return new InputStream() {
            @Override
            public int read() throws IOException {
                byte[] one = new byte[1];
                return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
            }

            @Override
            public int read(byte[] b, int off, int len) throws IOException {
                if (len == 0) return 0;
                while (appIn.position() == 0) {
                    if (!unwrap()) return -1;
                    // a post-handshake message (a key update) may ask for an answer
                    if (engine.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NEED_WRAP) wrap(EMPTY);
                }
                appIn.flip();
                int n = Math.min(len, appIn.remaining());
                appIn.get(b, off, n);
                appIn.compact();
                return n;
            }
        };
    }

    OutputStream out() {
        return new OutputStream() {
            @Override
            public void write(int b) throws IOException {
                write(new byte[] {(byte) b}, 0, 1);
            }

            @Override
            public void write(byte[] b, int off, int len) throws IOException {
                ByteBuffer src = ByteBuffer.wrap(b, off, len);
                while (src.hasRemaining()) wrap(src);
            }
        };
    }
}
