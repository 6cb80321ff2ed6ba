package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import dev.codeexec.config.Config;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.LocalExecutor;
import dev.codeexec.http.HttpServer;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.Sandboxes;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** notifications/cancelled over real HTTP interrupts a call in a session, which keeps its state. */
@org.junit.jupiter.api.Timeout(value = 120, threadMode = org.junit.jupiter.api.Timeout.ThreadMode.SEPARATE_THREAD)
class SessionCancelTest {

    HttpServer server;
    Executor executor;
    RawClient raw;

    @BeforeEach
    void start() throws Exception {
        Path data = Files.createTempDirectory("session-cancel-data");
        Files.setPosixFilePermissions(data, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Config config = Config.of("PORT", "0", "DATA_DIR", data.toString(), "WARM_POOL", "off");
        Sandbox sandbox = Sandboxes.create(config);
        assumeTrue(sandbox.unavailableReason().isEmpty() && sandbox.supportsControl(), "needs the bwrap sandbox");
        executor = LocalExecutor.create(config, sandbox);
        ServerSetup setup = TestServers.real(config, sandbox, executor);
        server = HttpServer.start(setup);
        raw = new RawClient(server.port());
    }

    @AfterEach
    void stop() {
        if (server != null) server.close();
    }

    private static String call(Object id, String code) {
        return "{\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"method\":\"tools/call\",\"params\":{\"name\":\"execute_code\","
                + "\"arguments\":{\"language\":\"python\",\"session\":\"nb\",\"code\":\"" + code + "\"}}}";
    }

    @Test
    void aCancelledSessionCallIsInterruptedAndTheSessionGoesOn() throws Exception {
        String session = raw.initialize();
        assertThat(raw.send(raw.mcpPost(session, call(1, "x = 41"))).body()).contains("\"sessionCreated\":true")
                .doesNotContain("isError\":true");
        CompletableFuture<String> loop = CompletableFuture.supplyAsync(() -> {
            try {
                HttpResponse<String> r = raw.send(raw.mcpPost(session, call(2, "while True: pass")));
                return r.statusCode() + " " + r.body();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (executor.running() == 0 && System.nanoTime() < end) Thread.sleep(20);
        Thread.sleep(300);
        assertThat(raw.send(raw.mcpPost(session, RawClient.cancel(2))).statusCode()).isEqualTo(202);
        String result = loop.get(20, TimeUnit.SECONDS);
        assertThat(result).startsWith("200 ").contains("cancelled").contains("KeyboardInterrupt")
                .contains("kept its state");
        assertThat(raw.send(raw.mcpPost(session, call(3, "x + 1"))).body()).contains("\"result\":\"42\"");
    }
}
