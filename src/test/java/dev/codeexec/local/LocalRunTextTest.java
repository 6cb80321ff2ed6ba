package dev.codeexec.local;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

class LocalRunTextTest {

    @Test
    void shellQuotingSurvivesQuotes() {
        assertThat(LocalRun.shellQuote(List.of("a b", "it's"))).isEqualTo("'a b' 'it'\\''s'");
    }

    @Test
    void auditPreviewIsOneLineAndBounded() {
        assertThat(LocalRun.codePreview("print(\"a\")\n\tx\r\u0001")).isEqualTo("print(\\\"a\\\")\\n\\tx\\r\\u0001");
        assertThat(LocalRun.codePreview("y".repeat(500))).hasSize(203).endsWith("...");
    }
}
