package dev.codeexec.egress;

import dev.codeexec.config.Config;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLServerSocket;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManagerFactory;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A real TLS server behind a CONNECT tunnel: the handshake and the data after it pass the proxy's checks, in both
 * TLS 1.3 and 1.2. The server's certificate is a throwaway one made with keytool for fixture.test (seconds: slow).
 */
@Tag("slow")
class EgressTlsTunnelTest {

    static final InetAddress LOOPBACK = InetAddress.ofLiteral("127.0.0.1");
    static SSLContext server;
    static SSLContext client;

    @TempDir
    Path dir;
    final ExecutorService io = Executors.newVirtualThreadPerTaskExecutor();
    final List<AutoCloseable> toClose = new ArrayList<>();

    @BeforeAll
    static void throwawayCertificate(@TempDir Path keys) throws Exception {
        Path store = keys.resolve("fixture.p12");
        Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "keytool").toString(), "-genkeypair",
                "-alias", "fixture", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=fixture.test",
                "-ext", "SAN=dns:fixture.test", "-validity", "2", "-storetype", "PKCS12", "-keystore", store.toString(),
                "-storepass", "throwaway").redirectErrorStream(true).start();
        String said = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0).as(said).isTrue();
        KeyStore ks = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(store)) {
            ks.load(in, "throwaway".toCharArray());
        }
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(ks, "throwaway".toCharArray());
        server = SSLContext.getInstance("TLS");
        server.init(kmf.getKeyManagers(), null, null);
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(ks);
        client = SSLContext.getInstance("TLS");
        client.init(null, tmf.getTrustManagers(), null);
    }

    @AfterEach
    void stop() throws Exception {
        for (AutoCloseable c : toClose.reversed()) c.close();
        io.shutdownNow();
    }

    /** A TLS server on loopback that answers each line with "pong:" and the line, for one connection at a time. */
    int echoServer() throws Exception {
        SSLServerSocket s = (SSLServerSocket) server.getServerSocketFactory().createServerSocket(0, 50, LOOPBACK);
        toClose.add(s);
        io.submit(() -> {
            while (true) {
                try (Socket c = s.accept()) {
                    BufferedReader in = new BufferedReader(new InputStreamReader(c.getInputStream(), StandardCharsets.UTF_8));
                    OutputStream out = c.getOutputStream();
                    for (String line; (line = in.readLine()) != null; ) out.write(("pong:" + line + "\n").getBytes(StandardCharsets.UTF_8));
                }
            }
        });
        return s.getLocalPort();
    }

    /**
     * A TCP socket whose other end is a connection to the channel's unix socket, so the JDK's TLS client (which
     * needs a Socket) can run through the proxy as a program's would through the sandbox's relay.
     */
    Socket bridged(EgressChannel ch) throws Exception {
        ServerSocket relay = new ServerSocket(0, 1, LOOPBACK);
        toClose.add(relay);
        Socket program = new Socket(LOOPBACK, relay.getLocalPort());
        toClose.add(program);
        Socket near = relay.accept();
        SocketChannel far = SocketChannel.open(UnixDomainSocketAddress.of(ch.socket()));
        toClose.add(near);
        toClose.add(far);
        io.submit(() -> copy(near.getInputStream(), Channels.newOutputStream(far), () -> far.shutdownOutput()));
        io.submit(() -> copy(Channels.newInputStream(far), near.getOutputStream(), near::shutdownOutput));
        return program;
    }

    interface Shut {
        void run() throws Exception;
    }

    static Void copy(InputStream in, OutputStream out, Shut done) throws Exception {
        in.transferTo(out);
        out.flush();
        done.run();
        return null;
    }

    @Test
    void aRealTlsServerAnswersThroughTheTunnelInTls13And12() throws Exception {
        int port = echoServer();
        EgressSettings s = EgressSettings.of(Config.of("EGRESS", "on", "EGRESS_ALLOW", "fixture.test:" + port,
                "EGRESS_ALLOW_CIDRS", "127.0.0.1/32", "EGRESS_RESOLVE", "fixture.test=127.0.0.1"));
        try (EgressChannel ch = EgressChannel.open(s, EgressDecision.resolver(s), dir.resolve("t.sock"),
                s.policyFor(Optional.empty()), "tenant", "run")) {
            for (String protocol : new String[] {"TLSv1.3", "TLSv1.2"}) {
                Socket plain = bridged(ch);
                OutputStream o = plain.getOutputStream();
                o.write(("CONNECT fixture.test:" + port + " HTTP/1.1\r\nHost: fixture.test:" + port + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
                StringBuilder head = new StringBuilder();
                while (!head.toString().endsWith("\r\n\r\n")) head.append((char) plain.getInputStream().read());
                assertThat(head.toString()).startsWith("HTTP/1.1 200 ");
                try (SSLSocket tls = (SSLSocket) client.getSocketFactory().createSocket(plain, "fixture.test", port, true)) {
                    tls.setEnabledProtocols(new String[] {protocol});
                    tls.setSoTimeout(20_000);
                    tls.startHandshake();
                    assertThat(tls.getSession().getProtocol()).isEqualTo(protocol);
                    BufferedReader in = new BufferedReader(new InputStreamReader(tls.getInputStream(), StandardCharsets.UTF_8));
                    for (int i = 0; i < 3; i++) {
                        tls.getOutputStream().write(("ping " + i + "\n").getBytes(StandardCharsets.UTF_8));
                        assertThat(in.readLine()).isEqualTo("pong:ping " + i);
                    }
                }
            }
            NetworkReport report = ch.finish();
            assertThat(report.counts()).doesNotContainKey("refused/not_tls");
            assertThat(report.connections()).hasSize(2).allSatisfy(r -> {
                assertThat(r.decision()).isEqualTo(ConnectionRecord.ALLOWED);
                assertThat(r.host()).isEqualTo("fixture.test");
                assertThat(r.bytesIn()).isPositive();
            });
        }
    }
}
