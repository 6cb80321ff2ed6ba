package dev.codeexec.codemode;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.AppenderBase;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;

/**
 * What {@link Upstreams} logs while it is open, with the thread that logged each line: a connection attempt logs
 * its outcome on the thread that made it, so a test can see that no attempt ran on a caller's thread.
 */
final class UpstreamLog implements AutoCloseable {

    /** One logged line and the name of the thread that logged it. */
    record Line(String thread, String message) {
    }

    private final List<Line> lines = new ArrayList<>();
    private final Logger logger;
    private final AppenderBase<ILoggingEvent> appender = new AppenderBase<>() {
        @Override
        protected void append(ILoggingEvent event) {
            synchronized (lines) {
                lines.add(new Line(event.getThreadName(), event.getFormattedMessage()));
            }
        }
    };

    UpstreamLog() {
        LoggerContext ctx = (LoggerContext) LoggerFactory.getILoggerFactory();
        appender.setContext(ctx);
        appender.setName("upstream-log");
        appender.start();
        logger = ctx.getLogger(Upstreams.class.getName());
        logger.addAppender(appender);
    }

    /** The lines so far that contain {@code text}. */
    List<Line> lines(String text) {
        synchronized (lines) {
            return lines.stream().filter(l -> l.message().contains(text)).toList();
        }
    }

    @Override
    public void close() {
        logger.detachAppender(appender);
        appender.stop();
    }
}
