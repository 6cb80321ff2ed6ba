package dev.codeexec.engine;

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

    @Test
    void multibyteCharactersSplitAcrossReadsAreDecodedWhole() {
        String text = "héllo € 😀 日本";
        List<String> chunks = new CopyOnWriteArrayList<>();
        var c = new OutputCollector(oneByteAtATime(text.getBytes(StandardCharsets.UTF_8)), 1024,
                OutputListener.Stream.STDOUT, (s, t) -> chunks.add(t), () -> { });
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
                OutputListener.NONE, () -> { });
        c.run();
        assertThat(c.text()).isEqualTo("a\uFFFD\uFFFDb\uFFFD");
    }

    @Test
    void capKeepsExactlyCapBytesReportsOnceAndDrainsTheRest() {
        byte[] data = "x".repeat(100_000).getBytes(StandardCharsets.UTF_8);
        AtomicInteger overCap = new AtomicInteger();
        var in = new ByteArrayInputStream(data);
        var c = new OutputCollector(in, 1000, OutputListener.Stream.STDERR, OutputListener.NONE,
                overCap::incrementAndGet);
        c.run();
        assertThat(c.text()).hasSize(1000);
        assertThat(c.truncated()).isTrue();
        assertThat(overCap.get()).isEqualTo(1);
        assertThat(in.available()).isZero();
    }

    @Test
    void aFailingListenerDoesNotStopCollection() {
        var c = new OutputCollector(new ByteArrayInputStream("abc".getBytes(StandardCharsets.UTF_8)), 10,
                OutputListener.Stream.STDOUT, (s, t) -> { throw new IllegalStateException("boom"); }, () -> { });
        c.run();
        assertThat(c.text()).isEqualTo("abc");
    }
}
