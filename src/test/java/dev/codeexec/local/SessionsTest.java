package dev.codeexec.local;

import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.engine.SessionControl;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.lang.Languages;
import dev.codeexec.config.DataDir;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.config.Config;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.SandboxLeftovers;
import dev.codeexec.testing.Poll;
import dev.codeexec.testing.Requires;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.Workspaces;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

import static dev.codeexec.local.TestSupport.await;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Stateful sessions against the real bwrap sandbox: state persists between calls, sessions are isolated per name
 * and tenant, timeouts and cancels interrupt without losing state, a stuck or dying interpreter ends its session
 * clearly, and nothing is left behind.
 */
@Tag("sandbox")
@org.junit.jupiter.api.Timeout(value = 120, threadMode = org.junit.jupiter.api.Timeout.ThreadMode.SEPARATE_THREAD)
class SessionsTest {

    static LocalExecutor executor;
    static Sandbox sandbox;
    private static final AtomicInteger TENANTS = new AtomicInteger();

    /** The warm pool is off: its pre-started sandboxes would count as leftovers in the process checks. */
    static Path dataDir;

    /**
     * Its own DATA_DIR: the shared test one is rebuilt (its /etc snapshot) by every sandbox other test JVMs on this
     * machine create, which can pull files from under a running interpreter.
     */
    static Config config(String... pairs) {
        List<String> all = new java.util.ArrayList<>(List.of(pairs));
        all.addAll(List.of("DATA_DIR", dataDir.toString()));
        return TestSupport.config(all.toArray(String[]::new));
    }

