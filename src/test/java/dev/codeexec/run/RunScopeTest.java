package dev.codeexec.run;

import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunEnd;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.sandbox.SandboxProcess;
import dev.codeexec.sandbox.Termination;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PipedInputStream;
import java.io.PipedOutputStream;
import java.time.Duration;
import java.util.List;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The scope every kind of run holds its resources in: cancel at every step, one order of ending, once. */
class RunScopeTest {

    private static final Limits LIMITS = new Limits(Duration.ofSeconds(1), 1, 64 << 20, 8, 1024, 1024, 1 << 20);
    private final List<String> events = new CopyOnWriteArrayList<>();

    @Test
    void aCancelWakesAWaitAtOnceAndTheRunSeesItAfterwards() throws Exception {
        RunScope scope = new RunScope("r1");
        CountDownLatch waiting = new CountDownLatch(1);
        CompletableFuture<Throwable> thrown = new CompletableFuture<>();
        Thread t = Thread.ofVirtual().start(() -> {
            try {
                scope.await(() -> {
                    waiting.countDown();
                    new CountDownLatch(1).await(); // never opens: only the cancel ends it
                    return "never";
                });
                thrown.complete(null);
            } catch (Exception e) {
                thrown.complete(e);
            }
        });
        assertThat(waiting.await(10, TimeUnit.SECONDS)).isTrue();
        scope.cancel();
        assertThat(thrown.get(10, TimeUnit.SECONDS)).isInstanceOf(InterruptedException.class);
        assertThat(scope.cancelled()).isTrue();
        t.join();
    }

    @Test
    void aRunCancelledBeforeItsWaitDoesNotWaitAtAll() {
        RunScope scope = new RunScope("r2");
        scope.cancel();
        assertThatThrownBy(() -> scope.await(() -> {
            events.add("waited");
            return 1;
        })).isInstanceOf(InterruptedException.class);
        assertThat(events).isEmpty();
    }

    @Test
    void noInterruptOutlivesAWait() throws Exception {
        RunScope scope = new RunScope("r3");
        assertThat(scope.<String, RuntimeException>await(() -> "done")).isEqualTo("done");
        scope.cancel(); // after the wait: nothing is left to interrupt, and this thread stays uninterrupted
        assertThat(Thread.currentThread().isInterrupted()).isFalse();
        assertThat(scope.cancelled()).isTrue();
    }

    @Test
    void aCancelKillsAProgramOfItsOwnButLeavesABorrowedOneToItsCaller() {
        RunScope own = new RunScope("own");
        Recording mine = new Recording("mine");
        own.program(mine, true);
        own.cancel();
        RunScope call = new RunScope("call");
        Recording session = new Recording("session");
        call.program(session, false);
        call.cancel();
        assertThat(events).containsExactly("mine.kill");
        call.close();
        assertThat(events).as("a borrowed program outlives the call's scope").containsExactly("mine.kill");
    }

    @Test
    void aProgramThatStartsAfterTheCancelIsKilledAtOnce() {
        RunScope scope = new RunScope("late");
        scope.cancel();
        scope.program(new Recording("p"), true);
        assertThat(events).containsExactly("p.kill");
    }

    @Test
    void theReasonsToStopAreDecidedInOneOrder() {
        RunScope scope = new RunScope("why");
        assertThat(scope.stopReason(false, false)).isNull();
        assertThat(scope.stopReason(false, true)).isEqualTo(RunEnd.Stop.TIMEOUT);
        assertThat(scope.stopReason(true, true)).isEqualTo(RunEnd.Stop.OUTPUT_FLOOD);
        scope.cancel();
        assertThat(scope.stopReason(true, true)).isEqualTo(RunEnd.Stop.CANCELLED);
    }

    @Test
    void stoppingAProgramKillsItBeforeItWaitsForItsTree() throws Exception {
        RunScope scope = new RunScope("stop");
        scope.program(new Recording("p"), true);
        scope.stopProgram();
        assertThat(events).containsExactly("p.kill", "p.waitFor");
    }

    @Test
    void closeEndsEverythingInOneOrderOnceHoweverOftenItIsCalled() {
        RunScope scope = new RunScope("close");
        scope.beforeFiles(() -> events.add("first registered"));
        scope.program(new Recording("p"), true);
        scope.beforeFiles(() -> events.add("second registered"));
        scope.close();
        scope.close();
        assertThat(events).containsExactly("p.close", "second registered", "first registered");
    }

    @Test
    void theFilesAreReadOnlyAfterTheWatchesAndCleanupsEnded() {
        RunScope scope = new RunScope("files");
        scope.beforeFiles(() -> events.add("code file removed"));
        scope.complete(RunEnd.of(new RunEnd.NotStarted("x"), LIMITS)
                .result("python", "fake", "x"));
        assertThat(events).containsExactly("code file removed");
        scope.close();
        assertThat(events).as("a cleanup runs once").containsExactly("code file removed");
    }

    @Test
    void readersOfAStreamThatSomethingLeftBehindStillHoldsAreEndedByKillingTheTree() throws Exception {
        RunScope scope = new RunScope("held");
        PipedOutputStream heldOpen = new PipedOutputStream();
        PipedInputStream out = new PipedInputStream(heldOpen);
        Recording p = new Recording("p") {
            @Override
            public InputStream stdout() {
                return out;
            }

            @Override
            public void kill() {
                super.kill();
                try {
                    heldOpen.close(); // the tree is gone: the pipe reaches its end
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }
        };
        scope.program(p, true);
        OutputCollector.Drain drain = new OutputCollector.Drain(1 << 20, () -> { });
        OutputCollector o = new OutputCollector(p.stdout(), 1024, OutputListener.Stream.STDOUT, OutputListener.NONE, drain);
        OutputCollector e = new OutputCollector(p.stderr(), 1024, OutputListener.Stream.STDERR, OutputListener.NONE, drain);
        heldOpen.write("partial".getBytes());
        scope.readOutput(o, e, "in".getBytes(), Thread.ofVirtual().factory());
        scope.joinOutput();
        assertThat(events).contains("p.kill");
        assertThat(o.captured().text()).isEqualTo("partial");
    }

    /** A program that records what is done to it. */
    private class Recording implements SandboxProcess {
        private final String name;

        Recording(String name) {
            this.name = name;
        }

        @Override
        public OutputStream stdin() {
            return OutputStream.nullOutputStream();
        }

        @Override
        public InputStream stdout() {
            return InputStream.nullInputStream();
        }

        @Override
        public InputStream stderr() {
            return InputStream.nullInputStream();
        }

        @Override
        public boolean waitFor(Duration timeout) {
            events.add(name + ".waitFor");
            return true;
        }

        @Override
        public Termination termination() {
            return new Termination.Exited(0, false);
        }

        @Override
        public void kill() {
            events.add(name + ".kill");
        }

        @Override
        public boolean memoryLimitHit() {
            return false;
        }

        @Override
        public boolean cpuLimitHit() {
            return false;
        }

        @Override
        public OptionalLong peakMemoryBytes() {
            return OptionalLong.empty();
        }

        @Override
        public OptionalDouble cpuTimeMs() {
            return OptionalDouble.empty();
        }

        @Override
        public void close() {
            events.add(name + ".close");
        }
    }
}
