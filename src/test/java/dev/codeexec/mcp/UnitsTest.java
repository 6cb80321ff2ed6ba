package dev.codeexec.mcp;

import dev.codeexec.auth.Principal;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.OutputListener.Stream;
import dev.codeexec.engine.RunHandle;
import io.modelcontextprotocol.spec.McpSchema.ProgressNotification;
import org.junit.jupiter.api.Test;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** RunRegistry, MessageInterceptor, ProgressForwarder and the stdio input stream on their own. */
class UnitsTest {

    static final JsonMapper JSON = JsonMapper.builder().build();

    static final class CountingHandle implements RunHandle {
        final AtomicInteger cancels = new AtomicInteger();

        @Override
        public String id() {
            return "h";
        }

        @Override
        public CompletableFuture<ExecutionResult> result() {
            return new CompletableFuture<>();
        }

        @Override
        public void cancel() {
            cancels.incrementAndGet();
        }
    }

    @Test
    void registryCancelsByKeyAndBySession() {
        RunRegistry reg = new RunRegistry();
        CountingHandle a = new CountingHandle();
        CountingHandle b = new CountingHandle();
        CountingHandle c = new CountingHandle();
        reg.register("s1", "1", a);
        RunRegistry.Registration rb = reg.register("s1", "2", b);
        reg.register("s2", "1", c);
        assertThat(reg.cancel("s2", "1")).isTrue();
        assertThat(c.cancels).hasValue(1);
        assertThat(a.cancels).hasValue(0);
        rb.close();
        assertThat(reg.cancelSession("s1")).isEqualTo(1);
        assertThat(a.cancels).hasValue(1);
        assertThat(b.cancels).hasValue(0);
    }

    @Test
    void aCancelThatOvertakesItsCallIsAppliedOnRegistration() {
        RunRegistry reg = new RunRegistry();
        assertThat(reg.cancel("s", "9")).isFalse();
        CountingHandle h = new CountingHandle();
        reg.register("s", "9", h).close();
        assertThat(h.cancels).hasValue(1);
        CountingHandle again = new CountingHandle();
        reg.register("s", "9", again);
        assertThat(again.cancels).hasValue(0);
    }

    /** A session that ends between a call's submission and its registration: the run must not outlive it. */
    @Test
    void aRunRegisteringForASessionThatJustEndedIsCancelled() {
        RunRegistry reg = new RunRegistry();
        assertThat(reg.cancelSession("gone")).isZero();
        CountingHandle late = new CountingHandle();
        reg.register("gone", "1", late).close();
        assertThat(late.cancels).hasValue(1);
        CountingHandle other = new CountingHandle();
        reg.register("alive", "1", other);
        assertThat(other.cancels).hasValue(0);
        // every late run of the ended session, not only the first
        CountingHandle later = new CountingHandle();
        reg.register("gone", "2", later);
        assertThat(later.cancels).hasValue(1);
    }

    @Test
    void interceptorStampsTheAuthenticatedTenantOverAForgedOne() {
        MessageInterceptor i = new MessageInterceptor(new RunRegistry());
        Principal bob = new Principal("bob", false);
        for (String method : new String[]{"tools/call", "resources/read", "prompts/get", "completion/complete"}) {
            String out = i.intercept("sess", bob, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"" + method
                    + "\",\"params\":{\"_meta\":{\"dev.codeexec/tenant\":\"alice\",\"dev.codeexec/admin\":true}}}");
            @SuppressWarnings("unchecked")
            java.util.Map<String, Object> meta = JSON.convertValue(JSON.readTree(out).path("params").path("_meta"),
                    java.util.Map.class);
            assertThat(MessageInterceptor.principalOf(meta)).as(method).isEqualTo(bob);
        }
        assertThat(MessageInterceptor.principalOf(null)).isEqualTo(Principal.DEFAULT);
    }

