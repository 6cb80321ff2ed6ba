package dev.codeexec.agent;

import dev.langchain4j.agent.tool.ToolSpecification;
import dev.langchain4j.data.message.AiMessage;
import dev.langchain4j.data.message.ChatMessage;
import dev.langchain4j.exception.HttpException;
import dev.langchain4j.model.anthropic.AnthropicChatModel;
import dev.langchain4j.model.anthropic.AnthropicStreamingChatModel;
import dev.langchain4j.model.chat.ChatModel;
import dev.langchain4j.model.chat.StreamingChatModel;
import dev.langchain4j.model.chat.request.ChatRequest;
import dev.langchain4j.model.chat.response.ChatResponse;
import dev.langchain4j.model.chat.response.StreamingChatResponseHandler;
import dev.langchain4j.model.openai.OpenAiChatModel;
import dev.langchain4j.model.openai.OpenAiStreamingChatModel;
import dev.langchain4j.model.output.TokenUsage;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.net.ConnectException;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;

/**
 * The model through LangChain4j: its OpenAI module (the Chat Completions API, which OpenAI, Azure OpenAI, vLLM,
 * Ollama, llama.cpp's server and LM Studio speak) or its Anthropic module (the Messages API), plain and streaming,
 * over {@link ModelHttp}. LangChain4j's own retries are off: a failure is the chat's to name (a short Retry-After
 * is waited out once by {@link ModelHttp}). Each call runs on a virtual thread of its own and is given up after
 * LLM_TIMEOUT_MS (plus a rate limit's short wait), the thread interrupted.
 */
final class LangChainModel implements Model {

    private static final JsonMapper JSON = JsonMapper.shared();

    private final ChatSettings settings;
    private final ChatModel plain;
    private final StreamingChatModel streaming;

    LangChainModel(ChatSettings settings) {
        this.settings = settings;
        String model = settings.model().orElseThrow();
        String key = settings.apiKey().orElse(null);
        Duration t = settings.timeout();
        if (settings.provider().equals("anthropic")) {
            String base = settings.baseUrl().orElse("https://api.anthropic.com/v1");
            this.plain = AnthropicChatModel.builder().httpClientBuilder(new ModelHttp.Builder(t)).baseUrl(slash(base))
                    .apiKey(key == null ? "none" : key).modelName(model).maxTokens(settings.maxTokens()).timeout(t)
                    .maxRetries(0).build();
            this.streaming = AnthropicStreamingChatModel.builder().httpClientBuilder(new ModelHttp.Builder(t))
                    .baseUrl(slash(base)).apiKey(key == null ? "none" : key).modelName(model)
                    .maxTokens(settings.maxTokens()).timeout(t).build();
        } else {
            String base = settings.baseUrl().orElse("https://api.openai.com/v1");
            this.plain = OpenAiChatModel.builder().httpClientBuilder(new ModelHttp.Builder(t)).baseUrl(base)
                    .apiKey(key).modelName(model).maxTokens(settings.maxTokens()).timeout(t).maxRetries(0).build();
            this.streaming = OpenAiStreamingChatModel.builder().httpClientBuilder(new ModelHttp.Builder(t)).baseUrl(base)
                    .apiKey(key).modelName(model).maxTokens(settings.maxTokens()).timeout(t).build();
        }
    }

    /** LangChain4j's Anthropic client joins "messages" to the base URL as a relative path: it needs the slash. */
    private static String slash(String base) {
        return base.endsWith("/") ? base : base + "/";
    }

    @Override
    public String provider() {
        return settings.provider();
    }

    @Override
    public String name() {
        return settings.model().orElse("");
    }

