package dev.codeexec.job;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * One stream (stdout or stderr) of a background job, on disk, readable by offset while it grows. Offsets count every
 * byte the job wrote. What is kept is bounded by {@code capBytes}: the first half (the head, never dropped) and the
 * most recent part of the rest (the tail, between a quarter and a half of the cap), in segment files named by the
 * offset they start at ({@code stdout.0}, {@code stdout.8388608}, ...), so that the layout needs no other record and a
 * log left by a server that was killed reads the same after its restart. A reader asking for bytes that were dropped
 * is told how many it skipped and gets the next kept ones: each byte is read at most once, and the marker of the gap
 * is the reader's to show.
 */
public final class JobLog {

    private record Segment(long start, Path file) {
    }

    private final Path dir;
    private final String name;
    private final long headCap;
    private final long segmentCap;
    private final List<Segment> segments = new ArrayList<>();
    private long total;
    private FileChannel writing;
    /** The job ended: a late delivery of its output is dropped (it would start a segment and drop a kept one). */
    private boolean closed;

    private JobLog(Path dir, String name, long capBytes) {
        this.dir = dir;
        this.name = name;
        this.headCap = Math.max(1, capBytes / 2);
        this.segmentCap = Math.max(1, (capBytes - headCap) / 2);
    }

    /** The log {@code name} in {@code dir}: a new one, or what an earlier server left there (segments and all). */
    public static JobLog open(Path dir, String name, long capBytes) throws IOException {
        JobLog log = new JobLog(dir, name, capBytes);
        try (Stream<Path> files = Files.list(dir)) {
            files.forEach(f -> {
                String n = f.getFileName().toString();
                if (!n.startsWith(name + ".")) return;
                try {
                    log.segments.add(new Segment(Long.parseLong(n.substring(name.length() + 1)), f));
                } catch (NumberFormatException e) {
                    // not a segment
                }
            });
        }
        log.segments.sort(java.util.Comparator.comparingLong(Segment::start));
        if (!log.segments.isEmpty()) {
            Segment last = log.segments.getLast();
            log.total = last.start() + Files.size(last.file());
        }
        return log;
    }

    /** Bytes written so far, kept or not. */
    public synchronized long total() {
        return total;
    }

    /** Bytes kept on disk now. */
    public synchronized long keptBytes() {
        long kept = 0;
        for (int i = 0; i < segments.size(); i++) kept += end(i) - segments.get(i).start();
        return kept;
    }

    /** Appends what the job wrote; past the cap the oldest part of the tail is dropped. */
    public synchronized void append(byte[] bytes) throws IOException {
        if (closed) return;
        int off = 0;
        while (off < bytes.length) {
            if (writing == null || room() == 0) startSegment();
            int n = (int) Math.min(room(), bytes.length - off);
            ByteBuffer b = ByteBuffer.wrap(bytes, off, n);
            try {
                while (b.hasRemaining()) writing.write(b);
            } catch (IOException e) {
                // a full disk: what part of this piece was written goes, so that the file holds exactly the
                // offsets counted (later offsets would otherwise be shifted by it)
                writing.truncate(total - segments.getLast().start());
                throw e;
            }
            off += n;
            total += n;
        }
    }

    /** Room left in the segment being written. */
    private long room() {
        Segment cur = segments.getLast();
        long cap = cur.start() == 0 ? headCap : segmentCap;
        return cap - (total - cur.start());
    }

    private void startSegment() throws IOException {
        if (writing != null) writing.close();
        Segment s = new Segment(total, dir.resolve(name + "." + total));
        if (!segments.isEmpty() && segments.getLast().start() == total) segments.removeLast(); // an empty one
        segments.add(s);
        writing = FileChannel.open(s.file(), java.util.Set.of(StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.APPEND), java.nio.file.attribute.PosixFilePermissions.asFileAttribute(
                java.nio.file.attribute.PosixFilePermissions.fromString("rw-------")));
        // the head plus at most two tail segments: the oldest tail segment goes when a third starts
        while (segments.size() > 3) {
            Segment gone = segments.remove(1);
            Files.deleteIfExists(gone.file());
        }
    }

