package dev.codeexec.agent;

import dev.codeexec.config.Config;

import java.time.Duration;
import java.util.Optional;

/**
 * The chat agent's settings, from the operator's configuration only (nothing in a request changes them): the model
 * (provider, base URL, key, name), the bounds of one answer (rounds, tokens, time) and of the conversations kept.
 */
public record ChatSettings(String provider, Optional<String> baseUrl, Optional<String> apiKey, Optional<String> model,
        int maxRounds, int maxTokens, Duration timeout, int maxConversations, int maxConversationBytes, Duration idle) {

    public static ChatSettings of(Config config) {
        return new ChatSettings(config.get(Config.LLM_PROVIDER), nonEmpty(config.get(Config.LLM_BASE_URL)),
                nonEmpty(config.get(Config.LLM_API_KEY)), nonEmpty(config.get(Config.LLM_MODEL)),
                config.get(Config.LLM_MAX_ROUNDS), config.get(Config.LLM_MAX_TOKENS),
                Duration.ofMillis(config.get(Config.LLM_TIMEOUT_MS)), config.get(Config.CHAT_MAX_CONVERSATIONS),
                config.get(Config.CHAT_CONVERSATION_MAX_KB) << 10, Duration.ofHours(config.get(Config.CHAT_CONVERSATION_IDLE_HOURS)));
    }

    private static Optional<String> nonEmpty(String s) {
        return s == null || s.isBlank() ? Optional.empty() : Optional.of(s.strip());
    }

    /** Whether the chat is on: a model is named. */
    public boolean enabled() {
        return model.isPresent();
    }

    /** What the chat says when it is off. */
    public static final String OFF = "the chat is off: the server has no model (set LLM_MODEL, and LLM_PROVIDER, "
            + "LLM_BASE_URL and LLM_API_KEY as the model's API needs; see docs/chat.md)";

    /** The key with every occurrence of the API key replaced, for any text that may reach a response or a log. */
    public String scrub(String text) {
        if (text == null) return "";
        String out = text;
        if (apiKey.isPresent() && apiKey.get().length() >= 4) out = out.replace(apiKey.get(), "[LLM_API_KEY]");
        return out;
    }
}
