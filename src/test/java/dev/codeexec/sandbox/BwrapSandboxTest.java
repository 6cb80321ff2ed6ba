package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static dev.codeexec.sandbox.SandboxTesting.*;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The bubblewrap sandbox against the real bwrap, cgroups and kernel of this machine: isolation promises,
 * kernel-enforced limits, and that nothing is left behind. Each test would fail if its promise broke.
 */
@Tag("sandbox")
class BwrapSandboxTest {

    static BwrapSandbox sandbox;
    static Path dataDir;

    @BeforeAll
    static void setUp() throws Exception {
        dataDir = Files.createTempDirectory("code-exec-data-");
        sandbox = new BwrapSandbox(UID, UID, dataDir);
        assertThat(sandbox.unavailableReason()).isEmpty();
        assertThat(sandbox.usesHelper()).as("codeexec-helper built into target/classes and working").isTrue();
    }

    @AfterAll
    static void removeDataDir() {
        DataDir.deleteTree(dataDir);
    }

    @AfterEach
    void nothingLeftBehind() throws Exception {
        awaitNoSandboxProcesses("no process of uid 65534 after the run");
        assertThat(sandbox.leftoverCgroups()).as("run cgroups after the run").isEmpty();
    }

    @Test
    void runsAProgramWithStdinStdoutStderrAndExitCode() throws Exception {
        Result r = run(sandbox, spec("/bin/sh", "-c", "read x; echo \"out:$x\"; echo err >&2; exit 3"), "hello\n",
                Duration.ofSeconds(10));
        assertThat(r.exit()).isEqualTo(3);
        assertThat(r.out()).isEqualTo("out:hello\n");
        assertThat(r.err()).isEqualTo("err\n");
    }

    @Test
    void infoDescribesTheIsolation() {
        Map<String, Object> info = sandbox.info();
        assertThat(info).containsEntry("kind", "bwrap").containsEntry("uid", UID).containsEntry("seccomp", true)
                .containsEntry("network", "none").containsKey("bwrapVersion");
        assertThat(info.get("cgroup")).isIn("v1", "v2", "none(rlimits)");
    }

    @Test
    void infoNamesTheLauncher() {
        assertThat(sandbox.info()).containsEntry("launcher", "codeexec-helper").doesNotContainKey("launcherNote")
                .containsEntry("spawn", "posix_spawn");
        // every host has /sys to leave out
        assertThat((String) sandbox.info().get("mountNamespace")).matches("\\d+ of the host's \\d+ mounts");
    }

