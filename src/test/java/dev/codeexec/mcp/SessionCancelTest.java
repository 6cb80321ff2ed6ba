package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import dev.codeexec.config.Config;
import dev.codeexec.engine.Executor;
import dev.codeexec.local.LocalExecutor;
import dev.codeexec.http.HttpServer;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.Sandboxes;
import dev.codeexec.testing.Requires;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/** notifications/cancelled over real HTTP interrupts a call in a session, which keeps its state. */
@Tag("sandbox")
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
        Requires.that(sandbox.unavailableReason().isEmpty() && sandbox.supportsControl(), "the bwrap sandbox, usable here");
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
        // The loop prints a line first; with a progress token the output comes back as progress on the call's own
        // response stream, so the cancel is sent once the code is surely in the loop.
        String looping = """
                {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_code","arguments":\
                {"language":"python","session":"nb","code":"print('looping', flush=True)\\nwhile True: pass"},\
                "_meta":{"progressToken":"loop"}}}""";
        HttpResponse<java.util.stream.Stream<String>> r = raw.stream(raw.mcpPost(session, looping));
        assertThat(r.statusCode()).isEqualTo(200);
        java.util.Iterator<String> lines = r.body().iterator();
        StringBuilder seen = new StringBuilder();
        while (!seen.toString().contains("looping")) {
            assertThat(lines.hasNext()).as("the response ended before the loop printed: %s", seen).isTrue();
            seen.append(lines.next()).append('\n');
        }
        assertThat(raw.send(raw.mcpPost(session, RawClient.cancel(2))).statusCode()).isEqualTo(202);
        StringBuilder rest = new StringBuilder();
        lines.forEachRemaining(l -> rest.append(l).append('\n'));
        assertThat(rest.toString()).contains("cancelled").contains("KeyboardInterrupt").contains("kept its state");
        assertThat(raw.send(raw.mcpPost(session, call(3, "x + 1"))).body()).contains("\"result\":\"42\"");
    }
}
