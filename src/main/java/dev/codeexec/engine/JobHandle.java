package dev.codeexec.engine;

import java.io.IOException;

/**
 * One background job, kept by this server or by a worker: what the surfaces (tools, REST, console, subscriptions)
 * do with it. Each call reads the job as it is now.
 */
public interface JobHandle {

    String id();

    String tenant();

    /** Its state now. */
    JobState state();

    /**
     * One stream's output from byte {@code offset} of everything it wrote, at most {@code max} bytes.
     *
     * @throws IOException the log cannot be read (or its keeper reached)
     */
    LogChunk read(OutputListener.Stream stream, long offset, int max) throws IOException;

    /**
     * Waits until the job ends or {@code millis} pass, whichever is first.
     *
     * @return its state then
     */
    JobState await(long millis) throws InterruptedException;

    /** Output as it arrives, until the returned handle is closed (a job_wait's progress). */
    AutoCloseable watch(OutputListener listener);

    /**
     * Cancels it: a queued job leaves the queue, a running one's whole process tree is killed; its record and output
     * stay. Waits up to {@code waitMillis} for it to end.
     *
     * @return its state then (one that had ended is left as it was)
     */
    JobState cancel(long waitMillis) throws InterruptedException;
}