    /** Where segment {@code i} ends (the next one's start, or the total for the last). */
    private long end(int i) {
        return i + 1 < segments.size() ? Math.min(segments.get(i).start() + capOf(i), segments.get(i + 1).start())
                : total;
    }

    private long capOf(int i) {
        return segments.get(i).start() == 0 ? headCap : segmentCap;
    }

    /**
     * Up to {@code max} bytes from offset {@code from} (clamped to what was written). Bytes that were dropped are
     * skipped and counted; a chunk never ends inside a UTF-8 character unless the log ends there, and never starts
     * inside one after a gap.
     */
    public synchronized dev.codeexec.engine.LogChunk read(long from, int max) throws IOException {
        long at = Math.max(0, Math.min(from, total));
        long skipped = 0;
        for (int i = 0; i < segments.size(); i++) {
            Segment s = segments.get(i);
            long end = end(i);
            if (at >= end) continue;
            if (at < s.start()) {
                skipped += s.start() - at;
                at = s.start();
            }
            int n = (int) Math.min(max, end - at);
            byte[] b = readAt(s, at - s.start(), n);
            if (b.length == 0) {
                // a segment shorter than its range (the host went down mid-write): what it lacks counts as skipped
                skipped += end - at;
                at = end;
                continue;
            }
            // a character cut by the segment's end goes on in the next segment when that one follows on directly
            if (at + b.length == end && i + 1 < segments.size() && segments.get(i + 1).start() == end
                    && completePrefix(b) < b.length) {
                byte[] more = readAt(segments.get(i + 1), 0, 3);
                byte[] joined = java.util.Arrays.copyOf(b, b.length + more.length);
                System.arraycopy(more, 0, joined, b.length, more.length);
                int whole = completePrefix(joined);
                b = java.util.Arrays.copyOf(joined, Math.max(whole, b.length));
            }
            int lead = skipped > 0 ? continuationBytes(b) : 0;
            int keep = at + b.length >= total ? b.length : completePrefix(b);
            if (keep <= lead) keep = b.length; // too small a chunk for a whole character: the bytes as they are
            byte[] out = java.util.Arrays.copyOfRange(b, lead, Math.max(lead, keep));
            return new dev.codeexec.engine.LogChunk(at + lead, at + Math.max(lead, keep), skipped + lead, out, total);
        }
        return new dev.codeexec.engine.LogChunk(at, at, skipped, new byte[0], total);
    }

    /** Up to {@code n} bytes of segment {@code s} from {@code pos} (fewer where the file is shorter). */
    private static byte[] readAt(Segment s, long pos, int n) throws IOException {
        byte[] b = new byte[n];
        try (FileChannel ch = FileChannel.open(s.file(), StandardOpenOption.READ)) {
            ByteBuffer buf = ByteBuffer.wrap(b);
            while (buf.hasRemaining()) {
                int r = ch.read(buf, pos);
                if (r < 0) break;
                pos += r;
            }
            return buf.hasRemaining() ? java.util.Arrays.copyOf(b, buf.position()) : b;
        }
    }

    /** Continuation bytes (10xxxxxx) at the start: the rest of a character whose beginning was dropped. */
    static int continuationBytes(byte[] b) {
        int i = 0;
        while (i < b.length && i < 3 && (b[i] & 0xC0) == 0x80) i++;
        return i;
    }

    /** The length of the longest prefix of {@code b} that does not end inside a UTF-8 character. */
    static int completePrefix(byte[] b) {
        int n = b.length;
        for (int back = 1; back <= Math.min(3, n); back++) {
            int x = b[n - back] & 0xFF;
            if ((x & 0xC0) == 0x80) continue; // a continuation byte: look further back for its lead
            int len = x >= 0xF0 ? 4 : x >= 0xE0 ? 3 : x >= 0xC0 ? 2 : 1;
            return len > back ? n - back : n;
        }
        return n;
    }

    /** Stops writing (the job ended); reads go on working. */
    public synchronized void close() {
        closed = true;
        if (writing == null) return;
        try {
            writing.close();
        } catch (IOException e) {
            // closing
        }
        writing = null;
    }
}
