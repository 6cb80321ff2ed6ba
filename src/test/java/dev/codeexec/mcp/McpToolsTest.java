package dev.codeexec.mcp;

import dev.codeexec.http.HttpServer;
import io.modelcontextprotocol.client.McpClient;
import io.modelcontextprotocol.client.McpSyncClient;
import io.modelcontextprotocol.client.transport.HttpClientStreamableHttpTransport;
import io.modelcontextprotocol.spec.McpSchema.CallToolRequest;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.InitializeResult;
import io.modelcontextprotocol.spec.McpSchema.ProgressNotification;
import io.modelcontextprotocol.spec.McpSchema.TextContent;
import io.modelcontextprotocol.spec.McpSchema.Tool;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

import static org.assertj.core.api.Assertions.assertThat;

/** The two tools through the official SDK client over Streamable HTTP, against the real Jetty stack. */
class McpToolsTest {

    static FakeExecutor executor = new FakeExecutor();
    static HttpServer server;
    static McpSyncClient client;
    static final List<ProgressNotification> progress = new CopyOnWriteArrayList<>();

    @BeforeAll
    static void start() throws Exception {
        server = TestServers.start(executor);
        client = McpClient.sync(HttpClientStreamableHttpTransport.builder("http://127.0.0.1:" + server.port()).build())
                // the client checks every structured result against its tool's output schema (the server does not)
                .enableCallToolSchemaCaching(true)
                .requestTimeout(Duration.ofSeconds(30))
                .progressConsumer(progress::add)
                .build();
    }

    @AfterAll
    static void stop() {
        client.closeGracefully();
        server.close();
    }

    private static CallToolResult execute(Map<String, Object> args) {
        return client.callTool(CallToolRequest.builder("execute_code").arguments(args).build());
    }

    private static String text(CallToolResult r) {
        return ((TextContent) r.content().getFirst()).text();
    }

    @Test
    void initializeNamesTheServer() {
        InitializeResult init = client.initialize();
        assertThat(init.serverInfo().name()).isEqualTo("code-exec-mcp");
        assertThat(init.capabilities().tools()).isNotNull();
    }

    @Test
    @SuppressWarnings("unchecked")
    void toolsListShowsBothToolsWithInputAndOutputSchemas() {
        client.initialize();
        List<Tool> tools = client.listTools().tools();
        assertThat(tools).extracting(Tool::name).containsExactlyInAnyOrder("execute_code", "runtime_info",
                "list_files", "read_file", "write_file", "delete_file", "workspace_info", "session_list",
                "session_reset", "session_close", "job_status", "job_wait", "job_cancel", "job_list", "expose_port",
                "unexpose_port");
        Tool exec = tools.stream().filter(t -> t.name().equals("execute_code")).findFirst().orElseThrow();
        Map<String, Object> input = exec.inputSchema();
        assertThat((List<Object>) input.get("required")).containsExactlyInAnyOrder("language", "code");
        Map<String, Object> props = (Map<String, Object>) input.get("properties");
        assertThat(props).containsKeys("language", "code", "stdin", "timeout_ms", "args", "env");
        Map<String, Object> language = (Map<String, Object>) props.get("language");
        assertThat((List<Object>) language.get("enum")).contains("python", "nodejs", "typescript", "go", "java", "shell", "bash");
        Map<String, Object> timeout = (Map<String, Object>) props.get("timeout_ms");
        // the maximum of a background job (JOB_MAX_TIMEOUT_MS); a foreground call's (MAX_TIMEOUT_MS) is in the description
        assertThat(timeout).containsEntry("type", "integer").containsEntry("maximum", 3600000).containsEntry("default", 30000);
        assertThat((String) timeout.get("description")).contains("at most 120000");
        assertThat(props).containsKey("background");
        assertThat(exec.outputSchema()).containsKey("properties");
        Map<String, Object> outProps = (Map<String, Object>) exec.outputSchema().get("properties");
        assertThat(outProps).containsKeys("language", "exitCode", "stdout", "stderr", "durationMs", "timedOut",
                "truncated", "outcome", "peakMemoryBytes", "cpuTimeMs", "sandbox");
        Tool info = tools.stream().filter(t -> t.name().equals("runtime_info")).findFirst().orElseThrow();
        assertThat(info.outputSchema()).isNotNull();
    }

    @Test
    void happyPathReturnsStructuredContentAndSummary() {
        client.initialize();
        CallToolResult r = execute(Map.of("language", "python", "code", "print:hello world"));
        assertThat(r.isError()).isFalse();
        @SuppressWarnings("unchecked")
        Map<String, Object> s = (Map<String, Object>) r.structuredContent();
        assertThat(s).containsEntry("language", "python").containsEntry("exitCode", 0)
                .containsEntry("stdout", "hello world").containsEntry("stderr", "")
                .containsEntry("timedOut", false).containsEntry("truncated", false)
                .containsEntry("outcome", "exited").containsEntry("sandbox", "fake")
                .containsEntry("peakMemoryBytes", 1234567).containsKey("durationMs")
                .doesNotContainKey("cpuTimeMs");
        assertThat(text(r)).startsWith("outcome: exited, exit code 0").contains("--- stdout ---\nhello world");
    }

