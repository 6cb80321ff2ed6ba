package dev.codeexec.http;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import org.eclipse.jetty.ee10.servlet.ServletContextRequest;
import org.eclipse.jetty.io.EndPoint;

import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Request bodies read whole into memory (a JSON-RPC message on /mcp, the JSON of the playground and of the REST
 * API), under two bounds that hold however many connections send them: a server-wide budget of bytes (BODY_MEMORY_MB)
 * and a deadline for each body's arrival (BODY_TIMEOUT_SECONDS). Streamed bodies (uploads go to disk) do not come
 * here.
 *
 * <p><b>Why.</b> Each body used to be held whole until its request ended, with nothing bounding how many: 200
 * connections each sending a 4 MB body and holding back its last bytes took the heap from 13 MB to 1.4 GB, and a few
 * more hundred would have ended the server.
 *
 * <p><b>Budget.</b> Bytes are reserved as they arrive, a 64 KB chunk at a time, never for what a Content-Length
 * merely promises, so a client pins only what it has sent. The reservation lasts until the request is done with the
 * body ({@link Body#close}): the bytes, the parsed message and the SDK's own copy of it live that long, so the heap a
 * body costs while its call runs is a small multiple of the reservation. When the budget is spent the request gets
 * 503 with {@code Retry-After}, and nothing of it is kept.
 *
 * <p><b>Deadline.</b> The connection's idle timeout is the request timeout (a run may print nothing for minutes), so
 * a body gets its own bound: before each read the connection's idle timeout is set to what is left until the body's
 * deadline, and put back once the body is in. A body that has not arrived by then gets 408 and its connection is
 * closed; its memory goes back to the budget at once.
 */
final class Bodies {

    static final int CHUNK = 64 * 1024;
    /** What a 503 for a spent budget tells the client to wait, in seconds: held bodies time out, calls end. */
    static final int RETRY_AFTER_SECONDS = 2;

    private final long capacity;
    private final Duration timeout;
    private long used;
    private long peak;

    Bodies(long capacityBytes, Duration timeout) {
        this.capacity = capacityBytes;
        this.timeout = timeout;
    }

    /** Why a body was not taken, and the HTTP status that says so. */
    enum Refusal {
        TOO_LARGE(413, "too_large"), BUSY(503, "busy"), TOO_SLOW(408, "timeout");

        final int status;
        /** The REST API's error code. */
        final String code;

        Refusal(int status, String code) {
            this.status = status;
            this.code = code;
        }
    }

    /** A body that was not taken; nothing of it is held. */
    static final class Refused extends Exception {
        final Refusal why;

        Refused(Refusal why, String message) {
            super(message, null, false, false);
            this.why = why;
        }

        /**
         * The headers every answer to a refused body needs: the connection cannot carry another request (the body
         * was not read to its end), and a busy server says when to come back.
         */
        void prepare(HttpServletResponse response) {
            response.setHeader("Connection", "close");
            if (why == Refusal.BUSY) response.setHeader("Retry-After", Integer.toString(RETRY_AFTER_SECONDS));
        }

        /** As a REST error (the headers already set on the response). */
        ApiException api(HttpServletResponse response) {
            prepare(response);
            return new ApiException(why.status, why.code, getMessage());
        }
    }

    /** A body in memory; closing it gives its bytes back to the budget. */
    final class Body implements AutoCloseable {
        private final byte[] bytes;
        private long reserved;

        private Body(byte[] bytes, long reserved) {
            this.bytes = bytes;
            this.reserved = reserved;
        }

        byte[] bytes() {
            return bytes;
        }

        @Override
        public void close() {
            long r;
            synchronized (this) {
                r = reserved;
                reserved = 0;
            }
            release(r);
        }
    }

    /**
     * Reads the whole body of the request.
     *
     * @param limit      the largest body accepted (MAX_BODY_MB, or the route's own)
     * @param limitName  how a refusal for size names the limit
     * @throws Refused   too large, over the budget, or not arrived in time
     * @throws IOException the connection broke
     */
    Body read(HttpServletRequest request, long limit, String limitName) throws IOException, Refused {
        long deadline = System.nanoTime() + timeout.toNanos();
        Deadline idle = Deadline.of(request);
        List<byte[]> chunks = new ArrayList<>();
        long reserved = 0;
        boolean done = false;
        try {
            InputStream in = request.getInputStream();
            byte[] chunk = null;
            int fill = 0;
            long total = 0;
            while (true) {
                if (chunk == null || fill == chunk.length) {
                    if (!reserve(CHUNK)) throw busy();
                    reserved += CHUNK;
                    chunk = new byte[CHUNK];
                    chunks.add(chunk);
                    fill = 0;
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) throw tooSlow();
                idle.before(left);
                int n;
                try {
                    n = in.read(chunk, fill, chunk.length - fill);
                } catch (IOException e) {
                    // The connection's idle timeout is this body's deadline; Jetty counts it from the last bytes
                    // that arrived, which can be a moment before this read asked, so it may fire just before the
                    // deadline by this clock: a timeout is the body's timeout either way (seen as a 500 under load).
                    if (deadline - System.nanoTime() <= 0 || timedOut(e)) throw tooSlow();
                    throw e;
                }
                if (n < 0) break;
                fill += n;
                total += n;
                if (total > limit)
                    throw new Refused(Refusal.TOO_LARGE, "Request body exceeds " + limitName);
            }
            byte[] body = join(chunks, total);
            chunks.clear();
            release(reserved - total);
            reserved = total;
            done = true;
            return new Body(body, total);
        } finally {
            if (!done) {
                release(reserved);
                idle.giveUp();
            }
            idle.restore();
        }
    }

    /** Whether {@code e} comes from a timeout (Jetty's idle timeout: a {@link java.util.concurrent.TimeoutException} cause). */
    static boolean timedOut(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof java.util.concurrent.TimeoutException || t instanceof java.net.SocketTimeoutException) return true;
        }
        return false;
    }

    private static byte[] join(List<byte[]> chunks, long total) {
        if (chunks.size() == 1 && chunks.getFirst().length == total) return chunks.getFirst();
        byte[] out = new byte[(int) total];
        int at = 0;
        for (byte[] c : chunks) {
            int n = (int) Math.min(c.length, total - at);
            System.arraycopy(c, 0, out, at, n);
            at += n;
        }
        return out;
    }

    private Refused busy() {
        return new Refused(Refusal.BUSY, "Server busy: request bodies in memory have reached BODY_MEMORY_MB; retry in "
                + RETRY_AFTER_SECONDS + " s");
    }

    private Refused tooSlow() {
        return new Refused(Refusal.TOO_SLOW, "Request body not received within BODY_TIMEOUT_SECONDS ("
                + timeout.toSeconds() + " s)");
    }

    private synchronized boolean reserve(long n) {
        if (used + n > capacity) return false;
        used += n;
        peak = Math.max(peak, used);
        return true;
    }

    private synchronized void release(long n) {
        used -= n;
    }

    /** Bytes reserved now. */
    synchronized long used() {
        return used;
    }

    /** The most ever reserved at once. */
    synchronized long peak() {
        return peak;
    }

    long capacity() {
        return capacity;
    }

    /**
     * The connection's idle timeout as the body's deadline. Without Jetty's endpoint (a request not from Jetty) it
     * does nothing, and only the check between reads remains.
     */
    private static final class Deadline {
        private final EndPoint endPoint;
        private static final long GIVE_UP_IDLE_MILLIS = 1000;
        private final long before;
        private boolean givenUp;

        private Deadline(EndPoint endPoint) {
            this.endPoint = endPoint;
            this.before = endPoint == null ? 0 : endPoint.getIdleTimeout();
        }

        static Deadline of(HttpServletRequest request) {
            try {
                return new Deadline(ServletContextRequest.getServletContextRequest(request).getConnectionMetaData()
                        .getConnection().getEndPoint());
            } catch (RuntimeException e) {
                return new Deadline(null);
            }
        }

        void before(long leftNanos) {
            if (endPoint != null) endPoint.setIdleTimeout(Math.max(1, leftNanos / 1_000_000));
        }

        /**
         * The body was refused and the connection will close: a short idle timeout from now on, so neither the
         * answer nor the edge's drain of the unread body waits on a client that stopped sending.
         */
        void giveUp() {
            givenUp = true;
            if (endPoint != null) endPoint.setIdleTimeout(GIVE_UP_IDLE_MILLIS);
        }

        void restore() {
            if (endPoint != null && !givenUp) endPoint.setIdleTimeout(before);
        }
    }
}
