package dev.codeexec.run;

import dev.codeexec.engine.OutputListener;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import static org.assertj.core.api.Assertions.assertThat;

/** How a run's output reaches its listener: a line per delivery, in the order read, stamped; merged in a flood. */
class ListenerDispatcherTest {

    record Got(OutputListener.Stream stream, String text, long at) {
    }

    static final class Recorder implements OutputListener {
        final List<Got> got = new CopyOnWriteArrayList<>();

        @Override
        public void onOutput(Stream stream, String text) {
            throw new AssertionError("the dispatcher delivers with a time");
        }

        @Override
        public void onOutput(Stream stream, String text, long atMillis) {
            got.add(new Got(stream, text, atMillis));
        }
    }

    /**
     * A dispatcher whose line ends may come up to 5 s late (production waits 10 ms): the cases below write a line in
     * pieces a moment apart, and a loaded machine can make that moment longer than 10 ms. What the 10 ms do is
     * checked where a line never ends.
     */
    private static ListenerDispatcher dispatcher(Recorder r, long intervalMs) {
        return new ListenerDispatcher(r, Thread.ofVirtual().factory(), Duration.ofMillis(intervalMs), Duration.ofSeconds(5));
    }

    @Test
    void eachLineIsOneDeliveryInTheOrderReadWithTheTimeItsFirstTextWasRead() throws Exception {
        Recorder r = new Recorder();
        ListenerDispatcher d = dispatcher(r, 100);
        d.onOutput(OutputListener.Stream.STDOUT, "one\ntw", 1000);
        d.onOutput(OutputListener.Stream.STDERR, "oops\n", 1001);
        d.onOutput(OutputListener.Stream.STDOUT, "o\nthree\n", 1002);
        d.finish(Duration.ofSeconds(5));
        assertThat(r.got).containsExactly(
                new Got(OutputListener.Stream.STDOUT, "one\n", 1000),
                new Got(OutputListener.Stream.STDERR, "oops\n", 1001),
                new Got(OutputListener.Stream.STDOUT, "two\n", 1000),
                new Got(OutputListener.Stream.STDOUT, "three\n", 1002));
    }

    @Test
    void aLineWrittenInTwoPiecesIsOneDeliveryAndALineWithoutItsEndGoesOutAfterTheGrace() throws Exception {
        Recorder r = new Recorder();
        ListenerDispatcher d = dispatcher(r, 0);
        // print(1) in Python: "1", then "\n" a moment later
        d.onOutput(OutputListener.Stream.STDOUT, "1");
        Thread.sleep(2);
        d.onOutput(OutputListener.Stream.STDOUT, "\n");
        long until = System.nanoTime() + 5_000_000_000L;
        while (r.got.isEmpty() && System.nanoTime() < until) Thread.sleep(5);
        Thread.sleep(50);
        assertThat(r.got).extracting(Got::text).containsExactly("1\n");
        d.finish(Duration.ofSeconds(5));
        // a progress bar's redraw never ends its line: it still goes out, after production's grace, with no end
        Recorder bar = new Recorder();
        ListenerDispatcher p = new ListenerDispatcher(bar, Thread.ofVirtual().factory(), Duration.ZERO);
        p.onOutput(OutputListener.Stream.STDOUT, "50%\r");
        until = System.nanoTime() + 5_000_000_000L;
        while (bar.got.isEmpty() && System.nanoTime() < until) Thread.sleep(5);
        assertThat(bar.got).extracting(Got::text).containsExactly("50%\r");
        p.finish(Duration.ofSeconds(5));
    }

    @Test
    void aFloodIsMergedPerStreamSwitch() throws Exception {
        Recorder r = new Recorder();
        ListenerDispatcher d = dispatcher(r, 200);
        Thread.sleep(10);
        StringBuilder all = new StringBuilder();
        // the first chunk goes out at once; the rest gathers for the interval
        d.onOutput(OutputListener.Stream.STDOUT, "first\n");
        for (int i = 0; i < 500; i++) {
            d.onOutput(OutputListener.Stream.STDOUT, "line " + i + "\n");
            all.append("line ").append(i).append('\n');
        }
        d.onOutput(OutputListener.Stream.STDERR, "err\n");
        d.finish(Duration.ofSeconds(5));
        // the first gathering may catch up to MAX_LINES lines one by one on a loaded machine; the rest merge
        assertThat(r.got.size()).as("a few deliveries, not 502").isLessThanOrEqualTo(ListenerDispatcher.MAX_LINES + 8);
        assertThat(String.join("", r.got.stream().filter(g -> g.stream() == OutputListener.Stream.STDOUT).map(Got::text).toList()))
                .isEqualTo("first\n" + all);
        assertThat(r.got.getLast()).isEqualTo(new Got(OutputListener.Stream.STDERR, "err\n", r.got.getLast().at()));
    }
}
