package dev.codeexec.agent;

import java.util.Optional;

/**
 * Why a chat request could not be answered: an HTTP status, a reason word (docs/chat.md lists them) and a message
 * that is safe to show (never the model's key, never a stack trace). {@code conversation} names the conversation that
 * keeps what was done before the failure, when there is one.
 */
public final class ChatException extends RuntimeException {

    private final int status;
    private final String reason;
    private final Optional<String> retryAfterSeconds;
    private volatile Optional<String> conversation = Optional.empty();

    public ChatException(int status, String reason, String message) {
        this(status, reason, message, Optional.empty());
    }

    public ChatException(int status, String reason, String message, Optional<String> retryAfterSeconds) {
        super(message, null, false, false);
        this.status = status;
        this.reason = reason;
        this.retryAfterSeconds = retryAfterSeconds;
    }

    public int status() {
        return status;
    }

    public String reason() {
        return reason;
    }

    /** For a rate limit: the model API's Retry-After, in seconds, when it gave one. */
    public Optional<String> retryAfterSeconds() {
        return retryAfterSeconds;
    }

    public Optional<String> conversation() {
        return conversation;
    }

    ChatException in(String conversationId) {
        conversation = Optional.of(conversationId);
        return this;
    }

    static ChatException badRequest(String message) {
        return new ChatException(400, "bad_request", message);
    }

    static ChatException notFound(String id) {
        return new ChatException(404, "not_found", "no conversation '" + id + "' here");
    }
}
