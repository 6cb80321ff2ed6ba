package dev.codeexec.engine;

import java.util.Map;

/**
 * The one seam between surfaces (MCP, HTTP, gRPC) and whatever runs code. Implementations: the local engine
 * ({@code local.LocalExecutor}), and the gateway's executor that sends runs to gRPC workers, each of which runs a
 * local engine. What an executor reports about itself is its {@link #status()}.
 */
public interface Executor extends AutoCloseable {

    /**
     * Starts a run and returns a handle at once; the run waits for a slot (bounded queue) and then runs.
     *
     * @throws ExecutionException.InvalidRequest   unknown language or arguments the engine cannot accept
     * @throws ExecutionException.Unavailable      the sandbox cannot work, or the server is shutting down
     */
    RunHandle submit(ExecutionRequest request, OutputListener listener);

    /** Versions and availability of languages and tools, the sandbox and the limits, as plain data for JSON. */
    Map<String, Object> runtimeInfo();

    /** The tenants' stateful sessions (requests with {@link ExecutionRequest#session()} run in them). */
    default SessionControl sessions() {
        return SessionControl.NONE;
    }

    /**
     * The background jobs this executor keeps itself (a gateway's are kept by its workers, which run them); empty:
     * the server keeps them, over this executor ({@code job.Jobs}).
     */
    default java.util.Optional<JobControl<?>> jobs() {
        return java.util.Optional.empty();
    }

    /**
     * The port previews this executor keeps itself (a gateway's are kept by its workers, which hold the sandboxes);
     * empty: the server keeps them, over this executor ({@code surface.Previews}).
     */
    default java.util.Optional<PreviewControl> previews() {
        return java.util.Optional.empty();
    }

    /** Its slots, queue, warm pool, workers and package store, and its sandbox starts, for the surfaces that show them. */
    ExecutorStatus status();

    /** Stops accepting, waits up to the grace for running runs, kills the rest, cleans up. */
    @Override
    void close();
}
