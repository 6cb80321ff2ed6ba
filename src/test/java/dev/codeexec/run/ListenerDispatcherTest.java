package dev.codeexec.run;

import dev.codeexec.engine.OutputListener;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadFactory;

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

    /** Makes the dispatcher's one thread and keeps it, so a test can see where it waits. */
    static final class Threads implements ThreadFactory {
        volatile Thread thread;

        @Override
        public Thread newThread(Runnable r) {
            thread = Thread.ofPlatform().name("dispatcher").daemon().unstarted(r);
            return thread;
        }

        /** Waits until the thread waits for a first chunk (untimed, in the queue's take). */
        void awaitIdle() throws InterruptedException {
            Poll.until("the dispatcher waits for a first chunk", () -> thread.getState(), s -> s == Thread.State.WAITING);
        }
    }

    /**
     * A dispatcher whose line ends may come up to 5 s late (production waits 10 ms): the cases below write a line in
     * pieces a moment apart, and a loaded machine can make that moment longer than 10 ms. What the 10 ms do is
     * checked where a line never ends.
     */
    private static ListenerDispatcher dispatcher(Recorder r, ThreadFactory threads, long intervalMs) {
        return new ListenerDispatcher(r, threads, Duration.ofMillis(intervalMs), Duration.ofSeconds(5));
    }

    private static ListenerDispatcher dispatcher(Recorder r, long intervalMs) {
        return dispatcher(r, Thread.ofVirtual().factory(), intervalMs);
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
        Threads threads = new Threads();
        ListenerDispatcher d = dispatcher(r, threads, 0);
        // print(1) in Python: "1", then "\n" once the dispatcher has taken the "1" and waits (timed) for the rest
        d.onOutput(OutputListener.Stream.STDOUT, "1");
        Poll.until("the dispatcher took the \"1\" and waits for its line's end (or delivered it)",
                () -> threads.thread.getState() == Thread.State.TIMED_WAITING || !r.got.isEmpty());
        d.onOutput(OutputListener.Stream.STDOUT, "\n");
        d.finish(Duration.ofSeconds(5)); // every delivery made
        assertThat(r.got).extracting(Got::text).containsExactly("1\n");
        // a progress bar's redraw never ends its line: it still goes out, after production's grace, with no end and
        // before the run's end
        Recorder bar = new Recorder();
        ListenerDispatcher p = new ListenerDispatcher(bar, Thread.ofVirtual().factory(), Duration.ZERO);
        p.onOutput(OutputListener.Stream.STDOUT, "50%\r");
        Poll.until("the redraw is delivered", () -> !bar.got.isEmpty());
        assertThat(bar.got).extracting(Got::text).containsExactly("50%\r");
        p.finish(Duration.ofSeconds(5));
        assertThat(bar.got).hasSize(1);
    }

    @Test
    void aFloodIsMergedPerStreamSwitch() throws Exception {
        Recorder r = new Recorder();
        Threads threads = new Threads();
        ListenerDispatcher d = dispatcher(r, threads, 200);
        threads.awaitIdle();
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
