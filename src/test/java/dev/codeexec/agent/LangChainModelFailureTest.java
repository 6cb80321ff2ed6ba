package dev.codeexec.agent;

import com.fasterxml.jackson.core.JsonParseException;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.time.Duration;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;

/** How a failed model call is named: an answer that is not the format is model_malformed, not a connection failure. */
class LangChainModelFailureTest {

    private final LangChainModel model = new LangChainModel(new ChatSettings("openai",
            Optional.of("http://127.0.0.1:9/v1"), Optional.of("sk-test-key"), Optional.of("m"), 4, 100,
            Duration.ofSeconds(1), 10, 1 << 20, Duration.ofHours(1)));

    @Test
    void anAnswerTheJsonReaderCannotParseIsModelMalformedWithoutTheParsersPositionText() {
        // as LangChain4j throws it: Jackson 2's parse error (an IOException) wrapped in a RuntimeException
        var e = new RuntimeException(new JsonParseException(null, "Unrecognized token 'this'\n at [Source: REDACTED]"));

        ChatException named = model.failure(e);

        assertThat(named.reason()).isEqualTo("model_malformed");
        assertThat(named.status()).isEqualTo(502);
        assertThat(named.getMessage()).doesNotContain("[Source:").doesNotContain("Unrecognized token");
    }

    @Test
    void anotherIoFailureIsStillAModelErrorOfTheConnection() {
        ChatException named = model.failure(new RuntimeException(new IOException("connection reset")));

        assertThat(named.reason()).isEqualTo("model_error");
        assertThat(named.getMessage()).contains("connection reset");
    }
}
