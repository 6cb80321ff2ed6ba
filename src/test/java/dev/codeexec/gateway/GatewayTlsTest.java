package dev.codeexec.gateway;

import dev.codeexec.config.Config;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.lang.Languages;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.WorkerStatus;
import io.grpc.TlsServerCredentials;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** TLS and mTLS to workers with certificates made by openssl: trusted works, untrusted or certificate-less does not. */
@Tag("slow")
class GatewayTlsTest {

    @TempDir
    static Path dir;

    private final List<AutoCloseable> toClose = new ArrayList<>();

    @BeforeAll
    static void certificates() throws Exception {
        String script = String.join("\n",
                "set -e",
                "for ca in ca other; do openssl req -x509 -newkey rsa:2048 -nodes -keyout $ca.key -out $ca.pem -days 2 -subj /CN=$ca 2>/dev/null; done",
                "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext",
                "for who in server client; do",
                "  openssl req -newkey rsa:2048 -nodes -keyout $who.key -out $who.csr -subj /CN=$who 2>/dev/null",
                "  openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $who.pem -days 2 -extfile san.ext 2>/dev/null",
                "done");
        Process p = new ProcessBuilder("sh", "-c", script).directory(dir.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertThat(p.waitFor()).as(out).isZero();
    }

    @AfterEach
    void closeAll() throws Exception {
        for (int i = toClose.size() - 1; i >= 0; i--) toClose.get(i).close();
    }

    private FakeWorker mtlsWorker() throws Exception {
        FakeWorker w = new FakeWorker("tls", 0, TlsServerCredentials.newBuilder()
                .keyManager(dir.resolve("server.pem").toFile(), dir.resolve("server.key").toFile())
                .trustManager(dir.resolve("ca.pem").toFile())
                .clientAuth(TlsServerCredentials.ClientAuth.REQUIRE).build());
        toClose.add(w);
        return w;
    }

    private RemoteExecutor gateway(String target, String... tls) {
        List<String> pairs = new ArrayList<>(List.of("WORKERS", target, "QUEUE_TIMEOUT_MS", "100",
                "SHUTDOWN_GRACE_SECONDS", "1"));
        pairs.addAll(List.of(tls));
        RemoteExecutor e = RemoteExecutor.create(Config.of(pairs.toArray(String[]::new)), Languages.load(),
                Duration.ofSeconds(1));
        toClose.add(e);
        return e;
    }

    private String f(String name) {
        return dir.resolve(name).toString();
    }

    @Test
    void mutualTlsWithTheRightCaAndClientCertificateRuns() throws Exception {
        FakeWorker w = mtlsWorker();
        // localhost: the static resolver hands each address its own name to verify the certificate against
        RemoteExecutor gw = gateway("static:///localhost:" + w.port, "WORKER_TLS_CA", f("ca.pem"),
                "WORKER_TLS_CERT", f("client.pem"), "WORKER_TLS_KEY", f("client.key"));
        assertThat(gw.submit(RemoteExecutorTest.request(Duration.ofSeconds(5)), OutputListener.NONE).result()
                .get(20, TimeUnit.SECONDS).outcome()).isEqualTo(Outcome.EXITED);
        assertThat(gw.workers()).allMatch(WorkerStatus::healthy);
    }

    @Test
    void aWorkerCertificateFromAnotherCaIsRefused() throws Exception {
        FakeWorker w = mtlsWorker();
        RemoteExecutor gw = gateway("static:///127.0.0.1:" + w.port, "WORKER_TLS_CA", f("other.pem"),
                "WORKER_TLS_CERT", f("client.pem"), "WORKER_TLS_KEY", f("client.key"));
        assertThatThrownBy(() -> gw.submit(RemoteExecutorTest.request(Duration.ofSeconds(5)), OutputListener.NONE)
                .result().get(20, TimeUnit.SECONDS)).hasCauseInstanceOf(ExecutionException.Unavailable.class);
        assertThat(gw.workers()).noneMatch(WorkerStatus::healthy);
        assertThat(w.calls.get()).isZero();
    }

    @Test
    void withoutAClientCertificateAnMtlsWorkerIsUnreachable() throws Exception {
        FakeWorker w = mtlsWorker();
        RemoteExecutor gw = gateway("static:///127.0.0.1:" + w.port, "WORKER_TLS_CA", f("ca.pem"));
        assertThatThrownBy(() -> gw.submit(RemoteExecutorTest.request(Duration.ofSeconds(5)), OutputListener.NONE)
                .result().get(20, TimeUnit.SECONDS)).hasCauseInstanceOf(ExecutionException.Unavailable.class);
        assertThat(w.calls.get()).isZero();
    }

    @Test
    void tlsNeedsNoPlaintextPermissionOffLoopback() {
        WorkerChannels c = new WorkerChannels(Config.of("WORKERS", "static:///10.0.0.5:30031,10.0.0.6:30031",
                "WORKER_TLS_CA", f("ca.pem")));
        assertThat(c.tls()).isTrue();
        assertThat(Files.exists(dir.resolve("ca.pem"))).isTrue();
    }
}
