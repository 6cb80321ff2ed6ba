package dev.codeexec.boot;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.Configurator;
import ch.qos.logback.core.spi.ContextAwareBase;

/**
 * Logback's configuration until {@link Logging#configure} applies LOG_FORMAT and LOG_LEVEL: text lines on stderr
 * (in stdio mode stdout carries the MCP protocol and nothing else), INFO, Jetty at WARN. Found by logback through
 * {@code META-INF/services/ch.qos.logback.classic.spi.Configurator} ahead of any logback.xml, and the last word:
 * reading an XML configuration (logback's Joran) was about a tenth of a fresh start's main-thread CPU, for a
 * configuration the start replaces a moment later (the jar has no logback.xml: LOG_FORMAT and LOG_LEVEL are the
 * settings).
 */
public final class LogbackDefaults extends ContextAwareBase implements Configurator {

    @Override
    public ExecutionStatus configure(LoggerContext ctx) {
        Logging.apply(ctx, "text", Level.INFO);
        return ExecutionStatus.DO_NOT_INVOKE_NEXT_IF_ANY;
    }
}
