package dev.codeexec.sandbox;

import dev.codeexec.testing.Poll;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;

/** Shared helpers for the sandbox tests: run a spec to the end, look for leftovers on the host. */
final class SandboxTesting {

    static final int UID = 65534;
    static final String PY = "/usr/bin/python3";
    static final Map<String, String> ENV = Map.of("PATH", "/usr/bin:/bin", "HOME", "/tmp", "LANG", "C.UTF-8");
    private static final AtomicLong SEQ = new AtomicLong();

    private SandboxTesting() {
    }

    static Limits limits() {
        return new Limits(Duration.ofSeconds(30), 10, 256L << 20, 64, 1 << 20, 64L << 20);
    }

    static String runId() {
        return "t-" + ProcessHandle.current().pid() + "-" + SEQ.incrementAndGet();
    }

    static SandboxSpec spec(Limits limits, String... command) {
        return SandboxSpec.builder(runId(), List.of(command), "/work", limits).env(ENV).build();
    }

    static SandboxSpec spec(String... command) {
        return spec(limits(), command);
    }

    record Result(int exit, String out, String err, SandboxProcess process) {
    }

    /** Starts, feeds stdin, waits (killing after {@code wait}), closes; the process is returned closed. */
    static Result run(Sandbox sandbox, SandboxSpec spec, String stdin, Duration wait) throws Exception {
        SandboxProcess p = sandbox.start(spec);
        try {
            CompletableFuture<String> out = drain(p.stdout());
            CompletableFuture<String> err = drain(p.stderr());
            try (var in = p.stdin()) {
                in.write(stdin.getBytes(StandardCharsets.UTF_8));
            } catch (IOException closedEarly) {
                // the program did not read its stdin
            }
            if (!p.waitFor(wait)) p.kill();
            p.waitFor(Duration.ofSeconds(10));
            int code = p.exitCode();
            String o = out.get(), e = err.get();
            p.close(); // before returning: the result's limit flags are the figures read at close
            return new Result(code, o, e, p);
        } finally {
            p.close();
        }
    }

    static Result run(Sandbox sandbox, SandboxSpec spec) throws Exception {
        return run(sandbox, spec, "", Duration.ofSeconds(30));
    }

    static CompletableFuture<String> drain(InputStream in) {
        return CompletableFuture.supplyAsync(() -> {
            try {
                return new String(in.readAllBytes(), StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }, r -> Thread.ofVirtual().start(r));
    }

    /**
     * Host pids of the sandbox uid that belong to this JVM's runs: in one of its run cgroups. Other processes of
     * that uid (other servers or test runs on the same machine) are not ours to judge.
     */
    static List<Long> processesOfSandboxUid() {
        String mine = "/" + Cgroups.PARENT + "/" + Cgroups.INSTANCE_PREFIX + ProcessHandle.current().pid() + "/";
        return allProcessesOfSandboxUid().stream().filter(pid -> {
            try {
                return Files.readString(Path.of("/proc/" + pid + "/cgroup")).contains(mine);
            } catch (IOException gone) {
                return false;
            }
        }).toList();
    }

    /**
     * Whether a host uid is one sandboxes run as: SANDBOX_UID's default, or one of the "auto" SANDBOX_UID_RANGE
     * ranges (each sandbox runs as a uid of its own from there).
     */
    static boolean isSandboxUid(long uid) {
        return uid == UID || (uid >= Sandboxes.AUTO_FIRST && uid < (long) Sandboxes.AUTO_FIRST + Sandboxes.AUTO_SIZE)
                || (uid >= 65534 - Sandboxes.AUTO_SMALL_SIZE && uid < 65534);
    }

    /** Host pids whose real uid is a sandbox uid (sandboxed code, or launcher steps that dropped to it). */
    static List<Long> allProcessesOfSandboxUid() {
        List<Long> out = new ArrayList<>();
        try (Stream<Path> s = Files.list(Path.of("/proc"))) {
            for (Path p : s.filter(x -> x.getFileName().toString().matches("\\d+")).toList()) {
                try {
                    for (String line : Files.readAllLines(p.resolve("status"))) {
                        if (line.startsWith("Uid:") && isSandboxUid(Long.parseLong(line.split("\\s+")[1])))
                            out.add(Long.parseLong(p.getFileName().toString()));
                    }
                } catch (IOException gone) {
                    // exited while we looked
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out;
    }

    /**
     * Like {@link #processesOfSandboxUid()} without zombies: for the sandbox without a pid namespace, killed
     * orphans are reparented to host pid 1, and how fast that reaps them is up to the host's init.
     */
    static List<String> liveProcessesOfSandboxUid() {
        return processesOfSandboxUid().stream().filter(pid -> {
            if (pid == 0) return false;
            try {
                String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
                return stat.charAt(stat.lastIndexOf(')') + 2) != 'Z';
            } catch (IOException gone) {
                return false;
            }
        }).map(pid -> {
            try {
                return pid + " " + Files.readString(Path.of("/proc/" + pid + "/cmdline")).replace('\0', ' ');
            } catch (IOException gone) {
                return pid + " (gone)";
            }
        }).toList();
    }

    /** Waits until the kernel has reaped every process of the sandbox uid in this JVM's run cgroups. */
    static void awaitNoSandboxProcesses(String what) throws InterruptedException {
        Poll.until(what, SandboxTesting::processesOfSandboxUid, List::isEmpty);
    }
}
