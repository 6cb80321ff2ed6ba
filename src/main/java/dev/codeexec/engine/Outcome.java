package dev.codeexec.engine;

/** How a run ended. The wire name is what clients see in {@code structuredContent.outcome}. */
public enum Outcome {
    /** The program ran and exited by itself (any exit code). */
    EXITED("exited"),
    /** The wall-clock timeout elapsed; the whole process tree was killed. */
    TIMEOUT("timeout"),
    /** The caller cancelled the run (MCP notifications/cancelled, session end, server shutdown). */
    CANCELLED("cancelled"),
    /** The kernel killed the run for exceeding its memory limit. */
    MEMORY_LIMIT("memory_limit"),
    /** The run used up its CPU-time limit. */
    CPU_LIMIT("cpu_limit"),
    /** stdout or stderr went over the output cap; the run was ended. */
    OUTPUT_LIMIT("output_limit"),
    /**
     * The run's workspace went past its quota of bytes or entries while it ran, where the kernel does not bound it
     * (no XFS project quota): the server measured it and stopped the run.
     */
    WORKSPACE_LIMIT("workspace_limit"),
    /** The program died from a signal that is not explained by one of our limits. */
    KILLED_BY_SIGNAL("killed_by_signal"),
    /** The sandbox or the interpreter could not be started. */
    FAILED_TO_START("failed_to_start"),
    /**
     * The worker running it (gateway mode) was lost after it had started the run: the process died, the connection
     * broke or it stopped answering within the deadline. What the run did is unknown; it is never re-run.
     */
    WORKER_LOST("worker_lost");

    private final String wireName;

    Outcome(String wireName) {
        this.wireName = wireName;
    }

    public String wireName() {
        return wireName;
    }
}
