package dev.codeexec.boot;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.spi.IThrowableProxy;
import ch.qos.logback.classic.spi.LoggerContextVO;
import ch.qos.logback.classic.spi.StackTraceElementProxy;
import ch.qos.logback.core.encoder.Encoder;
import ch.qos.logback.core.encoder.EncoderBase;
import org.slf4j.Marker;
import org.slf4j.event.KeyValuePair;

import java.util.List;
import java.util.Map;

/**
 * The encoder every log line goes through, text or JSON: it hands the real encoder the event with its message and
 * its exceptions' messages passed through {@link LogValues#escape}, so no value in a message, whoever logged it,
 * can start a line of its own. Stack frames stay one per line: they come from the code, not from a request.
 */
final class EscapingEncoder extends EncoderBase<ILoggingEvent> {

    private final Encoder<ILoggingEvent> delegate;

    EscapingEncoder(Encoder<ILoggingEvent> delegate) {
        this.delegate = delegate;
    }

    @Override
    public byte[] headerBytes() {
        return delegate.headerBytes();
    }

    @Override
    public byte[] encode(ILoggingEvent event) {
        return delegate.encode(new Escaped(event));
    }

    @Override
    public byte[] footerBytes() {
        return delegate.footerBytes();
    }

    @Override
    public void start() {
        if (!delegate.isStarted()) delegate.start();
        super.start();
    }

    @Override
    public void stop() {
        delegate.stop();
        super.stop();
    }

    /** The event as logged, but for its message and its exceptions' messages. */
    private record Escaped(ILoggingEvent e) implements ILoggingEvent {
        @Override
        public String getFormattedMessage() {
            return LogValues.escape(e.getFormattedMessage());
        }

        @Override
        public String getMessage() {
            return LogValues.escape(e.getMessage());
        }

        @Override
        public IThrowableProxy getThrowableProxy() {
            IThrowableProxy t = e.getThrowableProxy();
            return t == null ? null : new EscapedThrowable(t);
        }

        @Override
        public String getThreadName() {
            return e.getThreadName();
        }

        @Override
        public Level getLevel() {
            return e.getLevel();
        }

        @Override
        public Object[] getArgumentArray() {
            return e.getArgumentArray();
        }

        @Override
        public String getLoggerName() {
            return e.getLoggerName();
        }

        @Override
        public LoggerContextVO getLoggerContextVO() {
            return e.getLoggerContextVO();
        }

        @Override
        public StackTraceElement[] getCallerData() {
            return e.getCallerData();
        }

        @Override
        public boolean hasCallerData() {
            return e.hasCallerData();
        }

        @Override
        public List<Marker> getMarkerList() {
            return e.getMarkerList();
        }

        @Override
        public Map<String, String> getMDCPropertyMap() {
            return e.getMDCPropertyMap();
        }

        @Override
        @SuppressWarnings("deprecation")
        public Map<String, String> getMdc() {
            return e.getMdc();
        }

        @Override
        public long getTimeStamp() {
            return e.getTimeStamp();
        }

        @Override
        public int getNanoseconds() {
            return e.getNanoseconds();
        }

        @Override
        public long getSequenceNumber() {
            return e.getSequenceNumber();
        }

        @Override
        public List<KeyValuePair> getKeyValuePairs() {
            return e.getKeyValuePairs();
        }

        @Override
        public void prepareForDeferredProcessing() {
            e.prepareForDeferredProcessing();
        }
    }

    /** An exception whose message (and its causes' and suppressed exceptions') is escaped. */
    private record EscapedThrowable(IThrowableProxy t) implements IThrowableProxy {
        @Override
        public String getMessage() {
            return t.getMessage() == null ? null : LogValues.escape(t.getMessage());
        }

        @Override
        public String getClassName() {
            return t.getClassName();
        }

        @Override
        public StackTraceElementProxy[] getStackTraceElementProxyArray() {
            return t.getStackTraceElementProxyArray();
        }

        @Override
        public int getCommonFrames() {
            return t.getCommonFrames();
        }

        @Override
        public IThrowableProxy getCause() {
            return t.getCause() == null ? null : new EscapedThrowable(t.getCause());
        }

        @Override
        public IThrowableProxy[] getSuppressed() {
            IThrowableProxy[] s = t.getSuppressed();
            if (s == null) return null;
            IThrowableProxy[] out = new IThrowableProxy[s.length];
            for (int i = 0; i < s.length; i++) out[i] = new EscapedThrowable(s[i]);
            return out;
        }

        @Override
        public boolean isCyclic() {
            return t.isCyclic();
        }
    }
}