    @Test
    void interceptorTagsToolCallsAndOverwritesClientMeta() {
        MessageInterceptor i = new MessageInterceptor(new RunRegistry());
        String out = i.intercept("sess", Principal.DEFAULT, """
                {"jsonrpc":"2.0","id":"x1","method":"tools/call","params":{"name":"execute_code","arguments":{},\
                "_meta":{"progressToken":7,"dev.codeexec/requestId":"forged","dev.codeexec/session":"other"}}}""");
        JsonNode meta = JSON.readTree(out).path("params").path("_meta");
        assertThat(meta.path("dev.codeexec/requestId").asString()).isEqualTo("x1");
        assertThat(meta.path("dev.codeexec/session").asString()).isEqualTo("sess");
        assertThat(meta.path("progressToken").asInt()).isEqualTo(7);

        String numeric = i.intercept("sess", Principal.DEFAULT, "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}");
        assertThat(JSON.readTree(numeric).path("params").path("_meta").path("dev.codeexec/requestId").asString()).isEqualTo("12");

        String other = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}";
        assertThat(i.intercept("sess", Principal.DEFAULT, other)).isSameAs(other);
        assertThatThrownBy(() -> i.intercept("sess", Principal.DEFAULT, "{nope")).isInstanceOf(JacksonException.class);
        for (String notAnObject : new String[]{"null", "42", "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]"})
            assertThatThrownBy(() -> i.intercept("sess", Principal.DEFAULT, notAnObject))
                    .isInstanceOf(MessageInterceptor.NotAMessage.class);
    }

    @Test
    void interceptorCancelsOnlyTheNamedRunOfThatSession() {
        RunRegistry reg = new RunRegistry();
        CountingHandle h = new CountingHandle();
        reg.register("sess", "12", h);
        MessageInterceptor i = new MessageInterceptor(reg);
        i.intercept("other", Principal.DEFAULT, RawClient.cancel(12));
        i.intercept("sess", Principal.DEFAULT, RawClient.cancel(13));
        assertThat(h.cancels).hasValue(0);
        i.intercept("sess", Principal.DEFAULT, RawClient.cancel(12));
        assertThat(h.cancels).hasValue(1);
    }

    @Test
    void progressPrefixesStderrStampsEachPieceAndFlushesOnClose() {
        List<ProgressNotification> sent = new CopyOnWriteArrayList<>();
        ProgressForwarder f = new ProgressForwarder("t", sent::add);
        f.onOutput(Stream.STDOUT, "a");
        f.onOutput(Stream.STDOUT, "b");
        f.onOutput(Stream.STDERR, "oops");
        f.onOutput(Stream.STDOUT, "c");
        f.close();
        f.onOutput(Stream.STDOUT, "after close");
        String all = String.join("|", sent.stream().map(ProgressNotification::message).toList());
        assertThat(all.replace("|", "")).isEqualTo("ab[stderr] oopsc");
        assertThat(sent).extracting(ProgressNotification::progress).isSorted().doesNotHaveDuplicates();
        assertThat(sent).allSatisfy(n -> assertThat(n.progressToken()).isEqualTo("t"));
        assertThat(sent).allSatisfy(n -> assertThat(java.time.Instant.parse((String) n.meta().get("dev.codeexec/at")))
                .isCloseTo(java.time.Instant.now(), org.assertj.core.api.Assertions.within(60, java.time.temporal.ChronoUnit.SECONDS)));
        assertThat(sent.stream().filter(n -> n.message().startsWith("[stderr] ")).toList())
                .singleElement().satisfies(n -> assertThat(n.meta()).containsEntry("dev.codeexec/stream", "stderr"));
        ProgressForwarder timed = new ProgressForwarder("u", sent::add);
        sent.clear();
        timed.onOutput(Stream.STDOUT, "line one\n", 1_700_000_000_000L);
        timed.onOutput(Stream.STDOUT, "line two\n", 1_700_000_000_005L);
        timed.close();
        assertThat(sent).as("one notification per line the engine delivers").extracting(ProgressNotification::message)
                .containsExactly("line one\n", "line two\n");
        assertThat(sent.getFirst().meta()).containsEntry("dev.codeexec/stream", "stdout")
                .containsEntry("dev.codeexec/at", "2023-11-14T22:13:20Z");
    }

    @Test
    void stdioStreamPassesLinesThroughTheInterceptorAndReportsEof() throws Exception {
        RunRegistry reg = new RunRegistry();
        CountingHandle h = new CountingHandle();
        reg.register(RunRegistry.STDIO_SESSION, "5", h);
        AtomicInteger eofs = new AtomicInteger();
        String input = "not json\n" + RawClient.cancel(5) + "\n" + RawClient.call(6, "print:x");
        InterceptingInputStream in = new InterceptingInputStream(
                new ByteArrayInputStream(input.getBytes(StandardCharsets.UTF_8)), new MessageInterceptor(reg),
                RunRegistry.STDIO_SESSION, eofs::incrementAndGet);
        List<String> lines = new String(in.readAllBytes(), StandardCharsets.UTF_8).lines().toList();
        assertThat(lines).hasSize(3);
        assertThat(lines.get(0)).isEqualTo("not json");
        assertThat(lines.get(1)).isEqualTo(RawClient.cancel(5));
        assertThat(lines.get(2)).contains("\"dev.codeexec/requestId\":\"6\"");
        assertThat(h.cancels).hasValue(1);
        assertThat(in.read()).isEqualTo(-1);
        assertThat(eofs).hasValue(1);
    }

    @Test
    void summaryPutsEachSectionOnItsOwnLine() {
        ExecutionResult r = ExecutionResult.builder("python", dev.codeexec.engine.Outcome.EXITED).exitCode(1)
                .stdout("a\n").stderr("b").durationMs(12).truncated(true)
                .peakMemoryBytes(java.util.OptionalLong.empty()).cpuTimeMs(java.util.OptionalDouble.empty())
                .sandbox("bwrap").build();
        assertThat(ExecuteCodeTool.summary(r)).isEqualTo("""
                outcome: exited, exit code 1, 12 ms (python, sandbox bwrap)
                output was truncated at the output limit
                --- stdout ---
                a
                --- stderr ---
                b""");
        ExecutionResult quiet = ExecutionResult.builder("go", dev.codeexec.engine.Outcome.TIMEOUT).exitCode(0)
                .durationMs(3).peakMemoryBytes(java.util.OptionalLong.empty())
                .cpuTimeMs(java.util.OptionalDouble.empty()).sandbox("bwrap").build();
        assertThat(ExecuteCodeTool.summary(quiet)).endsWith("(go, sandbox bwrap)\n(no output)");
    }
}
