package dev.codeexec.agent;

import java.util.Map;

/**
 * What happens while an answer is made, as it happens: the SSE form of {@code POST /api/chat} writes each as an
 * event (docs/chat.md). Every method has a default that ignores it (the JSON form needs none).
 */
public interface ChatEvents {

    ChatEvents NONE = new ChatEvents() { };

    /** First: which conversation, mode, workspace and model. */
    default void conversation(Map<String, Object> info) {
    }

    /** A model call starts. */
    default void round(int round) {
    }

    /** A piece of the answer's text (streaming only). */
    default void text(int round, String text) {
    }

    /** The model asked for a tool call; it runs now. */
    default void toolCall(int round, String id, String tool, Map<String, Object> input) {
    }

    /** A running tool's output ({@code stdout} or {@code stderr}). */
    default void toolOutput(String id, String stream, String text) {
    }

    /** A tool call's record, as the final object lists it. */
    default void toolResult(Map<String, Object> record) {
    }
}
