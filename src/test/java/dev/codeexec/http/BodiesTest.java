package dev.codeexec.http;

import jakarta.servlet.ReadListener;
import jakarta.servlet.ServletInputStream;
import jakarta.servlet.http.HttpServletRequest;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.concurrent.TimeoutException;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

/** A body read that ends in the connection's idle timeout is the body's timeout (408), not a broken connection. */
class BodiesTest {

    /** A request whose body gives {@code first} bytes, then fails the next read with {@code failure}. */
    private static HttpServletRequest request(int first, IOException failure) {
        ServletInputStream in = new ServletInputStream() {
            private int left = first;

            @Override
            public int read() throws IOException {
                if (left-- > 0) return 'x';
                throw failure;
            }

            @Override
            public int read(byte[] b, int off, int len) throws IOException {
                if (left <= 0) throw failure;
                int n = Math.min(len, left);
                left -= n;
                return n;
            }

            @Override
            public boolean isFinished() {
                return false;
            }

            @Override
            public boolean isReady() {
                return true;
            }

            @Override
            public void setReadListener(ReadListener l) {
                throw new UnsupportedOperationException();
            }
        };
        return (HttpServletRequest) Proxy.newProxyInstance(BodiesTest.class.getClassLoader(),
                new Class<?>[] {HttpServletRequest.class}, (proxy, method, args) -> {
                    if (method.getName().equals("getInputStream")) return in;
                    throw new UnsupportedOperationException(method.getName());
                });
    }

    @Test
    void anIdleTimeoutBeforeTheDeadlineByTheServersClockIsStillTheBodysTimeoutAndGivesItsMemoryBack() {
        Bodies bodies = new Bodies(4 << 20, Duration.ofSeconds(30));
        IOException idle = new IOException(new TimeoutException("Idle timeout expired: 999/999 ms"));
        Bodies.Refused r = catchThrowableOfType(Bodies.Refused.class,
                () -> bodies.read(request(100, idle), 1 << 20, "MAX_BODY_MB"));
        assertThat(r).as("refused as too slow, 30 s before the deadline").isNotNull();
        assertThat(r.why).isEqualTo(Bodies.Refusal.TOO_SLOW);
        assertThat(r.getMessage()).contains("BODY_TIMEOUT_SECONDS");
        assertThat(bodies.used()).isZero();
    }

    @Test
    void aConnectionThatBreaksIsStillAnIoErrorAndGivesItsMemoryBack() {
        Bodies bodies = new Bodies(4 << 20, Duration.ofSeconds(30));
        IOException reset = new IOException("Connection reset by peer");
        IOException e = catchThrowableOfType(IOException.class,
                () -> bodies.read(request(100, reset), 1 << 20, "MAX_BODY_MB"));
        assertThat(e).isSameAs(reset);
        assertThat(bodies.used()).isZero();
    }

    @Test
    void timeoutsAreFoundAnywhereInTheCauseChain() {
        assertThat(Bodies.timedOut(new IOException(new IOException(new TimeoutException())))).isTrue();
        assertThat(Bodies.timedOut(new java.net.SocketTimeoutException())).isTrue();
        assertThat(Bodies.timedOut(new IOException("broken pipe"))).isFalse();
    }
}
