package dev.codeexec.preview;

import dev.codeexec.config.Config;
import dev.codeexec.config.DataDir;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.PreviewControl;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.engine.WorkerStatus;
import dev.codeexec.gateway.RemoteExecutor;
import dev.codeexec.lang.Languages;
import dev.codeexec.mcp.FakeExecutor;
import dev.codeexec.testing.Poll;
import dev.codeexec.worker.WorkerServer;
import dev.codeexec.workspace.Workspaces;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Previews behind gateways: the worker that holds a session keeps its previews; two gateways (as two replicas) each
 * find a preview by its token and carry its connections to the worker over gRPC, through their own bridge socket,
 * to the sandbox's preview socket (here a fake of init in front of a test app): requests, a WebSocket's bytes both
 * ways, an event stream as it is written.
 */
class GatewayPreviewTest {

    private final Path tmp;
    private final List<AutoCloseable> toClose = new ArrayList<>();

    {
        try {
            tmp = Files.createTempDirectory("gateway-preview");
            Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @AfterEach
    void closeAll() throws Exception {
        for (int i = toClose.size() - 1; i >= 0; i--) toClose.get(i).close();
        DataDir.deleteTree(tmp);
    }

    private RemoteExecutor gateway(String name, WorkerServer w) throws Exception {
        RemoteExecutor e = RemoteExecutor.create(Config.of("WORKERS", "static:///127.0.0.1:" + w.port(),
                "SHUTDOWN_GRACE_SECONDS", "1", "DATA_DIR", tmp.resolve("gw-" + name).toString(),
                "WORKSPACE_ROOT", tmp.resolve("ws").toString()), Languages.load());
        toClose.add(e);
        Poll.until("the worker healthy at gateway " + name, () -> e.workers().stream().anyMatch(WorkerStatus::healthy));
        e.previews().orElseThrow().address().listening("http://gw-" + name);
        return e;
    }

    private PreviewProxy listener(Executor gw) throws Exception {
        PreviewControl previews = gw.previews().orElseThrow();
        PreviewProxy p = PreviewProxy.start(new PreviewProxy.Settings("127.0.0.1", 0, Optional.empty(), "https", 8, 64,
                        1 << 20, 64L << 20, Duration.ofSeconds(20)),
                token -> previews.find(token).map(x -> new PreviewProxy.Target(x.token(), x.tenant(), x.port(),
                        x.key() ? PreviewProxy.Auth.KEY : PreviewProxy.Auth.TOKEN, x.socket(), x.sandbox().label())),
                key -> Optional.empty(), new PreviewProxy.Observer() {
                    @Override
                    public void request(PreviewProxy.Target t, String method, int status) {
                    }

                    @Override
                    public void connection(PreviewProxy.Target t, String client, long bytesIn, long bytesOut, long millis, String end) {
                    }
                });
        toClose.add(p);
        return p;
    }

    @Test
    void aSessionsPreviewOnAWorkerIsServedThroughEitherGatewayAndEndsAtBoth() throws Exception {
        Path workerData = tmp.resolve("worker");
        Config wc = Config.of("DATA_DIR", workerData.toString(), "WORKER_PORT", "0", "WORKER_NAME", "wp",
                "WORKSPACE_ROOT", tmp.resolve("ws").toString(), "SHUTDOWN_GRACE_SECONDS", "1");
        FakeExecutor engine = new FakeExecutor();
        engine.sessionsByTenant = Map.of("alice", 1); // session "s0"
        toClose.add(engine);
        WorkerServer worker = WorkerServer.start(wc, engine, Workspaces.configured(wc), "test");
        toClose.add(worker);
        // the session's sandbox: its init's preview socket where the worker looks for it, an app behind it
        Path dir = DataDir.of(wc).previews().resolve(new SessionRef("alice", "s0").previewKey());
        Files.createDirectories(dir);
        FakeSandbox sandbox = new FakeSandbox(dir);
        toClose.add(sandbox);
        FakeSandbox.App app = sandbox.app(0);

        RemoteExecutor a = gateway("a", worker), b = gateway("b", worker);
        PreviewControl.Sandbox s0 = new PreviewControl.Sandbox(PreviewControl.Kind.SESSION, "s0");
        PreviewControl.Preview p = a.previews().orElseThrow().expose("alice", s0, app.port(), false);
        assertThat(p.token()).as("it names its worker").startsWith(worker.instanceId().substring(0, 16)).hasSize(48);
        assertThat(b.previews().orElseThrow().expose("alice", s0, app.port(), false).token())
                .as("the same preview through the other gateway").isEqualTo(p.token());
        assertThat(b.previews().orElseThrow().list("alice", s0)).extracting(PreviewControl.Preview::token)
                .containsExactly(p.token());
        assertThatThrownBy(() -> a.previews().orElseThrow().expose("bob", s0, app.port(), false))
                .isInstanceOf(ExecutionException.InvalidRequest.class).hasMessageContaining("no session");

        for (PreviewProxy l : List.of(listener(a), listener(b))) {
            try (Http c = new Http(l.port())) {
                Http.Response r = c.get("/p/" + p.token() + "/hello?x=1");
                assertThat(r.status()).isEqualTo(200);
                assertThat(r.body()).startsWith("GET /hello?x=1");
                assertThat(c.get("/p/" + p.token() + "/again").body()).as("keep-alive through the worker").startsWith("GET /again");
            }
            try (Http c = new Http(l.port())) {
                c.send("GET /p/" + p.token() + "/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
                assertThat(c.read().status()).isEqualTo(101);
                c.send("\u0081\u0005hello");
                assertThat(new String(c.in.readNBytes(7), StandardCharsets.ISO_8859_1)).isEqualTo("\u0081\u0005hello");
                c.socket.shutdownOutput(); // the half-close crosses the gateway and the worker, and the app ends its side
                assertThat(c.closedByPeer()).isTrue();
            }
        }

        assertThat(b.previews().orElseThrow().unexpose("alice", Optional.empty(), Optional.of(p.token()), Optional.empty()))
                .isOne();
        Poll.until("gone at gateway a too", () -> a.previews().orElseThrow().find(p.token()).isEmpty());
        assertThat(b.previews().orElseThrow().find(p.token())).isEmpty();
    }
}
