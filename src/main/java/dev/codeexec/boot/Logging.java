package dev.codeexec.boot;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.JsonEncoder;
import ch.qos.logback.classic.encoder.PatternLayoutEncoder;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.ConsoleAppender;
import ch.qos.logback.core.encoder.Encoder;
import dev.codeexec.config.Config;
import org.slf4j.LoggerFactory;

/** Logging as every role of the jar sets it up (server, worker): LOG_FORMAT and LOG_LEVEL, always on stderr. */
public final class Logging {

    private Logging() {
    }

    /** LOG_FORMAT and LOG_LEVEL, applied to every logger (the engine's "audit" logger included), always on stderr. */
    public static void configure(Config config) {
        if (!(LoggerFactory.getILoggerFactory() instanceof LoggerContext ctx)) return;
        ctx.reset();
        apply(ctx, config.get(Config.LOG_FORMAT), Level.toLevel(config.get(Config.LOG_LEVEL), Level.INFO));
    }

    /**
     * One appender on stderr with the format's encoder, the root at {@code level}, Jetty at WARN unless the level
     * asks for debugging: the server's logging, and (text, INFO) its defaults until the configuration is read
     * ({@link LogbackDefaults}).
     */
    static void apply(LoggerContext ctx, String format, Level level) {
        ConsoleAppender<ILoggingEvent> appender = new ConsoleAppender<>();
        appender.setContext(ctx);
        appender.setName("stderr");
        appender.setTarget("System.err");
        appender.setEncoder(encoder(format, ctx));
        appender.start();
        ch.qos.logback.classic.Logger root = ctx.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
        root.setLevel(level);
        root.addAppender(appender);
        if (level.isGreaterOrEqual(Level.INFO)) {
            ctx.getLogger("org.eclipse.jetty").setLevel(Level.WARN);
        }
    }

    /**
     * The started encoder of LOG_FORMAT ({@code text} or {@code json}); public so tests read log lines exactly as
     * the server writes them. JSON lines carry the MDC, and with it the request id ({@code "mdc":{"requestId":..}}).
     * In both formats every message is escaped first ({@link EscapingEncoder}): one event is one line, whatever
     * a request put into it.
     */
    public static Encoder<ILoggingEvent> encoder(String format, LoggerContext ctx) {
        Encoder<ILoggingEvent> encoder;
        if ("json".equals(format)) {
            // One self-contained line per event: the formatted message, not logback's pattern-plus-arguments pair.
            JsonEncoder json = new JsonEncoder();
            json.setWithFormattedMessage(true);
            json.setWithMessage(false);
            json.setWithArguments(false);
            json.setWithSequenceNumber(false);
            json.setWithNanoseconds(false);
            json.setWithContext(false);
            encoder = json;
        } else {
            PatternLayoutEncoder text = new PatternLayoutEncoder();
            text.setPattern("%d{yyyy-MM-dd'T'HH:mm:ss.SSSXXX} %-5level [%thread] %logger{20} - %msg%n");
            encoder = text;
        }
        encoder.setContext(ctx);
        EscapingEncoder escaping = new EscapingEncoder(encoder);
        escaping.setContext(ctx);
        escaping.start();
        return escaping;
    }
}
