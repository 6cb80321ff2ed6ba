package dev.codeexec.engine;

import dev.codeexec.packages.PackageStore;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * What an executor reports about itself, for the surfaces that show it (/healthz, /metrics, runtime_info, the admin
 * console, a worker's load report): its slots and queue, its warm pool, its workers, its package store, and each
 * sandbox start. Apart from {@link Executor}, which runs code: a surface that only shows status needs only this.
 */
public interface ExecutorStatus {

    /** Runs executing now. */
    int running();

    /** Runs waiting for a slot. */
    int queued();

    /** Maximum runs at once. */
    int maxConcurrent();

    /** Warm sandboxes per language: {@code {"python": {"ready": 2, "target": 2}}}; empty without a pool. */
    default Map<String, Map<String, Integer>> warmPoolLevels() {
        return Map.of();
    }

    /**
     * The store of declared packages that this executor's runs use, when it has one here (a local server with
     * PACKAGES=on); a gateway has none (each worker keeps its own).
     */
    default Optional<PackageStore> packageStore() {
        return Optional.empty();
    }

    /** The workers this executor sends runs to, sorted by address; empty for an executor that runs code itself. */
    default List<WorkerStatus> workers() {
        return List.of();
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
}