    /**
     * A run that binds something from under a mount the sandboxes' namespace leaves out (here sysfs) starts in the
     * server's namespace instead, where bwrap finds it.
     */
    @Test
    void aBindFromALeftOutMountStillWorks() throws Exception {
        SandboxSpec s = SandboxSpec.builder(runId(), List.of("/bin/ls", "/sys/kernel"), "/work", limits())
                .readOnlyDirs(List.of(Path.of("/sys/kernel"))).env(ENV).build();
        Result r = run(sandbox, s);
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out().lines().toList()).contains("mm");
    }

    @Test
    void runsAsTheUnprivilegedUidWithoutCapabilities() throws Exception {
        Result r = run(sandbox, spec("/bin/sh", "-c",
                "id -u; id -g; id -G; uname -n; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status"));
        assertThat(r.out().lines().toList()).containsExactly("65534", "65534", "65534", "sandbox",
                "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1");
    }

    /**
     * The kernel counts epoll watches, inotify instances, pipe buffers and processes per host uid: two sandboxes
     * at once run as two host uids of SANDBOX_UID_RANGE (each sees 65534 inside), so neither can use up the other's.
     */
    @Test
    void sandboxesAtTheSameTimeRunAsHostUidsOfTheirOwn() throws Exception {
        SandboxProcess a = sandbox.start(spec("/bin/sh", "-c", "id -u; read x"));
        SandboxProcess b = sandbox.start(spec("/bin/sh", "-c", "id -u; read x"));
        try (a; b) {
            assertThat(firstLine(a)).as("the uid seen inside").isEqualTo("65534");
            assertThat(firstLine(b)).as("the uid seen inside").isEqualTo("65534");
            List<Long> hostUids = new ArrayList<>();
            for (long pid : processesOfSandboxUid()) {
                List<String> status;
                try {
                    status = Files.readAllLines(Path.of("/proc/" + pid + "/status"));
                } catch (java.nio.file.NoSuchFileException ended) {
                    continue; // a short-lived child (id -u) that ended after it was listed; both shells live on
                }
                for (String line : status)
                    if (line.startsWith("Uid:")) hostUids.add(Long.parseLong(line.split("\\s+")[1]));
            }
            assertThat(new java.util.TreeSet<>(hostUids)).as("host uids of the two sandboxes' processes").hasSize(2)
                    .allSatisfy(u -> assertThat(u).isBetween((long) Sandboxes.AUTO_FIRST, Sandboxes.AUTO_FIRST + 65535L));
        }
    }

    @Test
    void aBackgroundJobsSandboxRunsAtALowerPriorityItsSessionIncludedAndAnInteractiveOneDoesNot() throws Exception {
        // field 19 of /proc/PID/stat is the nice value; /proc/self/autogroup (where the kernel has autogroups) the
        // session's, which the scheduler weighs against other sessions (every sandbox is one) before nice counts
        String show = "awk '{print \"nice \" $19}' /proc/self/stat; cat /proc/self/autogroup 2>/dev/null || echo no-autogroup";
        Result job = run(sandbox, SandboxSpec.builder(runId(), List.of("/bin/sh", "-c", show), "/work", limits())
                .background(true).build());
        Result call = run(sandbox, SandboxSpec.builder(runId(), List.of("/bin/sh", "-c", show), "/work", limits()).build());
        assertThat(job.out()).as(job.err()).startsWith("nice " + Launcher.BACKGROUND_NICE + "\n");
        assertThat(call.out()).startsWith("nice 0\n");
        if (!job.out().contains("no-autogroup")) {
            assertThat(job.out()).contains("nice " + Launcher.BACKGROUND_NICE + "\n").containsPattern("/autogroup-\\d+ nice 10");
            assertThat(call.out()).containsPattern("/autogroup-\\d+ nice 0");
        }
    }

    @Test
    void environmentIsExactlyWhatTheSpecGives() throws Exception {
        Result r = run(sandbox, SandboxSpec.builder(runId(), List.of("/bin/sh", "-c", "tr '\\0' '\\n' < /proc/self/environ; echo ---; tr '\\0' '\\n' < /proc/1/environ"), "/work", limits())
                .env(Map.of("PATH", "/usr/bin:/bin", "FOO", "bar")).build());
        String[] parts = r.out().split("---\n");
        // sh adds PWD to what it exports; nothing else may appear
        assertThat(parts[0].lines().filter(l -> !l.startsWith("PWD=")).sorted().toList())
                .containsExactly("FOO=bar", "PATH=/usr/bin:/bin");
        for (Map.Entry<String, String> host : System.getenv().entrySet()) {
            if (host.getKey().equals("PATH") || host.getValue().length() < 3) continue;
            assertThat(r.out()).as("host variable %s", host.getKey()).doesNotContain(host.getKey() + "=" + host.getValue());
        }
        assertThat(r.out()).doesNotContain("HOME=/root").doesNotContain("API_KEY");
    }

    @Test
    void hasNoNetworkNotEvenTheHostLoopback() throws Exception {
        try (ServerSocket server = new ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress())) {
            String py = """
                    import socket, os
                    s = socket.socket(); s.settimeout(2)
                    try:
                        s.connect(("127.0.0.1", %d)); print("CONNECTED")
                    except OSError as e:
                        print("refused", e.errno)
                    print(sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]))
                    print("routes", open("/proc/net/route").read().splitlines()[1:])
                    """.formatted(server.getLocalPort());
            Result r = run(sandbox, spec(PY, "-c", py));
            // no interface but lo and no route: nothing off this machine is reachable (shown without aiming at it)
            assertThat(r.out()).doesNotContain("CONNECTED").contains("refused").contains("['lo']").contains("routes []");
        }
    }

    @Test
    void seesNoSecretsOrPrivateHostDirectories() throws Exception {
        Result r = run(sandbox, spec("/bin/sh", "-c",
                "for p in /etc/shadow /etc/gshadow /etc/sudoers /etc/ssl/private /etc/machine-id /root /home /var /srv " + dataDir
                        + " /work/briefs; do if [ -e $p ]; then echo \"VISIBLE $p\"; fi; done;"
                        + " ls -A /work | wc -l; test -r /etc/passwd && echo passwd-ok;"
                        + " test -r /etc/ssl/certs/ca-certificates.crt && echo certs-ok; date +%Z"));
        assertThat(r.out()).doesNotContain("VISIBLE").contains("passwd-ok", "certs-ok");
        assertThat(r.out().lines().findFirst()).hasValue("0");
    }

    @Test
    void seesNoHostProcesses() throws Exception {
        String py = """
                import os
                pids = [p for p in os.listdir("/proc") if p.isdigit()]
                cmds = [open(f"/proc/{p}/cmdline", "rb").read().replace(b"\\0", b" ").decode() for p in pids]
                print(len(pids)); print(cmds)
                """;
        Result r = run(sandbox, spec(PY, "-c", py));
        int count = Integer.parseInt(r.out().lines().findFirst().orElseThrow());
        assertThat(count).isLessThanOrEqualTo(3); // bwrap's init, python (and maybe a transient child)
        assertThat(r.out()).doesNotContain("java").doesNotContain("surefire");
    }

    @Test
    void writesOnlyToTheWorkDirAndTmp() throws Exception {
        Result r = run(sandbox, spec("/bin/sh", "-c",
                "for f in /usr/x /etc/x /x /bin/x /dev/x /proc/x /work/ok /tmp/ok /dev/shm/ok /dev/null; do"
                        + " if (echo x > $f) 2>/dev/null; then echo \"wrote $f\"; else echo \"denied $f\"; fi; done"));
        assertThat(r.out().lines().toList()).containsExactly("denied /usr/x", "denied /etc/x", "denied /x",
                "denied /bin/x", "denied /dev/x", "denied /proc/x", "wrote /work/ok", "wrote /tmp/ok",
                "wrote /dev/shm/ok", "wrote /dev/null");
    }

    @Test
    void killMinusOneInsideDoesNotReachHostProcessesOfTheSameUid() throws Exception {
        Process victim = new ProcessBuilder("/usr/bin/setpriv", "--reuid=" + UID, "--regid=" + UID,
                "--clear-groups", "--", "/bin/cat").start();
        try {
            Result r = run(sandbox, spec("/bin/sh", "-c", "kill -9 -1; echo done"));
            assertThat(r.exit()).isIn(0, 137);
            // kill(2) had queued its signals before the sandbox ended: a victim it reached could not echo now.
            victim.getOutputStream().write("still here\n".getBytes(StandardCharsets.UTF_8));
            victim.getOutputStream().flush();
            assertThat(new BufferedReader(new InputStreamReader(victim.getInputStream(), StandardCharsets.UTF_8)).readLine())
                    .as("host process of uid 65534 survives kill -9 -1 in the sandbox").isEqualTo("still here");
        } finally {
            victim.destroyForcibly().waitFor();
        }
    }

    @Test
    void ptraceIsRefused() throws Exception {
        String py = """
                import ctypes, os
                libc = ctypes.CDLL(None, use_errno=True)
                print("traceme", libc.ptrace(0, 0, 0, 0), ctypes.get_errno())
                pid = os.fork()
                if pid == 0:
                    import time; time.sleep(5); os._exit(0)
                print("attach", libc.ptrace(16, pid, 0, 0), ctypes.get_errno())
                os.kill(pid, 9)
                """;
        Result r = run(sandbox, spec(PY, "-c", py));
        assertThat(r.out()).contains("traceme -1 1").contains("attach -1 1");
    }

    @Test
    void nestedNamespacesAreRefused() throws Exception {
        String py = """
                import ctypes, subprocess
                libc = ctypes.CDLL(None, use_errno=True)
                CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
                print("clone_newuser", libc.syscall(56, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0), ctypes.get_errno())
                print("unshare", libc.unshare(CLONE_NEWUSER), ctypes.get_errno())
                print("setns", libc.setns(0, 0), ctypes.get_errno())
                print("mount", libc.mount(b"none", b"/tmp", b"tmpfs", 0, None), ctypes.get_errno())
                print("clone3", libc.syscall(435, 0, 0), ctypes.get_errno())
                print("cli", subprocess.run(["/usr/bin/unshare", "-U", "true"], capture_output=True).returncode)
                """;
        Result r = run(sandbox, spec(PY, "-c", py));
        assertThat(r.out()).contains("clone_newuser -1 1", "unshare -1 1", "setns -1 1", "mount -1 1",
                "clone3 -1 38");
        assertThat(r.out()).doesNotContain("cli 0");
    }

    /**
     * The network namespace covers IP but not vsock (the hypervisor's services on a VM host) or the kernel's crypto
     * sockets: only the families the runtimes need can be created. Never connects anywhere: creating is enough.
     */
    @Test
    void onlyUnixIpAndNetlinkSocketsCanBeCreatedNotVsock() throws Exception {
        String py = """
                import socket
                for name, fam in [("unix", 1), ("inet", 2), ("inet6", 10), ("netlink", 16), ("vsock", 40),
                                  ("alg", 38), ("packet", 17), ("bluetooth", 31)]:
                    try:
                        # a refused family fails in seccomp before its type is looked at
                        s = socket.socket(fam, socket.SOCK_RAW if fam == 16 else socket.SOCK_STREAM)
                        s.close()
                        print(name, "created")
                    except OSError as e:
                        print(name, e.errno)
                a, b = socket.socketpair(socket.AF_UNIX)
                print("socketpair unix created")
                """;
        Result r = run(sandbox, spec(PY, "-c", py));
        assertThat(r.out()).contains("unix created", "inet created", "inet6 created", "netlink created",
                "vsock 97", "alg 97", "packet 97", "bluetooth 97", "socketpair unix created");
    }

    @Test
    void theSeccompAndFileDescriptorsAreNotInheritedByTheProgram() throws Exception {
        Path code = Files.createTempFile("code-", ".sh");
        Files.writeString(code, "sleep 2 & p=$!; sleep 0.3; ls /proc/$p/fd; kill $p\n");
        try {
            SandboxSpec s = SandboxSpec.builder(runId(), List.of("/bin/sh", "/work/main.sh"), "/work", limits())
                    .readOnlyFiles(Map.of("/work/main.sh", code)).env(ENV).build();
            Result r = run(sandbox, s);
            assertThat(r.out().lines().toList()).containsExactly("0", "1", "2");
        } finally {
            Files.delete(code);
        }
    }

    @Test
    void readOnlyFilesAndDirectoriesAreReadableButNotWritable() throws Exception {
        Path code = Files.createTempFile("code-", ".py");
        Files.setPosixFilePermissions(code, PosixFilePermissions.fromString("rw-------")); // root-only on the host
        Files.writeString(code, "# marker\nprint(open('/work/main.py').read().count('mark' + 'er'))\n");
        Path dir = Files.createTempDirectory(Path.of("/tmp"), "ro-dir-");
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        Files.writeString(dir.resolve("data.txt"), "shared\n");
        Files.setPosixFilePermissions(dir.resolve("data.txt"), PosixFilePermissions.fromString("rw-r--r--"));
        try {
            SandboxSpec s = SandboxSpec.builder(runId(), List.of("/bin/sh", "-c", PY + " /work/main.py; cat " + dir + "/data.txt; (echo x >> /work/main.py) 2>/dev/null || echo ro-file;" + " (echo x > " + dir + "/new) 2>/dev/null || echo ro-dir"), "/work", limits())
                    .readOnlyFiles(Map.of("/work/main.py", code)).readOnlyDirs(List.of(dir)).env(ENV).build();
            Result r = run(sandbox, s);
            assertThat(r.out().lines().toList()).containsExactly("1", "shared", "ro-file", "ro-dir");
        } finally {
            Files.delete(code);
            DataDir.deleteTree(dir);
        }
    }

    @Test
    void forkBombIsStoppedByThePidsLimit() throws Exception {
        Limits l = new Limits(Duration.ofSeconds(20), 10, 256L << 20, 32, 1 << 20, 16L << 20);
        String py = """
                import os, time
                n = 0
                try:
                    while True:
                        if os.fork() == 0:
                            time.sleep(100); os._exit(0)
                        n += 1
                except OSError as e:
                    print(n, e.errno)
                """;
        Result r = run(sandbox, spec(l, PY, "-c", py));
        String[] f = r.out().trim().split(" ");
        assertThat(Integer.parseInt(f[0])).isLessThan(32);
        assertThat(f[1]).isEqualTo("11"); // EAGAIN

        try (SandboxProcess p = sandbox.start(spec(l, "/bin/sh", "-c", "b() { b | b & }; b; sleep 100"))) {
            assertThat(p.waitFor(Duration.ofMillis(1500))).as("the bomb keeps running, contained").isFalse();
            assertThat(processesOfSandboxUid().size()).isLessThanOrEqualTo(32 + 2);
        }
    }

    @Test
    void memoryHogIsKilledAndReportedAsMemoryLimit() throws Exception {
        Limits l = new Limits(Duration.ofSeconds(20), 10, 64L << 20, 32, 1 << 20, 16L << 20);
        Result r = run(sandbox, spec(l, PY, "-c", "x = []\nwhile True: x.append(bytearray(1 << 20))"));
        assertThat(r.exit()).isEqualTo(137);
        assertThat(r.process().memoryLimitHit()).isTrue();
        assertThat(r.process().cpuLimitHit()).isFalse();
        assertThat(r.process().peakMemoryBytes()).isPresent();
        assertThat(r.process().peakMemoryBytes().getAsLong()).isGreaterThan(32L << 20);
    }

    @Test
    void hugeAllocationFailsCleanly() throws Exception {
        Limits l = new Limits(Duration.ofSeconds(20), 10, 64L << 20, 32, 1 << 20, 16L << 20);
        Result r = run(sandbox, spec(l, PY, "-c", "b = bytearray(8 << 30)\nprint('ALLOCATED')"));
        assertThat(r.out()).doesNotContain("ALLOCATED");
        assertThat(r.exit()).isNotZero();
        assertThat(r.err().contains("MemoryError") || r.process().memoryLimitHit()).isTrue();
        assertThat(run(sandbox, spec("/bin/echo", "still fine")).out()).isEqualTo("still fine\n");
    }

    @Test
    void diskFillStopsAtTheTmpfsCap() throws Exception {
        Limits l = new Limits(Duration.ofSeconds(20), 10, 256L << 20, 32, 1 << 20, 8L << 20);
        String py = """
                import os
                for d in ["/work", "/tmp"]:
                    written = 0
                    try:
                        for i in range(100):
                            with open(f"{d}/f{i}", "wb") as f:
                                f.write(b"x" * (1 << 20)); f.flush(); os.fsync(f.fileno())
                            written += 1
                    except OSError as e:
                        print(d, written, e.errno)
                """;
        Result r = run(sandbox, spec(l, PY, "-c", py));
        List<String> lines = r.out().lines().toList();
        assertThat(lines).hasSize(2);
        for (String line : lines) {
            String[] f = line.split(" ");
            assertThat(Integer.parseInt(f[1])).isLessThanOrEqualTo(8);
            assertThat(f[2]).isEqualTo("28"); // ENOSPC
        }
    }

    @Test
    void busyLoopHitsTheCpuLimit() throws Exception {
        Limits l = new Limits(Duration.ofSeconds(20), 1, 256L << 20, 32, 1 << 20, 16L << 20);
        Result r = run(sandbox, spec(l, PY, "-c", "while True: pass"));
        assertThat(r.exit()).isEqualTo(128 + 24);
        assertThat(r.process().cpuLimitHit()).isTrue();
        assertThat(r.process().memoryLimitHit()).isFalse();
        assertThat(r.process().cpuTimeMs()).isPresent();
        assertThat(r.process().cpuTimeMs().getAsDouble()).isGreaterThanOrEqualTo(900);
    }

    @Test
    void backgroundProcessesDoNotOutliveTheRun() throws Exception {
        Result r = run(sandbox, spec("/bin/sh", "-c",
                "setsid nohup sleep 1000 >/dev/null 2>&1 & nohup sleep 1000 >/dev/null 2>&1 & echo started"));
        assertThat(r.out()).isEqualTo("started\n");
        // @AfterEach: no process of the sandbox uid remains
    }

    @Test
    void killEndsTheWholeTreeAndCloseCleansUp() throws Exception {
        SandboxProcess p = sandbox.start(spec("/bin/sh", "-c", "sleep 1000 & sleep 1000 & echo up; wait"));
        assertThat(firstLine(p)).as("the shell forked both sleeps").isEqualTo("up");
        assertThat(processesOfSandboxUid()).hasSizeGreaterThanOrEqualTo(3);
        p.kill();
        assertThat(p.waitFor(Duration.ofSeconds(5))).isTrue();
        assertThat(p.exitCode()).isEqualTo(137);
        assertThat(p.cpuLimitHit()).isFalse();
        p.close();
        p.close(); // idempotent
    }

    @Test
    void killRightAfterStartLeavesNothing() throws Exception {
        for (int i = 0; i < 5; i++) {
            SandboxProcess p = sandbox.start(spec("/bin/sleep", "1000"));
            p.kill();
            assertThat(p.waitFor(Duration.ofSeconds(5))).isTrue();
            assertThat(p.exitCode()).isEqualTo(137);
            p.close();
        }
    }

    @Test
    void killAndCloseCompleteOnAnInterruptedThread() throws Exception {
        SandboxProcess p = sandbox.start(spec("/bin/sh", "-c", "sleep 1000 & echo up; sleep 1000"));
        assertThat(firstLine(p)).isEqualTo("up");
        Thread.currentThread().interrupt();
        try {
            p.kill();
            p.close();
            assertThat(Thread.currentThread().isInterrupted()).as("interrupt status kept").isTrue();
        } finally {
            Thread.interrupted();
        }
        assertThat(p.exitCode()).isEqualTo(137);
    }

    @Test
    void closeWithoutWaitingKillsARunningProgram() throws Exception {
        try (SandboxProcess p = sandbox.start(spec("/bin/sleep", "1000"))) {
            assertThat(p.waitFor(Duration.ofMillis(200))).isFalse();
        }
    }

    @Test
    void nodeGoAndJavaStartUnderTheSeccompFilter() throws Exception {
        String js = """
                const { Worker } = require('worker_threads');
                const w = new Worker('require("worker_threads").parentPort.postMessage(6*7)', { eval: true });
                w.on('message', m => { console.log('node', m); w.terminate(); });
                require('child_process').exec('echo child', (e, out) => console.log(out.trim()));
                """;
        Result node = run(sandbox, spec("/usr/bin/node", "-e", js));
        assertThat(node.out()).contains("node 42").contains("child");
        Result go = run(sandbox, spec("/usr/lib/go-1.23/bin/go", "version"));
        assertThat(go.exit()).isZero();
        assertThat(go.out()).startsWith("go version go1.23");
        Result java = run(sandbox, spec("/usr/lib/jvm/temurin-25-jdk-amd64/bin/java", "-Xshare:auto", "-XX:+UseSerialGC",
                "-Xmx64m", "-XshowSettings:properties", "-version"));
        assertThat(java.exit()).as(java.err()).isZero();
        assertThat(java.err()).contains("java.version = 25").contains("user.name = nobody");
    }

    /** A cold {@code go run} (empty build cache: compiles the runtime, many threads and processes). */
    @Test
    void goRunBuildsAndRunsUnderTheSeccompFilter() throws Exception {
        Path code = Files.createTempFile("main-", ".go");
        Files.writeString(code, "package main\nimport \"fmt\"\nfunc main() { fmt.Println(\"hello from go\") }\n");
        try {
            Limits l = new Limits(Duration.ofSeconds(120), 120, 2048L << 20, 256, 1 << 20, 512L << 20);
            Map<String, String> env = Map.of("PATH", "/usr/lib/go-1.23/bin:/usr/bin:/bin", "HOME", "/tmp",
                    "GOCACHE", "/tmp/gocache", "GOPATH", "/tmp/gopath", "GOTOOLCHAIN", "local", "GOTELEMETRY", "off",
                    "CGO_ENABLED", "0");
            Result r = run(sandbox, SandboxSpec.builder(runId(), List.of("/usr/lib/go-1.23/bin/go", "run", "/work/main.go"), "/work", l)
                    .readOnlyFiles(Map.of("/work/main.go", code)).env(env).build(), "", Duration.ofSeconds(120));
            assertThat(r.exit()).as(r.err()).isZero();
            assertThat(r.out()).isEqualTo("hello from go\n");
        } finally {
            Files.delete(code);
        }
    }

    @Test
    void rejectsBadSpecsWithoutLeavingAnything() {
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> sandbox.start(SandboxSpec.builder(runId(), List.of("/bin/true"), "work/relative", limits())
                .env(ENV).build()))
                .isInstanceOf(SandboxException.class).hasMessageContaining("absolute");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> sandbox.start(SandboxSpec.builder(runId(), List.of("/bin/true"), "/usr/lib", limits())
                .env(ENV).build()))
                .isInstanceOf(SandboxException.class).hasMessageContaining("system directory");
        Map<String, Path> many = new java.util.HashMap<>();
        for (int i = 0; i < 5; i++) many.put("/work/f" + i, Path.of("/etc/hostname"));
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> sandbox.start(SandboxSpec.builder(runId(), List.of("/bin/true"), "/work", limits())
                .readOnlyFiles(many).env(ENV).build()))
                .isInstanceOf(SandboxException.class).hasMessageContaining("at most 4");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> sandbox.start(SandboxSpec.builder(runId(), List.of("/bin/true"), "/work", limits())
                .env(Map.of("A=B", "x")).build()))
                .isInstanceOf(SandboxException.class).hasMessageContaining("environment");
    }

    @Test
    void withoutCgroupsMemoryFallsBackToRlimitAs() throws Exception {
        BwrapSandbox rlimits = new BwrapSandbox(UID, UID, dataDir, Cgroups.none("test").withoutWatchdog());
        assertThat(rlimits.unavailableReason()).isEmpty();
        assertThat(rlimits.info()).containsEntry("cgroup", "none(rlimits)").containsEntry("cgroupNote", "test");
        Limits l = new Limits(Duration.ofSeconds(20), 10, 128L << 20, 32, 1 << 20, 16L << 20);
        Result r = run(rlimits, spec(l, "/bin/sh", "-c", "ulimit -v; " + PY + " -c 'b = bytearray(512 << 20)'"));
        assertThat(r.out()).isEqualTo((128 << 10) + "\n");
        assertThat(r.err()).contains("MemoryError");
        assertThat(r.process().memoryLimitHit()).isFalse();
    }

    /**
     * Without cgroups the watchdog holds the run's memory as a whole: eight processes of 48 MiB each stay under
     * RLIMIT_AS one by one, but not under the run's 128 MiB together; the run is killed and says memory_limit.
     */
    @Test
    void withoutCgroupsTheWatchdogKillsARunWhoseProcessesTogetherPassTheLimit() throws Exception {
        BwrapSandbox watched = new BwrapSandbox(UID, UID, dataDir, Cgroups.none("test"));
        assertThat(watched.limitGuarantees().get("memory")).contains("watchdog");
        Limits l = new Limits(Duration.ofSeconds(30), 20, 128L << 20, 32, 1 << 20, 16L << 20);
        String hog = "import os, time\nfor i in range(8):\n    if os.fork() == 0:\n        b = bytearray(48 << 20)\n"
                + "        for j in range(0, len(b), 4096): b[j] = 1\n        time.sleep(30); os._exit(0)\n"
                + "for i in range(8): os.wait()\nprint('all eight lived')\n";
        long t0 = System.nanoTime();
        Result r = run(watched, spec(l, PY, "-c", hog));
        assertThat(r.out()).doesNotContain("all eight lived");
        assertThat(r.process().memoryLimitHit()).as("reported as the memory limit").isTrue();
        assertThat(r.process().peakMemoryBytes().orElse(0)).isGreaterThan(128L << 20);
        assertThat(System.nanoTime() - t0).as("killed, not timed out").isLessThan(Duration.ofSeconds(25).toNanos());
        // a run under its limit is left alone, and what it used is reported
        Result small = run(watched, spec(l, PY, "-c", "b = bytearray(32 << 20)\nfor j in range(0, len(b), 4096): b[j] = 1\n"
                + "import time; time.sleep(0.3); print('ok')"));
        assertThat(small.out()).isEqualTo("ok\n");
        assertThat(small.process().memoryLimitHit()).isFalse();
        assertThat(small.process().peakMemoryBytes().orElse(0)).isGreaterThan(30L << 20);
    }

    /**
     * Shared memory is memory too (finding 4 of issue 35: twelve memfds of 256 MiB held 3 GiB past a 512 MiB limit,
     * reported as a 4 MiB peak). Without cgroups the watchdog counts memfds held open, mapped or not, shared
     * mappings (anonymous, SysV, memfds whose descriptor was closed) and the files of the run's tmpfs mounts: each
     * of these runs holds 150 to 200 MiB against its 128 MiB, in pieces under every per-process and per-file limit,
     * and is killed as over its memory limit. A run under the limit keeps running, and its peak includes them.
     */
    @Test
    void withoutCgroupsTheWatchdogCountsMemfdsSharedMappingsAndTmpfsFiles() throws Exception {
        BwrapSandbox watched = new BwrapSandbox(UID, UID, dataDir, Cgroups.none("test"));
        Limits l = new Limits(Duration.ofSeconds(30), 20, 128L << 20, 32, 1 << 20, 64L << 20);
        String prelude = String.join("\n",
                "import ctypes, mmap, os, time",
                "def touch(m):",
                "    for i in range(0, len(m), 4096): m[i] = 1",
                "");
        String outlived = "\nprint('allocated', flush=True); time.sleep(20); print('outlived the watchdog')\n";
        Map<String, String> hogs = new java.util.LinkedHashMap<>();
        hogs.put("memfds held open, never mapped", "fds = [os.memfd_create('m%d' % i) for i in range(12)]\n"
                + "for fd in fds: os.posix_fallocate(fd, 0, 16 << 20)");
        hogs.put("memfds mapped, their descriptors closed", "maps = []\nfor i in range(8):\n"
                + "    fd = os.memfd_create('m%d' % i); os.ftruncate(fd, 24 << 20); m = mmap.mmap(fd, 24 << 20)\n"
                + "    os.close(fd); touch(m); maps.append(m)");
        hogs.put("a shared anonymous mapping and an attached SysV segment", "a = mmap.mmap(-1, 96 << 20); touch(a)\n"
                + "libc = ctypes.CDLL(None, use_errno=True); libc.shmat.restype = ctypes.c_void_p\n"
                + "seg = libc.shmget(0, 96 << 20, 0o600); assert seg >= 0, ctypes.get_errno()\n"
                + "addr = libc.shmat(seg, None, 0); ctypes.memset(addr, 1, 96 << 20)");
        hogs.put("files in /dev/shm, /tmp and the working directory", "for d in ('/dev/shm', '/tmp', '/work'):\n"
                + "    with open(d + '/fill', 'wb') as f: f.write(b'x' * (50 << 20))");
        for (Map.Entry<String, String> hog : hogs.entrySet()) {
            Result r = run(watched, spec(l, PY, "-c", prelude + hog.getValue() + outlived));
            assertThat(r.out()).as(hog.getKey() + ": " + r.err()).doesNotContain("outlived");
            assertThat(r.process().memoryLimitHit()).as(hog.getKey() + ": reported as the memory limit").isTrue();
            assertThat(r.process().peakMemoryBytes().orElse(0)).as(hog.getKey()).isGreaterThan(128L << 20);
        }
        // under the limit: it runs on until the watchdog has seen what it holds, then ends as it likes
        try (SandboxProcess p = watched.start(spec(l, PY, "-c", prelude + String.join("\n",
                "import sys",
                "fd = os.memfd_create('m'); os.posix_fallocate(fd, 0, 32 << 20)",
                "a = mmap.mmap(-1, 16 << 20); touch(a)",
                "for d in ('/dev/shm', '/tmp'):",
                "    with open(d + '/fill', 'wb') as f: f.write(b'x' * (16 << 20))",
                "print('allocated', flush=True); sys.stdin.read(); print('ok')")))) {
            BufferedReader out = new BufferedReader(new InputStreamReader(p.stdout(), StandardCharsets.UTF_8));
            assertThat(out.readLine()).isEqualTo("allocated");
            long seen = dev.codeexec.testing.Poll.until("the watchdog counting 32 + 16 + 16 + 16 MiB",
                    () -> p.memoryBytes().orElse(0), b -> b >= 80L << 20);
            assertThat(seen).as("and not much more").isLessThan(120L << 20);
            p.stdin().close();
            assertThat(out.readLine()).isEqualTo("ok");
            assertThat(p.waitFor(Duration.ofSeconds(10))).isTrue();
            assertThat(p.exitCode()).isZero();
            assertThat(p.memoryLimitHit()).isFalse();
            assertThat(p.peakMemoryBytes().orElse(0)).isGreaterThanOrEqualTo(80L << 20);
        }
    }

    /**
     * A run the watchdog could only measure slowly (each open descriptor costs a pass a statx) is ended as over its
     * limit once its processes hold more than it looks at in one pass: 5 processes of 3,500 descriptors each would
     * have taken every pass about 70 ms, and 128 processes of 4,096 seconds, during which the run went unmeasured.
     */
    @Test
    void withoutCgroupsARunWithMoreDescriptorsThanAPassLooksAtIsEndedAsOverItsLimit() throws Exception {
        BwrapSandbox watched = new BwrapSandbox(UID, UID, dataDir, Cgroups.none("test"));
        Limits l = new Limits(Duration.ofSeconds(30), 20, 256L << 20, 32, 1 << 20, 64L << 20);
        String code = String.join("\n",
                "import os, time",
                "r, w = os.pipe()",
                "for i in range(4):",
                "    if os.fork() == 0: break",
                "fds = [os.dup(r) for _ in range(3500)]",
                "print('held', flush=True)",
                "time.sleep(20)",
                "print('outlived the watchdog', flush=True)");
        Result r = run(watched, spec(l, PY, "-c", code));
        assertThat(r.out()).as(r.err()).contains("held").doesNotContain("outlived");
        assertThat(r.process().memoryLimitHit()).as("reported as the memory limit").isTrue();
        // the same run with a tenth of the descriptors is measured, and left alone
        try (SandboxProcess p = watched.start(spec(l, PY, "-c", code.replace("range(3500)", "range(350)")
                .replace("time.sleep(20)", "import sys; sys.stdin.read()")))) {
            BufferedReader out = new BufferedReader(new InputStreamReader(p.stdout(), StandardCharsets.UTF_8));
            for (int i = 0; i < 5; i++) assertThat(out.readLine()).isEqualTo("held");
            dev.codeexec.testing.Poll.until("the watchdog measured it", () -> p.memoryBytes().orElse(0), b -> b > 0);
            p.stdin().close();
            assertThat(out.readLine()).isEqualTo("outlived the watchdog");
            assertThat(p.waitFor(Duration.ofSeconds(10))).isTrue();
            assertThat(p.memoryLimitHit()).isFalse();
        }
    }

    @Test
    void refusesUidZero() {
        assertThat(new BwrapSandbox(0, 0, dataDir).unavailableReason()).hasValueSatisfying(
                r -> assertThat(r).contains("must not be 0"));
    }

    /** The first line the sandboxed program writes to stdout (it says how far the program has got). */
    private static String firstLine(SandboxProcess p) throws IOException {
        return new BufferedReader(new InputStreamReader(p.stdout(), StandardCharsets.UTF_8)).readLine();
    }
}
