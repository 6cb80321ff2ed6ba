package dev.codeexec.gateway;

import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** WORKERS parsing and the credential rules: every refusal names the key to change. */
class WorkerChannelsTest {

    private static WorkerChannels channels(String... pairs) {
        return new WorkerChannels(Config.of(pairs));
    }

    @Test
    void staticTargetsParseInOrder() {
        WorkersTarget t = WorkersTarget.parse("static:///127.0.0.1:30031,localhost:30032, worker-3.local:1");
        assertThat(t.dns()).isFalse();
        assertThat(t.addresses()).containsExactly(new WorkersTarget.HostPort("127.0.0.1", 30031),
                new WorkersTarget.HostPort("localhost", 30032), new WorkersTarget.HostPort("worker-3.local", 1));
        assertThat(WorkersTarget.parse("dns:///workers.ns.svc.cluster.local:30031").addresses())
                .containsExactly(new WorkersTarget.HostPort("workers.ns.svc.cluster.local", 30031));
    }

    @Test
    void badTargetsAreRefusedWithAClearMessage() {
        assertRefused("http://w:1", "WORKERS must be dns:///<host>:<port>");
        assertRefused("static:///", "lists no address");
        assertRefused("static:///w1", "'w1' needs a port");
        assertRefused("static:///w1:0", "port must be 1-65535");
        assertRefused("static:///w1:99999", "port must be 1-65535");
        assertRefused("static:///w1:http", "port 'http' is not a number");
        assertRefused("static:///w1:1,,w2:2", "empty address");
        assertRefused("static:///w1:1,w1:1", "lists w1:1 twice");
        assertRefused("static:///:1", "has no host");
        assertRefused("static:///[::1]:1", "IPv6");
        assertRefused("static:///w_1$:1", "not a host name");
        assertRefused("dns:///workers", "needs a port");
        assertRefused("dns:///a:1,b:1", "takes one name");
    }

    private static void assertRefused(String workers, String message) {
        assertThatThrownBy(() -> channels("WORKERS", workers)).as(workers).isInstanceOf(ConfigException.class)
                .hasMessageContaining("WORKERS").hasMessageContaining(message);
    }

    @Test
    void plaintextIsRefusedOffLoopbackUnlessAllowed() {
        assertThatThrownBy(() -> channels("WORKERS", "static:///127.0.0.1:1,10.0.0.5:30031"))
                .isInstanceOf(ConfigException.class).hasMessageContaining("WORKER_PLAINTEXT")
                .hasMessageContaining("WORKER_TLS_CA").hasMessageContaining("not on loopback");
        assertThatThrownBy(() -> channels("WORKERS", "dns:///workers.ns.svc.cluster.local:30031"))
                .isInstanceOf(ConfigException.class).hasMessageContaining("WORKER_PLAINTEXT");
        assertThat(channels("WORKERS", "static:///10.0.0.5:30031", "WORKER_PLAINTEXT", "true").tls()).isFalse();
        assertThat(channels("WORKERS", "static:///127.0.0.1:1,localhost:2").tls()).isFalse();
        assertThat(channels("WORKERS", "dns:///localhost:30031").tls()).isFalse();
    }

    @Test
    void tlsSettingsAreCheckedAtStart(@TempDir Path dir) throws Exception {
        assertThatThrownBy(() -> channels("WORKERS", "static:///10.0.0.5:1", "WORKER_TLS_CA", dir.resolve("nope.pem").toString()))
                .isInstanceOf(ConfigException.class).hasMessageContaining("WORKER_TLS_CA").hasMessageContaining("not a readable file");
        Path garbage = Files.writeString(dir.resolve("ca.pem"), "not a certificate");
        assertThatThrownBy(() -> channels("WORKERS", "static:///10.0.0.5:1", "WORKER_TLS_CA", garbage.toString()))
                .isInstanceOf(ConfigException.class).hasMessageContaining("WORKER_TLS_CA");
        assertThatThrownBy(() -> channels("WORKERS", "static:///127.0.0.1:1", "WORKER_TLS_CERT", garbage.toString()))
                .isInstanceOf(ConfigException.class).hasMessageContaining("WORKER_TLS_KEY");
        assertThatThrownBy(() -> channels("WORKERS", "static:///127.0.0.1:1", "WORKER_TLS_CERT", garbage.toString(),
                "WORKER_TLS_KEY", garbage.toString()))
                .isInstanceOf(ConfigException.class).hasMessageContaining("WORKER_TLS_CA");
    }

    @Test
    void sessionKeysKeepTenantAndNameApart() {
        assertThat(RemoteExecutor.sessionKey(new dev.codeexec.engine.SessionRef("a/b", "c")))
                .isNotEqualTo(RemoteExecutor.sessionKey(new dev.codeexec.engine.SessionRef("a", "b/c")));
        assertThat(RemoteExecutor.sessionKey(new dev.codeexec.engine.SessionRef("tenant ü", "s")))
                .matches("\\p{ASCII}+");
    }

    @Test
    void statusDescriptionsShownToClientsLeaveGrpcDiagnosticsOut() {
        io.grpc.Status s = io.grpc.Status.UNAVAILABLE.withDescription(
                "io exception [closed=[], open=[[connecting_and_lb_delay=1009012821ns, remote_addr=10.0.0.5:1]]]");
        assertThat(RemoteRun.description(s)).contains("io exception");
        assertThat(RemoteRun.description(io.grpc.Status.UNAVAILABLE)).isEmpty();
        assertThat(RemoteRun.description(io.grpc.Status.INTERNAL.withDescription("x".repeat(500))).orElseThrow())
                .hasSize(203);
        assertThat(WorkerDirectory.brief(io.grpc.Status.DEADLINE_EXCEEDED.withDescription("after 1.5s [x]"),
                java.time.Duration.ofMillis(1500))).isEqualTo("no answer within 1500 ms");
    }
}
