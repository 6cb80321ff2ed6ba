package dev.codeexec.testing;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.AppenderBase;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;

/**
 * The messages one logger (and its children) logs while it is open, so that a test can wait (with {@link Poll})
 * for the line that says something happened instead of sleeping until it probably has.
 */
public final class LogCapture implements AutoCloseable {

    private final List<String> messages = new ArrayList<>();
    private final Logger logger;
    /** The logger's own level before the capture, given back on close. */
    private final Level before;
    private final AppenderBase<ILoggingEvent> appender = new AppenderBase<>() {
        @Override
        protected void append(ILoggingEvent event) {
            synchronized (messages) {
                messages.add(event.getFormattedMessage());
            }
        }
    };

    private LogCapture(String loggerName) {
        LoggerContext ctx = (LoggerContext) LoggerFactory.getILoggerFactory();
        appender.setContext(ctx);
        appender.setName("test-capture");
        appender.start();
        logger = ctx.getLogger(loggerName);
        before = logger.getLevel();
        // whatever an earlier test of the JVM set the process's level to (a server started in-process with
        // LOG_LEVEL=warn, say), the lines a test waits for are written while it captures
        if (!logger.isInfoEnabled()) logger.setLevel(Level.INFO);
        logger.addAppender(appender);
    }

    /** Captures what the class's logger logs from now on. */
    public static LogCapture of(Class<?> type) {
        return new LogCapture(type.getName());
    }

    /** Captures what the named logger logs from now on (the "audit" logger, say). */
    public static LogCapture named(String loggerName) {
        return new LogCapture(loggerName);
    }

    /** Whether a message containing the text has been logged. */
    public boolean contains(String text) {
        synchronized (messages) {
            return messages.stream().anyMatch(m -> m.contains(text));
        }
    }

    /** Whether one message has been logged that contains every one of the parts. */
    public boolean containsAll(String... parts) {
        synchronized (messages) {
            return messages.stream().anyMatch(m -> java.util.Arrays.stream(parts).allMatch(m::contains));
        }
    }

    @Override
    public void close() {
        logger.detachAppender(appender);
        appender.stop();
        logger.setLevel(before);
    }
}
