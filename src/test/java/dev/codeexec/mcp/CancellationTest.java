package dev.codeexec.mcp;

import dev.codeexec.http.HttpServer;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import static org.assertj.core.api.Assertions.assertThat;

/** notifications/cancelled and the end of a session reach the run, over real HTTP. */
@Tag("slow")
class CancellationTest {

    FakeExecutor executor = new FakeExecutor();
    HttpServer server;
    RawClient raw;

    @BeforeEach
    void start() throws Exception {
        server = TestServers.start(executor);
        raw = new RawClient(server.port());
    }

    @AfterEach
    void stop() {
        server.close();
    }

    private CompletableFuture<String> callInBackground(String session, Object id) {
        return CompletableFuture.supplyAsync(() -> {
            try {
                HttpResponse<String> r = raw.send(raw.mcpPost(session, RawClient.call(id, "block")));
                return r.statusCode() + " " + r.body();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
    }

    @Test
    void cancelledNotificationKillsTheRunAndTheCallEnds() throws Exception {
        String session = raw.initialize();
        CompletableFuture<String> call = callInBackground(session, 42);
        assertThat(executor.blockStarted.await(10, TimeUnit.SECONDS)).isTrue();

        HttpResponse<String> ack = raw.send(raw.mcpPost(session, RawClient.cancel(42)));
        assertThat(ack.statusCode()).isEqualTo(202);

        String result = call.get(10, TimeUnit.SECONDS);
        assertThat(executor.cancels.get()).isEqualTo(1);
        assertThat(result).startsWith("200 ").contains("\"outcome\":\"cancelled\"").contains("\"id\":42");
        assertThat(server.registry().size()).isZero();
    }

    @Test
    void cancelForAnotherSessionDoesNotTouchTheRun() throws Exception {
        String owner = raw.initialize();
        String other = raw.initialize();
        CompletableFuture<String> call = callInBackground(owner, "abc");
        assertThat(executor.blockStarted.await(10, TimeUnit.SECONDS)).isTrue();

        raw.send(raw.mcpPost(other, RawClient.cancel("abc")));
        assertThat(call).isNotDone();
        assertThat(executor.cancels.get()).isZero();

        raw.send(raw.mcpPost(owner, RawClient.cancel("abc")));
        assertThat(call.get(10, TimeUnit.SECONDS)).contains("\"outcome\":\"cancelled\"");
    }

    @Test
    void deletingTheSessionCancelsItsRuns() throws Exception {
        String session = raw.initialize();
        CompletableFuture<String> call = callInBackground(session, 7);
        assertThat(executor.blockStarted.await(10, TimeUnit.SECONDS)).isTrue();

        HttpResponse<String> deleted = raw.send(raw.request("/mcp").header("Mcp-Session-Id", session).DELETE());
        assertThat(deleted.statusCode()).isEqualTo(200);
        // The cancel may land just after the DELETE's answer.
        Poll.until("the run cancelled", () -> executor.cancels.get() > 0);
        assertThat(executor.cancels.get()).isEqualTo(1);
        call.get(10, TimeUnit.SECONDS);
        assertThat(executor.activeRuns()).isZero();

        HttpResponse<String> after = raw.send(raw.mcpPost(session, RawClient.call(8, "print:x")));
        assertThat(after.statusCode()).isEqualTo(404);
    }

    @Test
    void progressStreamsBeforeTheResultOnTheSameResponse() throws Exception {
        String session = raw.initialize();
        String body = """
                {"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"execute_code",\
                "arguments":{"language":"python","code":"stream:4"},"_meta":{"progressToken":"p5"}}}""";
        HttpResponse<java.util.stream.Stream<String>> r = raw.stream(raw.mcpPost(session, body));
        String events = r.body().filter(l -> l.startsWith("data:")).collect(Collectors.joining("\n"));
        int firstProgress = events.indexOf("notifications/progress");
        int result = events.indexOf("\"result\"");
        assertThat(firstProgress).isNotNegative();
        assertThat(result).isGreaterThan(firstProgress);
        assertThat(events.substring(result)).doesNotContain("notifications/progress");
        assertThat(events).contains("\"progressToken\":\"p5\"").contains("line 0");
    }

    /**
     * Tool calls over HTTP run on their own request threads, not on the SDK's bounded pool (10 threads per core):
     * more calls than that pool holds are all running at once, and ending the session ends them all.
     */
    @Test
    void manyConcurrentCallsAllRunAndSessionEndCancelsThemAll() throws Exception {
        int calls = Runtime.getRuntime().availableProcessors() * 10 + 4;
        String session = raw.initialize();
        List<CompletableFuture<String>> pending = new ArrayList<>();
        for (int i = 0; i < calls; i++) pending.add(callInBackground(session, 100 + i));
        Poll.until("all " + calls + " calls running", () -> executor.activeRuns() >= calls);
        assertThat(executor.activeRuns()).isEqualTo(calls);
        assertThat(server.registry().size()).isEqualTo(calls);

        raw.send(raw.request("/mcp").header("Mcp-Session-Id", session).DELETE());
        for (CompletableFuture<String> c : pending) c.get(10, TimeUnit.SECONDS);
        assertThat(executor.cancels.get()).isEqualTo(calls);
        assertThat(executor.activeRuns()).isZero();
    }
}
