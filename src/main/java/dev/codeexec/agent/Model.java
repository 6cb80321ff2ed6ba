package dev.codeexec.agent;

import dev.langchain4j.agent.tool.ToolSpecification;
import dev.langchain4j.data.message.AiMessage;
import dev.langchain4j.data.message.ChatMessage;

import java.util.List;
import java.util.function.Consumer;

/**
 * One model call: the messages so far and the tools offered in; the model's message (text, tool calls) and the
 * tokens it counted out. {@link LangChainModel} is the real one; tests of the agent's loop give a scripted one.
 */
interface Model {

    /** The model's answer to one call, with its token counts (0 when the API gave none). */
    record Reply(AiMessage message, long inputTokens, long outputTokens) {
    }

    /**
     * @param onText null for a plain call; else the call streams and each piece of text goes here as it arrives
     * @throws ChatException why the call failed (model_auth, model_rate_limited, model_error, model_timeout,
     *                       model_malformed)
     */
    Reply chat(List<ChatMessage> messages, List<ToolSpecification> tools, Consumer<String> onText);

    /** What the chat shows of the model: its provider and name. */
    String provider();

    String name();
}
