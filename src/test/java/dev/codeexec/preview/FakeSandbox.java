package dev.codeexec.preview;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The sandbox side of a preview, as the test needs it: init's unix socket (read the 2-byte port, connect to
 * 127.0.0.1:port, answer 0 and relay both ways, or answer 1) in front of an app of the test's own, a small raw
 * HTTP/1.1 server on 127.0.0.1 with the endpoints the tests call.
 */
final class FakeSandbox implements AutoCloseable {

    final Path socket;
    private final ServerSocketChannel init;
    private final List<AutoCloseable> open = new ArrayList<>();
    /** Connections init relayed to the app. */
    final AtomicInteger relayed = new AtomicInteger();

    FakeSandbox(Path dir) throws IOException {
        socket = dir.resolve("preview.sock");
        init = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        init.bind(UnixDomainSocketAddress.of(socket));
        Thread.ofVirtual().start(this::acceptInit);
    }

    private void acceptInit() {
        while (true) {
            SocketChannel ch;
            try {
                ch = init.accept();
            } catch (IOException e) {
                return;
            }
            Thread.ofVirtual().start(() -> initConnection(ch));
        }
    }

    private void initConnection(SocketChannel ch) {
        try (ch) {
            ByteBuffer port = ByteBuffer.allocate(2);
            while (port.hasRemaining()) if (ch.read(port) < 0) return;
            Socket app;
            try {
                app = new Socket(InetAddress.getLoopbackAddress(), port.getShort(0) & 0xffff);
            } catch (IOException e) {
                ch.write(ByteBuffer.wrap(new byte[] {1}));
                return;
            }
            relayed.incrementAndGet();
            ch.write(ByteBuffer.wrap(new byte[] {0}));
            try (app) {
                Thread up = Thread.ofVirtual().start(() -> {
                    try {
                        Channels.newInputStream(ch).transferTo(app.getOutputStream());
                        app.shutdownOutput();
                    } catch (IOException e) {
                        // one side went
                    }
                });
                try {
                    app.getInputStream().transferTo(Channels.newOutputStream(ch));
                    ch.shutdownOutput();
                } catch (IOException e) {
                    // one side went
                }
                up.join();
            }
        } catch (IOException | InterruptedException e) {
            // the test ended
        }
    }

    /** A request as the app received it. */
    record Seen(String method, String target, Map<String, List<String>> headers, String body) {
        String header(String name) {
            List<String> v = headers.get(name.toLowerCase(Locale.ROOT));
            return v == null ? null : v.getFirst();
        }
    }

    /** The app: a raw HTTP/1.1 server on 127.0.0.1 (port 0: any). */
    final class App implements AutoCloseable {
        final ServerSocket server;
        final BlockingQueue<Seen> seen = new ArrayBlockingQueue<>(100);
        final AtomicInteger connections = new AtomicInteger();
        /** Each server-sent event after the first waits for the test to have read the one before. */
        final List<CountDownLatch> eventRead = List.of(new CountDownLatch(1), new CountDownLatch(1), new CountDownLatch(1));
        final CountDownLatch bigStarted = new CountDownLatch(1);
        volatile boolean eventSentUnread;

        App(int port) throws IOException {
            server = new ServerSocket();
            server.setReuseAddress(true);
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
            open.add(this);
            Thread.ofVirtual().start(() -> {
                while (true) {
                    Socket s;
                    try {
                        s = server.accept();
                    } catch (IOException e) {
                        return;
                    }
                    connections.incrementAndGet();
                    open.add(s);
                    Thread.ofVirtual().start(() -> serve(s));
                }
            });
        }

        int port() {
            return server.getLocalPort();
        }

        private void serve(Socket s) {
            try (s) {
                InputStream in = s.getInputStream();
                OutputStream out = s.getOutputStream();
                while (true) {
                    String head = Http.readHead(in);
                    if (head == null) return;
                    String[] lines = head.split("\r\n");
                    String[] req = lines[0].split(" ");
                    Map<String, List<String>> headers = new HashMap<>();
                    for (int i = 1; i < lines.length; i++) {
                        int c = lines[i].indexOf(':');
                        headers.computeIfAbsent(lines[i].substring(0, c).toLowerCase(Locale.ROOT), k -> new ArrayList<>())
                                .add(lines[i].substring(c + 1).strip());
                    }
                    String body = Http.readBody(in, headers);
                    Seen seenNow = new Seen(req[0], req[1], headers, body);
                    seen.add(seenNow);
                    String path = req[1];
                    if (path.startsWith("/sse")) {
                        out.write("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                                .getBytes(StandardCharsets.US_ASCII));
                        for (int i = 0; i < 3; i++) {
                            if (i > 0) {
                                Thread.sleep(200);
                                if (!eventRead.get(i - 1).await(5, TimeUnit.SECONDS)) eventSentUnread = true;
                            }
                            Http.writeChunk(out, "data: event " + i + "\n\n");
                        }
                        out.write("0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                    } else if (path.startsWith("/ws")) {
                        out.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
                                .getBytes(StandardCharsets.US_ASCII));
                        in.transferTo(out);
                        return;
                    } else if (path.startsWith("/big")) {
                        byte[] chunk = new byte[64 * 1024];
                        int chunks = 128;
                        out.write(("HTTP/1.1 200 OK\r\nContent-Length: " + (long) chunk.length * chunks + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
                        for (int i = 0; i < chunks; i++) {
                            out.write(chunk);
                            bigStarted.countDown();
                        }
                    } else if (path.startsWith("/hang")) {
                        in.read(); // answers nothing until the proxy goes away
                        return;
                    } else {
                        byte[] b = (seenNow.method() + " " + seenNow.target() + "\n" + seenNow.body()).getBytes(StandardCharsets.UTF_8);
                        out.write(("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + b.length + "\r\n\r\n")
                                .getBytes(StandardCharsets.US_ASCII));
                        out.write(b);
                    }
                }
            } catch (IOException | InterruptedException e) {
                // the proxy went
            }
        }

        @Override
        public void close() throws IOException {
            server.close();
        }
    }

    App app(int port) throws IOException {
        return new App(port);
    }

    @Override
    public void close() throws Exception {
        init.close();
        for (AutoCloseable c : open) c.close();
    }
}
