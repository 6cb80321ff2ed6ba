package dev.codeexec.worker;

import dev.codeexec.wire.v1.StatusRequest;
import io.grpc.ManagedChannel;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The real entry point, {@code Main worker}, in a child JVM: it prints its port, serves, and on SIGTERM drains
 * and exits 0; bad configuration exits 2 before anything starts.
 */
@Tag("slow")
class WorkerMainTest {

    @TempDir
    Path tmp;

    private Process start(Map<String, String> env) throws Exception {
        // WORKSPACE_ROOT must be reachable by the sandbox uid, or the engine refuses to start.
        Files.setPosixFilePermissions(tmp, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        ProcessBuilder pb = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                "dev.codeexec.Main", "worker");
        pb.environment().clear();
        pb.environment().put("PATH", "/usr/local/bin:/usr/bin:/bin");
        pb.environment().putAll(env);
        pb.redirectError(tmp.resolve("stderr.log").toFile());
        return pb.start();
    }

    @Test
    void servesThenDrainsOnSigtermAndExitsZero() throws Exception {
        Process p = start(Map.of("WORKER_PORT", "0", "DATA_DIR", WorkerTesting.DATA_DIR, "WARM_POOL", "off",
                "WORKSPACE_ROOT", tmp.resolve("ws").toString(), "WORKER_NAME", "child", "WORKER_TOKEN", "tok"));
        try {
            BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream()));
            // A child that never prints must fail the test, not hang it: the finally block kills it.
            String line = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
                try {
                    return out.readLine();
                } catch (java.io.IOException e) {
                    return null;
                }
            }).completeOnTimeout(null, 90, TimeUnit.SECONDS).join();
            assertThat(line).as(Files.readString(tmp.resolve("stderr.log"))).startsWith("worker listening on port ");
            int port = Integer.parseInt(line.substring("worker listening on port ".length()).trim());
            ManagedChannel ch = WorkerTesting.plaintext(port);
            try {
                assertThat(WorkerTesting.blocking(ch, "tok").withDeadlineAfter(20, TimeUnit.SECONDS)
                        .status(StatusRequest.getDefaultInstance()).getWorker()).isEqualTo("child");
            } finally {
                ch.shutdownNow();
            }
            p.destroy(); // SIGTERM
            assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
            assertThat(p.exitValue()).isZero();
            String log = Files.readString(tmp.resolve("stderr.log"));
            assertThat(log).contains("listening on 127.0.0.1:" + port).contains("token on").contains("TLS off")
                    .contains("draining").contains("drained");
        } finally {
            p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void badConfigurationExitsTwoNamingTheVariable() throws Exception {
        for (List<String> env : List.of(List.of("WORKER_HOST", "0.0.0.0"), List.of("WORKER_PORT", "x"))) {
            Process p = start(Map.of(env.get(0), env.get(1), "DATA_DIR", tmp.resolve("data").toString()));
            assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
            assertThat(p.exitValue()).isEqualTo(2);
            assertThat(Files.readString(tmp.resolve("stderr.log"))).contains(env.get(0));
            // Refused before the engine started: it never prepared DATA_DIR.
            assertThat(Files.exists(tmp.resolve("data"))).isFalse();
        }
    }
}
