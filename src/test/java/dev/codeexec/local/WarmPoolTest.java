package dev.codeexec.local;

import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.testing.Poll;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.Workspaces;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static dev.codeexec.local.TestSupport.await;
import static dev.codeexec.local.TestSupport.request;
import static dev.codeexec.local.WarmRuns.assertWarmGivesWhatColdGives;
import static dev.codeexec.local.WarmRuns.run;
import static dev.codeexec.local.WarmRuns.served;
import static dev.codeexec.local.WarmRuns.warm;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The warm pool in the real sandbox: warm runs give what cold runs give, nothing passes from one warm run to the
 * next, the limits of a cold run hold, workspaces are bound late, and nothing is left when the executor closes.
 * Whether a run was warm is read from the pool's counters ({@code served}).
 */
@Tag("sandbox")
@Timeout(value = 180, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class WarmPoolTest {

    @TempDir
    Path tmp;
    private final List<LocalExecutor> executors = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        executors.forEach(LocalExecutor::close);
        Poll.until("no warm sandbox of this JVM after the executors closed", WarmPoolTest::warmSandboxes,
                List::isEmpty);
    }

    private LocalExecutor executor(String... pairs) throws Exception {
        return WarmRuns.executor(executors, Sandbox::supportsControl, "a sandbox with a control channel (bwrap)", TestSupport.config(pairs));
    }

    @Test
    void warmAndColdRunsGiveTheSameResults() throws Exception {
        LocalExecutor hot = executor("WARM_POOL", "python=1,nodejs=1");
        LocalExecutor cold = executor("WARM_POOL", "off");
        assertThat(cold.warmPoolInfo()).containsEntry("enabled", false);
        List<ExecutionRequest> cases = List.of(
                request(hot.config, "python", "import sys\nprint('hi', sys.argv[1:], __name__)\nprint(sys.stdin.read().upper())\nsys.exit(3)",
                        "some input", List.of("a", "b c"), Map.of(), null),
                request(hot.config, "python", "def f():\n    return 1/0\nf()"),
                request(hot.config, "python", "import os\nprint(os.getcwd(), sorted(os.listdir('.')), os.getuid())"),
                request(hot.config, "nodejs", "console.log('hi', process.argv.slice(2), require.main === module);"
                        + "process.stdin.on('data', d => console.log(String(d).toUpperCase()));", "input", List.of("x"),
                        Map.of(), null),
                request(hot.config, "nodejs", "setTimeout(() => { console.error('late'); process.exit(4); }, 10);"));
        assertWarmGivesWhatColdGives(hot, cold, cases);
    }

    /**
     * Shell, bash and a compiled language have no warm interpreter: their pooled sandboxes wait at their init for
     * the run's whole command (init --await-exec), and a run there gives what a cold run gives, its limits included.
     * TypeScript has one (Node, given the JavaScript made ahead or making it): the same holds for it.
     */
    @Test
    void languagesWithoutAWarmInterpreterGetSandboxesThatWaitForTheirCommand() throws Exception {
        LocalExecutor hot = executor("WARM_POOL", "shell=1,bash=1,c=1,typescript=1", "CPU_LIMIT_SECONDS", "2",
                "MAX_PROCESSES", "32");
        LocalExecutor cold = executor("WARM_POOL", "off", "CPU_LIMIT_SECONDS", "2", "MAX_PROCESSES", "32");
        @SuppressWarnings("unchecked")
        Map<String, Map<String, Object>> langs = (Map<String, Map<String, Object>>) hot.warmPoolInfo().get("languages");
        assertThat(langs.get("shell")).containsEntry("kind", "waiting sandbox");
        assertThat(langs.get("typescript")).containsEntry("kind", "interpreter");
        assertThat(((Number) langs.get("shell").get("idleMemoryBytes")).longValue()).as("an idle waiting sandbox")
                .isPositive().isLessThan(langs.get("typescript").get("idleMemoryBytes") instanceof Number n
                        ? n.longValue() : Long.MAX_VALUE);
        List<ExecutionRequest> cases = List.of(
                request(hot.config, "shell", "echo \"$0\" \"$#\" \"$1\"; pwd; ls /proc/self/fd; id -u; ulimit -t; "
                        + "tr a-z A-Z; ls -l \"$0\" | cut -c1-10; exit 3", "some input\n", List.of("a b", "c"), Map.of(), null),
                request(hot.config, "bash", "echo \"${BASH_VERSINFO[0]}\" \"$@\"; ls /proc/self/fd; echo oops >&2; false",
                        "", List.of("x"), Map.of(), null),
                request(hot.config, "c", "#include <stdio.h>\nint main(int c, char **v) { printf(\"%d %s\\n\", c, v[1]); "
                        + "return 4; }\n", "", List.of("arg"), Map.of(), null),
                request(hot.config, "c", "int main(void) { return undefined_name; }\n"),
                // typescript's warm runner gets the JavaScript made ahead by the tenant's stripper, or makes it
                request(hot.config, "typescript", "import * as fs from 'fs';\nconst n: number = 6 * 7;\n"
                        + "console.log(n, process.argv.slice(2), require.main === module, fs.readFileSync(0, 'utf8'));\n"
                        + "process.exitCode = 5;\n", "typed input", List.of("t"), Map.of(), null),
                request(hot.config, "typescript", "const x: number = ;\n"));
        assertWarmGivesWhatColdGives(hot, cold, cases);
        assertThat(warm(hot, request(hot.config, "shell", "ls /proc/self/fd")).stdout())
                .as("the control channel is closed before the command starts").isEqualTo("0\n1\n2\n3\n");
        ExecutionResult cpu = warm(hot, request(hot.config, "shell", "while :; do :; done", "", List.of(), Map.of(), 20_000L));
        assertThat(cpu.outcome()).as("the run's CPU limit, not the start-up allowance").isEqualTo(Outcome.CPU_LIMIT);
        ExecutionResult timeout = warm(hot, request(hot.config, "bash", "sleep 30", "", List.of(), Map.of(), 1500L));
        assertThat(timeout.outcome()).isEqualTo(Outcome.TIMEOUT);
        ExecutionResult fork = warm(hot, request(hot.config, "shell",
                "i=0; while [ $i -lt 100 ]; do sleep 5 & i=$((i+1)); done; echo all started"));
        assertThat(fork.stdout()).as("the process limit holds").isEmpty();
        assertThat(fork.stderr()).contains("fork");
    }

    @Test
    void nothingPassesFromOneWarmRunToTheNext() throws Exception {
        LocalExecutor e = executor("WARM_POOL", "python=2");
        String spoil = """
                import builtins, json, os, random, sys
                builtins.LEAK = 1
                json.LEAK = 1
                sys.modules['leaky'] = json
                os.environ['LEAK'] = '1'
                open('/tmp/leak', 'w').write('x')
                open('/work/leak', 'w').write('x')
                open('/dev/shm/leak', 'w').write('x')
                print(random.random())
                """;
        String check = """
                import builtins, json, os, random, sys
                print(hasattr(builtins, 'LEAK'), hasattr(json, 'LEAK'), 'leaky' in sys.modules, 'LEAK' in os.environ,
                      os.path.exists('/tmp/leak'), os.path.exists('/work/leak'), os.path.exists('/dev/shm/leak'))
                print(random.random())
                """;
        ExecutionResult first = warm(e, request(e.config, "python", spoil));
        ExecutionResult second = warm(e, request(e.config, "python", check));
        assertThat(first.outcome()).isEqualTo(Outcome.EXITED);
        List<String> lines = second.stdout().lines().toList();
        assertThat(lines.getFirst()).isEqualTo("False False False False False False False");
        assertThat(lines.get(1)).isNotEqualTo(first.stdout().trim());
    }

    @Test
    void limitsAndTimeoutsHoldInWarmRuns() throws Exception {
        LocalExecutor e = executor("WARM_POOL", "python=1", "CPU_LIMIT_SECONDS", "1", "MEMORY_LIMIT_MB", "128",
                "MAX_PROCESSES", "32");
        ExecutionResult timeout = warm(e, request(e.config, "python", "import time\ntime.sleep(30)", "", List.of(), Map.of(), 1500L));
        assertThat(timeout.outcome()).isEqualTo(Outcome.TIMEOUT);
        assertThat(timeout.durationMs()).isLessThan(10_000);
        // the preload allowance is gone once the code arrived: 1 s of CPU, as cold
        ExecutionResult cpu = warm(e, request(e.config, "python", "while True: pass", "", List.of(), Map.of(), 20_000L));
        assertThat(cpu.outcome()).isEqualTo(Outcome.CPU_LIMIT);
        ExecutionResult mem = warm(e, request(e.config, "python", "b = bytearray(400 << 20)\nprint(len(b))"));
        assertThat(mem.outcome()).isEqualTo(Outcome.MEMORY_LIMIT);
        ExecutionResult fork = warm(e, request(e.config, "python",
                "import os\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            import time; time.sleep(5); os._exit(0)\n        n += 1\nexcept OSError as x:\n    print('refused after', n)"));
        assertThat(fork.stdout()).startsWith("refused after");
        ExecutionResult disk = warm(e, request(e.config, "python",
                "import os\nwith open('/work/big', 'wb') as f:\n    f.write(b'x' * (600 << 20))"));
        assertThat(disk.exitCode()).isNotZero();
    }

    @Test
    void cancelKillsAWarmRunsWholeTree() throws Exception {
        LocalExecutor e = executor("WARM_POOL", "python=1");
        long before = served(e, "python");
        java.util.concurrent.CountDownLatch started = new java.util.concurrent.CountDownLatch(1);
        RunHandle h = e.submit(request(e.config, "python",
                "import subprocess, time\nsubprocess.Popen(['sleep', '300'])\nprint('up', flush=True)\ntime.sleep(300)"),
                (stream, text) -> started.countDown());
        assertThat(started.await(30, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
        assertThat(served(e, "python")).isEqualTo(before + 1);
        h.cancel();
        ExecutionResult r = await(h);
        assertThat(r.outcome()).isEqualTo(Outcome.CANCELLED);
        Poll.until("the run's child killed", () -> {
            Process ps = new ProcessBuilder("pgrep", "-u", "65534", "-f", "^sleep 300$").start();
            return new String(ps.getInputStream().readAllBytes()).trim();
        }, String::isEmpty);
    }

    @Test
    void aWorkspaceIsMountedIntoAWarmSandboxAndQuotaCapsItsFiles() throws Exception {
        LocalExecutor e = executor("WARM_POOL", "python=1");
        Files.setPosixFilePermissions(tmp, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Workspaces workspaces = new Workspaces(tmp.resolve("ws"), 1 << 20, Duration.ofHours(1), 65534, 65534);
        Workspace ws = workspaces.open("alice", "proj", true);
        ws.write(dev.codeexec.workspace.RelPath.parse("in.txt"), new java.io.ByteArrayInputStream("data".getBytes()), 1 << 20);
        ExecutionResult r = warm(e, request(e.config, "python",
                "import os\nprint(os.getcwd(), open('in.txt').read())\nopen('out.txt', 'w').write('made')").inWorkspace(ws));
        assertThat(r.stdout()).isEqualTo("/work data\n");
        assertThat(ws.fs().root().resolve("out.txt")).hasContent("made");
        assertThat(r.files()).extracting(ExecutionResult.FileArtifact::path).containsExactly("out.txt");
        ExecutionResult big = warm(e, request(e.config, "python",
                "try:\n    open('big', 'wb').write(b'x' * (4 << 20))\nexcept OSError as x:\n    print('refused', x.errno)").inWorkspace(ws));
        assertThat(big.stdout()).isEqualTo("refused 27\n"); // EFBIG: the file-size cap is the space left
        assertThat(Files.size(ws.fs().root().resolve("big"))).isLessThanOrEqualTo(1 << 20);
    }

    @Test
    void preloadedModulesAreThereWhenTheCodeStarts() throws Exception {
        LocalExecutor e = executor("WARM_POOL", "python=1", "WARM_PRELOAD_PYTHON", "json,numpy");
        ExecutionResult r = warm(e, request(e.config, "python",
                "import sys, os\nprint('numpy' in sys.modules, 'CODE_EXEC_PRELOAD' in os.environ)\nimport numpy\nprint(numpy.arange(3).sum())"));
        assertThat(r.stdout()).isEqualTo("True False\n3\n");
        assertThat(r.stderr()).isEmpty();
    }

    @Test
    void requestsThePoolCannotServeExactlyRunCold() throws Exception {
        LocalExecutor e = executor("WARM_POOL", "python=1");
        long before = served(e, "python");
        ExecutionResult r = run(e, request(e.config, "python", "import os\nprint(os.environ['MINE'])", "", List.of(),
                Map.of("MINE", "own env"), null));
        assertThat(r.stdout()).isEqualTo("own env\n");
        ExecutionResult shell = run(e, request(e.config, "shell", "echo cold"));
        assertThat(shell.stdout()).isEqualTo("cold\n");
        assertThat(served(e, "python")).isEqualTo(before);
    }

    @Test
    void anEmptyPoolMeansAColdRunNotAFailure() throws Exception {
        LocalExecutor e = executor("WARM_POOL", "python=1", "MAX_CONCURRENT", "4");
        List<RunHandle> handles = new ArrayList<>();
        for (int i = 0; i < 4; i++) handles.add(e.submit(request(e.config, "python", "print(" + i + ")"), OutputListener.NONE));
        for (int i = 0; i < 4; i++) assertThat(await(handles.get(i)).stdout()).isEqualTo(i + "\n");
        @SuppressWarnings("unchecked")
        Map<String, Object> py = (Map<String, Object>) ((Map<String, Object>) e.warmPoolInfo().get("languages")).get("python");
        assertThat(((Number) py.get("missed")).longValue() + ((Number) py.get("served")).longValue()).isEqualTo(4);
    }

    /**
     * Warm sandboxes of this JVM running now: their bwrap binds DATA_DIR/late/&lt;this pid&gt;/ (other servers and
     * test runs on the machine may have warm sandboxes of their own meanwhile).
     */
    static List<String> warmSandboxes() throws Exception {
        Process p = new ProcessBuilder("ps", "-u", "65534", "-o", "pid=,args=").start();
        String out = new String(p.getInputStream().readAllBytes());
        p.waitFor();
        String mine = "/late/" + ProcessHandle.current().pid() + "/";
        return out.lines().filter(l -> l.contains(mine)).toList();
    }
}
