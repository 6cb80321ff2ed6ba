package dev.codeexec.local;

import dev.codeexec.config.DataDir;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.SandboxException;
import dev.codeexec.sandbox.SandboxProcess;
import dev.codeexec.sandbox.SandboxSpec;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;

/**
 * Test double of a sandbox: runs the command directly with ProcessBuilder in a temp dir that stands for
 * spec.workDir (every occurrence of workDir in argv and env is rewritten to it), with readOnlyFiles copied in and
 * exactly spec.env as the environment. No isolation, no kernel limits: it tests the engine, not the sandbox.
 */
final class FakeSandbox implements Sandbox {

    @Override
    public String name() {
        return "fake";
    }

    @Override
    public Optional<String> unavailableReason() {
        return Optional.empty();
    }

    @Override
    public Map<String, Object> info() {
        return Map.of("kind", "fake (tests only)");
    }

    @Override
    public SandboxProcess start(SandboxSpec spec) throws SandboxException {
        try {
            Path dir = Files.createTempDirectory("fake-sandbox");
            String wd = spec.workDir();
            for (Map.Entry<String, Path> f : spec.readOnlyFiles().entrySet()) {
                Path target = Path.of(f.getKey().replace(wd, dir.toString()));
                Files.createDirectories(target.getParent());
                Files.copy(f.getValue(), target);
            }
            List<String> cmd = new ArrayList<>();
            for (String a : spec.command()) cmd.add(a.replace(wd, dir.toString()));
            ProcessBuilder pb = new ProcessBuilder(cmd).directory(dir.toFile());
            pb.environment().clear();
            spec.env().forEach((k, v) -> pb.environment().put(k, v.replace(wd, dir.toString())));
            return new FakeProcess(pb.start(), dir);
        } catch (IOException e) {
            throw new SandboxException("fake sandbox could not start: " + e.getMessage(), e);
        }
    }

    private final class FakeProcess implements SandboxProcess {
        private final Process p;
        private final Path dir;
        private boolean closedOnce;

        FakeProcess(Process p, Path dir) {
            this.p = p;
            this.dir = dir;
        }

        @Override
        public OutputStream stdin() {
            return p.getOutputStream();
        }

        @Override
        public InputStream stdout() {
            return p.getInputStream();
        }

        @Override
        public InputStream stderr() {
            return p.getErrorStream();
        }

        @Override
        public boolean waitFor(Duration timeout) throws InterruptedException {
            return p.waitFor(timeout.toNanos(), TimeUnit.NANOSECONDS);
        }

        @Override
        public dev.codeexec.sandbox.Termination termination() {
            // ProcessBuilder gives only the exit value; the JDK reports a signal N as 128+N
            int v = p.exitValue();
            return v > 128 && v <= 192 ? new dev.codeexec.sandbox.Termination.Signaled(v - 128, false)
                    : new dev.codeexec.sandbox.Termination.Exited(v, false);
        }

        @Override
        public void kill() {
            // Parent first, so that a shell cannot run its next command when its child dies; the children were
            // listed before, while they were still reachable as descendants.
            var children = p.descendants().toList();
            p.destroyForcibly();
            children.forEach(ProcessHandle::destroyForcibly);
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
        public synchronized void close() {
            if (closedOnce) return;
            closedOnce = true;
            kill();
            try {
                p.waitFor(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            DataDir.deleteTree(dir);
        }
    }
}