    @Override
    public Reply chat(List<ChatMessage> messages, List<ToolSpecification> tools, Consumer<String> onText) {
        ChatRequest.Builder b = ChatRequest.builder().messages(messages);
        if (!tools.isEmpty()) b.toolSpecifications(tools);
        ChatRequest request = b.build();
        CompletableFuture<ChatResponse> done = new CompletableFuture<>();
        Thread call = Thread.ofVirtual().name("chat-model").start(() -> {
            try {
                if (onText == null) done.complete(plain.chat(request));
                else streaming.chat(request, new StreamingChatResponseHandler() {
                    @Override
                    public void onPartialResponse(String text) {
                        if (text != null && !text.isEmpty()) onText.accept(text);
                    }

                    @Override
                    public void onCompleteResponse(ChatResponse response) {
                        done.complete(response);
                    }

                    @Override
                    public void onError(Throwable error) {
                        done.completeExceptionally(error);
                    }
                });
                // a stream that ended with neither a response nor an error
                if (!done.isDone()) done.completeExceptionally(new IllegalStateException("the stream ended without an answer"));
            } catch (Throwable e) {
                done.completeExceptionally(e);
            }
        });
        ChatResponse response;
        try {
            response = done.get(settings.timeout().toMillis() + ModelHttp.MAX_RETRY_WAIT * 1000L + 1000, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            call.interrupt();
            throw timeout();
        } catch (InterruptedException e) {
            call.interrupt();
            Thread.currentThread().interrupt();
            throw new ChatException(503, "cancelled", "the request was cancelled");
        } catch (ExecutionException e) {
            throw failure(e.getCause());
        }
        AiMessage message = response == null ? null : response.aiMessage();
        if (message == null || ((message.text() == null || message.text().isEmpty()) && !message.hasToolExecutionRequests()))
            throw new ChatException(502, "model_malformed", "the model's API answered, but with no text and no tool call "
                    + "that could be read");
        TokenUsage u = response.tokenUsage();
        return new Reply(message, u == null || u.inputTokenCount() == null ? 0 : u.inputTokenCount(),
                u == null || u.outputTokenCount() == null ? 0 : u.outputTokenCount());
    }

    private ChatException timeout() {
        return new ChatException(504, "model_timeout", "the model did not answer within " + settings.timeout().toMillis()
                + " ms (LLM_TIMEOUT_MS)");
    }

    /** Why a call failed, in the chat's words; the API's own message is kept (without the key), its body is not. */
    ChatException failure(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (c instanceof ModelHttp.Refused r) return refused(r.statusCode(), r.getMessage(), r.retryAfter);
            if (c instanceof HttpException h) return refused(h.statusCode(), h.getMessage(), Optional.empty());
            if (c instanceof dev.langchain4j.exception.TimeoutException || c instanceof java.net.http.HttpTimeoutException)
                return timeout();
            if (c instanceof ConnectException || c instanceof java.nio.channels.UnresolvedAddressException)
                return new ChatException(502, "model_error", "could not reach the model's API at "
                        + settings.baseUrl().orElse("the provider's address") + " (" + c.getClass().getSimpleName() + ")");
            if (c instanceof java.io.IOException || c instanceof java.io.UncheckedIOException)
                return new ChatException(502, "model_error", "the connection to the model's API failed ("
                        + settings.scrub(String.valueOf(c.getMessage())) + ")");
        }
        return new ChatException(502, "model_malformed", "the model's answer could not be read ("
                + e.getClass().getSimpleName() + ")");
    }

    private ChatException refused(int status, String body, Optional<String> retryAfter) {
        String said = apiMessage(body);
        String tail = said.isEmpty() ? "" : ": " + said;
        if (status == 401 || status == 403)
            return new ChatException(502, "model_auth", "the model's API refused the key (HTTP " + status + ", check "
                    + "LLM_API_KEY)" + tail);
        if (status == 429)
            return new ChatException(429, "model_rate_limited", "the model's API is rate limiting requests (HTTP 429)"
                    + retryAfter.map(s -> "; it asks to retry after " + s + (s.matches("\\d+") ? " s" : "")).orElse("") + tail,
                    retryAfter);
        return new ChatException(502, "model_error", "the model's API failed (HTTP " + status + ")" + tail);
    }

    /** The error message an API put in its body ({"error": {"message"}} of both), short, without the key. */
    private String apiMessage(String body) {
        if (body == null || body.isBlank()) return "";
        String m;
        try {
            JsonNode n = JSON.readTree(body);
            JsonNode e = n.path("error");
            m = e.isString() ? e.asString() : e.path("message").asString(n.path("message").asString(""));
        } catch (RuntimeException ex) {
            m = "";
        }
        m = settings.scrub(m.strip());
        return m.length() > 300 ? m.substring(0, 300) + "…" : m;
    }
}
