package dev.codeexec.boot;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.spi.LoggingEvent;
import ch.qos.logback.core.encoder.Encoder;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.nio.charset.StandardCharsets;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Log lines cannot be forged through the values a request puts into them: in both LOG_FORMATs one event is one
 * line, and an audit field stays one field.
 */
class LoggingTest {

    /** What a client sends as its clientInfo.name or as a JSON-RPC id, hoping to plant a line of its own. */
    static final String FORGED = "raw\n2026-01-01T00:00:00.000Z INFO  [exec-sandbox-0] audit - run id=run-0 "
            + "language=python outcome=exited tenant=other\r\u2028\u0085\u202e";

    private final LoggerContext ctx = (LoggerContext) org.slf4j.LoggerFactory.getILoggerFactory();
    private final Logger sdk = ctx.getLogger("io.modelcontextprotocol.server.McpAsyncServer");

    private String encode(String format, ILoggingEvent event) {
        Encoder<ILoggingEvent> encoder = Logging.encoder(format, ctx);
        return new String(encoder.encode(event), StandardCharsets.UTF_8);
    }

    private LoggingEvent clientInfoLine(Throwable t) {
        return new LoggingEvent(Logger.class.getName(), sdk, Level.INFO,
                "Client initialize request - Protocol: {}, Capabilities: {}, Info: {}", t,
                new Object[] {"2025-06-18", "{}", "Implementation[name=" + FORGED + ", version=1]"});
    }

    @Test
    void aNewlineInALoggedValueStaysInItsLineInTheTextFormat() {
        String out = encode("text", clientInfoLine(null));
        assertThat(out.lines().toList()).singleElement().satisfies(line -> assertThat(line)
                .contains("Info: Implementation[name=raw\\n2026-01-01T00:00:00.000Z INFO  [exec-sandbox-0] audit - run")
                .contains("tenant=other\\r\\u2028\\u0085\\u202e, version=1]"));
        assertThat(out).doesNotContain("\r").doesNotContain("\u2028").doesNotContain("\u0085").doesNotContain("\u202e");
    }

    @Test
    void aNewlineInALoggedValueStaysInItsLineInTheJsonFormatAndInItsDecodedMessage() {
        String out = encode("json", clientInfoLine(null));
        assertThat(out.lines().toList()).hasSize(1);
        JsonNode line = JsonMapper.builder().build().readTree(out);
        assertThat(line.path("formattedMessage").asString()).doesNotContain("\n").doesNotContain("\u2028")
                .contains("name=raw\\n2026-01-01T00:00:00.000Z INFO");
    }

    @Test
    void anExceptionMessageFromARequestIsEscapedWhileItsStackStaysOneFramePerLine() {
        Throwable t = new IllegalArgumentException("bad id " + FORGED, new IllegalStateException("cause " + FORGED));
        List<String> text = encode("text", clientInfoLine(t)).lines().toList();
        assertThat(text).noneMatch(l -> l.startsWith("2026-01-01T00:00:00.000Z"));
        assertThat(String.join("\n", text)).contains("bad id raw\\n2026").contains("cause raw\\n2026");
        assertThat(text.stream().filter(l -> l.startsWith("\tat "))).as("the stack, one frame per line").isNotEmpty();

        String json = encode("json", clientInfoLine(t));
        assertThat(json.lines().toList()).hasSize(1);
        JsonNode thrown = JsonMapper.builder().build().readTree(json).path("throwable");
        assertThat(thrown.path("message").asString()).startsWith("bad id raw\\n2026").doesNotContain("\n");
        assertThat(thrown.path("cause").path("message").asString()).startsWith("cause raw\\n2026").doesNotContain("\n");
    }

    @Test
    void anAuditFieldFromARequestIsQuotedUnlessItIsAPlainToken() {
        assertThat(LogValues.value("7")).isEqualTo("7");
        assertThat(LogValues.value("3f2a-b1c9_x.y:z/1@h+2")).isEqualTo("3f2a-b1c9_x.y:z/1@h+2");
        assertThat(LogValues.value("7 tenant=other")).isEqualTo("\"7 tenant=other\"");
        assertThat(LogValues.value("a\"b\\c\nd")).isEqualTo("\"a\\\"b\\\\c\\nd\"");
        assertThat(LogValues.value("")).isEqualTo("\"\"");
    }

    @Test
    void plainTextIsLeftAsItIs() {
        String plain = "session tenant=alice name=nb: ended (ünïcödé, 😀, tab-free)";
        assertThat(LogValues.escape(plain)).isSameAs(plain);
        assertThat(LogValues.escape("a\tb\u0000c\u007fd")).isEqualTo("a\\tb\\u0000c\\u007fd");
    }
}
