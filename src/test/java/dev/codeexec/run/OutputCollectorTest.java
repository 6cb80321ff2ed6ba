package dev.codeexec.run;

import dev.codeexec.engine.CapturedText;
import dev.codeexec.engine.OutputListener;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

class OutputCollectorTest {

    /** Hands out one byte per read, the worst case for a decoder. */
    private static InputStream oneByteAtATime(byte[] data) {
        return new ByteArrayInputStream(data) {
            @Override
            public synchronized int read(byte[] b, int off, int len) {
                return super.read(b, off, Math.min(len, 1));
            }
        };
    }

    private static OutputCollector.Drain noDrainLimit() {
        return new OutputCollector.Drain(Long.MAX_VALUE, () -> { });
    }

    @Test
    void multibyteCharactersSplitAcrossReadsAreDecodedWhole() {
        String text = "héllo € 😀 日本";
        List<String> chunks = new CopyOnWriteArrayList<>();
        var c = new OutputCollector(oneByteAtATime(text.getBytes(StandardCharsets.UTF_8)), 1024,
                OutputListener.Stream.STDOUT, (s, t) -> chunks.add(t), noDrainLimit());
        c.run();
        assertThat(c.text()).isEqualTo(text);
        assertThat(String.join("", chunks)).isEqualTo(text);
        assertThat(chunks).noneMatch(s -> s.contains("\uFFFD"));
        assertThat(c.truncated()).isFalse();
    }

    @Test
    void invalidBytesBecomeReplacementCharacters() {
        byte[] data = {'a', (byte) 0xff, (byte) 0xc3, 'b', (byte) 0xe2, (byte) 0x82};
        var c = new OutputCollector(new ByteArrayInputStream(data), 1024, OutputListener.Stream.STDOUT,
                OutputListener.NONE, noDrainLimit());
        c.run();
        assertThat(c.text()).isEqualTo("a\uFFFD\uFFFDb\uFFFD");
    }

    @Test
    void overTheCapTheResultKeepsTheHeadAndTheTailAndSaysHowMuchWasLeftOut() {
        String body = "head line\n" + "x".repeat(100_000) + "\nlast line: the answer is 42\n";
        var in = new ByteArrayInputStream(body.getBytes(StandardCharsets.UTF_8));
        var c = new OutputCollector(in, 1000, OutputListener.Stream.STDERR, OutputListener.NONE, noDrainLimit());
        c.run();
        CapturedText.Captured r = c.captured();
        assertThat(r.truncated()).isTrue();
        assertThat(r.text()).startsWith("head line\nxxx").endsWith("xxx\nlast line: the answer is 42\n");
        long kept = 1000;
        long leftOut = body.length() - kept;
        assertThat(r.text()).contains("\n[... " + leftOut + " bytes left out ...]\n");
        assertThat(r.text().length()).isEqualTo((int) kept + ("\n[... " + leftOut + " bytes left out ...]\n").length());
        assertThat(in.available()).isZero();
    }

    @Test
    void exactlyTheCapIsKeptWholeAndNotTruncated() {
        String body = "y".repeat(1000);
        var c = new OutputCollector(new ByteArrayInputStream(body.getBytes(StandardCharsets.UTF_8)), 1000,
                OutputListener.Stream.STDOUT, OutputListener.NONE, noDrainLimit());
        c.run();
        assertThat(c.captured()).isEqualTo(new CapturedText.Captured(body, false));
    }

    @Test
    void progressStreamsTheCapThenOneNoticeAndNothingMore() {
        List<String> chunks = new CopyOnWriteArrayList<>();
        byte[] data = "z".repeat(200_000).getBytes(StandardCharsets.UTF_8);
        var c = new OutputCollector(new ByteArrayInputStream(data), 10_000, OutputListener.Stream.STDOUT,
                (s, t) -> chunks.add(t), noDrainLimit());
        c.run();
        long streamed = chunks.stream().filter(t -> !t.equals(OutputCollector.NOT_STREAMED)).mapToLong(String::length).sum();
        assertThat(streamed).isBetween(10_000L, 10_000L + 16 * 1024);
        assertThat(chunks.getLast()).isEqualTo(OutputCollector.NOT_STREAMED);
        assertThat(chunks.stream().filter(OutputCollector.NOT_STREAMED::equals)).hasSize(1);
    }

    @Test
    void aBackgroundJobsListenerIsGivenEveryByteWhileTheResultKeepsItsCap() {
        StringBuilder streamed = new StringBuilder();
        String body = "z".repeat(200_000) + "\nthe end\n";
        var c = new OutputCollector(new ByteArrayInputStream(body.getBytes(StandardCharsets.UTF_8)), 10_000,
                Long.MAX_VALUE, OutputListener.Stream.STDOUT, (s, t) -> streamed.append(t), noDrainLimit());
        c.run();
        assertThat(streamed.toString()).isEqualTo(body);
        assertThat(c.truncated()).isTrue();
    }

    @Test
    void theDrainLimitIsSharedByBothStreamsAndTellsOnce() {
        AtomicInteger exceeded = new AtomicInteger();
        var drain = new OutputCollector.Drain(150_000, exceeded::incrementAndGet);
        byte[] data = "w".repeat(100_000).getBytes(StandardCharsets.UTF_8);
        var out = new OutputCollector(new ByteArrayInputStream(data), 1000, OutputListener.Stream.STDOUT,
                OutputListener.NONE, drain);
        var err = new OutputCollector(new ByteArrayInputStream(data), 1000, OutputListener.Stream.STDERR,
                OutputListener.NONE, drain);
        out.run();
        assertThat(drain.exceeded()).isFalse();
        err.run();
        assertThat(drain.exceeded()).isTrue();
        assertThat(exceeded.get()).isEqualTo(1);
    }

    @Test
    void aFailingListenerDoesNotStopCollection() {
        var c = new OutputCollector(new ByteArrayInputStream("abc".getBytes(StandardCharsets.UTF_8)), 10,
                OutputListener.Stream.STDOUT, (s, t) -> { throw new IllegalStateException("boom"); }, noDrainLimit());
        c.run();
        assertThat(c.text()).isEqualTo("abc");
    }
}
