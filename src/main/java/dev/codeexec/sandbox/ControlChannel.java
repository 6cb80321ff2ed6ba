package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;
import dev.codeexec.linux.Posix;

import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The server's end of a sandboxed program's control channel: two FIFOs that the root-side launcher opens onto
 * fds {@link SandboxSpec#CONTROL_IN_FD} and {@link SandboxSpec#CONTROL_OUT_FD} before it drops privileges, so
 * the program needs no access to them (the FIFOs live in a root-only directory and are unlinked once open).
 * Messages are lines of JSON; what they mean is up to the engine (see docs/interpreter-protocol.md).
 *
 * <p>Everything read from here comes from untrusted code: callers bound line length and parse defensively.
 */
public final class ControlChannel implements AutoCloseable {

    /** Longest line accepted from the program (a session's response carries its figures as base64). */
    public static final int MAX_LINE = 64 << 20;

    private final OutputStream toProgram;
    private final InputStream fromProgram;
    /** Over the program's stdin and stdout: closing it is the program's owner's business (the user's input follows). */
    private final boolean stdio;

    private ControlChannel(OutputStream toProgram, InputStream fromProgram) {
        this(toProgram, fromProgram, false);
    }

    private ControlChannel(OutputStream toProgram, InputStream fromProgram, boolean stdio) {
        this.toProgram = toProgram;
        this.fromProgram = fromProgram;
        this.stdio = stdio;
    }

    /**
     * A channel over the program's own stdin and stdout, for a sandbox that cannot pass other descriptors
     * ({@link Sandbox#controlOverStdio()}): what the server sends goes in ahead of the user's input on the same
     * pipe, and the program's lines come out ahead of its output. {@link #receive()} reads the stream given here
     * byte by byte through that same stream object, so whatever follows a line stays there for the reader of the
     * program's output. {@link #closeInput()} and {@link #close()} leave both pipes open: the run feeds and closes
     * stdin, and reads stdout, as for any program.
     */
    static ControlChannel overStdio(OutputStream stdin, InputStream stdout) {
        return new ControlChannel(stdin, stdout, true);
    }

    /** The two FIFOs of a new channel, made in {@code dir} (root-only, created here). */
    record Fifos(Path dir, Path in, Path out) {
        static Fifos create(Path dir) throws SandboxException {
            try {
                Files.createDirectories(dir.getParent());
                Files.createDirectory(dir);
                Path in = dir.resolve("in");
                Path out = dir.resolve("out");
                Posix.mkfifo(in.toString(), 0600);
                Posix.mkfifo(out.toString(), 0600);
                return new Fifos(dir, in, out);
            } catch (IOException | Posix.Errno e) {
                DataDir.deleteTree(dir);
                throw new SandboxException("cannot create the control channel: " + e.getMessage(), e);
            }
        }

        void delete() {
            DataDir.deleteTree(dir);
        }
    }

    /**
     * Opens the server's ends in the order the launcher opens its ends (in, then out), so neither side blocks
     * the other for long. If the launcher dies before it got there (a failed cgroup join, say), each blocked
     * open is released by opening the FIFO's other end ourselves, and this fails.
     */
    static ControlChannel open(Fifos fifos, Process launcher, Duration max) throws SandboxException {
        CompletableFuture<ControlChannel> opening = CompletableFuture.supplyAsync(() -> {
            try {
                OutputStream w = new FileOutputStream(fifos.in().toFile());
                try {
                    return new ControlChannel(w, new java.io.BufferedInputStream(new FileInputStream(fifos.out().toFile()), 1 << 16));
                } catch (IOException e) {
                    w.close();
                    throw e;
                }
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }, r -> Thread.ofVirtual().name("control-open").start(r));
        long end = System.nanoTime() + max.toNanos();
        try {
            while (true) {
                try {
                    return opening.get(5, TimeUnit.MILLISECONDS);
                } catch (TimeoutException e) {
                    if (!launcher.isAlive() || System.nanoTime() > end) {
                        release(fifos);
                        opening.thenAccept(ControlChannel::close);
                        throw new SandboxException(launcher.isAlive()
                                ? "the sandbox did not open its control channel within " + max.toMillis() + " ms"
                                : "the sandbox ended before it opened its control channel");
                    }
                }
            }
        } catch (java.util.concurrent.ExecutionException e) {
            throw new SandboxException("cannot open the control channel: " + e.getCause().getMessage(), e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            release(fifos);
            opening.thenAccept(ControlChannel::close);
            throw new SandboxException("interrupted while opening the control channel");
        } finally {
            fifos.delete();
        }
    }

    /** Opening a FIFO read-write never blocks and completes any open waiting on its other end. */
    private static void release(Fifos fifos) {
        for (Path p : new Path[] {fifos.in(), fifos.out()}) {
            try (RandomAccessFile ignored = new RandomAccessFile(p.toFile(), "rw")) {
                // opened and closed: enough to wake the blocked open
            } catch (IOException e) {
                // already gone
            }
        }
    }

    /** Sends one line (a newline is appended) and flushes. */
    public synchronized void send(String line) throws IOException {
        toProgram.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        toProgram.flush();
    }

    /** Sends raw bytes as they are and flushes. */
    public synchronized void send(byte[] message) throws IOException {
        toProgram.write(message);
        toProgram.flush();
    }

    /** Closes the server → program direction: the program reads end of file. */
    public synchronized void closeInput() {
        if (stdio) {
            try {
                toProgram.flush();
            } catch (IOException e) {
                // the program is gone
            }
            return;
        }
        try {
            toProgram.close();
        } catch (IOException e) {
            // the program is gone
        }
    }

    /**
     * Blocks for the next line from the program (without its newline), or null at end of stream (the program
     * and everything holding its end are gone). Throws when a line exceeds {@link #MAX_LINE}.
     */
    public String receive() throws IOException {
        ByteArrayOutputStream line = new ByteArrayOutputStream(128);
        while (true) {
            int b = fromProgram.read();
            if (b < 0) return line.size() == 0 ? null : line.toString(StandardCharsets.UTF_8);
            if (b == '\n') return line.toString(StandardCharsets.UTF_8);
            if (line.size() >= MAX_LINE) throw new IOException("control message longer than " + MAX_LINE + " bytes");
            line.write(b);
        }
    }

    @Override
    public void close() {
        closeInput();
        if (stdio) return;
        try {
            fromProgram.close();
        } catch (IOException e) {
            // nothing to do
        }
    }
}
