package dev.codeexec.agent;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.codeexec.config.Config;
import dev.langchain4j.agent.tool.ToolExecutionRequest;
import dev.langchain4j.agent.tool.ToolSpecification;
import dev.langchain4j.data.message.ChatMessage;
import dev.langchain4j.data.message.UserMessage;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The model's two wire formats through LangChain4j and {@link ModelHttp}, against a scripted API on loopback: a
 * tool call read from each format, plain and streaming; and each failure named as the chat names it (the key never
 * in a message). The whole chat against both formats is e2e/test/chat.test.js.
 */
class LangChainModelTest {

    private static final String KEY = "sk-test-0123456789abcdef";

    /** One scripted answer: status, headers, body, and how long to wait before it. */
    record Answer(int status, Map<String, String> headers, String body, long delayMs) {
        static Answer json(String body) {
            return new Answer(200, Map.of("Content-Type", "application/json"), body, 0);
        }

        static Answer sse(String body) {
            return new Answer(200, Map.of("Content-Type", "text/event-stream"), body, 0);
        }
    }

    private final Queue<Answer> answers = new ConcurrentLinkedQueue<>();
    private final List<String> requests = Collections.synchronizedList(new ArrayList<>());
    private final List<String> keys = Collections.synchronizedList(new ArrayList<>());
    private HttpServer server;

    private String start() throws IOException {
        server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.createContext("/", this::serve);
        server.setExecutor(java.util.concurrent.Executors.newVirtualThreadPerTaskExecutor());
        server.start();
        return "http://127.0.0.1:" + server.getAddress().getPort() + "/v1";
    }

