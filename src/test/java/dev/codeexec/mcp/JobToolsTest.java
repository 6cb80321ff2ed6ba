package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import io.modelcontextprotocol.client.McpSyncClient;
import io.modelcontextprotocol.spec.McpError;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.ReadResourceRequest;
import io.modelcontextprotocol.spec.McpSchema.ResourceContents;
import io.modelcontextprotocol.spec.McpSchema.SubscribeRequest;
import io.modelcontextprotocol.spec.McpSchema.TextResourceContents;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

import static dev.codeexec.mcp.FileToolsTest.assertError;
import static dev.codeexec.mcp.FileToolsTest.call;
import static dev.codeexec.mcp.FileToolsTest.data;
import static dev.codeexec.mcp.FileToolsTest.text;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The job tools through real MCP clients of two tenants, over a fake executor: execute_code with background answers
 * at once in the shape its output schema allows (the client checks it), the tools read and wait and cancel, another
 * tenant meets not_found everywhere, and a subscription to job://{job} hears of the job's end.
 */
class JobToolsTest {

    static TenantServer server;
    static ServerSetup setup;
    static McpSyncClient alice;
    static McpSyncClient bob;
    static final List<List<ResourceContents>> updates = new CopyOnWriteArrayList<>();
    static final List<List<ResourceContents>> bobsUpdates = new CopyOnWriteArrayList<>();
    static McpSyncClient bobWatching;

    @BeforeAll
    static void start() throws Exception {
        setup = TestServers.setup(new FakeExecutor(), List.of()).withJobs();
        server = new TenantServer(setup);
        alice = server.client("alice", spec -> spec.resourcesUpdateConsumer(updates::add));
        bob = server.client("bob");
        bobWatching = server.client("bob", spec -> spec.resourcesUpdateConsumer(bobsUpdates::add));
    }

    @AfterAll
    static void stop() throws Exception {
        alice.closeGracefully();
        bob.closeGracefully();
        bobWatching.closeGracefully();
        server.close();
        setup.closeEngine();
    }

    static String start(String code) {
        Map<String, Object> s = data(call(alice, "execute_code", "language", "python", "code", code, "background", true));
        assertThat((String) s.get("job")).matches("job-[0-9a-f]{32}");
        assertThat(s.get("status")).isIn("running", "queued");
        return (String) s.get("job");
    }

    @Test
    void aBackgroundCallAnswersAtOnceAndJobWaitCollectsTheEndWithItsOutput() {
        long t0 = System.nanoTime();
        String job = start("stream:10");
        assertThat(Duration.ofNanos(System.nanoTime() - t0)).as("answered before the job's 1 s of output")
                .isLessThan(Duration.ofMillis(900));
        Map<String, Object> done = data(call(alice, "job_wait", "job", job, "timeout_ms", 20_000));
        assertThat(done).containsEntry("status", "exited").containsEntry("exitCode", 0)
                .containsEntry("stdout", "line 0\nline 2\nline 4\nline 6\nline 8\n")
                .containsEntry("stderr", "line 1\nline 3\nline 5\nline 7\nline 9\n").containsEntry("more", false);
        @SuppressWarnings("unchecked")
        Map<String, Object> result = (Map<String, Object>) done.get("result");
        assertThat(result).containsEntry("outcome", "exited").doesNotContainKey("stdout");
        assertThat(data(call(alice, "job_list"))).extractingByKey("jobs").asList().extracting("job").contains(job);
    }

    @Test
    void sinceReadsEachByteOnce() throws Exception {
        String job = start("stream:30");
        StringBuilder out = new StringBuilder(), err = new StringBuilder();
        Map<String, Object> since = Map.of("stdout", 0, "stderr", 0);
        String status;
        do {
            Thread.sleep(150);
            Map<String, Object> s = data(call(alice, "job_status", "job", job, "since", since));
            out.append(s.get("stdout"));
            err.append(s.get("stderr"));
            @SuppressWarnings("unchecked")
            Map<String, Object> next = (Map<String, Object>) s.get("offsets");
            since = next;
            status = (String) s.get("status");
        } while (status.equals("running") || !since.equals(Map.of("stdout", out.length(), "stderr", err.length())));
        StringBuilder wantOut = new StringBuilder(), wantErr = new StringBuilder();
        for (int i = 0; i < 30; i++) (i % 2 == 0 ? wantOut : wantErr).append("line ").append(i).append('\n');
        assertThat(out.toString()).isEqualTo(wantOut.toString());
        assertThat(err.toString()).isEqualTo(wantErr.toString());
    }

