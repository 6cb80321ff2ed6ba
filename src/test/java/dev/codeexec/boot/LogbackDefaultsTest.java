package dev.codeexec.boot;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.Configurator;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.util.ContextInitializer;
import ch.qos.logback.core.Appender;
import ch.qos.logback.core.ConsoleAppender;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The logging a process has before its configuration is read. In stdio mode stdout is the MCP channel: logback's
 * own fallback (BasicConfigurator) would log to stdout, so the defaults must be found, must log to stderr, and
 * must stop logback from configuring anything after them.
 */
class LogbackDefaultsTest {

    @Test
    void logbackFindsTheDefaultsAndTheyLogTextToStderrAtInfo() throws Exception {
        LoggerContext ctx = new LoggerContext();
        try {
            // what logback does at the first getLogger: the service-loaded configurators, then its built-in ones
            new ContextInitializer(ctx).autoConfig();
            ch.qos.logback.classic.Logger root = ctx.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
            List<Appender<ILoggingEvent>> appenders = new ArrayList<>();
            root.iteratorForAppenders().forEachRemaining(appenders::add);
            assertThat(appenders).as("one appender: logback's fallback added none of its own").hasSize(1);
            assertThat(appenders.get(0)).isInstanceOf(ConsoleAppender.class);
            assertThat(((ConsoleAppender<ILoggingEvent>) appenders.get(0)).getTarget()).isEqualTo("System.err");
            assertThat(root.getLevel()).isEqualTo(Level.INFO);
            assertThat(ctx.getLogger("org.eclipse.jetty").getLevel()).isEqualTo(Level.WARN);
        } finally {
            ctx.stop();
        }
    }

    @Test
    void theDefaultsAreTheLastWord() {
        LoggerContext ctx = new LoggerContext();
        try {
            LogbackDefaults defaults = new LogbackDefaults();
            defaults.setContext(ctx);
            assertThat(defaults.configure(ctx)).isEqualTo(Configurator.ExecutionStatus.DO_NOT_INVOKE_NEXT_IF_ANY);
        } finally {
            ctx.stop();
        }
    }
}
