package dev.codeexec.preview;

import java.io.IOException;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;

/**
 * One connection to a port inside a sandbox, through the unix socket its init listens on: the proxy writes the port
 * (2 bytes, big-endian), init connects to {@code 127.0.0.1:port} inside the sandbox and answers one byte, 0 when
 * connected (from then on bytes pass both ways), 1 when nothing listens there.
 */
final class Upstream implements AutoCloseable {

    final String token;
    final SocketChannel channel;
    final Wire in;

    private Upstream(String token, SocketChannel channel, Wire.Source source) {
        this.token = token;
        this.channel = channel;
        this.in = new Wire(source);
    }

    /**
     * Connects to {@code target}'s port; null when nothing listens there (init's 1, its close, or no socket: the
     * sandbox has ended). {@code activity} is called on every byte that moves, for the idle timeout.
     *
     * @param opened called with the channel before the handshake, so that closing the connection can end a wait
     */
    static Upstream open(PreviewProxy.Target target, Runnable activity, java.util.function.Consumer<SocketChannel> opened) {
        SocketChannel ch = null;
        try {
            ch = SocketChannel.open(UnixDomainSocketAddress.of(target.socket()));
            opened.accept(ch);
            writeAll(ch, ByteBuffer.wrap(new byte[] {(byte) (target.port() >> 8), (byte) target.port()}));
            ByteBuffer answer = ByteBuffer.allocate(1);
            if (ch.read(answer) != 1 || answer.get(0) != 0) {
                ch.close();
                return null;
            }
            SocketChannel channel = ch;
            return new Upstream(target.token(), ch, (b, off, len) -> {
                int r = channel.read(ByteBuffer.wrap(b, off, len));
                if (r > 0) activity.run();
                return r;
            });
        } catch (IOException | RuntimeException e) {
            closeQuietly(ch);
            return null;
        }
    }

    void write(byte[] b, int off, int len) throws IOException {
        writeAll(channel, ByteBuffer.wrap(b, off, len));
    }

    @Override
    public void close() {
        closeQuietly(channel);
    }

    private static void writeAll(SocketChannel ch, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) ch.write(b);
    }

    static void closeQuietly(AutoCloseable c) {
        if (c == null) return;
        try {
            c.close();
        } catch (Exception e) {
            // closing
        }
    }
}
