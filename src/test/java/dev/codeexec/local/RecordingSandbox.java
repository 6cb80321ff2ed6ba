package dev.codeexec.local;

import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.SandboxException;
import dev.codeexec.sandbox.SandboxProcess;
import dev.codeexec.sandbox.SandboxSpec;

import java.io.InputStream;
import java.io.OutputStream;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Wraps a sandbox (fake or real) and records what the engine did with it: the specs it started, how many
 * processes were alive at once (from start to close) and how many were closed. Can also pretend to be
 * unusable or to fail at start.
 */
final class RecordingSandbox implements Sandbox {

    final Sandbox delegate;
    final List<SandboxSpec> specs = new CopyOnWriteArrayList<>();
    final AtomicInteger alive = new AtomicInteger();
    final AtomicInteger maxAlive = new AtomicInteger();
    final AtomicInteger closed = new AtomicInteger();
    volatile Optional<String> unavailable = Optional.empty();
    volatile String failStart;

    RecordingSandbox(Sandbox delegate) {
        this.delegate = delegate;
    }

    @Override
    public String name() {
        return delegate.name();
    }

    @Override
    public Optional<String> unavailableReason() {
        return unavailable.or(delegate::unavailableReason);
    }

    @Override
    public Map<String, Object> info() {
        return delegate.info();
    }

    @Override
    public SandboxProcess start(SandboxSpec spec) throws SandboxException {
        specs.add(spec);
        if (failStart != null) throw new SandboxException(failStart);
        SandboxProcess p = delegate.start(spec);
        maxAlive.accumulateAndGet(alive.incrementAndGet(), Math::max);
        return new SandboxProcess() {
            private boolean closedOnce;

            @Override
            public OutputStream stdin() {
                return p.stdin();
            }

            @Override
            public InputStream stdout() {
                return p.stdout();
            }

            @Override
            public InputStream stderr() {
                return p.stderr();
            }

            @Override
            public boolean waitFor(Duration timeout) throws InterruptedException {
                return p.waitFor(timeout);
            }

            @Override
            public dev.codeexec.sandbox.Termination termination() {
                return p.termination();
            }

            @Override
            public void kill() {
                p.kill();
            }

            @Override
            public boolean memoryLimitHit() {
                return p.memoryLimitHit();
            }

            @Override
            public boolean cpuLimitHit() {
                return p.cpuLimitHit();
            }

            @Override
            public OptionalLong peakMemoryBytes() {
                return p.peakMemoryBytes();
            }

            @Override
            public OptionalDouble cpuTimeMs() {
                return p.cpuTimeMs();
            }

            @Override
            public synchronized void close() {
                if (closedOnce) return;
                closedOnce = true;
                p.close();
                alive.decrementAndGet();
                closed.incrementAndGet();
            }
        };
    }
}
