package dev.codeexec.gateway;

import dev.codeexec.local.LocalEngine;
import dev.codeexec.config.Config;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.lang.Languages;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.engine.WorkerStatus;
import dev.codeexec.testing.Poll;
import dev.codeexec.testing.Requires;
import dev.codeexec.worker.WorkerServer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** The gateway in front of real WorkerServers, each over a real local engine in bubblewrap. */
@Tag("sandbox")
class RealWorkerGatewayTest {

    @TempDir
    Path workspaces;

    private final List<AutoCloseable> toClose = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (int i = toClose.size() - 1; i >= 0; i--) toClose.get(i).close();
    }

    private WorkerServer worker(String name, String... more) throws Exception {
        List<String> pairs = new ArrayList<>(List.of("DATA_DIR", "/tmp/code-exec-engine-test", "WARM_POOL", "off", "WORKER_PORT", "0",
                "WORKSPACE_ROOT", workspaces.toString(), "SHUTDOWN_GRACE_SECONDS", "2", "WORKER_NAME", name, "MAX_CONCURRENT", "2"));
        pairs.addAll(List.of(more));
        Config c = Config.of(pairs.toArray(String[]::new));
        LocalEngine engine = LocalEngine.create(c);
        engine.codeTools().ifPresent(toClose::add);
        toClose.add(engine.executor());
        Requires.that(engine.sandbox().unavailableReason().isEmpty(), "a sandbox that can run code here ("
                + engine.sandbox().unavailableReason().orElse("") + ")");
        WorkerServer w = WorkerServer.start(c, engine.executor(), engine.workspaces(), "test", engine.sandbox().status());
        toClose.add(w);
        return w;
    }

    private RemoteExecutor gateway(WorkerServer... ws) {
        StringBuilder target = new StringBuilder("static:///");
        for (int i = 0; i < ws.length; i++) target.append(i == 0 ? "" : ",").append("127.0.0.1:").append(ws[i].port());
        RemoteExecutor e = RemoteExecutor.create(Config.of("WORKERS", target.toString(), "SHUTDOWN_GRACE_SECONDS", "1",
                "WORKSPACE_ROOT", workspaces.toString()), Languages.load(), Duration.ofSeconds(5));
        toClose.add(e);
        return e;
    }

    private static ExecutionRequest python(String code, Duration timeout) {
        return ExecutionRequest.builder("python", code, new Limits(timeout, 30, 512L << 20, 64, 256 << 10, 64L << 20))
                .build();
    }

    @Test
    void runsSessionsAndCancelGoThroughRealWorkers() throws Exception {
        WorkerServer a = worker("real-a"), b = worker("real-b");
        RemoteExecutor gw = gateway(a, b);
        // The gateway's first look at the workers may come before a loaded machine has let them answer.
        Poll.until("both workers healthy at the gateway", () -> {
            gw.pollNow();
            return gw.workers().size() == 2 && gw.workers().stream().allMatch(WorkerStatus::healthy);
        });
        assertThat(gw.maxConcurrent()).isEqualTo(4);
        // A worker answers runtime_info once its engine has probed the language versions (seconds after start).
        assertThat(Poll.until("runtime info from a worker", gw::runtimeInfo, m -> m.containsKey("sandbox")))
                .containsEntry("mode", "gateway");

        ExecutionResult r = gw.submit(python("print(6*7)", Duration.ofSeconds(20)), OutputListener.NONE).result()
                .get(60, TimeUnit.SECONDS);
        assertThat(r.outcome()).isEqualTo(Outcome.EXITED);
        assertThat(r.stdout()).isEqualTo("42\n");
        assertThat(r.worker().orElseThrow()).isIn("real-a", "real-b");

        SessionRef ref = new SessionRef("alice", "nb");
        ExecutionResult first = gw.submit(python("x = 41", Duration.ofSeconds(20)).inSession(ref), OutputListener.NONE)
                .result().get(60, TimeUnit.SECONDS);
        assertThat(first.outcome()).as(first.stderr()).isEqualTo(Outcome.EXITED);
        ExecutionResult second = gw.submit(python("x + 1", Duration.ofSeconds(20)).inSession(ref), OutputListener.NONE)
                .result().get(60, TimeUnit.SECONDS);
        assertThat(second.worker()).isEqualTo(first.worker());
        assertThat(second.session()).hasValueSatisfying(s -> assertThat(s.result()).contains("42"));
        assertThat(gw.sessions().list("alice")).extracting(i -> i.name()).containsExactly("nb");

        CountDownLatch out = new CountDownLatch(1);
        RunHandle h = gw.submit(python("import time\nprint('go', flush=True)\ntime.sleep(60)", Duration.ofSeconds(90)),
                (stream, text) -> out.countDown());
        assertThat(out.await(30, TimeUnit.SECONDS)).isTrue();
        h.cancel();
        ExecutionResult c = h.result().get(30, TimeUnit.SECONDS);
        assertThat(c.outcome()).isEqualTo(Outcome.CANCELLED);
        Poll.until("the run killed on the worker", () -> {
            gw.pollNow();
            return gw.workers().stream().mapToInt(WorkerStatus::running).sum() == 0;
        });
    }

    @Test
    void aWorkerClosedMidRunGivesWorkerLost() throws Exception {
        WorkerServer a = worker("doomed");
        RemoteExecutor gw = gateway(a);
        CountDownLatch out = new CountDownLatch(1);
        RunHandle h = gw.submit(python("import time\nprint('started', flush=True)\ntime.sleep(60)", Duration.ofSeconds(90)),
                (stream, text) -> out.countDown());
        assertThat(out.await(30, TimeUnit.SECONDS)).isTrue();
        a.close();
        ExecutionResult r = h.result().get(30, TimeUnit.SECONDS);
        assertThat(r.outcome()).as(r.stderr()).isIn(Outcome.WORKER_LOST, Outcome.CANCELLED);
        assertThat(r.stdout()).startsWith("started");
    }

    @Test
    void aRunThroughTheGatewayReachesACredentialedApiFromItsWorkerAndItsRecordComesBack() throws Exception {
        java.util.concurrent.ConcurrentLinkedQueue<String> seen = new java.util.concurrent.ConcurrentLinkedQueue<>();
        com.sun.net.httpserver.HttpServer fixture = com.sun.net.httpserver.HttpServer.create(
                new java.net.InetSocketAddress(java.net.InetAddress.ofLiteral("127.0.0.1"), 0), 10);
        fixture.createContext("/", ex -> {
            seen.add(ex.getRequestURI() + " " + ex.getRequestHeaders().getFirst("X-Key"));
            byte[] body = "{\"ok\": true}".getBytes(java.nio.charset.StandardCharsets.UTF_8);
            ex.getResponseHeaders().add("Content-Type", "application/json");
            ex.sendResponseHeaders(200, body.length);
            ex.getResponseBody().write(body);
            ex.close();
        });
        fixture.start();
        toClose.add(() -> fixture.stop(0));
        Path file = workspaces.resolve("upstreams.json");
        java.nio.file.Files.writeString(file, "{\"httpApis\": {\"fx\": {\"url\": \"http://127.0.0.1:"
                + fixture.getAddress().getPort() + "\", \"headers\": {\"X-Key\": \"gateway-test-key-1\"}}}}");
        WorkerServer a = worker("api-worker", "SANDBOX", "bwrap", "UPSTREAM_MCP_FILE", file.toString());
        RemoteExecutor gw = gateway(a);
        Poll.until("the worker healthy at the gateway", () -> {
            gw.pollNow();
            return gw.workers().size() == 1 && gw.workers().getFirst().healthy();
        });
        ExecutionResult r = gw.submit(python("""
                import os, urllib.request
                with urllib.request.urlopen(os.environ["CODE_APIS_URL"] + "/fx/user?page=1") as res:
                    print(res.status, res.read().decode())
                """, Duration.ofSeconds(30)), OutputListener.NONE).result().get(60, TimeUnit.SECONDS);
        assertThat(r.outcome()).as(r.stderr()).isEqualTo(Outcome.EXITED);
        assertThat(r.stdout()).isEqualTo("200 {\"ok\": true}\n");
        assertThat(seen).containsExactly("/user?page=1 gateway-test-key-1");
        assertThat(r.toolCalls().orElseThrow().apiCalls()).singleElement().satisfies(c -> {
            assertThat(c.api()).isEqualTo("fx");
            assertThat(c.path()).isEqualTo("/user");
            assertThat(c.status()).isEqualTo(200);
            assertThat(c.bytesIn()).isEqualTo(12);
        });
    }

    /**
     * Placeholder secrets behind a gateway: the worker holds EGRESS_SECRETS_FILE (and its own CA under its DATA_DIR)
     * and swaps the placeholder for the value on the way to the secret's host, a TLS fixture on 127.0.0.1 whose
     * certificate comes from a throwaway CA the worker trusts (EGRESS_UPSTREAM_CA_FILE); the gateway, with the same
     * file, lists the secret in runtime_info and passes the caller's policy and tenant on; the program sees only the
     * placeholder, and the result's network record names the secret through the gateway.
     */
    @Test
    @SuppressWarnings("unchecked")
    void aRunThroughTheGatewayGetsAPlaceholderItsWorkerSwapsForTheValueAndTheGatewayListsTheSecret(@TempDir Path dir)
            throws Exception {
        String value = "gw-real-secret-" + dev.codeexec.config.Ids.hex(8);
        java.nio.file.Files.setPosixFilePermissions(dir, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Path fixtureCaDir = java.nio.file.Files.createDirectory(dir.resolve("fixture-ca"));
        dev.codeexec.egress.InterceptCa fixtureCa = dev.codeexec.egress.InterceptCa.loadOrCreate(fixtureCaDir);
        java.util.concurrent.ConcurrentLinkedQueue<String> seen = new java.util.concurrent.ConcurrentLinkedQueue<>();
        com.sun.net.httpserver.HttpsServer fixture = com.sun.net.httpserver.HttpsServer.create(
                new java.net.InetSocketAddress(java.net.InetAddress.ofLiteral("127.0.0.1"), 0), 10);
        fixture.setHttpsConfigurator(new com.sun.net.httpserver.HttpsConfigurator(fixtureCa.serverContext("api.secret.test")));
        fixture.createContext("/", ex -> {
            String auth = String.valueOf(ex.getRequestHeaders().getFirst("Authorization"));
            seen.add(auth);
            byte[] body = ("you sent " + auth + "\n").getBytes(java.nio.charset.StandardCharsets.UTF_8);
            ex.getResponseHeaders().add("Content-Type", "text/plain");
            ex.sendResponseHeaders(200, body.length);
            ex.getResponseBody().write(body);
            ex.close();
        });
        fixture.start();
        toClose.add(() -> fixture.stop(0));
        int port = fixture.getAddress().getPort();
        String host = "api.secret.test:" + port;
        Path secrets = java.nio.file.Files.writeString(dir.resolve("secrets.json"), """
                {"GW_TOKEN": {"value": "%s", "hosts": ["%s"], "description": "the fixture's token"}}
                """.formatted(value, host));
        Path workerData = java.nio.file.Files.createDirectory(dir.resolve("worker-data"));
        WorkerServer w = worker("secret-worker", "SANDBOX", "bwrap", "DATA_DIR", workerData.toString(), "EGRESS", "on",
                "EGRESS_ALLOW", host, "EGRESS_ALLOW_CIDRS", "127.0.0.1/32", "EGRESS_RESOLVE", "api.secret.test=127.0.0.1",
                "EGRESS_SECRETS_FILE", secrets.toString(),
                "EGRESS_UPSTREAM_CA_FILE", fixtureCaDir.resolve("ca.pem").toString());
        // the gateway: the production wiring, the same file (read for names only), its own allow-list; it resolves
        // nothing of the fixture and holds no CA
        dev.codeexec.surface.ServerSetup setup = dev.codeexec.Main.wire(Config.of("WORKERS", "static:///127.0.0.1:" + w.port(),
                "SHUTDOWN_GRACE_SECONDS", "1", "WORKSPACE_ROOT", workspaces.toString(), "PORT", "0",
                "DATA_DIR", dir.resolve("gateway-data").toString(),
                "EGRESS", "on", "EGRESS_ALLOW", host, "EGRESS_SECRETS_FILE", secrets.toString()), List.of());
        dev.codeexec.http.HttpServer gateway = dev.codeexec.http.HttpServer.start(setup);
        toClose.add(gateway);
        io.modelcontextprotocol.client.McpSyncClient client = io.modelcontextprotocol.client.McpClient.sync(
                io.modelcontextprotocol.client.transport.HttpClientStreamableHttpTransport.builder(
                        "http://127.0.0.1:" + gateway.port()).build()).requestTimeout(Duration.ofSeconds(90)).build();
        toClose.add(client::closeGracefully);
        client.initialize();

        Map<String, Object> info = Poll.until("the worker healthy at the gateway", () -> (Map<String, Object>) client.callTool(
                io.modelcontextprotocol.spec.McpSchema.CallToolRequest.builder("runtime_info").arguments(Map.of()).build())
                .structuredContent(), m -> ((List<Map<String, Object>>) m.get("workers")).stream()
                .anyMatch(x -> Boolean.TRUE.equals(x.get("healthy"))));
        assertThat(info).containsEntry("mode", "gateway");
        List<Map<String, Object>> listed = (List<Map<String, Object>>) ((Map<String, Object>) info.get("network")).get("secrets");
        assertThat(listed).containsExactly(Map.of("name", "GW_TOKEN", "description", "the fixture's token", "hosts", List.of(host)));
        assertThat(info.toString()).doesNotContain(value);

        io.modelcontextprotocol.spec.McpSchema.CallToolResult r = client.callTool(
                io.modelcontextprotocol.spec.McpSchema.CallToolRequest.builder("execute_code").arguments(Map.of("language", "bash",
                        "code", "curl -sS -H \"Authorization: Bearer $GW_TOKEN\" https://" + host + "/user\necho \"token=$GW_TOKEN\"",
                        "timeout_ms", 30000)).build());
        Map<String, Object> result = (Map<String, Object>) r.structuredContent();
        assertThat(r.isError()).as(String.valueOf(result)).isFalse();
        assertThat(seen).containsExactly("Bearer " + value);
        String stdout = (String) result.get("stdout");
        String token = stdout.lines().filter(l -> l.startsWith("token=")).findFirst().orElseThrow().substring(6);
        assertThat(token).matches("cxs_[0-9a-f]{40}");
        assertThat(stdout).contains("you sent Bearer " + token).doesNotContain(value);
        assertThat(result).containsEntry("worker", "secret-worker");
        List<Map<String, Object>> connections = (List<Map<String, Object>>) ((Map<String, Object>) result.get("network"))
                .get("connections");
        assertThat(connections).singleElement().satisfies(c -> {
            assertThat(c).containsEntry("host", "api.secret.test").containsEntry("decision", "allowed");
            assertThat(c.get("secrets")).isEqualTo(List.of("GW_TOKEN"));
        });
    }
}