    @Test
    void nonZeroExitIsANormalResult() {
        client.initialize();
        CallToolResult r = execute(Map.of("language", "bash", "code", "exit:3"));
        assertThat(r.isError()).isFalse();
        @SuppressWarnings("unchecked")
        Map<String, Object> s = (Map<String, Object>) r.structuredContent();
        assertThat(s).containsEntry("exitCode", 3).containsEntry("stderr", "boom\n").containsEntry("outcome", "exited");
        assertThat(text(r)).contains("exit code 3").contains("--- stderr ---\nboom");
    }

    @Test
    void timeoutOutOfRangeIsAClearError() {
        client.initialize();
        CallToolResult r = execute(Map.of("language", "python", "code", "print:x", "timeout_ms", 999999));
        assertThat(r.isError()).isTrue();
        assertThat(text(r)).isEqualTo("Error [invalid_request]: 'timeout_ms' must be between 1 and 120000, got 999999 (a longer run can go on as a background job: `background: true`)");
    }

    @Test
    void unknownLanguageIsAClearError() {
        client.initialize();
        CallToolResult r = execute(Map.of("language", "cobol", "code", "x"));
        assertThat(r.isError()).isTrue();
        assertThat(text(r)).startsWith("Error [invalid_request]: unknown language 'cobol'").doesNotContain("Exception");
    }

    @Test
    void busyAndUnavailableAreErrorsWithTheEngineMessage() {
        client.initialize();
        CallToolResult busy = execute(Map.of("language", "python", "code", "busy"));
        assertThat(busy.isError()).isTrue();
        assertThat(text(busy)).isEqualTo("Error [busy]: all 4 slots are busy and the queue is full");
        CallToolResult down = execute(Map.of("language", "python", "code", "unavailable"));
        assertThat(down.isError()).isTrue();
        assertThat(text(down)).isEqualTo("Error [unavailable]: sandbox bwrap is not usable: no user namespaces");
    }

    @Test
    void aWorkspaceRefusalNamesItsKindAndAFaultOfTheServersShowsNothingOfIt() {
        client.initialize();
        CallToolResult badName = execute(Map.of("language", "python", "code", "print:x", "workspace", "../up"));
        assertThat(badName.isError()).isTrue();
        assertThat(text(badName)).startsWith("Error [bad_name]: bad workspace name '../up'");
        CallToolResult crash = execute(Map.of("language", "python", "code", "crash"));
        assertThat(crash.isError()).isTrue();
        assertThat(text(crash)).isEqualTo("Error [internal]: the call could not be completed (details are in the server log)");
    }

    @Test
    void runtimeInfoReturnsTheExecutorsDescription() {
        client.initialize();
        CallToolResult r = client.callTool(CallToolRequest.builder("runtime_info").arguments(Map.of()).build());
        assertThat(r.isError()).isFalse();
        @SuppressWarnings("unchecked")
        Map<String, Object> s = (Map<String, Object>) r.structuredContent();
        assertThat(s).containsEntry("sandbox", Map.of("kind", "fake"));
        assertThat(text(r)).contains("\"kind\" : \"fake\"");
    }

    @Test
    void outputArrivesAsProgressBeforeTheResult() {
        client.initialize();
        progress.clear();
        CallToolResult r = client.callTool(CallToolRequest.builder("execute_code")
                .arguments(Map.of("language", "python", "code", "stream:6")).progressToken("tok-1").build());
        List<ProgressNotification> seen = List.copyOf(progress);
        assertThat(r.isError()).isFalse();
        assertThat(seen).isNotEmpty().allSatisfy(p -> assertThat(p.progressToken()).isEqualTo("tok-1"));
        assertThat(seen).extracting(ProgressNotification::progress).isSorted().doesNotHaveDuplicates();
        String joined = String.join("", seen.stream().map(ProgressNotification::message).toList());
        assertThat(joined).contains("line 0").contains("[stderr] line 1").contains("line 4").contains("[stderr] line 5");
        // the request's audit carries the session and the JSON-RPC id the interceptor tagged
        assertThat(executor.requests.getLast().audit().session()).isPresent();
        assertThat(executor.requests.getLast().audit().requestId()).isPresent();
    }

    /** The SDK's 10 s default request timeout must not cut a long, silent run short. */
    @Test
    @Tag("slow")
    void aSilentRunLongerThanTheSdkDefaultTimeoutCompletes() {
        client.initialize();
        CallToolResult r = execute(Map.of("language", "python", "code", "sleep:11000", "timeout_ms", 20000));
        assertThat(r.isError()).isFalse();
        @SuppressWarnings("unchecked")
        Map<String, Object> s = (Map<String, Object>) r.structuredContent();
        assertThat(s).containsEntry("stdout", "done").containsEntry("outcome", "exited");
    }
}
