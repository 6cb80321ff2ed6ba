package dev.codeexec.job;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

class JobLogTest {

    @TempDir
    Path dir;

    @Test
    void readingByTheOffsetsItGaveReturnsEveryByteOnceWhileTheLogGrows() throws Exception {
        JobLog log = JobLog.open(dir, "stdout", 1 << 20);
        ByteArrayOutputStream read = new ByteArrayOutputStream();
        StringBuilder written = new StringBuilder();
        long at = 0;
        for (int i = 0; i < 500; i++) {
            String line = "line " + i + " é ✓\n";
            written.append(line);
            log.append(line.getBytes(StandardCharsets.UTF_8));
            if (i % 7 == 0) {
                dev.codeexec.engine.LogChunk c = log.read(at, 100); // small pieces: some end inside a character
                read.write(c.bytes());
                assertThat(c.from()).isEqualTo(at);
                assertThat(c.skipped()).isZero();
                at = c.next();
            }
        }
        while (true) {
            dev.codeexec.engine.LogChunk c = log.read(at, 100);
            if (c.next() == at) break;
            read.write(c.bytes());
            at = c.next();
        }
        assertThat(read.toString(StandardCharsets.UTF_8)).isEqualTo(written.toString());
        assertThat(log.total()).isEqualTo(written.toString().getBytes(StandardCharsets.UTF_8).length);
    }

    @Test
    void pastTheCapTheHeadAndTheLatestTailAreKeptAndAReaderIsToldWhatWasSkipped() throws Exception {
        int cap = 64 * 1024;
        JobLog log = JobLog.open(dir, "stdout", cap);
        for (int i = 0; i < 20_000; i++) log.append(String.format("%08d\n", i).getBytes(StandardCharsets.US_ASCII));
        long total = 20_000L * 9;
        assertThat(log.total()).isEqualTo(total);
        assertThat(log.keptBytes()).isLessThanOrEqualTo(cap).isGreaterThanOrEqualTo(cap / 2 + cap / 4);
        long onDisk;
        try (Stream<Path> files = Files.list(dir)) {
            onDisk = files.mapToLong(f -> f.toFile().length()).sum();
        }
        assertThat(onDisk).as("bytes on disk").isLessThanOrEqualTo(cap);
        try (Stream<Path> files = Files.list(dir)) {
            files.forEach(f -> assertThat(java.nio.file.attribute.PosixFilePermissions.toString(Uncheck.perms(f)))
                    .as(f.toString()).isEqualTo("rw-------"));
        }

        StringBuilder text = new StringBuilder();
        long at = 0, skipped = 0;
        while (true) {
            dev.codeexec.engine.LogChunk c = log.read(at, 4096);
            if (c.next() == at) break;
            skipped += c.skipped();
            text.append(new String(c.bytes(), StandardCharsets.US_ASCII));
            at = c.next();
        }
        assertThat(text.toString()).startsWith("00000000\n00000001\n").endsWith("00019999\n");
        assertThat(skipped).isPositive();
        assertThat(text.length() + skipped).isEqualTo(total);
    }

    @Test
    void aLogLeftByAServerThatWasKilledReadsTheSameWhenOpenedAgain() throws Exception {
        JobLog log = JobLog.open(dir, "stderr", 8 * 1024);
        for (int i = 0; i < 3000; i++) log.append(("e" + i + "\n").getBytes(StandardCharsets.US_ASCII));
        dev.codeexec.engine.LogChunk before = log.read(0, 1 << 20);
        // no close: as a SIGKILL leaves it
        JobLog again = JobLog.open(dir, "stderr", 8 * 1024);
        assertThat(again.total()).isEqualTo(log.total());
        dev.codeexec.engine.LogChunk after = again.read(0, 1 << 20);
        assertThat(after.bytes()).isEqualTo(before.bytes());
        dev.codeexec.engine.LogChunk tailBefore = log.read(before.next(), 1 << 20);
        dev.codeexec.engine.LogChunk tailAfter = again.read(after.next(), 1 << 20);
        assertThat(tailAfter.skipped()).isEqualTo(tailBefore.skipped()).isPositive();
        assertThat(tailAfter.bytes()).isEqualTo(tailBefore.bytes());
    }