    @Test
    void jobCancelEndsARunningJobAndKeepsItsRecord() {
        String job = start("block");
        Map<String, Object> s = data(call(alice, "job_cancel", "job", job));
        assertThat(s).containsEntry("status", "cancelled");
        assertThat(data(call(alice, "job_status", "job", job))).containsEntry("status", "cancelled");
        assertThat(text(call(alice, "job_cancel", "job", job))).contains("already ended");
    }

    @Test
    void anotherTenantGetsNotFoundFromEveryToolAndResourceAndSeesNoJob() {
        String job = start("block");
        assertError(call(bob, "job_status", "job", job), "not_found");
        assertError(call(bob, "job_wait", "job", job, "timeout_ms", 10), "not_found");
        assertError(call(bob, "job_cancel", "job", job), "not_found");
        assertError(call(bob, "job_status", "job", "job-00000000000000000000000000000000"), "not_found");
        for (String uri : List.of("job://" + job, "job://" + job + "/stdout"))
            assertThatThrownBy(() -> bob.readResource(new ReadResourceRequest(uri))).isInstanceOf(McpError.class);
        assertThat(data(call(bob, "job_list"))).extractingByKey("jobs").asList().isEmpty();
        assertThat(data(call(alice, "job_status", "job", job))).containsEntry("status", "running");
        data(call(alice, "job_cancel", "job", job));
    }

    @Test
    void theResourcesGiveTheStatusAndTheOutputAndASubscriberHearsOfTheEnd() throws Exception {
        String job = start("stream:6");
        alice.subscribeResource(new SubscribeRequest("job://" + job));
        bobWatching.subscribeResource(new SubscribeRequest("job://" + job)); // not his: as good as an unknown id
        data(call(alice, "job_wait", "job", job, "timeout_ms", 20_000));
        dev.codeexec.testing.Poll.until("resources/updated for the job", Duration.ofSeconds(10), () -> updates.stream()
                .flatMap(List::stream).anyMatch(c -> c.uri().equals("job://" + job)
                        && ((TextResourceContents) c).text().contains("\"status\":\"exited\"")));
        assertThat(bobsUpdates).as("another tenant hears nothing of the job").isEmpty();
        TextResourceContents out = (TextResourceContents) alice.readResource(new ReadResourceRequest("job://" + job + "/stdout"))
                .contents().getFirst();
        assertThat(out.text()).isEqualTo("line 0\nline 2\nline 4\n");
        assertThat(out.mimeType()).isEqualTo("text/plain");
    }

    @Test
    void backgroundWithASessionAndAWaitPast55SecondsAreClearErrors() {
        CallToolResult r = call(alice, "execute_code", "language", "python", "code", "print:x", "background", true,
                "session", "s1");
        assertError(r, "invalid_request");
        assertThat(text(r)).contains("'background' cannot be used with 'session'");
        String job = start("block");
        assertError(call(alice, "job_wait", "job", job, "timeout_ms", 60_000), "invalid_arguments");
        data(call(alice, "job_cancel", "job", job));
    }

    @Test
    void aWaitStreamsAtMostTheOutputCapThenOneNotice() {
        List<String> got = new CopyOnWriteArrayList<>();
        dev.codeexec.engine.OutputListener l = JobTools.capped((stream, text) -> got.add(text), 10);
        for (String piece : List.of("12345", "67890", "abc", "def")) l.onOutput(dev.codeexec.engine.OutputListener.Stream.STDOUT, piece);
        assertThat(got).containsExactly("12345", "67890", JobTools.NOT_STREAMED);
    }

    @Test
    void aSubscriptionToAnotherTenantsJobIsTurnedIntoOneThatNeverFires() {
        String job = start("block");
        MessageInterceptor interceptor = new MessageInterceptor(new RunRegistry(),
                (tenant, uri) -> McpServers.mayWatch(setup, tenant, uri));
        String subscribe = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"resources/subscribe\",\"params\":{\"uri\":\"job://" + job + "\"}}";
        assertThat(interceptor.intercept("s", new dev.codeexec.auth.Principal("bob", false), subscribe))
                .contains(MessageInterceptor.NOWHERE).doesNotContain(job);
        assertThat(interceptor.intercept("s", new dev.codeexec.auth.Principal("alice", false), subscribe))
                .contains("job://" + job).doesNotContain(MessageInterceptor.NOWHERE);
        String other = subscribe.replace("job://" + job, "ws://proj/a.txt");
        assertThat(interceptor.intercept("s", new dev.codeexec.auth.Principal("bob", false), other)).contains("ws://proj/a.txt");
        data(call(alice, "job_cancel", "job", job));
    }
}