    @BeforeAll
    static void setUp() throws Exception {
        dataDir = Files.createTempDirectory("code-exec-sessions-test-");
        Files.setPosixFilePermissions(dataDir, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Config config = config("MAX_SESSIONS", "100", "WARM_POOL", "off");
        sandbox = TestSandboxes.required(config, Sandbox::supportsControl, "a sandbox with a control channel (bwrap)");
        executor = new LocalExecutor(config, sandbox, Languages.load());
    }

    @AfterAll
    static void tearDown() throws Exception {
        if (executor == null) return;
        executor.close();
        assertNothingLeft();
        sandbox.close();
        DataDir.deleteTree(dataDir);
    }

    static void assertNothingLeft() throws Exception {
        SandboxLeftovers.awaitNoProcesses("no interpreter process left");
        assertThat(SandboxLeftovers.cgroups(sandbox)).isEmpty();
    }

    /** Hears a call's output; {@link #await} returns once the call has printed "started". */
    private static final class StartedListener implements OutputListener {
        private final StringBuilder seen = new StringBuilder();
        private final java.util.concurrent.CountDownLatch started = new java.util.concurrent.CountDownLatch(1);

        @Override
        public synchronized void onOutput(Stream stream, String text) {
            seen.append(text);
            if (seen.toString().startsWith("started\n")) started.countDown();
        }

        void await() throws InterruptedException {
            assertThat(started.await(60, java.util.concurrent.TimeUnit.SECONDS)).as("the call printed started").isTrue();
        }
    }

    private static final List<String> USED = new CopyOnWriteArrayList<>();

    /** Each test its own tenant, so the shared executor's sessions never meet. */
    private static String tenant() {
        String t = "t" + TENANTS.incrementAndGet();
        USED.add(t);
        return t;
    }

    /** A failed test must not leave sessions that make the next test's leftover checks fail. */
    @org.junit.jupiter.api.AfterEach
    void closeSessions() {
        if (executor == null) return;
        for (String t : USED)
            for (SessionControl.SessionInfo i : executor.sessions().list(t)) executor.sessions().close(t, i.name());
        USED.clear();
    }

    static ExecutionRequest req(LocalExecutor e, String lang, String code, String tenant, String session) {
        return TestSupport.request(e.config, lang, code).inSession(new SessionRef(tenant, session));
    }

    static ExecutionResult call(LocalExecutor e, String lang, String code, String tenant, String session) throws Exception {
        return await(e.submit(req(e, lang, code, tenant, session), OutputListener.NONE));
    }

    private static ExecutionResult py(String tenant, String code) throws Exception {
        return call(executor, "python", code, tenant, "main");
    }

    private static Optional<String> result(ExecutionResult r) {
        return r.session().orElseThrow().result();
    }

    @Test
    void variablesImportsAndFunctionsPersistAndTheFinalExpressionIsTheResult() throws Exception {
        String t = tenant();
        ExecutionResult first = py(t, "import math\nx = 41\ndef inc(a):\n    return a + 1\nprint('defined')");
        assertThat(first.outcome()).isEqualTo(Outcome.EXITED);
        assertThat(first.stdout()).isEqualTo("defined\n");
        assertThat(first.session().orElseThrow().created()).isTrue();
        assertThat(result(first)).isEmpty();

        ExecutionResult second = py(t, "print(inc(x))\nround(math.pi, 3)");
        assertThat(second.exitCode()).isZero();
        assertThat(second.stdout()).isEqualTo("42\n");
        assertThat(second.stderr()).isEmpty();
        assertThat(result(second)).contains("3.142");
        assertThat(second.session().orElseThrow().created()).isFalse();
        assertThat(second.session().orElseThrow().name()).isEqualTo("main");

        assertThat(result(py(t, "'a' + 'b'"))).contains("'ab'");
        assertThat(executor.sessions().list(t)).singleElement().satisfies(i -> {
            assertThat(i.name()).isEqualTo("main");
            assertThat(i.language()).isEqualTo("python");
            assertThat(i.workspace()).isEmpty();
            assertThat(i.calls()).isEqualTo(3);
            assertThat(i.busy()).isFalse();
            assertThat(i.memoryBytes()).isPresent();
            assertThat(i.lastUsed()).isAfterOrEqualTo(i.created());
        });
        assertThat(executor.sessions().close(t, "main")).isTrue();
    }

    /** What a model used to a notebook writes (issue: sessions that behave like the notebook a model expects). */
    @Test
    void notebookHabitsWorkAndPlainPythonKeepsItsMeaning() throws Exception {
        String t = tenant();
        // indented as a whole (models and SDKs send cells like this); line numbers stay right
        ExecutionResult indented = py(t, "    a = 40\n    if a:\n        b = a + 2\n    b");
        assertThat(indented.stderr()).isEmpty();
        assertThat(result(indented)).contains("42");
        ExecutionResult where = py(t, "    x = 1\n    1/0");
        assertThat(where.stderr()).contains("line 2").contains("ZeroDivisionError");
        // a trailing ; hides the value, as in a notebook
        assertThat(result(py(t, "b;"))).isEmpty();
        assertThat(result(py(t, "b  # no semicolon; in a comment"))).contains("42");
        // ! runs in the shell, name = !cmd takes its lines, %cd and %pwd move and tell
        ExecutionResult bang = py(t, "!echo from-the-shell\nlines = !printf 'a\\nb\\n'\nprint(lines)");
        assertThat(bang.stdout()).isEqualTo("from-the-shell\n['a', 'b']\n");
        ExecutionResult cd = py(t, "import os\nos.makedirs('sub', exist_ok=True)\n%cd sub\nos.getcwd()");
        assertThat(cd.stdout()).endsWith("/sub\n");
        assertThat(result(cd)).hasValueSatisfying(v -> assertThat(v).endsWith("/sub'"));
        assertThat(result(py(t, "%pwd"))).hasValueSatisfying(v -> assertThat(v).endsWith("/sub'"));
        ExecutionResult pip = py(t, "!pip install requests");
        assertThat(pip.stderr()).contains("pip cannot install here").contains("packages");
        assertThat(pip.exitCode()).isZero();
        // valid Python is never rewritten: != and % stay operators, a string holding "!ls" stays a string
        assertThat(result(py(t, "x = 5\nx != 4"))).contains("True");
        assertThat(result(py(t, "s = '''\n!ls\n'''\ns.strip()"))).contains("'!ls'");
        assertThat(result(py(t, "10 % 4"))).contains("2");
        // a cell that awaits runs whole in the session's loop: tasks made before the await, the running loop
        ExecutionResult tasks = py(t, "import asyncio\nt = asyncio.create_task(asyncio.sleep(0.01, result=42))\n"
                + "loop = asyncio.get_running_loop()\nawait t");
        assertThat(tasks.stderr()).isEmpty();
        assertThat(result(tasks)).contains("42");
        assertThat(result(py(t, "await asyncio.sleep(0, result='later');"))).isEmpty();
        assertThat(result(py(t, "r = await asyncio.sleep(0, result=7)\nr * 6"))).contains("42");
        ExecutionResult names = py(t, "sorted(n for n in globals() if n.startswith('__codeexec'))");
        assertThat(result(names)).as("only the magics helper, made when a magic was used").contains("['__codeexec_magics__']");
        executor.sessions().close(t, "main");
    }

    /** Each call's number in its session, and a failed call's error as a notebook reports it, in Python and Node. */
    @Test
    void callsAreNumberedAndErrorsComeBackStructured() throws Exception {
        String t = tenant();
        ExecutionResult first = py(t, "a = 1");
        assertThat(first.session().orElseThrow().executionCount()).hasValue(1);
        assertThat(first.session().orElseThrow().error()).isEmpty();
        ExecutionResult failed = py(t, "xyz");
        ExecutionResult.SessionOutput so = failed.session().orElseThrow();
        assertThat(so.executionCount()).hasValue(2);
        assertThat(so.error()).hasValueSatisfying(e -> {
            assertThat(e.name()).isEqualTo("NameError");
            assertThat(e.value()).isEqualTo("name 'xyz' is not defined");
            assertThat(e.traceback()).contains("<cell 2>").contains("NameError: name 'xyz' is not defined")
                    .doesNotContain("session_python");
        });
        ExecutionResult custom = py(t, "class Oops(Exception): pass\nraise Oops('bad thing')");
        assertThat(custom.session().orElseThrow().error()).hasValueSatisfying(e -> {
            assertThat(e.name()).isEqualTo("Oops");
            assertThat(e.value()).isEqualTo("bad thing");
        });
        assertThat(py(t, "a").session().orElseThrow().executionCount()).hasValue(4);
        executor.sessions().close(t, "main");

        ExecutionResult n1 = call(executor, "nodejs", "let k = 1", t, "js");
        assertThat(n1.session().orElseThrow().executionCount()).hasValue(1);
        ExecutionResult n2 = call(executor, "nodejs", "null.x", t, "js");
        assertThat(n2.session().orElseThrow().executionCount()).hasValue(2);
        assertThat(n2.session().orElseThrow().error()).hasValueSatisfying(e -> {
            assertThat(e.name()).isEqualTo("TypeError");
            assertThat(e.value()).contains("Cannot read properties of null");
            assertThat(e.traceback()).contains("TypeError").doesNotContain("session_node");
        });
        executor.sessions().close(t, "js");
    }

    /** A bash session is one shell: variables, functions and the working directory stay; status, interrupt, exit. */
    @Test
    void bashSessionsKeepTheShell() throws Exception {
        String t = tenant();
        ExecutionResult first = call(executor, "bash", "x=41\ngreet() { echo \"hi $1\"; }\nmkdir -p sub && cd sub", t, "sh");
        assertThat(first.exitCode()).as(first.stderr()).isZero();
        assertThat(first.session().orElseThrow().created()).isTrue();
        ExecutionResult second = call(executor, "bash", "echo $((x + 1)) $(basename \"$PWD\"); greet you", t, "sh");
        assertThat(second.stdout()).isEqualTo("42 sub\nhi you\n");
        assertThat(second.session().orElseThrow().created()).isFalse();
        assertThat(second.session().orElseThrow().executionCount()).hasValue(2);
        ExecutionResult failed = call(executor, "bash", "echo before; false", t, "sh");
        assertThat(failed.exitCode()).isEqualTo(1);
        assertThat(failed.stdout()).isEqualTo("before\n");
        ExecutionResult status = call(executor, "bash", "(exit 7)", t, "sh");
        assertThat(status.exitCode()).isEqualTo(7);
        // a timeout interrupts the call (a child, then a loop in the shell itself) and the shell stays
        ExecutionRequest slow = TestSupport.request(executor.config, "bash", "sleep 30", "", List.of(), Map.of(), 1000L)
                .inSession(new SessionRef(t, "sh"));
        ExecutionResult timedOut = await(executor.submit(slow, OutputListener.NONE));
        assertThat(timedOut.outcome()).isEqualTo(Outcome.TIMEOUT);
        ExecutionRequest loop = TestSupport.request(executor.config, "bash", "while :; do :; done", "", List.of(), Map.of(), 1000L)
                .inSession(new SessionRef(t, "sh"));
        assertThat(await(executor.submit(loop, OutputListener.NONE)).outcome()).isEqualTo(Outcome.TIMEOUT);
        ExecutionResult after = call(executor, "bash", "echo $x", t, "sh");
        assertThat(after.stdout()).isEqualTo("41\n");
        assertThat(after.session().orElseThrow().created()).as("the same shell").isFalse();
        // exit ends the shell: its status is the call's, and the next call runs in a new shell
        ExecutionResult exit = call(executor, "bash", "exit 3", t, "sh");
        assertThat(exit.exitCode()).isEqualTo(3);
        assertThat(exit.stderr()).contains("the shell exited with status 3");
        ExecutionResult fresh = call(executor, "bash", "echo \"[$x]\"", t, "sh");
        assertThat(fresh.stdout()).isEqualTo("[]\n");
        executor.sessions().close(t, "sh");
    }

    @Test
    void anErrorKeepsTheStateAndGivesExitCodeOne() throws Exception {
        String t = tenant();
        py(t, "y = 5");
        ExecutionResult err = py(t, "y = 6\n1/0");
        assertThat(err.exitCode()).isEqualTo(1);
        assertThat(err.outcome()).isEqualTo(Outcome.EXITED);
        assertThat(err.stderr()).contains("ZeroDivisionError: division by zero").doesNotContain("session_python");
        assertThat(result(py(t, "y"))).contains("6");
        executor.sessions().close(t, "main");
    }

    @Test
    void pythonCallsReadTheirStdin() throws Exception {
        String t = tenant();
        ExecutionRequest r = req(executor, "python", "name = input()\nname.upper()", t, "main");
        r = ExecutionRequest.builder(r.language(), r.code(), r.limits()).stdin("ada\n").args(r.args()).env(r.env())
                .audit(r.audit()).workspace(r.workspace()).session(r.session()).build();
        assertThat(result(await(executor.submit(r, OutputListener.NONE)))).contains("'ADA'");
        assertThat(result(py(t, "import sys\nsys.stdin.read()"))).contains("''");
        executor.sessions().close(t, "main");
    }

    @Test
    void sessionsAreIsolatedByNameAndByTenant() throws Exception {
        String alice = tenant();
        String bob = tenant();
        call(executor, "python", "secret = 'alice-a'", alice, "a");
        ExecutionResult otherName = call(executor, "python", "secret", alice, "b");
        assertThat(otherName.exitCode()).as(otherName.stderr()).isEqualTo(1);
        assertThat(otherName.stderr()).contains("NameError");
        ExecutionResult otherTenant = call(executor, "python", "secret", bob, "a");
        assertThat(otherTenant.exitCode()).isEqualTo(1);
        assertThat(otherTenant.stderr()).contains("NameError");
        assertThat(result(call(executor, "python", "secret", alice, "a"))).contains("'alice-a'");
        assertThat(executor.sessions().list(alice)).extracting(SessionControl.SessionInfo::name).containsExactly("a", "b");
        assertThat(executor.sessions().list(bob)).extracting(SessionControl.SessionInfo::name).containsExactly("a");
        assertThat(executor.sessions().close(bob, "b")).isFalse();
        for (String n : List.of("a", "b")) executor.sessions().close(alice, n);
        executor.sessions().close(bob, "a");
    }

    @Test
    void resetStartsAFreshInterpreterAndCloseForgetsTheSession() throws Exception {
        String t = tenant();
        py(t, "x = 1");
        assertThat(executor.sessions().reset(t, "main")).isTrue();
        assertThat(executor.sessions().list(t)).singleElement().satisfies(i -> assertThat(i.calls()).isZero());
        ExecutionResult afterReset = py(t, "x");
        assertThat(afterReset.stderr()).contains("NameError");
        assertThat(executor.sessions().reset(t, "nope")).isFalse();

        py(t, "x = 2");
        assertThat(executor.sessions().close(t, "main")).isTrue();
        assertThat(executor.sessions().list(t)).isEmpty();
        assertThat(executor.sessions().close(t, "main")).isFalse();
        SandboxLeftovers.awaitNoProcesses("the closed session's interpreter is gone");
        ExecutionResult fresh = py(t, "x");
        assertThat(fresh.session().orElseThrow().created()).isTrue();
        assertThat(fresh.stderr()).contains("NameError");
        executor.sessions().close(t, "main");
        assertNothingLeft();
    }

    @Test
    void aTimedOutCallIsInterruptedAndTheSessionKeepsItsState() throws Exception {
        String t = tenant();
        py(t, "x = 7");
        ExecutionRequest loop = req(executor, "python", "print('looping', flush=True)\nwhile True: pass", t, "main");
        loop = withTimeout(loop, 1000);
        ExecutionResult r = await(executor.submit(loop, OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.TIMEOUT);
        assertThat(r.session().orElseThrow().created()).as("the loop ran in the session of x = 7").isFalse();
        assertThat(r.timedOut()).isTrue();
        assertThat(r.stdout()).isEqualTo("looping\n");
        assertThat(r.stderr()).contains("KeyboardInterrupt").contains("timeout after 1000 ms")
                .contains("the session kept its state");
        ExecutionResult after = py(t, "x");
        assertThat(result(after)).as(after.toString()).contains("7");
        assertThat(after.session().orElseThrow().created()).isFalse();
        executor.sessions().close(t, "main");
    }

    @Test
    void aCallThatIgnoresTheInterruptIsKilledAfterTheGraceAndTheNextCallStartsFresh() throws Exception {
        String t = tenant();
        py(t, "x = 7");
        ExecutionRequest stuck = withTimeout(req(executor, "python",
                "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass", t, "main"), 1000);
        ExecutionResult r = await(executor.submit(stuck, OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.TIMEOUT);
        assertThat(r.stderr()).contains("timeout after 1000 ms").contains("did not stop")
                .contains("the session was killed").contains("the next call starts a new one");
        assertThat(executor.sessions().list(t)).isEmpty();
        SandboxLeftovers.awaitNoProcesses("the killed session's interpreter is gone");
        ExecutionResult next = py(t, "x");
        assertThat(next.session().orElseThrow().created()).isTrue();
        assertThat(next.stderr()).contains("NameError");
        executor.sessions().close(t, "main");
    }

    @Test
    void aSessionKilledByItsMemoryLimitSaysSoAndTheNextCallWorksFresh() throws Exception {
        String t = tenant();
        ExecutionRequest first = req(executor, "python", "x = 1", t, "main");
        Limits small = first.limits();
        small = new Limits(small.timeout(), small.cpuSeconds(), 150L << 20, small.maxProcesses(), small.outputBytes(),
                small.diskBytes());
        first = ExecutionRequest.builder(first.language(), first.code(), small).audit(first.audit())
                .workspace(first.workspace()).session(first.session()).build();
        assertThat(await(executor.submit(first, OutputListener.NONE)).exitCode()).isZero();
        ExecutionResult r = py(t, "b = b'x' * (600 << 20)\nlen(b)");
        assertThat(r.outcome()).isEqualTo(Outcome.MEMORY_LIMIT);
        assertThat(r.stderr()).contains("memory limit").contains("the next call starts a new one");
        assertThat(executor.sessions().list(t)).isEmpty();
        ExecutionResult next = py(t, "'x' in globals()");
        assertThat(next.exitCode()).isZero();
        assertThat(result(next)).contains("False");
        assertThat(next.session().orElseThrow().created()).isTrue();
        executor.sessions().close(t, "main");
    }

    @Test
    void anInterpreterThatDiesBetweenCallsIsReportedOnceThenANewSessionStarts() throws Exception {
        String t = tenant();
        py(t, "import os, threading, time\nx = 1\n"
                + "threading.Thread(target=lambda: (time.sleep(0.3), os._exit(3)), daemon=True).start()");
        Poll.until("the session gone from the list once its interpreter died",
                () -> executor.sessions().list(t).isEmpty());
        ExecutionResult told = py(t, "x");
        assertThat(told.outcome()).isEqualTo(Outcome.FAILED_TO_START);
        assertThat(told.stderr()).contains("ended while idle").contains("exited with code 3")
                .contains("next call starts a new session");
        ExecutionResult fresh = py(t, "x = 2\nx");
        assertThat(fresh.session().orElseThrow().created()).isTrue();
        assertThat(result(fresh)).contains("2");
        executor.sessions().close(t, "main");
    }

    @Test
    void figuresComeBackFromShowAndFromFiguresLeftOpen() throws Exception {
        String t = tenant();
        ExecutionResult shown = py(t, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()");
        assertThat(shown.exitCode()).as(shown.stderr()).isZero();
        List<ExecutionResult.Figure> figs = shown.session().orElseThrow().figures();
        assertThat(figs).singleElement().satisfies(f -> {
            assertThat(f.mimeType()).isEqualTo("image/png");
            assertThat(f.data()).startsWith(0x89, 'P', 'N', 'G');
        });
        ExecutionResult open = py(t, "plt.figure()\nplt.bar([1, 2], [3, 1])\nplt.figure()\nplt.plot([0, 1])\nNone");
        assertThat(open.session().orElseThrow().figures()).hasSize(2);
        assertThat(py(t, "1").session().orElseThrow().figures()).as("figures are closed once returned").isEmpty();
        executor.sessions().close(t, "main");
    }

    @Test
    void cancelInterruptsTheCallAndKeepsTheState() throws Exception {
        String t = tenant();
        py(t, "x = 3");
        StartedListener started = new StartedListener();
        RunHandle h = executor.submit(req(executor, "python", "print('started', flush=True)\nwhile True: pass", t, "main"),
                started);
        started.await();
        h.cancel();
        ExecutionResult r = await(h);
        assertThat(r.outcome()).isEqualTo(Outcome.CANCELLED);
        assertThat(r.stderr()).contains("cancelled").contains("kept its state");
        assertThat(result(py(t, "x"))).contains("3");
        executor.sessions().close(t, "main");
    }

    @Test
    void outputStreamsToTheListenerWithoutTheMarkerAndAFloodIsInterruptedAtTheDrainLimit() throws Exception {
        String t = tenant();
        Map<OutputListener.Stream, StringBuilder> seen = Map.of(OutputListener.Stream.STDOUT, new StringBuilder(),
                OutputListener.Stream.STDERR, new StringBuilder());
        ExecutionResult r = await(executor.submit(req(executor, "python",
                "import sys\nprint('out')\nprint('err', file=sys.stderr)", t, "main"), (s, text) -> {
                    synchronized (seen) {
                        seen.get(s).append(text);
                    }
                }));
        assertThat(r.stdout()).isEqualTo("out\n");
        assertThat(r.stderr()).isEqualTo("err\n");
        synchronized (seen) {
            assertThat(seen.get(OutputListener.Stream.STDOUT).toString()).isEqualTo("out\n");
            assertThat(seen.get(OutputListener.Stream.STDERR).toString()).isEqualTo("err\n");
        }

        ExecutionRequest flood = req(executor, "python", "n = 0\nwhile True:\n    n += 1\n    print('y' * 100)", t, "main");
        Limits l = flood.limits();
        flood = ExecutionRequest.builder("python", flood.code(), new Limits(l.timeout(), l.cpuSeconds(), l.memoryBytes(), l.maxProcesses(), 4096, l.diskBytes(), 1 << 20))
                .audit(flood.audit()).session(flood.session()).build();
        ExecutionResult over = await(executor.submit(flood, OutputListener.NONE));
        assertThat(over.outcome()).isEqualTo(Outcome.OUTPUT_LIMIT);
        assertThat(over.truncated()).isTrue();
        assertThat(over.stdout().length()).isLessThanOrEqualTo(4096 + 40);
        assertThat(over.stderr()).contains("output limit: more than 1 MB of output").contains("kept its state");
        assertThat(py(t, "n > 0").session().orElseThrow().result()).contains("True");
        executor.sessions().close(t, "main");
    }

    @Test
    void nodeSessionsKeepTheirState() throws Exception {
        String t = tenant();
        ExecutionResult first = call(executor, "nodejs", "var a = 40; let b = 2; function sum() { return a + b; }",
                t, "js");
        assertThat(first.exitCode()).as(first.stderr()).isZero();
        ExecutionResult second = call(executor, "nodejs", "console.log('sum is', sum()); sum() * 2", t, "js");
        assertThat(second.stdout()).isEqualTo("sum is 42\n");
        assertThat(second.session().orElseThrow().result()).contains("84");
        ExecutionResult err = call(executor, "nodejs", "nope()", t, "js");
        assertThat(err.exitCode()).isEqualTo(1);
        assertThat(err.stderr()).contains("ReferenceError");
        ExecutionResult loop = await(executor.submit(withTimeout(req(executor, "nodejs", "while (true) {}", t, "js"), 1000),
                OutputListener.NONE));
        assertThat(loop.outcome()).isEqualTo(Outcome.TIMEOUT);
        assertThat(loop.stderr()).contains("kept its state");
        assertThat(call(executor, "nodejs", "b", t, "js").session().orElseThrow().result()).contains("2");
        executor.sessions().close(t, "js");
    }

    @Test
    void aWorkspaceSessionSeesAndWritesTheWorkspaceFiles(@TempDir Path tmp) throws Exception {
        Files.setPosixFilePermissions(tmp, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Workspaces workspaces = new Workspaces(tmp.resolve("ws"), 16 << 20, Duration.ofHours(1), 65534, 65534);
        String t = tenant();
        Workspace ws = workspaces.open(t, "proj", true);
        ws.write(dev.codeexec.workspace.RelPath.parse("in.txt"),
                new java.io.ByteArrayInputStream("from the workspace".getBytes()), 1 << 20);
        ExecutionRequest first = req(executor, "python", "data = open('in.txt').read()\ndata", t, "w").inWorkspace(ws);
        ExecutionResult r = await(executor.submit(first, OutputListener.NONE));
        assertThat(r.session().orElseThrow().result()).contains("'from the workspace'");
        assertThat(r.files()).isEmpty();
        ExecutionResult wrote = await(executor.submit(req(executor, "python",
                "open('out.txt', 'w').write(data.upper())", t, "w").inWorkspace(ws), OutputListener.NONE));
        assertThat(wrote.files()).singleElement().satisfies(f -> {
            assertThat(f.path()).isEqualTo("out.txt");
            assertThat(f.status()).isEqualTo("created");
        });
        assertThat(ws.fs().root().resolve("out.txt")).hasContent("FROM THE WORKSPACE");
        assertThat(executor.sessions().list(t)).singleElement()
                .satisfies(i -> assertThat(i.workspace()).contains("proj"));
        assertThatThrownBy(() -> executor.submit(req(executor, "python", "1", t, "w"), OutputListener.NONE))
                .isInstanceOf(ExecutionException.InvalidRequest.class).hasMessageContaining("workspace 'proj'");
        executor.sessions().close(t, "w");
    }

    /** Python that raises its own file-size soft limit to the hard one, then writes {@code mb} MB to big.bin. */
    private static String writeRaisingTheLimit(int mb) {
        return "import resource\n"
                + "soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)\n"
                + "resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))\n"
                + "try:\n"
                + "    open('big.bin', 'wb').write(b'x' * (" + mb + " << 20))\n"
                + "    print('wrote')\n"
                + "except OSError as e:\n"
                + "    print('errno', e.errno)\n";
    }

    /** Whether this server may raise a process's hard limit (CAP_SYS_RESOURCE in its effective set). */
    private static boolean mayRaiseHardLimits() throws Exception {
        String eff = Files.readAllLines(Path.of("/proc/self/status")).stream().filter(l -> l.startsWith("CapEff:"))
                .findFirst().orElseThrow().substring(7).trim();
        return (Long.parseLong(eff, 16) & (1L << 24)) != 0;
    }

    @Test
    void aSessionCallThatRaisesItsOwnFileSizeLimitGetsEfbigPastTheWorkspaceQuotaLikeARun(@TempDir Path tmp)
            throws Exception {
        Files.setPosixFilePermissions(tmp, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Workspaces workspaces = new Workspaces(tmp.resolve("ws"), 2 << 20, Duration.ofHours(1), 65534, 65534);
        String t = tenant();
        Workspace ws = workspaces.open(t, "quota", true);
        Path big = ws.fs().root().resolve("big.bin");

        ExecutionResult run = await(executor.submit(TestSupport.request(executor.config, "python",
                writeRaisingTheLimit(3)).inWorkspace(ws), OutputListener.NONE));
        assertThat(run.stdout()).as("a run").isEqualTo("errno 27\n");
        Files.delete(big);

        ExecutionResult call = await(executor.submit(req(executor, "python", writeRaisingTheLimit(3), t, "q")
                .inWorkspace(ws), OutputListener.NONE));
        assertThat(call.stdout()).as("a session call").isEqualTo("errno 27\n");
        assertThat(Files.size(big)).isLessThanOrEqualTo(2 << 20);

        // The workspace is full now: the next call's cap is the little that is left, hard limit included.
        assertThat(await(executor.submit(req(executor, "python", writeRaisingTheLimit(1), t, "q").inWorkspace(ws),
                OutputListener.NONE)).stdout()).isEqualTo("errno 27\n");
        Files.delete(big);
        ExecutionResult after = await(executor.submit(req(executor, "python", writeRaisingTheLimit(1), t, "q")
                .inWorkspace(ws), OutputListener.NONE));
        if (mayRaiseHardLimits()) {
            assertThat(after.stdout()).as("room regained once files were deleted").isEqualTo("wrote\n");
            assertThat(after.stderr()).doesNotContain("[session]");
        } else {
            assertThat(after.stdout()).isEqualTo("errno 27\n");
            assertThat(after.stderr()).contains("[session] files written by this call are capped at 64 KB, below the 2 MB")
                    .contains("session_reset");
            assertThat(executor.sessions().reset(t, "q")).isTrue();
            assertThat(await(executor.submit(req(executor, "python", writeRaisingTheLimit(1), t, "q").inWorkspace(ws),
                    OutputListener.NONE)).stdout()).as("a reset session has the full room").isEqualTo("wrote\n");
        }
        executor.sessions().close(t, "q");
    }

    @Test
    void requestsASessionCannotServeAreRefusedClearly() throws Exception {
        String t = tenant();
        assertThatThrownBy(() -> executor.submit(req(executor, "go", "package main", t, "s"), OutputListener.NONE))
                .isInstanceOf(ExecutionException.InvalidRequest.class).hasMessageContaining("python, nodejs, typescript and bash");
        ExecutionRequest base = req(executor, "python", "1", t, "s");
        ExecutionRequest withArgs = ExecutionRequest.builder("python", "1", base.limits()).args(List.of("a"))
                .audit(base.audit()).session(base.session()).build();
        assertThatThrownBy(() -> executor.submit(withArgs, OutputListener.NONE))
                .isInstanceOf(ExecutionException.InvalidRequest.class).hasMessageContaining("'args'");
        // env: the creating call's is the interpreter's, for the session's life; a later, different one is refused
        ExecutionRequest withEnv = ExecutionRequest.builder("python", "import os, subprocess\nprint(os.environ['A'], " + "subprocess.run(['sh', '-c', 'echo $A'], capture_output=True, text=True).stdout.strip())", base.limits())
                .env(Map.of("A", "b")).audit(base.audit()).session(base.session()).build();
        assertThat(await(executor.submit(withEnv, OutputListener.NONE)).stdout()).isEqualTo("b b\n");
        ExecutionRequest noEnv = ExecutionRequest.builder("python", "import os; print(os.environ['A'])", base.limits())
                .audit(base.audit()).session(base.session()).build();
        assertThat(await(executor.submit(noEnv, OutputListener.NONE)).stdout())
                .as("a call without env keeps the session's").isEqualTo("b\n");
        ExecutionRequest otherEnv = ExecutionRequest.builder("python", "1", base.limits()).env(Map.of("A", "c"))
                .audit(base.audit()).session(base.session()).build();
        assertThatThrownBy(() -> executor.submit(otherEnv, OutputListener.NONE))
                .isInstanceOf(ExecutionException.InvalidRequest.class).hasMessageContaining("'env'")
                .hasMessageContaining("session_close");
        executor.sessions().close(t, "s");
        ExecutionRequest nodeStdin = ExecutionRequest.builder("nodejs", "1", base.limits()).stdin("x")
                .audit(base.audit()).session(base.session()).build();
        assertThatThrownBy(() -> executor.submit(nodeStdin, OutputListener.NONE))
                .isInstanceOf(ExecutionException.InvalidRequest.class).hasMessageContaining("'stdin'");
        assertThatThrownBy(() -> executor.submit(req(executor, "python", "1", t, "bad name!"), OutputListener.NONE))
                .isInstanceOf(ExecutionException.InvalidRequest.class).hasMessageContaining("bad session name");
        call(executor, "python", "1", t, "s");
        assertThatThrownBy(() -> executor.submit(req(executor, "nodejs", "1", t, "s"), OutputListener.NONE))
                .isInstanceOf(ExecutionException.InvalidRequest.class).hasMessageContaining("runs python");
        executor.sessions().close(t, "s");
    }

    @Test
    void maxSessionsPerTenantIsEnforced() throws Exception {
        // No session idles out during the test, however slow the machine.
        Config c = config("MAX_SESSIONS", "2", "SESSION_IDLE_SECONDS", "3600", "WARM_POOL", "off");
        LocalExecutor e = new LocalExecutor(c, TestSandboxes.real(c).orElseThrow(), Languages.load());
        try {
            call(e, "python", "1", "alice", "one");
            call(e, "nodejs", "1", "alice", "two");
            assertThatThrownBy(() -> e.submit(req(e, "python", "1", "alice", "three"), OutputListener.NONE))
                    .isInstanceOf(ExecutionException.InvalidRequest.class)
                    .hasMessageContaining("MAX_SESSIONS").hasMessageContaining("session_close");
            assertThat(call(e, "python", "'other tenant'", "bob", "one").exitCode()).isZero();
            assertThat(e.runtimeInfo().get("sessions")).asInstanceOf(
                    org.assertj.core.api.InstanceOfAssertFactories.MAP).containsEntry("count", 3)
                    .containsEntry("maxPerTenant", 2);
            assertThat(e.sessions().close("alice", "one")).isTrue();
            assertThat(call(e, "python", "1", "alice", "three").exitCode()).as("a closed session frees its place").isZero();
        } finally {
            e.close();
        }
        assertNothingLeft();
    }

    @Test
    void pastSessionsMemoryMbTheLongestIdleSessionIsEndedAndItsNextCallIsTold() throws Exception {
        Config c = config("SESSIONS_MEMORY_MB", "200", "SESSION_IDLE_SECONDS", "3600", "WARM_POOL", "off");
        LocalExecutor e = new LocalExecutor(c, TestSandboxes.real(c).orElseThrow(), Languages.load());
        try {
            String hold = "held = b'x' * (120 << 20)\nlen(held)";
            assertThat(call(e, "python", hold, "alice", "big").exitCode()).isZero();
            Requires.that(e.sessions().list("alice").getFirst().memoryBytes().isPresent(), "a memory cgroup for the session");
            assertThat(call(e, "python", "1", "carol", "small").exitCode()).isZero();
            assertThat(e.sessions().list("alice")).as("alice's session fits beside a small one").hasSize(1);

            // bob's call makes the sessions hold about 250 MB: alice's, unused longest, is ended, carol's stays.
            assertThat(call(e, "python", hold, "bob", "big").exitCode()).isZero();
            assertThat(e.sessions().list("alice")).isEmpty();
            assertThat(e.sessions().list("carol")).hasSize(1);
            assertThat(e.sessions().list("bob")).singleElement().satisfies(i -> assertThat(i.memoryBytes()).isPresent());
            long held = java.util.stream.Stream.of("alice", "bob", "carol").flatMap(t -> e.sessions().list(t).stream())
                    .mapToLong(i -> i.memoryBytes().orElse(0)).sum();
            assertThat(held).isLessThanOrEqualTo(200L << 20);

            ExecutionResult told = call(e, "python", "len(held)", "alice", "big");
            assertThat(told.outcome()).isEqualTo(Outcome.FAILED_TO_START);
            assertThat(told.stderr()).contains("ended while idle").contains("SESSIONS_MEMORY_MB")
                    .contains("Its state is gone; the next call starts a new session");
            ExecutionResult fresh = call(e, "python", "'held' in globals()", "alice", "big");
            assertThat(fresh.session().orElseThrow().created()).isTrue();
            assertThat(result(fresh)).contains("False");
            assertThat(e.runtimeInfo().get("sessions")).asInstanceOf(
                    org.assertj.core.api.InstanceOfAssertFactories.MAP).containsEntry("memoryMb", 200L);
        } finally {
            e.close();
        }
        assertNothingLeft();
    }

    /**
     * The attack of issue 35 (finding 9), scaled down: one tenant's small session, then another tenant's three big
     * ones. The memory budget is shared by the tenants with sessions: the one over its share loses its own
     * longest-idle session, the small one (longer idle, but within its share) stays.
     */
    @Test
    void aTenantOverItsShareOfSessionsMemoryMbLosesItsOwnIdleSessionNotAnotherTenantsSmallOne() throws Exception {
        Config c = config("SESSIONS_MEMORY_MB", "250", "SESSION_IDLE_SECONDS", "3600", "WARM_POOL", "off");
        LocalExecutor e = new LocalExecutor(c, TestSandboxes.real(c).orElseThrow(), Languages.load());
        try {
            assertThat(call(e, "python", "x = 41", "bob", "small").exitCode()).isZero();
            Requires.that(e.sessions().list("bob").getFirst().memoryBytes().isPresent(), "a memory cgroup for the session");
            String hold = "held = b'x' * (100 << 20)\nlen(held)";
            for (String name : List.of("one", "two", "three"))
                assertThat(call(e, "python", hold, "alice", name).exitCode()).isZero();

            // about 330 MB against 250: alice holds over her share of 125, so her session unused longest is ended
            assertThat(e.sessions().list("bob")).as("bob's session, within its share").hasSize(1);
            assertThat(e.sessions().list("alice")).extracting(SessionControl.SessionInfo::name)
                    .containsExactly("three", "two");
            ExecutionResult told = call(e, "python", "len(held)", "alice", "one");
            assertThat(told.outcome()).isEqualTo(Outcome.FAILED_TO_START);
            assertThat(told.stderr()).contains("ended while idle").contains("SESSIONS_MEMORY_MB")
                    .contains("share").contains("Its state is gone");
            assertThat(result(call(e, "python", "x + 1", "bob", "small"))).as("bob's state kept").contains("42");
        } finally {
            e.close();
        }
        assertNothingLeft();
    }

    @Test
    void aTenantAtItsShareWhoseSessionsAreAllInCallsIsRefusedANewOneWhileOthersStartTheirs() throws Exception {
        Config c = config("SESSIONS_MEMORY_MB", "100", "SESSION_IDLE_SECONDS", "3600", "WARM_POOL", "off");
        LocalExecutor e = new LocalExecutor(c, TestSandboxes.real(c).orElseThrow(), Languages.load());
        try {
            assertThat(call(e, "python", "x = 41", "bob", "small").exitCode()).isZero();
            Requires.that(e.sessions().list("bob").getFirst().memoryBytes().isPresent(), "a memory cgroup for the session");
            StartedListener started = new StartedListener();
            RunHandle holding = e.submit(req(e, "python", "held = b'x' * (110 << 20)\nprint('started', flush=True)\n"
                    + "import time\nwhile True: time.sleep(0.05)", "alice", "one"), started);
            started.await();

            // over the budget, all of it alice's call: she is refused another interpreter, bob (within) is not
            ExecutionResult refused = call(e, "python", "1", "alice", "two");
            assertThat(refused.outcome()).isEqualTo(Outcome.FAILED_TO_START);
            assertThat(refused.stderr()).contains("no room for another session").contains("SESSIONS_MEMORY_MB")
                    .contains("share").contains("session_close");
            assertThat(e.sessions().list("alice")).extracting(SessionControl.SessionInfo::name).containsExactly("one");
            assertThat(call(e, "python", "1", "bob", "second").exitCode()).isZero();

            // once alice's call has ended her session is idle and over her share: it goes, bob's stay
            holding.cancel();
            assertThat(await(holding).outcome()).isEqualTo(Outcome.CANCELLED);
            assertThat(e.sessions().list("alice")).isEmpty();
            assertThat(e.sessions().list("bob")).extracting(SessionControl.SessionInfo::name)
                    .containsExactly("second", "small");
        } finally {
            e.close();
        }
        assertNothingLeft();
    }

    @Test
    void idleSessionsExpireAndLeaveNoProcess() throws Exception {
        Config c = config("MAX_SESSIONS", "1", "SESSION_IDLE_SECONDS", "1", "WARM_POOL", "off");
        LocalExecutor e = new LocalExecutor(c, TestSandboxes.real(c).orElseThrow(), Languages.load());
        try {
            call(e, "python", "1", "alice", "one");
            call(e, "nodejs", "1", "bob", "one");
            Poll.until("every session expired", () -> e.sessions.count() == 0);
            assertThat(e.sessions().list("alice")).isEmpty();
            assertThat(e.sessions().list("bob")).isEmpty();
            SandboxLeftovers.awaitNoProcesses("expired sessions leave no process");
            ExecutionResult next = call(e, "python", "1", "alice", "two");
            assertThat(next.exitCode()).isZero();
            assertThat(next.session().orElseThrow().created()).isTrue();
        } finally {
            e.close();
        }
        assertNothingLeft();
    }

    @Test
    void closingTheExecutorEndsEverySession() throws Exception {
        Config c = config("WARM_POOL", "off");
        LocalExecutor e = new LocalExecutor(c, TestSandboxes.real(c).orElseThrow(), Languages.load());
        call(e, "python", "x = 1", "alice", "a");
        call(e, "nodejs", "x = 1", "alice", "b");
        StartedListener started = new StartedListener();
        RunHandle running = e.submit(req(e, "python", "print('started', flush=True)\nwhile True: pass", "bob", "c"),
                started);
        started.await();
        assertThat(e.status().running()).as("a session call holds an execution slot like a run").isEqualTo(1);
        assertThat(SandboxLeftovers.processesNow()).as("three interpreters").hasSizeGreaterThanOrEqualTo(3);
        e.close();
        assertThat(await(running).outcome()).isIn(Outcome.CANCELLED);
        assertNothingLeft();
    }

    private static ExecutionRequest withTimeout(ExecutionRequest r, long ms) {
        return ExecutionRequest.builder(r.language(), r.code(), r.limits().withTimeout(Duration.ofMillis(ms)))
                .stdin(r.stdin()).args(r.args()).env(r.env()).audit(r.audit()).workspace(r.workspace())
                .session(r.session()).build();
    }
}
