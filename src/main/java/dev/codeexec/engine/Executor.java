package dev.codeexec.engine;

import java.time.Duration;
import java.util.Map;

/**
 * The one seam between surfaces (MCP, HTTP, gRPC) and whatever runs code. Implementations: the local engine
 * ({@link LocalExecutor}), and the gateway's executor that sends runs to gRPC workers, each of which runs a local
 * engine.
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

    /** Runs executing now. */
    int running();

    /** Runs waiting for a slot. */
    int queued();

    /** Maximum runs at once. */
    int maxConcurrent();

    /** The tenants' stateful sessions (requests with {@link ExecutionRequest#session()} run in them). */
    default SessionControl sessions() {
        return SessionControl.NONE;
    }

    /** Warm sandboxes per language: {@code {"python": {"ready": 2, "target": 2}}}; empty without a pool. */
    default Map<String, Map<String, Integer>> warmPoolLevels() {
        return Map.of();
    }

    /**
     * The store of declared packages that this executor's runs use, when it has one here (a local server with
     * PACKAGES=on); a gateway has none (each worker keeps its own).
     */
    default java.util.Optional<dev.codeexec.packages.PackageStore> packageStore() {
        return java.util.Optional.empty();
    }

    /**
     * The workers this executor sends runs to, sorted by address; empty for an executor that runs code itself.
     * Surfaces show them (runtime_info, /healthz, /metrics, the console).
     */
    default java.util.List<WorkerStatus> workers() {
        return java.util.List.of();
    }

    /**
     * True for an executor that sends runs to workers (a gateway), even while it knows no worker yet or none is
     * left: surfaces then say mode "gateway" and report "no worker" as unavailable, where a local server would
     * look fine.
     */
    default boolean remote() {
        return false;
    }

    /**
     * Registers a listener told each time a run's sandbox has started, for metrics. Executors that start no
     * sandboxes of their own (a remote one, a test double) ignore it.
     */
    default void addStartListener(StartListener listener) {
    }

    /** Told how long a run's sandbox took to start and whether a pre-started (warm) one served it. */
    @FunctionalInterface
    interface StartListener {

        /**
         * Called on the run's thread: must be quick and must not throw.
         *
         * @param language the run's language id
         * @param warm     a warm sandbox from the pool was handed the code; false for a cold start
         * @param elapsed  from the moment the run, holding its slot, began starting its sandbox until the sandbox
         *                 process was running the program (staging the code file included)
         */
        void started(String language, boolean warm, Duration elapsed);
    }

    /** Stops accepting, waits up to the grace for running runs, kills the rest, cleans up. */
    @Override
    void close();
}