    private void serve(HttpExchange x) throws IOException {
        // compact JSON, so that tests can look for fragments whatever the client's layout
        String sent = new String(x.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
        requests.add(x.getRequestURI().getPath() + " " + tools.jackson.databind.json.JsonMapper.shared().readTree(sent));
        String auth = x.getRequestHeaders().getFirst("Authorization");
        keys.add(auth != null ? auth : String.valueOf(x.getRequestHeaders().getFirst("x-api-key")));
        Answer a = answers.poll();
        if (a == null) a = new Answer(500, Map.of(), "{\"error\": {\"message\": \"no answer scripted\"}}", 0);
        try {
            Thread.sleep(a.delayMs());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        a.headers().forEach((k, v) -> x.getResponseHeaders().add(k, v));
        byte[] body = a.body().getBytes(StandardCharsets.UTF_8);
        try {
            x.sendResponseHeaders(a.status(), body.length);
            x.getResponseBody().write(body);
        } catch (IOException e) {
            // the client gave up (a timeout test)
        }
        x.close();
    }

    @AfterEach
    void stop() {
        if (server != null) server.stop(0);
    }

    private LangChainModel model(String provider, String base, String... more) {
        List<String> kv = new ArrayList<>(List.of("LLM_MODEL", "m1", "LLM_PROVIDER", provider, "LLM_BASE_URL", base,
                "LLM_API_KEY", KEY));
        kv.addAll(List.of(more));
        return new LangChainModel(ChatSettings.of(Config.of(kv.toArray(String[]::new))));
    }

    private static final List<ChatMessage> HELLO = List.of(UserMessage.from("hello"));
    private static final List<ToolSpecification> TOOLS = List.of(ToolSpecification.builder().name("execute_code")
            .description("runs code").parameters(AgentTools.parameters(Map.of("type", "object", "properties",
                    Map.of("code", Map.of("type", "string", "description", "the program")), "required", List.of("code"))))
            .build());

    @Test
    void openAiPlainToolCallAndUsageAreRead() throws Exception {
        String base = start();
        answers.add(Answer.json("{\"id\":\"1\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"m1\",\"choices\":[{\"index\":0,"
                + "\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_9\",\"type\":\"function\","
                + "\"function\":{\"name\":\"execute_code\",\"arguments\":\"{\\\"code\\\":\\\"print(1)\\\"}\"}}]},"
                + "\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":7,\"total_tokens\":19}}"));
        Model.Reply r = model("openai", base).chat(HELLO, TOOLS, null);
        ToolExecutionRequest call = r.message().toolExecutionRequests().get(0);
        assertThat(call.id()).isEqualTo("call_9");
        assertThat(call.name()).isEqualTo("execute_code");
        assertThat(call.arguments()).contains("print(1)");
        assertThat(r.inputTokens()).isEqualTo(12);
        assertThat(r.outputTokens()).isEqualTo(7);
        assertThat(requests.get(0)).startsWith("/v1/chat/completions ").contains("\"execute_code\"")
                .contains("\"required\":[\"code\"]").contains("\"description\":\"the program\"");
        assertThat(keys.get(0)).isEqualTo("Bearer " + KEY);
    }

    @Test
    void anthropicStreamingTextArrivesInPieces() throws Exception {
        String base = start();
        answers.add(Answer.sse("""
                event: message_start
                data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m1","content":[],"stop_reason":null,"usage":{"input_tokens":21,"output_tokens":1}}}

                event: content_block_start
                data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

                event: content_block_delta
                data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello "}}

                event: content_block_delta
                data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"there"}}

                event: content_block_stop
                data: {"type":"content_block_stop","index":0}

                event: message_delta
                data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}

                event: message_stop
                data: {"type":"message_stop"}

                """));
        List<String> pieces = Collections.synchronizedList(new ArrayList<>());
        Model.Reply r = model("anthropic", base).chat(HELLO, TOOLS, pieces::add);
        assertThat(pieces).containsExactly("Hello ", "there");
        assertThat(r.message().text()).isEqualTo("Hello there");
        assertThat(r.inputTokens()).isEqualTo(21);
        assertThat(requests.get(0)).startsWith("/v1/messages ").contains("\"stream\":true").contains("\"input_schema\"");
        assertThat(keys.get(0)).isEqualTo(KEY);
    }

    @Test
    void aRefusedKeyIsModelAuthAndTheKeyIsNotRepeated() throws Exception {
        String base = start();
        answers.add(new Answer(401, Map.of("Content-Type", "application/json"),
                "{\"error\": {\"message\": \"Incorrect API key provided: " + KEY + "\"}}", 0));
        assertThatThrownBy(() -> model("openai", base).chat(HELLO, TOOLS, null))
                .isInstanceOfSatisfying(ChatException.class, e -> {
                    assertThat(e.reason()).isEqualTo("model_auth");
                    assertThat(e.getMessage()).contains("HTTP 401").contains("Incorrect API key provided")
                            .doesNotContain(KEY).contains("[LLM_API_KEY]");
                });
    }

    @Test
    void aShortRetryAfterIsWaitedOutOnceAndALongOneIsNamed() throws Exception {
        String base = start();
        answers.add(new Answer(429, Map.of("Retry-After", "1"), "{\"error\": {\"message\": \"slow down\"}}", 0));
        answers.add(Answer.json("{\"id\":\"1\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"m1\",\"choices\":[{\"index\":0,"
                + "\"message\":{\"role\":\"assistant\",\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}"));
        assertThat(model("openai", base).chat(HELLO, TOOLS, null).message().text()).isEqualTo("ok");
        assertThat(requests).hasSize(2);

        answers.add(new Answer(429, Map.of("Retry-After", "120"), "{\"error\": {\"message\": \"quota\"}}", 0));
        assertThatThrownBy(() -> model("anthropic", base).chat(HELLO, TOOLS, s -> { }))
                .isInstanceOfSatisfying(ChatException.class, e -> {
                    assertThat(e.status()).isEqualTo(429);
                    assertThat(e.reason()).isEqualTo("model_rate_limited");
                    assertThat(e.getMessage()).contains("retry after 120 s").contains("quota");
                    assertThat(e.retryAfterSeconds()).contains("120");
                });
        assertThat(requests).hasSize(3);
    }

    @Test
    void aServerErrorATimeoutAndAMalformedAnswerAreEachNamed() throws Exception {
        String base = start();
        answers.add(new Answer(500, Map.of(), "{\"error\": {\"message\": \"overloaded\"}}", 0));
        assertThatThrownBy(() -> model("openai", base).chat(HELLO, TOOLS, null))
                .isInstanceOfSatisfying(ChatException.class, e -> {
                    assertThat(e.reason()).isEqualTo("model_error");
                    assertThat(e.getMessage()).contains("HTTP 500").contains("overloaded");
                });
        answers.add(new Answer(200, Map.of("Content-Type", "application/json"), "{}", 3000));
        assertThatThrownBy(() -> model("openai", base, "LLM_TIMEOUT_MS", "300").chat(HELLO, TOOLS, null))
                .isInstanceOfSatisfying(ChatException.class, e -> {
                    assertThat(e.reason()).isEqualTo("model_timeout");
                    assertThat(e.getMessage()).contains("300 ms");
                });
        answers.add(Answer.json("this is not JSON at all"));
        assertThatThrownBy(() -> model("anthropic", base).chat(HELLO, TOOLS, null))
                .isInstanceOfSatisfying(ChatException.class, e -> assertThat(e.reason()).isEqualTo("model_malformed"));
        answers.add(Answer.json("{\"id\":\"1\",\"object\":\"chat.completion\",\"choices\":[]}"));
        assertThatThrownBy(() -> model("openai", base).chat(HELLO, TOOLS, null))
                .isInstanceOfSatisfying(ChatException.class, e -> assertThat(e.reason()).isEqualTo("model_malformed"));
    }

    @Test
    void anUnreachableApiIsAModelErrorNamingTheAddress() throws Exception {
        String base = start();
        server.stop(0);
        server = null;
        assertThatThrownBy(() -> model("openai", base).chat(HELLO, TOOLS, null))
                .isInstanceOfSatisfying(ChatException.class, e -> {
                    assertThat(e.reason()).isEqualTo("model_error");
                    assertThat(e.getMessage()).contains(base);
                });
    }
}
