package dev.codeexec.engine;

/**
 * What one read of a background job's log returns: bytes from {@code from}, the offset to ask next, how many dropped
 * bytes (past JOB_LOG_MB) came first, and how many bytes the stream has had in all so far.
 */
public record LogChunk(long from, long next, long skipped, byte[] bytes, long total) {

    /** Whether the chunk reached everything written so far. */
    public boolean atEnd() {
        return next >= total;
    }
}