    @Test
    void aChunkEndsOnACharacterBoundaryAndAnOffsetPastTheEndReadsNothing() throws Exception {
        JobLog log = JobLog.open(dir, "stdout", 1 << 20);
        log.append("a✓b".getBytes(StandardCharsets.UTF_8)); // ✓ is three bytes
        log.append("more".getBytes(StandardCharsets.UTF_8));
        dev.codeexec.engine.LogChunk c = log.read(0, 3);
        assertThat(new String(c.bytes(), StandardCharsets.UTF_8)).isEqualTo("a");
        assertThat(c.next()).isEqualTo(1);
        dev.codeexec.engine.LogChunk past = log.read(10_000, 100);
        assertThat(past.bytes()).isEmpty();
        assertThat(past.next()).isEqualTo(log.total());
        assertThat(JobLog.completePrefix(new byte[] {'x', (byte) 0xE2, (byte) 0x9C})).isEqualTo(1);
        assertThat(JobLog.completePrefix(new byte[] {'x', (byte) 0xE2, (byte) 0x9C, (byte) 0x93})).isEqualTo(4);
    }

    @Test
    void aCharacterSplitBetweenTwoSegmentsIsReadWhole() throws Exception {
        JobLog log = JobLog.open(dir, "stdout", 16); // head 8 bytes, tail segments of 4
        log.append("abcdefgé".getBytes(StandardCharsets.UTF_8)); // é takes bytes 7 and 8: across the head's end
        log.append("xyz".getBytes(StandardCharsets.UTF_8));
        StringBuilder text = new StringBuilder();
        long at = 0;
        while (true) {
            dev.codeexec.engine.LogChunk c = log.read(at, 8);
            if (c.next() == at) break;
            text.append(new String(c.bytes(), StandardCharsets.UTF_8));
            at = c.next();
        }
        assertThat(text.toString()).isEqualTo("abcdefgéxyz");
    }

    @Test
    void outputDeliveredAfterTheEndIsDroppedAndKeepsTheTailThatWasKept() throws Exception {
        JobLog log = JobLog.open(dir, "stdout", 64);
        for (int i = 0; i < 40; i++) log.append(String.format("%02d\n", i).getBytes(StandardCharsets.US_ASCII));
        byte[] before = log.read(log.read(0, 1000).next(), 1000).bytes();
        log.close();
        log.append("late\n".getBytes(StandardCharsets.US_ASCII));
        assertThat(log.total()).isEqualTo(120);
        assertThat(log.read(log.read(0, 1000).next(), 1000).bytes()).isEqualTo(before);
    }

    @Test
    void aSegmentShorterThanItsRangeCountsAsSkippedAndReadingGoesOn() throws Exception {
        JobLog log = JobLog.open(dir, "stdout", 64); // head 32, tail segments of 16
        for (int i = 0; i < 20; i++) log.append(String.format("%02d\n", i).getBytes(StandardCharsets.US_ASCII));
        log.close();
        // the host went down: the head lost its last bytes
        try (var ch = java.nio.channels.FileChannel.open(dir.resolve("stdout.0"), java.nio.file.StandardOpenOption.WRITE)) {
            ch.truncate(20);
        }
        JobLog again = JobLog.open(dir, "stdout", 64);
        dev.codeexec.engine.LogChunk first = again.read(0, 1000);
        assertThat(first.bytes()).hasSize(20);
        dev.codeexec.engine.LogChunk second = again.read(first.next(), 1000);
        assertThat(second.skipped()).isEqualTo(12);
        assertThat(second.next()).isGreaterThan(first.next());
    }

    /** Files.getPosixFilePermissions without the checked exception, for a stream. */
    static final class Uncheck {
        static java.util.Set<java.nio.file.attribute.PosixFilePermission> perms(Path p) {
            try {
                return Files.getPosixFilePermissions(p);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
    }
}
