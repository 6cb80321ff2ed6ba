package dev.codeexec.local;

import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.warm.WarmPool;
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
import static dev.codeexec.local.WarmRuns.languages;
import static dev.codeexec.local.WarmRuns.run;
import static dev.codeexec.local.WarmRuns.served;
import static dev.codeexec.local.WarmRuns.warm;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The warm pool under gVisor (where runsc is installed): a pre-started gVisor sandbox whose Python, Node or
 * TypeScript runner waits for its run on stdin (runsc passes no control descriptors). Warm runs give what cold gVisor runs give, nothing passes
 * from one to the next, the limits hold, runs it cannot serve start cold, and nothing is left when the executor
 * closes. Whether a run was warm is read from the pool's counters ({@code served}).
 */
@Tag("sandbox")
@Timeout(value = 180, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class GvisorWarmPoolTest {

    @TempDir
    Path tmp;
    private final List<LocalExecutor> executors = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        executors.forEach(LocalExecutor::close);
        Poll.until("no warm gVisor sandbox after the executors closed", GvisorWarmPoolTest::warmGvisorSandboxes,
                List::isEmpty);
    }

    private LocalExecutor executor(String... pairs) throws Exception {
        List<String> all = new ArrayList<>(List.of("SANDBOX", "gvisor"));
        all.addAll(List.of(pairs));
        return WarmRuns.executor(executors, sb -> true, "the gVisor sandbox",
                TestSupport.config(all.toArray(String[]::new)));
    }

    @Test
    void theInterpretersAreKeptWarmAndTheirRunsGiveWhatColdRunsGive() throws Exception {
        LocalExecutor hot = executor("WARM_POOL", "python=1,nodejs=1,typescript=1,shell=1", "CPU_LIMIT_SECONDS", "3");
        LocalExecutor cold = executor("WARM_POOL", "off", "CPU_LIMIT_SECONDS", "3");
        // the waiting sandboxes talk over fds 8 and 9, which runsc cannot pass
        assertThat(languages(hot)).containsOnlyKeys("python", "nodejs", "typescript");
        assertThat(hot.warmPoolInfo()).containsEntry("enabled", true);
        List<ExecutionRequest> cases = List.of(
                request(hot.config, "python", "import sys\nprint('hi', sys.argv[1:], __name__)\nprint(sys.stdin.read().upper())\nsys.exit(3)",
                        "some input\nand more", List.of("a", "b c"), Map.of(), null),
                request(hot.config, "python", "def f():\n    return 1/0\nf()"),
                request(hot.config, "python", "import os, stat\nprint(os.getcwd(), sorted(os.listdir('.')), os.getuid(), "
                        + "oct(stat.S_IMODE(os.stat(__file__).st_mode)), open(__file__).read() == open(__file__).read())"),
                request(hot.config, "python", "print(open('/proc/version').read().split()[2], "
                        + "open('/proc/net/route').read().splitlines()[1:])"),
                // more than a pipe's worth of code and of stdin: the message ends exactly where the input starts
                request(hot.config, "python", "import sys\ndata = sys.stdin.read()\nprint(len(data), data[:6], data[-6:], "
                        + "len(open(__file__).read()))\n#" + "c".repeat(100_000) + "\n",
                        "<head>" + "i".repeat(300_000) + "<tail>", List.of(), Map.of(), null),
                // runsc reports the CPU limit's SIGXCPU as exit code 152: both read it as the CPU limit
                request(hot.config, "python", "while True: pass", "", List.of(), Map.of(), 30_000L),
                request(hot.config, "nodejs", "let s = '';\nprocess.stdin.on('data', (d) => { s += d; }).on('end', () => {\n"
                        + "  console.log('hi', process.argv.slice(2), require.main === module, s.toUpperCase());\n"
                        + "  process.exitCode = 3;\n});\n", "some input\nand more", List.of("a", "b c"), Map.of(), null),
                // (an uncaught error's trace differs below the user's frames: RunnerScriptsTest checks those frames)
                request(hot.config, "nodejs", "console.error('to stderr');\nsetTimeout(() => process.exit(4), 10);\n"),
                request(hot.config, "nodejs", "const fs = require('fs');\nconsole.log(process.cwd(), fs.readdirSync('.').sort(), "
                        + "process.getuid(), (fs.statSync(__filename).mode & 0o777).toString(8), "
                        + "fs.readFileSync('/proc/net/route', 'utf8').trim().split('\\n').slice(1));\n"),
                request(hot.config, "nodejs", "let s = '';\nprocess.stdin.on('data', (d) => { s += d; }).on('end', () => "
                        + "console.log(s.length, s.slice(0, 6), s.slice(-6), require('fs').readFileSync(__filename).length));\n//"
                        + "c".repeat(100_000) + "\n", "<head>" + "i".repeat(300_000) + "<tail>", List.of(), Map.of(), null),
                request(hot.config, "nodejs", "while (true) {}", "", List.of(), Map.of(), 30_000L),
                request(hot.config, "typescript", "interface P { x: number }\nconst p: P = { x: 21 * 2 };\n"
                        + "console.log(p.x, process.argv.slice(2));\n", "", List.of("t"), Map.of(), null));
        assertThat(assertWarmGivesWhatColdGives(hot, cold, cases)).extracting(ExecutionResult::sandbox)
                .containsOnly("gvisor");
        assertThat(run(cold, cases.get(5)).outcome()).isEqualTo(Outcome.CPU_LIMIT);
        assertThat(run(cold, cases.get(10)).outcome()).isEqualTo(Outcome.CPU_LIMIT);
    }

    @Test
    void nothingPassesFromOneWarmRunToTheNext() throws Exception {
        LocalExecutor e = executor("WARM_POOL", "python=2,nodejs=2");
        ExecutionResult first = warm(e, request(e.config, "python", """
                import builtins, json, os, sys
                builtins.LEAK = 1
                json.LEAK = 1
                os.environ['LEAK'] = '1'
                open('/tmp/leak', 'w').write('x')
                open('/work/leak', 'w').write('x')
                print('spoiled')
                """));
        ExecutionResult second = warm(e, request(e.config, "python", """
                import builtins, json, os
                print(hasattr(builtins, 'LEAK'), hasattr(json, 'LEAK'), 'LEAK' in os.environ,
                      os.path.exists('/tmp/leak'), os.path.exists('/work/leak'))
                """));
        assertThat(first.stdout()).isEqualTo("spoiled\n");
        assertThat(second.stdout()).isEqualTo("False False False False False\n");
        ExecutionResult node = warm(e, request(e.config, "nodejs", "const fs = require('fs');\n"
                + "globalThis.LEAK = 1;\nfs.writeFileSync('/tmp/nodeleak', 'x');\nconsole.log('spoiled');\n"));
        ExecutionResult nodeAfter = warm(e, request(e.config, "nodejs", "const fs = require('fs');\n"
                + "console.log(typeof globalThis.LEAK, fs.existsSync('/tmp/nodeleak'), fs.existsSync('/tmp/leak'));\n"));
        assertThat(node.stdout()).isEqualTo("spoiled\n");
        assertThat(nodeAfter.stdout()).isEqualTo("undefined false false\n");
    }

    @Test
    void limitsTimeoutsAndCancelHoldInWarmRuns() throws Exception {
        LocalExecutor e = executor("WARM_POOL", "python=1", "CPU_LIMIT_SECONDS", "2", "MEMORY_LIMIT_MB", "256");
        ExecutionResult timeout = warm(e, request(e.config, "python", "import time\ntime.sleep(30)", "", List.of(), Map.of(), 1500L));
        assertThat(timeout.outcome()).isEqualTo(Outcome.TIMEOUT);
        assertThat(timeout.durationMs()).isLessThan(10_000);
        // the CPU limit holds the whole gVisor sandbox from its start, as for a cold run there: no start-up allowance
        ExecutionResult cpu = warm(e, request(e.config, "python", "while True: pass", "", List.of(), Map.of(), 30_000L));
        assertThat(cpu.outcome()).as(cpu.stderr()).isEqualTo(Outcome.CPU_LIMIT);
        assertThat(cpu.durationMs()).isLessThan(15_000);
        ExecutionResult mem = warm(e, request(e.config, "python", "b = bytearray(600 << 20)\nprint(len(b))"));
        assertThat(mem.stdout()).isEmpty();
        assertThat(mem.outcome()).isNotEqualTo(Outcome.EXITED);
        e.awaitWarmPool(Duration.ofSeconds(90));
        long before = served(e, "python");
        TestSupport.Starts starts = TestSupport.startsOf(e);
        starts.take();
        java.util.concurrent.CountDownLatch up = new java.util.concurrent.CountDownLatch(1);
        RunHandle h = e.submit(request(e.config, "python", "import time\nprint('up', flush=True)\ntime.sleep(300)"),
                (stream, text) -> up.countDown());
        assertThat(up.await(30, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
        assertThat(served(e, "python")).as("served warm").isEqualTo(before + 1);
        assertThat(starts.take()).as("started warm").containsExactly(true);
        h.cancel();
        assertThat(await(h).outcome()).isEqualTo(Outcome.CANCELLED);
    }

    /** Its CPU limit counts from its start, so a gVisor sandbox that waited too long is replaced (idle CPU). */
    @Test
    void aWaitingGvisorSandboxIsReplacedAfterItsMaximumIdleTime() throws Exception {
        LocalExecutor e = executor("WARM_POOL", "python=1");
        long started = started(e);
        e.warmPool.orElseThrow().retireIdleAfter(Duration.ofMillis(300));
        Poll.until("the waiting sandbox replaced twice", () -> started(e), n -> n >= started + 2);
        e.warmPool.orElseThrow().retireIdleAfter(WarmPool.STDIO_MAX_IDLE);
        // the replaced ones are gone: one sandbox waits (and perhaps one more is starting), not three
        Poll.until("the replaced sandboxes gone", () -> warmGvisorSandboxes().stream()
                .map(l -> l.replaceAll(".*--root=(\\S*code-exec-gvisor-[0-9]+)/.*", "$1")).distinct().count(), n -> n <= 2);
        assertThat(warm(e, request(e.config, "python", "print('fresh')")).stdout()).isEqualTo("fresh\n");
    }

    private static long started(LocalExecutor e) {
        return WarmRuns.counter(e, "python", "started");
    }

    @Test
    void runsThePoolCannotServeStartCold() throws Exception {
        LocalExecutor e = executor("WARM_POOL", "python=1");
        long before = served(e, "python");
        ExecutionResult env = run(e, request(e.config, "python", "import os\nprint(os.environ['MINE'])", "", List.of(),
                Map.of("MINE", "own env"), null));
        assertThat(env.stdout()).isEqualTo("own env\n");
        // nothing can be mounted into a running gVisor sandbox: a workspace run starts cold, with its files
        Files.setPosixFilePermissions(tmp, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Workspaces workspaces = new Workspaces(tmp.resolve("ws"), 1 << 20, Duration.ofHours(1), 65534, 65534);
        Workspace ws = workspaces.open("alice", "proj", true);
        ws.write(dev.codeexec.workspace.RelPath.parse("in.txt"), new java.io.ByteArrayInputStream("data".getBytes()), 1 << 20);
        ExecutionResult inWs = run(e, request(e.config, "python", "print(open('in.txt').read())").inWorkspace(ws));
        assertThat(inWs.stdout()).isEqualTo("data\n");
        assertThat(served(e, "python")).isEqualTo(before);
    }

    /** gVisor sandboxes of this JVM's warm pools still running: their runner was started with --stdio. */
    static List<String> warmGvisorSandboxes() throws Exception {
        Process p = new ProcessBuilder("ps", "-u", "65534", "-o", "pid=,args=").start();
        String out = new String(p.getInputStream().readAllBytes());
        p.waitFor();
        return out.lines().filter(l -> l.contains("runsc") && l.contains(" --stdio")
                && l.contains(TestSupport.DATA_DIR)).toList();
    }
}
