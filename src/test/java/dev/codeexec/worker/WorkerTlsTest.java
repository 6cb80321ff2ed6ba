package dev.codeexec.worker;

import dev.codeexec.config.ConfigException;
import dev.codeexec.mcp.FakeExecutor;
import dev.codeexec.testing.Requires;
import dev.codeexec.wire.v1.StatusRequest;
import dev.codeexec.workspace.Workspaces;
import io.grpc.ChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * TLS and mutual TLS with certificates made here by the openssl CLI: a CA, a server certificate for localhost and
 * 127.0.0.1, a client certificate from the same CA, and one from a CA the worker does not trust.
 */
class WorkerTlsTest {

    static final String TOKEN = "tls-token";

    @TempDir
    static Path certs;
    @TempDir
    Path tmp;
    final List<AutoCloseable> open = new ArrayList<>();

    @BeforeAll
    static void makeCertificates() throws Exception {
        Requires.that(new File("/usr/bin/openssl").canExecute(), "openssl (/usr/bin/openssl)");
        Files.writeString(certs.resolve("server.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
        ca("ca");
        ca("other-ca");
        signed("server", "ca", "server.ext");
        signed("client", "ca", null);
        signed("stranger", "other-ca", null);
    }

    private static void ca(String name) throws Exception {
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                name + ".key", "-out", name + ".pem", "-days", "2", "-subj", "/CN=" + name);
    }

    private static void signed(String name, String ca, String ext) throws Exception {
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name);
        List<String> sign = new ArrayList<>(List.of("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem",
                "-CAkey", ca + ".key", "-CAcreateserial", "-out", name + ".pem", "-days", "2"));
        if (ext != null) sign.addAll(List.of("-extfile", ext));
        openssl(sign.toArray(String[]::new));
    }

    private static void openssl(String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of("/usr/bin/openssl"));
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).directory(certs.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertThat(p.waitFor()).as(out).isZero();
    }

    private static String file(String name) {
        return certs.resolve(name).toString();
    }

    @AfterEach
    void closeAll() throws Exception {
        for (AutoCloseable c : open.reversed()) c.close();
    }

    private WorkerServer worker(String... pairs) throws Exception {
        List<String> all = new ArrayList<>(List.of("WORKER_TOKEN", TOKEN, "WORKER_TLS_CERT", file("server.pem"),
                "WORKER_TLS_KEY", file("server.key")));
        all.addAll(List.of(pairs));
        FakeExecutor executor = new FakeExecutor();
        open.add(executor);
        WorkerServer s = WorkerServer.start(WorkerTesting.config(tmp, all.toArray(String[]::new)), executor,
                new Workspaces(tmp, 1 << 20, Duration.ofHours(1), 65534, 65534), "test");
        open.add(s);
        return s;
    }

    private ManagedChannel channel(int port, ChannelCredentials creds) {
        ManagedChannel ch = NettyChannelBuilder.forAddress("localhost", port, creds).build();
        open.add(() -> ch.shutdownNow().awaitTermination(5, TimeUnit.SECONDS));
        return ch;
    }

    private static int slots(ManagedChannel ch) {
        return WorkerTesting.blocking(ch, TOKEN).withDeadlineAfter(10, TimeUnit.SECONDS)
                .status(StatusRequest.getDefaultInstance()).getSlots();
    }

    private static void assertRefused(ManagedChannel ch) {
        assertThatThrownBy(() -> slots(ch)).isInstanceOfSatisfying(StatusRuntimeException.class,
                e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.UNAVAILABLE));
    }

    @Test
    void aClientTrustingTheCaConnectsAndAPlaintextClientDoesNot() throws Exception {
        WorkerServer s = worker();
        assertThat(s.tls()).isTrue();
        assertThat(slots(channel(s.port(), TlsChannelCredentials.newBuilder().trustManager(new File(file("ca.pem")))
                .build()))).isEqualTo(4);
        ManagedChannel plain = NettyChannelBuilder.forAddress("127.0.0.1", s.port()).usePlaintext().build();
        open.add(() -> plain.shutdownNow().awaitTermination(5, TimeUnit.SECONDS));
        assertRefused(plain);
        // Nor does a TLS client that trusts another CA (the worker's certificate does not chain to it).
        assertRefused(channel(s.port(), TlsChannelCredentials.newBuilder()
                .trustManager(new File(file("other-ca.pem"))).build()));
    }

    @Test
    void withWorkerTlsCaClientsMustPresentACertificateFromIt() throws Exception {
        WorkerServer s = worker("WORKER_TLS_CA", file("ca.pem"));
        TlsChannelCredentials.Builder trusting = TlsChannelCredentials.newBuilder()
                .trustManager(new File(file("ca.pem")));
        assertRefused(channel(s.port(), trusting.build()));
        assertRefused(channel(s.port(), TlsChannelCredentials.newBuilder().trustManager(new File(file("ca.pem")))
                .keyManager(new File(file("stranger.pem")), new File(file("stranger.key"))).build()));
        assertThat(slots(channel(s.port(), TlsChannelCredentials.newBuilder().trustManager(new File(file("ca.pem")))
                .keyManager(new File(file("client.pem")), new File(file("client.key"))).build()))).isEqualTo(4);
    }

    @Test
    void filesThatAreNotPemStopTheStartNamingTheVariables() throws Exception {
        Files.writeString(tmp.resolve("junk.pem"), "not a certificate\n");
        assertThatThrownBy(() -> worker("WORKER_TLS_CERT", tmp.resolve("junk.pem").toString()))
                .isInstanceOf(ConfigException.class).hasMessageContaining("WORKER_TLS_CERT");
        assertThatThrownBy(() -> worker("WORKER_TLS_CA", tmp.resolve("junk.pem").toString()))
                .isInstanceOf(ConfigException.class).hasMessageContaining("WORKER_TLS_CA");
        assertThatThrownBy(() -> worker("WORKER_TLS_KEY", file("missing.key")))
                .isInstanceOf(ConfigException.class).hasMessageContaining("WORKER_TLS_KEY");
    }
}
