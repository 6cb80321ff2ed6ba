package dev.codeexec.engine;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Clock;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * An {@link Executor} that tells {@link RunObserver}s about each run and otherwise passes everything through. It
 * wraps whichever executor does the work (the local engine today, remote workers later), so history and metrics
 * see the same runs whatever runs them.
 */
public final class ObservedExecutor implements Executor {

    private static final Logger LOG = LoggerFactory.getLogger(ObservedExecutor.class);

    private final Executor delegate;
    private final List<RunObserver> observers;
    private final Clock clock;
    private final AtomicLong rejected = new AtomicLong();

    public ObservedExecutor(Executor delegate, List<RunObserver> observers) {
        this(delegate, observers, Clock.systemUTC());
    }

    ObservedExecutor(Executor delegate, List<RunObserver> observers, Clock clock) {
        this.delegate = delegate;
        this.observers = List.copyOf(observers);
        this.clock = clock;
    }

    /** The executor doing the work. */
    public Executor delegate() {
        return delegate;
    }

    @Override
    public RunHandle submit(ExecutionRequest request, OutputListener listener) {
        Instant submittedAt = clock.instant();
        RunHandle handle;
        try {
            handle = delegate.submit(request, listener);
        } catch (ExecutionException.Busy | ExecutionException.Unavailable e) {
            // Refused at the door (queue full, shutting down): still a run someone asked for, so it is counted.
            // An invalid request is not: it never was a run.
            RunObserver.RunStart start = new RunObserver.RunStart("rejected-" + rejected.incrementAndGet(),
                    submittedAt, request);
            tell(start);
            tell(new RunObserver.RunEnd(start, clock.instant(), Optional.empty(), Optional.of(e)));
            throw e;
        }
        RunObserver.RunStart start = new RunObserver.RunStart(handle.id(), submittedAt, request);
        tell(start);
        // The caller's future completes only after the observers have seen the end: whoever has a result can count
        // on history and metrics already showing it (CompletableFuture runs dependants last-registered first, so
        // a callback of ours on the engine's future could run after the caller's).
        CompletableFuture<ExecutionResult> observed = handle.result().whenComplete((result, failure) -> {
            Throwable cause = failure instanceof CompletionException c && c.getCause() != null ? c.getCause() : failure;
            Optional<ExecutionException> error = Optional.empty();
            if (cause instanceof ExecutionException e) {
                error = Optional.of(e);
            } else if (cause != null) {
                // Not ours to show (history returns errors to clients): the detail stays in the server log.
                LOG.warn("run {} failed inside the server: {}", start.id(), cause.toString());
                error = Optional.of(new ExecutionException.Unavailable("the run failed inside the server"));
            }
            tell(new RunObserver.RunEnd(start, clock.instant(), Optional.ofNullable(result), error));
        });
        return new RunHandle() {
            @Override
            public String id() {
                return handle.id();
            }

            @Override
            public CompletableFuture<ExecutionResult> result() {
                return observed;
            }

            @Override
            public void cancel() {
                handle.cancel();
            }
        };
    }

    private void tell(RunObserver.RunStart start) {
        tell(o -> o.submitted(start));
    }

    private void tell(RunObserver.RunEnd end) {
        tell(o -> o.finished(end));
    }

    private void tell(Consumer<RunObserver> event) {
        for (RunObserver o : observers) {
            try {
                event.accept(o);
            } catch (RuntimeException e) {
                LOG.warn("run observer {} failed: {}", o.getClass().getSimpleName(), e.toString());
            }
        }
    }

    @Override
    public Map<String, Object> runtimeInfo() {
        return delegate.runtimeInfo();
    }

    @Override
    public SessionControl sessions() {
        return delegate.sessions();
    }

    @Override
    public java.util.Optional<JobControl<?>> jobs() {
        return delegate.jobs();
    }

    @Override
    public java.util.Optional<PreviewControl> previews() {
        return delegate.previews();
    }

    @Override
    public ExecutorStatus status() {
        return delegate.status();
    }

    @Override
    public void close() {
        delegate.close();
    }
}
