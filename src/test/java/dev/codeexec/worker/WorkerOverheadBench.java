package dev.codeexec.worker;

import dev.codeexec.local.LocalEngine;
import dev.codeexec.config.Config;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.Executor;
import dev.codeexec.lang.Languages;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.mcp.FakeExecutor;
import dev.codeexec.wire.v1.ExecuteRequest;
import dev.codeexec.wire.v1.WorkerGrpc;
import dev.codeexec.workspace.Workspaces;
import io.grpc.ManagedChannel;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What the gRPC hop adds to a run, against submitting to the same engine in-process (medians of sequential calls
 * on loopback). A measurement, not a test: {@code ./mvnw test -Dtest=WorkerOverheadBench -Dworker.bench=true}.
 */
@EnabledIfSystemProperty(named = "worker.bench", matches = "true")
class WorkerOverheadBench {

    @TempDir
    Path tmp;

    @Test
    void measure() throws Exception {
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        FakeExecutor fake = new FakeExecutor();
        Config fakeConfig = WorkerTesting.config(tmp.resolve("ws"));
        compare("fake engine, print", fakeConfig, fake, "python", "print:x", 2000);
        fake.close();

        Config config = WorkerTesting.config(tmp.resolve("ws"), "WARM_POOL", "python=2");
        LocalEngine engine = WorkerTesting.realEngine(config);
        engine.executor().awaitWarmPool(Duration.ofSeconds(60));
        compare("bwrap, python print, warm pool", config, engine.executor(), "python", "print('x')", 100);
        compare("bwrap, bash echo", config, engine.executor(), "bash", "echo x", 100);
        engine.executor().close();
    }

    private void compare(String what, Config config, Executor executor, String lang, String code, int n)
            throws Exception {
        ExecutionRequest local = new RequestValidator(config, Languages.load())
                .validate(lang, code, null, null, null, null, null);
        WorkerServer server = WorkerServer.start(config, executor,
                new Workspaces(tmp.resolve("ws"), 1 << 20, Duration.ofHours(1), 65534, 65534), "bench");
        ManagedChannel ch = WorkerTesting.plaintext(server.port());
        WorkerGrpc.WorkerBlockingStub stub = WorkerGrpc.newBlockingStub(ch);
        ExecuteRequest remote = WorkerTesting.request(lang, code).build();
        double direct = median(n, () -> executor.submit(local, OutputListener.NONE).result().get(60, TimeUnit.SECONDS));
        double viaGrpc = median(n, () -> {
            WorkerTesting.Recorded r = WorkerTesting.execute(ch, null, remote);
            assertThat(r.await().isOk()).isTrue();
            assertThat(r.events.getLast().hasResult()).isTrue();
        });
        System.out.printf("BENCH %-34s in-process %8.3f ms | via worker gRPC %8.3f ms | added %+.3f ms | ratio %.2f%n",
                what, direct, viaGrpc, viaGrpc - direct, viaGrpc / direct);
        ch.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        server.close();
    }

    interface Body {
        void run() throws Exception;
    }

    private static double median(int n, Body b) throws Exception {
        for (int i = 0; i < Math.min(20, n); i++) b.run();
        List<Double> t = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            long s = System.nanoTime();
            b.run();
            t.add((System.nanoTime() - s) / 1e6);
        }
        t.sort(null);
        return t.get(n / 2);
    }
}
