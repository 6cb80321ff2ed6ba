package dev.codeexec.gateway;

import dev.codeexec.config.Config;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.JobControl;
import dev.codeexec.engine.JobHandle;
import dev.codeexec.engine.JobState;
import dev.codeexec.engine.LogChunk;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.engine.WorkerStatus;
import dev.codeexec.lang.Languages;
import dev.codeexec.mcp.FakeExecutor;
import dev.codeexec.testing.Poll;
import dev.codeexec.worker.WorkerServer;
import dev.codeexec.workspace.Workspaces;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Jobs behind gateways: kept by the worker that runs them, found from any gateway replica by their id, and lost
 * with their worker's name when it goes away. Two gateways (two RemoteExecutors, as two replicas) over two workers
 * whose engines are scripted.
 */
class RemoteJobsTest {

    /** Not a @TempDir: a worker's job may write its record as its engine closes, after the test has ended. */
    private final Path tmp;

    {
        try {
            tmp = java.nio.file.Files.createTempDirectory("remote-jobs");
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private final List<AutoCloseable> toClose = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (int i = toClose.size() - 1; i >= 0; i--) toClose.get(i).close();
        Thread.sleep(200);
        dev.codeexec.config.DataDir.deleteTree(tmp);
    }

    private WorkerServer worker(String name) throws Exception {
        java.nio.file.Files.setPosixFilePermissions(tmp, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Config c = Config.of("DATA_DIR", tmp.resolve("data-" + name).toString(), "WORKER_PORT", "0",
                "WORKSPACE_ROOT", tmp.resolve("ws").toString(), "WORKER_NAME", name, "MAX_JOBS", "4",
                "SHUTDOWN_GRACE_SECONDS", "1");
        FakeExecutor engine = new FakeExecutor();
        toClose.add(engine);
        WorkerServer w = WorkerServer.start(c, engine, Workspaces.configured(c), "test");
        toClose.add(w);
        return w;
    }

    private RemoteExecutor gateway(WorkerServer... ws) throws InterruptedException {
        StringBuilder target = new StringBuilder("static:///");
        for (int i = 0; i < ws.length; i++) target.append(i == 0 ? "" : ",").append("127.0.0.1:").append(ws[i].port());
        RemoteExecutor e = RemoteExecutor.create(Config.of("WORKERS", target.toString(), "SHUTDOWN_GRACE_SECONDS", "1",
                "WORKSPACE_ROOT", tmp.resolve("ws").toString()), Languages.load(), Duration.ofSeconds(5));
        toClose.add(e);
        Poll.until("the workers healthy at the gateway", () -> {
            e.pollNow();
            return e.workers().size() == ws.length && e.workers().stream().allMatch(WorkerStatus::healthy);
        });
        return e;
    }

    private static JobControl<?> jobs(RemoteExecutor gw) {
        return gw.jobs().orElseThrow();
    }

    private static ExecutionRequest job(String tenant, String code) {
        return new RequestValidator(Config.of(), Languages.load()).validate("python", code, null, null, null, null,
                new ExecutionRequest.AuditInfo(Optional.of(tenant), Optional.empty(), Optional.empty()), true);
    }

    private static JobHandle find(RemoteExecutor gw, String tenant, String id) {
        return jobs(gw).find(Optional.of(tenant), id).map(JobHandle.class::cast).orElseThrow();
    }

    @Test
    void aJobStartedAtOneGatewayIsReadWaitedForListedAndCancelledAtAnother() throws Exception {
        WorkerServer a = worker("wa"), b = worker("wb");
        RemoteExecutor g1 = gateway(a, b), g2 = gateway(a, b);

        String id = jobs(g1).start(job("alice", "stream:5")).id();
        assertThat(id).as("the id names the worker process that keeps it")
                .matches("job-(" + a.instanceId() + "|" + b.instanceId() + ")-[0-9a-f]+");

        JobHandle there = find(g2, "alice", id);
        JobState ended = there.await(20_000);
        assertThat(ended.status()).isEqualTo("exited");
        assertThat(ended.result().orElseThrow()).containsEntry("exitCode", 0)
                .containsKey("worker");
        assertThat(ended.result().get().get("worker")).isIn("wa", "wb");
        LogChunk out = there.read(OutputListener.Stream.STDOUT, 0, 1 << 20);
        assertThat(new String(out.bytes(), StandardCharsets.UTF_8)).isEqualTo("line 0\nline 2\nline 4\n");
        assertThat(out.total()).isEqualTo(ended.stdout());
        LogChunk from = there.read(OutputListener.Stream.STDOUT, 7, 1 << 20);
        assertThat(new String(from.bytes(), StandardCharsets.UTF_8)).as("read by offset").isEqualTo("line 2\nline 4\n");

        // another tenant: not found anywhere, the same as an id that never existed
        assertThat(jobs(g2).find(Optional.of("bob"), id)).isEmpty();
        String other = id.substring(0, id.length() - 1) + (id.endsWith("0") ? "1" : "0");
        assertThat(jobs(g2).find(Optional.of("alice"), other)).as("an id that never existed").isEmpty();
        assertThat(jobs(g2).list(Optional.of("bob"))).isEmpty();
        assertThat(jobs(g1).find(Optional.empty(), id)).as("an admin's view").isPresent();

        // a running job, cancelled through the other gateway; its listing and state agree at both
        String blocked = jobs(g2).start(job("alice", "block")).id();
        JobHandle h = find(g1, "alice", blocked);
        Poll.until("the job runs", () -> h.state().status().equals("running"));
        assertThat(jobs(g1).list(Optional.of("alice"))).extracting(JobState::id).containsExactly(blocked, id);
        assertThat(h.cancel(10_000).status()).isEqualTo("cancelled");
        assertThat(find(g2, "alice", blocked).state().status()).isEqualTo("cancelled");
        assertThat(jobs(g1).running()).isZero();
    }

    @Test
    void jobsSpreadOverTheWorkersAndAWatcherHearsTheOutputAndTheEnd() throws Exception {
        WorkerServer a = worker("wa"), b = worker("wb");
        RemoteExecutor g = gateway(a, b);
        Set<String> instances = ConcurrentHashMap.newKeySet();
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            String id = jobs(g).start(job("alice", "block")).id();
            ids.add(id);
            instances.add(id.split("-")[1]);
        }
        assertThat(instances).as("jobs spread over both workers").containsExactlyInAnyOrder(a.instanceId(), b.instanceId());
        Poll.until("the workers report their jobs", () -> {
            g.pollNow();
            return jobs(g).running() + jobs(g).queued() == 6 && jobs(g).running() > 0;
        });
        for (String id : ids) find(g, "alice", id).cancel(10_000);

        List<String> heard = java.util.Collections.synchronizedList(new ArrayList<>());
        List<String> changed = java.util.Collections.synchronizedList(new ArrayList<>());
        jobs(g).onChange(j -> changed.add(j.id()));
        JobHandle streaming = jobs(g).start(job("alice", "stream:20"));
        try (AutoCloseable w = streaming.watch((stream, text) -> heard.add(text))) {
            streaming.await(30_000);
            Poll.until("the watcher heard it all", () -> String.join("", heard).contains("line 18\n"));
        }
        Poll.until("the change of status is told", () -> changed.contains(streaming.id()));
        g.pollNow();
        assertThat(jobs(g).endedByStatus()).containsEntry("cancelled", 6L).containsEntry("exited", 1L);
    }

    @Test
    void aJobWhoseWorkerWentAwayIsLostWithItsNameAtEveryGatewayThatKnewIt() throws Exception {
        WorkerServer a = worker("wa");
        RemoteExecutor g1 = gateway(a), g2 = gateway(a);
        String id = jobs(g1).start(job("alice", "block")).id();
        JobHandle atG2 = find(g2, "alice", id);
        Poll.until("the job runs", () -> atG2.state().status().equals("running"));

        a.close(); // the worker process is gone (its address no longer answers)
        // a wait started as it goes carries on until the worker is taken for gone, then answers lost
        JobState waited = find(g1, "alice", id).await(40_000);
        assertThat(waited.status()).isEqualTo("lost");
        for (RemoteExecutor g : List.of(g1, g2)) {
            JobState lost = Poll.until("the job lost at a gateway", () -> {
                g.pollNow();
                try {
                    return find(g, "alice", id).state();
                } catch (ExecutionException.Unavailable e) {
                    return null; // not yet taken for gone: the worker may answer again
                }
            }, s -> s != null && s.status().equals("lost"));
            assertThat(lost.message().orElseThrow()).contains("wa").contains(a.instanceId());
            assertThat(jobs(g).list(Optional.of("alice"))).extracting(JobState::status).containsExactly("lost");
            assertThat(jobs(g).find(Optional.of("bob"), id)).as("still the tenant's only").isEmpty();
            assertThat(find(g, "alice", id).read(OutputListener.Stream.STDOUT, 0, 100).bytes()).isEmpty();
        }
        assertThatThrownBy(() -> jobs(g1).start(job("alice", "print:x")))
                .isInstanceOf(ExecutionException.Unavailable.class);
    }
}
