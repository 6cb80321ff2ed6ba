package dev.codeexec.gateway;

import dev.codeexec.config.Config;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.lang.Languages;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.WorkerStatus;
import dev.codeexec.mcp.FakeExecutor;
import dev.codeexec.testing.Poll;
import dev.codeexec.testing.Requires;
import dev.codeexec.worker.WorkerServer;
import dev.codeexec.workspace.Workspaces;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code WORKERS=dns:///...} the way a Kubernetes headless Service behaves: the name's addresses change as pods come
 * and go. Here the name lives in /etc/hosts (the JDK resolver reads it on every lookup) and the workers are real
 * WorkerServers on two loopback addresses with the same port, recycling connections every second
 * (WORKER_MAX_CONNECTION_AGE_SECONDS), which is what makes grpc resolve the name again.
 */
@Tag("slow")
class WorkerDiscoveryTest {

    private static final Path HOSTS = Path.of("/etc/hosts");

    @TempDir
    Path tmp;

    @Test
    void aWorkerAddedToTheNameGetsRunsAndARemovedOneIsDropped() throws Exception {
        Requires.that(Files.isWritable(HOSTS), "a writable /etc/hosts (root)");
        String name = "cx-workers-" + UUID.randomUUID().toString().substring(0, 8) + ".test";
        String original = Files.readString(HOSTS);
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.2"))) {
            port = s.getLocalPort();
        }
        WorkerServer a = null;
        WorkerServer b = null;
        RemoteExecutor gateway = null;
        try {
            Files.writeString(HOSTS, original + "\n127.0.0.2 " + name + "\n");
            a = worker("127.0.0.2", port, "a");
            gateway = RemoteExecutor.create(Config.of("WORKERS", "dns:///" + name + ":" + port,
                    "WORKER_PLAINTEXT", "true"), Languages.load());
            assertThat(workerOf(gateway)).isEqualTo("a");

            // A new pod: the name now has two addresses; the gateway finds the second without a restart.
            Files.writeString(HOSTS, original + "\n127.0.0.2 " + name + "\n127.0.0.3 " + name + "\n");
            b = worker("127.0.0.3", port, "b");
            long t0 = System.nanoTime();
            Set<String> seen = new HashSet<>();
            RemoteExecutor g = gateway;
            // "Within seconds" (issue #6): connections recycle every second and the DNS caches are 1 s; grpc's own
            // resolver cache at its 30 s default would fail this.
            Poll.until("a run on the new worker b", Duration.ofSeconds(15), () -> {
                seen.add(workerOf(g));
                return seen.contains("b");
            });
            System.out.printf("new worker got a run %d ms after it was added to the name%n",
                    (System.nanoTime() - t0) / 1_000_000);
            Poll.until("b listed", Duration.ofSeconds(30), () -> addresses(g).contains("127.0.0.3:" + port));

            // The first pod goes away: out of the name, then stopped. It leaves the worker list; runs keep working.
            Files.writeString(HOSTS, original + "\n127.0.0.3 " + name + "\n");
            a.close();
            a = null;
            t0 = System.nanoTime();
            Poll.until("a gone from the list", Duration.ofSeconds(15), () -> !addresses(g).contains("127.0.0.2:" + port));
            System.out.printf("removed worker left the list %d ms after it left the name%n",
                    (System.nanoTime() - t0) / 1_000_000);
            for (int i = 0; i < 5; i++) assertThat(workerOf(gateway)).isEqualTo("b");
        } finally {
            Files.writeString(HOSTS, original);
            if (gateway != null) gateway.close();
            if (a != null) a.close();
            if (b != null) b.close();
        }
    }

    private WorkerServer worker(String host, int port, String name) throws Exception {
        Config c = Config.of("WORKER_HOST", host, "WORKER_PORT", Integer.toString(port), "WORKER_NAME", name,
                "WORKER_MAX_CONNECTION_AGE_SECONDS", "1", "SHUTDOWN_GRACE_SECONDS", "1",
                "WORKSPACE_ROOT", tmp.resolve("ws").toString());
        Files.setPosixFilePermissions(tmp, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Workspaces ws = new Workspaces(tmp.resolve("ws"), 1 << 20, Duration.ZERO, 65534, 65534);
        return WorkerServer.start(c, new FakeExecutor(), ws, "test");
    }

    private static String workerOf(RemoteExecutor gateway) throws Exception {
        ExecutionRequest req = ExecutionRequest.builder("python", "print:x", new Limits(Duration.ofSeconds(5), 5, 64 << 20, 16, 1 << 16, 1 << 20))
                .build();
        ExecutionResult r = gateway.submit(req, OutputListener.NONE).result().get(30, TimeUnit.SECONDS);
        return r.worker().orElse("");
    }

    private static Set<String> addresses(RemoteExecutor gateway) {
        Set<String> out = new HashSet<>();
        for (WorkerStatus w : gateway.workers()) out.add(w.address());
        return out;
    }
}
