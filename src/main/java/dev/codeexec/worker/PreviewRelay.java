package dev.codeexec.worker;

import dev.codeexec.engine.PreviewControl;
import dev.codeexec.wire.v1.PreviewFrame;
import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;

import java.io.IOException;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.Optional;

/**
 * One preview connection a gateway carries to this worker (worker.proto's Preview): {@code open} names the token and
 * port; the relay connects through the sandbox's preview socket (init's protocol: two port bytes, one answer byte),
 * answers {@code connected}, then moves bytes both ways. Bytes to the gateway wait for the call to be ready (no
 * unbounded buffering); a half-close either way is passed on; a cancelled call closes the connection.
 */
final class PreviewRelay implements StreamObserver<PreviewFrame> {

    /** The most one data message carries. */
    static final int CHUNK = 64 * 1024;

    private final ServerCallStreamObserver<PreviewFrame> out;
    private final PreviewControl previews;
    private final Object ready = new Object();
    private volatile SocketChannel channel;
    private volatile boolean closed;

    PreviewRelay(ServerCallStreamObserver<PreviewFrame> out, PreviewControl previews) {
        this.out = out;
        this.previews = previews;
        out.setOnReadyHandler(() -> {
            synchronized (ready) {
                ready.notifyAll();
            }
        });
        out.setOnCancelHandler(this::close);
    }

    @Override
    public void onNext(PreviewFrame frame) {
        switch (frame.getFrameCase()) {
            case OPEN -> open(frame.getOpen().getToken(), frame.getOpen().getPort());
            case DATA -> write(frame.getData());
            default -> fail(Status.INVALID_ARGUMENT.withDescription("a preview call sends open, then data"));
        }
    }

    private void open(String token, int port) {
        if (channel != null) {
            fail(Status.INVALID_ARGUMENT.withDescription("one open per preview call"));
            return;
        }
        Optional<PreviewControl.Preview> p = previews.find(token);
        if (p.isEmpty()) {
            fail(Status.NOT_FOUND.withDescription("no such preview"));
            return;
        }
        boolean connected = false;
        try {
            SocketChannel ch = SocketChannel.open(UnixDomainSocketAddress.of(p.get().socket()));
            channel = ch;
            ch.write(ByteBuffer.wrap(new byte[] {(byte) (port >> 8), (byte) port}));
            ByteBuffer answer = ByteBuffer.allocate(1);
            connected = ch.read(answer) == 1 && answer.get(0) == 0;
        } catch (IOException | RuntimeException e) {
            // the sandbox has ended, or its init refused: nothing listens there
        }
        out.onNext(PreviewFrame.newBuilder().setConnected(connected).build());
        if (!connected) {
            close();
            out.onCompleted();
            return;
        }
        Thread.ofVirtual().name("preview-relay").start(this::pump);
    }

    /** The program's bytes to the gateway, as the call can take them; its end as the call's end. */
    private void pump() {
        ByteBuffer buf = ByteBuffer.allocate(CHUNK);
        try {
            while (!closed) {
                buf.clear();
                int n = channel.read(buf);
                if (n < 0) break;
                synchronized (ready) {
                    while (!out.isReady() && !closed) ready.wait(1000);
                }
                if (closed) return;
                out.onNext(PreviewFrame.newBuilder().setData(ByteString.copyFrom(buf.array(), 0, n)).build());
            }
            out.onCompleted();
        } catch (IOException | InterruptedException | RuntimeException e) {
            if (!closed) {
                try {
                    out.onError(Status.UNAVAILABLE.withDescription("the preview connection ended").asRuntimeException());
                } catch (RuntimeException ignored) {
                    // the call has ended already
                }
            }
        } finally {
            close();
        }
    }

    private void write(ByteString data) {
        SocketChannel ch = channel;
        if (ch == null) {
            fail(Status.INVALID_ARGUMENT.withDescription("data before open"));
            return;
        }
        try {
            ByteBuffer b = data.asReadOnlyByteBuffer();
            while (b.hasRemaining()) ch.write(b);
        } catch (IOException e) {
            close();
        }
    }

    private void fail(Status status) {
        close();
        try {
            out.onError(status.asRuntimeException());
        } catch (RuntimeException ignored) {
            // the call has ended already
        }
    }

    @Override
    public void onError(Throwable t) {
        close();
    }

    /** The gateway's half-close: the program reads its end of input. */
    @Override
    public void onCompleted() {
        SocketChannel ch = channel;
        if (ch == null) return;
        try {
            ch.shutdownOutput();
        } catch (IOException e) {
            close();
        }
    }

    void close() {
        closed = true;
        SocketChannel ch = channel;
        if (ch != null) {
            try {
                ch.close();
            } catch (IOException ignored) {
                // closing
            }
        }
        synchronized (ready) {
            ready.notifyAll();
        }
    }
}
