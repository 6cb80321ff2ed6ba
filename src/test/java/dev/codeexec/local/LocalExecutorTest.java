package dev.codeexec.local;

import dev.codeexec.lang.Placeholders;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.lang.Languages;
import dev.codeexec.config.Config;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static dev.codeexec.local.TestSupport.await;
import static dev.codeexec.local.TestSupport.config;
import static dev.codeexec.local.TestSupport.request;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The engine's run lifecycle, queue, limits and cleanup, against {@link FakeSandbox};
 * {@link RealSandboxExecutorTest} runs the same tests in the real sandbox.
 */
@Tag("slow")
class LocalExecutorTest {

    private RecordingSandbox sandbox;
    private final List<LocalExecutor> executors = new ArrayList<>();

    /** The sandbox under the recording wrapper. */
    Sandbox baseSandbox(Config config) {
        return new FakeSandbox();
    }

    LocalExecutor executor(String... pairs) {
        Config config = config(pairs);
        if (sandbox == null) sandbox = new RecordingSandbox(baseSandbox(config));
        LocalExecutor e = new LocalExecutor(config, sandbox, Languages.load());
        executors.add(e);
        return e;
    }

    @AfterEach
    void closeAll() {
        executors.forEach(LocalExecutor::close);
    }

    private static ExecutionRequest py(LocalExecutor e, String code) {
        return request(e.config, "python", code);
    }

    static ExecutionRequest sh(LocalExecutor e, String code, long timeoutMs) {
        return request(e.config, "shell", code, "", List.of(), Map.of(), timeoutMs);
    }

    /** A language whose program is missing on this machine: said at start and in runtime_info, refused with why. */
    @Test
    void aLanguageThatIsNotInstalledIsAClearErrorNotAFailedRun() throws Exception {
        String table = "{\"languages\": [{\"id\": \"python\", \"aliases\": [], \"extension\": \"py\", "
                + "\"run\": [\"/nonexistent/python3\", \"{file}\"], \"version\": [\"/nonexistent/python3\", \"--version\"]}], \"tools\": {}}";
        Config config = config("WARM_POOL", "off");
        try (LocalExecutor e = new LocalExecutor(config, new FakeSandbox(),
                Languages.parse(new java.io.ByteArrayInputStream(table.getBytes(java.nio.charset.StandardCharsets.UTF_8))))) {
            @SuppressWarnings("unchecked")
            Map<String, Map<String, Object>> langs = (Map<String, Map<String, Object>>) e.runtimeInfo().get("languages");
            assertThat(langs.get("python")).containsEntry("available", false);
            assertThatThrownBy(() -> e.submit(request(config, "python", "print(1)"), OutputListener.NONE))
                    .isInstanceOf(dev.codeexec.engine.ExecutionException.InvalidRequest.class)
                    .hasMessageContaining("python is not installed on this machine");
        }
    }

    @Test
    void pythonHelloWorld() throws Exception {
        LocalExecutor e = executor();
        ExecutionResult r = await(e.submit(py(e, "print('hello')"), OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.EXITED);
        assertThat(r.exitCode()).isZero();
        assertThat(r.stdout()).isEqualTo("hello\n");
        assertThat(r.stderr()).isEmpty();
        assertThat(r.truncated()).isFalse();
        assertThat(r.sandbox()).isEqualTo(sandbox.name());
        assertThat(r.language()).isEqualTo("python");
    }

    @Test
    void stdinArgsStderrAndExitCode() throws Exception {
        LocalExecutor e = executor();
        String code = "import sys\nprint(sys.stdin.read().upper(), sys.argv[1:])\nprint('oops', file=sys.stderr)\nsys.exit(3)";
        ExecutionResult r = await(e.submit(request(e.config, "py", code, "abc", List.of("x y", "$HOME"), Map.of(), null),
                OutputListener.NONE));
        assertThat(r.stdout()).isEqualTo("ABC ['x y', '$HOME']\n");
        assertThat(r.stderr()).isEqualTo("oops\n");
        assertThat(r.exitCode()).isEqualTo(3);
        assertThat(r.outcome()).isEqualTo(Outcome.EXITED);
    }

    @Test
    void environmentIsTheWhitelistPlusLanguageAndRequestNeverTheServers() throws Exception {
        LocalExecutor e = executor();
        ExecutionResult r = await(e.submit(request(e.config, "shell", "env | sort", "", List.of(),
                Map.of("MY_VAR", "42"), null), OutputListener.NONE));
        var spec = sandbox.specs.getLast();
        assertThat(spec.env()).containsEntry("MY_VAR", "42").containsEntry("LANG", "C.UTF-8")
                .containsEntry("HOME", "/tmp").containsEntry("TMPDIR", "/tmp")
                .containsEntry("PYTHONUNBUFFERED", "1").containsEntry("MPLBACKEND", "Agg");
        assertThat(spec.env().keySet()).isSubsetOf(Set.of("PATH", "HOME", "LANG", "TMPDIR", "PYTHONUNBUFFERED",
                "MPLBACKEND", "MY_VAR"));
        assertThat(r.stdout()).contains("MY_VAR=42").doesNotContain("JAVA_HOME").doesNotContain("MAVEN");
    }

    @Test
    void codeFileIsUniquelyNamedInTheWorkDirAndStagingIsCleanedUp() throws Exception {
        LocalExecutor e = executor();
        await(e.submit(py(e, "print(1)"), OutputListener.NONE));
        await(e.submit(py(e, "print(2)"), OutputListener.NONE));
        var first = sandbox.specs.get(0).readOnlyFiles().keySet().iterator().next();
        var second = sandbox.specs.get(1).readOnlyFiles().keySet().iterator().next();
        assertThat(first).matches("/work/code_[0-9a-f]{8}\\.py");
        assertThat(second).matches("/work/code_[0-9a-f]{8}\\.py").isNotEqualTo(first);
        assertThat(sandbox.specs.get(0).workDir()).isEqualTo(Placeholders.WORK_DIR);
        assertThat(sandbox.specs.get(0).command()).containsExactly("/usr/bin/python3", "-S", "-u",
                e.config.dataDir().toAbsolutePath().resolve("runtime/run_python.py").toString(), first);
        for (var spec : sandbox.specs) {
            Path staged = spec.readOnlyFiles().values().iterator().next();
            assertThat(staged.getParent()).isEqualTo(e.stagingDir);
            assertThat(staged).doesNotExist();
        }
    }

    @Test
    void importsFromTheWorkingDirectoryWork() throws Exception {
        LocalExecutor e = executor();
        String code = "open('helper.py','w').write('X = 7\\n')\nimport helper\nprint(helper.X)";
        assertThat(await(e.submit(py(e, code), OutputListener.NONE)).stdout()).isEqualTo("7\n");
    }

    @Test
    void compiledLanguageRunsCompileThenProgramWithArgs() throws Exception {
        LocalExecutor e = executor();
        String code = "#include <stdio.h>\nint main(int c, char **v){ printf(\"%d %s\\n\", c, v[1]); return 4; }";
        ExecutionResult r = await(e.submit(request(e.config, "c", code, "", List.of("it's ok"), Map.of(), null),
                OutputListener.NONE));
        assertThat(r.stdout()).isEqualTo("2 it's ok\n");
        assertThat(r.exitCode()).isEqualTo(4);
    }

    @Test
    void compileErrorIsANormalResultWithTheCompilersMessage() throws Exception {
        LocalExecutor e = executor();
        ExecutionResult r = await(e.submit(request(e.config, "c", "int main(){ return nope; }"), OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.EXITED);
        assertThat(r.exitCode()).isNotZero();
        assertThat(r.stderr()).contains("nope").contains("error");
        assertThat(r.stdout()).isEmpty();
    }

    @Test
    void unknownLanguageIsRejectedAtSubmitWithTheSupportedList() {
        LocalExecutor e = executor();
        var req = ExecutionRequest.builder("cobol", "x", new RequestValidator(e.config, Languages.load()).limits(Duration.ofSeconds(1)))
                .build();
        assertThatThrownBy(() -> e.submit(req, OutputListener.NONE))
                .isInstanceOf(dev.codeexec.engine.ExecutionException.InvalidRequest.class)
                .hasMessageContaining("cobol").hasMessageContaining("python, nodejs, typescript, go, java");
    }

    @Test
    void timeoutKillsTheRunAndSaysSo() throws Exception {
        LocalExecutor e = executor();
        ExecutionResult r = await(e.submit(sh(e, "echo before; sleep 30; echo after", 2000), OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.TIMEOUT);
        assertThat(r.timedOut()).isTrue();
        assertThat(r.stdout()).as("killed before the sleep ended").isEqualTo("before\n");
        assertThat(r.stderr()).endsWith("[terminated] timeout after 2000 ms\n");
        assertThat(r.durationMs()).isGreaterThanOrEqualTo(2000);
    }

    @Test
    void timeoutTimerStartsWhenTheProgramStartsNotWhenQueued() throws Exception {
        LocalExecutor e = executor("MAX_CONCURRENT", "1");
        RunHandle first = e.submit(sh(e, "sleep 3", 20_000), OutputListener.NONE);
        RunHandle second = e.submit(sh(e, "sleep 0.3; echo done", 2_000), OutputListener.NONE);
        // second waits ~3 s in the queue, longer than its own 2 s timeout, and still must not time out
        assertThat(await(second).outcome()).isEqualTo(Outcome.EXITED);
        assertThat(await(second).stdout()).isEqualTo("done\n");
        assertThat(await(first).outcome()).isEqualTo(Outcome.EXITED);
    }

    @Test
    void stdoutFloodWithoutEndIsStoppedAtTheDrainLimitWithHeadAndTail() throws Exception {
        LocalExecutor e = executor("MAX_OUTPUT_KB", "64", "MAX_OUTPUT_DRAIN_MB", "8");
        ExecutionResult r = await(e.submit(py(e, "import sys\nwhile True: sys.stdout.write('x' * 65536)"),
                OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.OUTPUT_LIMIT);
        assertThat(r.truncated()).isTrue();
        assertThat(r.stdout()).matches("x{32768}\n\\[\\.\\.\\. \\d+ bytes left out \\.\\.\\.\\]\nx{32768}");
        assertThat(r.stderr()).isEqualTo("[terminated] output limit: more than 8 MB of output\n");
    }

    @Test
    void stderrFloodWithoutEndIsStoppedAtTheDrainLimit() throws Exception {
        LocalExecutor e = executor("MAX_OUTPUT_KB", "16", "MAX_OUTPUT_DRAIN_MB", "4");
        ExecutionResult r = await(e.submit(sh(e, "yes error >&2", 20_000), OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.OUTPUT_LIMIT);
        assertThat(r.truncated()).isTrue();
        assertThat(r.stderr()).startsWith("error\nerror\n").contains(" bytes left out ...]\n")
                .endsWith("\n[terminated] output limit: more than 4 MB of output\n");
        assertThat(r.stderr().length()).isLessThan(16 * 1024 + 200);
    }

    @Test
    void outputOverTheCapNoLongerEndsTheProgram() throws Exception {
        LocalExecutor e = executor("MAX_OUTPUT_KB", "64");
        List<String> streamed = new CopyOnWriteArrayList<>();
        ExecutionResult r = await(e.submit(py(e, "import sys\nsys.stderr.write('start\\n' + 'e' * 5_000_000 + '\\nlast words\\n')\n"
                + "print('fine')"), (s, t) -> streamed.add(t)));
        assertThat(r.outcome()).isEqualTo(Outcome.EXITED);
        assertThat(r.exitCode()).isZero();
        assertThat(r.stdout()).isEqualTo("fine\n");
        assertThat(r.truncated()).isTrue();
        assertThat(r.stderr()).startsWith("start\neee").endsWith("eee\nlast words\n")
                .contains("[... " + (5_000_018 - 64 * 1024) + " bytes left out ...]");
        assertThat(String.join("", streamed).length()).as("progress is bounded by the cap too")
                .isLessThan(2 * 64 * 1024 + 2 * 16 * 1024 + 200);
    }

    @Test
    void unreadStdinLargerThanAPipeDoesNotHang() throws Exception {
        LocalExecutor e = executor();
        String big = "y".repeat(1024 * 1024);
        ExecutionResult r = await(e.submit(request(e.config, "shell", "echo ignoring", big, List.of(), Map.of(), 10_000L),
                OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.EXITED);
        assertThat(r.stdout()).isEqualTo("ignoring\n");
    }

    @Test
    void binaryOutputComesBackAsValidText() throws Exception {
        LocalExecutor e = executor();
        ExecutionResult r = await(e.submit(py(e, "import sys\nsys.stdout.buffer.write(b'ok' + bytes(range(256)) + b'end')"),
                OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.EXITED);
        assertThat(r.stdout()).startsWith("ok").endsWith("end").contains("\uFFFD");
        // Round-trips through UTF-8 unchanged: the text is valid.
        String s = r.stdout();
        assertThat(new String(s.getBytes(java.nio.charset.StandardCharsets.UTF_8), java.nio.charset.StandardCharsets.UTF_8))
                .isEqualTo(s);
    }

    @Test
    void multibyteCharacterSplitAcrossWritesIsDecodedWhole() throws Exception {
        LocalExecutor e = executor();
        String code = "import sys, time\nb = '€ ü 😀'.encode()\nfor i in range(len(b)):\n"
                + "    sys.stdout.buffer.write(b[i:i+1]); sys.stdout.flush(); time.sleep(0.02)";
        ExecutionResult r = await(e.submit(py(e, code), OutputListener.NONE));
        assertThat(r.stdout()).isEqualTo("€ ü 😀");
    }

    @Test
    void listenerGetsOutputBeforeTheRunEnds() throws Exception {
        LocalExecutor e = executor();
        List<String> seen = new CopyOnWriteArrayList<>();
        CompletableFuture<Boolean> doneWhenFirstSeen = new CompletableFuture<>();
        var holder = new RunHandle[1];
        OutputListener l = (stream, text) -> {
            seen.add(stream + ":" + text);
            if (text.contains("first") && holder[0] != null) doneWhenFirstSeen.complete(holder[0].result().isDone());
        };
        holder[0] = e.submit(sh(e, "sleep 0.2; echo first; sleep 1; echo second; echo err >&2", 10_000), l);
        ExecutionResult r = await(holder[0]);
        assertThat(doneWhenFirstSeen.get(5, TimeUnit.SECONDS)).isFalse();
        assertThat(seen.getFirst()).isEqualTo("STDOUT:first\n");
        // stdout and stderr are read by two threads: their relative order is not defined
        assertThat(seen).containsExactlyInAnyOrder("STDOUT:first\n", "STDOUT:second\n", "STDERR:err\n");
        assertThat(r.stdout()).isEqualTo("first\nsecond\n");
    }

    @Test
    void aStuckListenerNeverStallsTheProgram() throws Exception {
        LocalExecutor e = executor("MAX_OUTPUT_KB", "2048");
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        OutputListener stuck = (stream, text) -> {
            try {
                release.await();
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
            }
        };
        // 1 MB is far more than a pipe buffer: with the listener on the reading path this would hang to the timeout.
        ExecutionResult r = await(e.submit(request(e.config, "python", "import sys\nsys.stdout.write('z' * 1000000)",
                "", List.of(), Map.of(), 60_000L), stuck));
        release.countDown();
        assertThat(r.outcome()).as("ended by itself, not by the 60 s timeout").isEqualTo(Outcome.EXITED);
        assertThat(r.stdout()).hasSize(1_000_000);
    }

    @Test
    void cancelWhileRunningKillsIt() throws Exception {
        LocalExecutor e = executor();
        CompletableFuture<Void> started = new CompletableFuture<>();
        RunHandle h = e.submit(sh(e, "echo started; sleep 30; echo never", 60_000), (s, t) -> started.complete(null));
        started.get(60, TimeUnit.SECONDS);
        h.cancel();
        ExecutionResult r = await(h);
        assertThat(r.outcome()).isEqualTo(Outcome.CANCELLED);
        assertThat(r.stdout()).as("killed before the sleep ended").isEqualTo("started\n");
        assertThat(r.stderr()).endsWith("[terminated] cancelled\n");
        assertThat(sandbox.closed.get()).isEqualTo(1);
    }

    @Test
    void cancelWhileQueuedLeavesTheQueueWithoutRunning() throws Exception {
        LocalExecutor e = executor("MAX_CONCURRENT", "1");
        RunHandle busy = e.submit(sh(e, "sleep 30", 60_000), OutputListener.NONE);
        RunHandle waiting = e.submit(sh(e, "echo should-not-run", 60_000), OutputListener.NONE);
        Poll.until("one run running and one queued", () -> e.status().queued() == 1 && e.status().running() == 1);
        waiting.cancel();
        ExecutionResult r = waiting.result().get(5, TimeUnit.SECONDS);
        assertThat(r.outcome()).isEqualTo(Outcome.CANCELLED);
        assertThat(r.stdout()).isEmpty();
        assertThat(r.exitCode()).isEqualTo(-1);
        Poll.until("the cancelled run out of the queue", () -> e.status().queued() == 0);
        busy.cancel();
        assertThat(await(busy).outcome()).isEqualTo(Outcome.CANCELLED);
        assertThat(sandbox.specs).hasSize(1);
    }

    @Test
    void fullQueueIsRefusedAtOnceWithBusy() throws Exception {
        LocalExecutor e = executor("MAX_CONCURRENT", "1", "QUEUE_SIZE", "1");
        RunHandle a = e.submit(sh(e, "sleep 30", 60_000), OutputListener.NONE);
        RunHandle b = e.submit(sh(e, "true", 60_000), OutputListener.NONE);
        Poll.until("the second run queued", () -> e.status().queued() == 1);
        RunHandle c = e.submit(sh(e, "true", 60_000), OutputListener.NONE);
        assertThat(c.result()).as("refused inside submit").isCompletedExceptionally();
        assertThatThrownBy(() -> c.result().get())
                .isInstanceOf(ExecutionException.class)
                .cause().isInstanceOf(dev.codeexec.engine.ExecutionException.Busy.class)
                .hasMessageContaining("busy").hasMessageContaining("try again later");
        a.cancel();
        assertThat(await(b).outcome()).isEqualTo(Outcome.EXITED);
    }

    @Test
    void queueTimeoutIsRefusedWithBusy() throws Exception {
        LocalExecutor e = executor("MAX_CONCURRENT", "1", "QUEUE_TIMEOUT_MS", "300");
        RunHandle a = e.submit(sh(e, "sleep 30", 60_000), OutputListener.NONE);
        RunHandle b = e.submit(sh(e, "true", 60_000), OutputListener.NONE);
        assertThatThrownBy(() -> b.result().get(5, TimeUnit.SECONDS))
                .cause().isInstanceOf(dev.codeexec.engine.ExecutionException.Busy.class)
                .hasMessageContaining("300 ms");
        assertThat(e.status().queued()).isZero();
        a.cancel();
        await(a);
    }

    @Test
    void neverMoreThanMaxConcurrentRunsAtOnce() throws Exception {
        LocalExecutor e = executor("MAX_CONCURRENT", "2");
        List<RunHandle> hs = new ArrayList<>();
        for (int i = 0; i < 7; i++) hs.add(e.submit(sh(e, "sleep 0.3; echo " + i, 30_000), OutputListener.NONE));
        for (int i = 0; i < hs.size(); i++) assertThat(await(hs.get(i)).stdout()).isEqualTo(i + "\n");
        assertThat(sandbox.maxAlive.get()).isEqualTo(2);
        assertThat(e.status().running()).isZero();
        assertThat(e.status().queued()).isZero();
    }

    @Test
    void closeCancelsWhatOutlivesTheGraceAndRefusesNewRuns() throws Exception {
        // A grace far longer than the quick run needs, however loaded the machine: it ends within it.
        LocalExecutor e = executor("SHUTDOWN_GRACE_SECONDS", "60", "MAX_CONCURRENT", "1");
        RunHandle quick = e.submit(sh(e, "sleep 0.3; echo finished", 60_000), OutputListener.NONE);
        Poll.until("the quick run running", () -> e.status().running() == 1);
        RunHandle queued = e.submit(sh(e, "echo never", 60_000), OutputListener.NONE);
        e.close();
        assertThat(quick.result()).isDone();
        assertThat(quick.result().get().stdout()).isEqualTo("finished\n");
        assertThat(queued.result().get().outcome()).isEqualTo(Outcome.CANCELLED);
        assertThatThrownBy(() -> e.submit(sh(e, "true", 1000), OutputListener.NONE))
                .isInstanceOf(dev.codeexec.engine.ExecutionException.Unavailable.class)
                .hasMessageContaining("shutting down");

        LocalExecutor e2 = executor("SHUTDOWN_GRACE_SECONDS", "0");
        CompletableFuture<Void> started = new CompletableFuture<>();
        RunHandle slow = e2.submit(sh(e2, "echo go; sleep 60", 120_000), (s, t) -> started.complete(null));
        started.get(60, TimeUnit.SECONDS);
        e2.close();
        assertThat(slow.result()).isDone();
        assertThat(slow.result().get().outcome()).isEqualTo(Outcome.CANCELLED);
        assertThat(sandbox.alive.get()).isZero();
        assertThat(sandbox.closed.get()).isEqualTo(sandbox.specs.size());
        // the staging directory is shared with every other test JVM on the machine: look for these runs' files
        Set<String> ours = Set.of(quick.id(), queued.id(), slow.id());
        try (Stream<Path> staged = Files.list(e2.stagingDir)) {
            assertThat(staged.filter(p -> ours.stream().anyMatch(id -> p.getFileName().toString().startsWith(id + "-"))))
                    .isEmpty();
        }
    }

    @Test
    void closeRightAfterStartStopsTheWarmUpsAndLeavesNoScratch() throws Exception {
        Path scratchRoot = Path.of(TestSupport.DATA_DIR, "tmp");
        Path deadServer = scratchRoot.resolve("999999999");
        Files.createDirectories(deadServer.resolve("go-warm123"));
        LocalExecutor e = executor();
        assertThat(deadServer).as("left by a server that no longer runs").doesNotExist();
        e.close();
        assertThat(scratchRoot.resolve(Long.toString(ProcessHandle.current().pid()))).doesNotExist();
    }

    @Test
    void unusableSandboxRefusesEveryRunWithItsReason() {
        LocalExecutor e = executor();
        sandbox.unavailable = java.util.Optional.of("bwrap not installed");
        assertThatThrownBy(() -> e.submit(py(e, "print(1)"), OutputListener.NONE))
                .isInstanceOf(dev.codeexec.engine.ExecutionException.Unavailable.class)
                .hasMessageContaining("bwrap not installed");
        assertThat(sandbox.specs).isEmpty();
    }

    @Test
    void sandboxStartFailureIsAFailedToStartResult() throws Exception {
        LocalExecutor e = executor();
        sandbox.failStart = "cannot create cgroup";
        ExecutionResult r = await(e.submit(py(e, "print(1)"), OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.FAILED_TO_START);
        assertThat(r.exitCode()).isEqualTo(-1);
        assertThat(r.stderr()).isEqualTo("cannot create cgroup");
        assertThat(e.status().running()).isZero();
    }

    @Test
    void killedBySignalIsReportedAsSuch() throws Exception {
        LocalExecutor e = executor();
        // A real fault, not kill(): the program may be pid 1 of its namespace, which ignores sent signals.
        ExecutionResult r = await(e.submit(py(e, "import ctypes\nctypes.string_at(0)"), OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.KILLED_BY_SIGNAL);
        assertThat(r.exitCode()).isEqualTo(128 + 11);
        assertThat(r.stderr()).contains("[terminated] killed by signal 11");
    }

    @Test
    void runtimeInfoReportsLanguagesToolsSandboxAndLimits() {
        LocalExecutor e = executor("MAX_CONCURRENT", "3", "MEMORY_LIMIT_MB", "512");
        Map<String, Object> info = e.runtimeInfo();
        @SuppressWarnings("unchecked")
        var langs = (Map<String, Map<String, Object>>) info.get("languages");
        assertThat(langs.keySet()).containsExactly("python", "nodejs", "typescript", "go", "java", "shell", "bash", "c");
        assertThat(langs.get("python")).containsEntry("available", true).containsEntry("aliases", List.of("py", "python3"));
        assertThat((String) langs.get("python").get("version")).startsWith("Python 3.");
        assertThat((String) langs.get("java").get("version")).startsWith("javac 25");
        assertThat((String) langs.get("typescript").get("version")).matches("typescript (5\\.|\\(types stripped by node\\) ).*");
        assertThat((String) langs.get("go").get("version")).startsWith("go version go1.23");
        assertThat(langs.get("c")).containsEntry("compiled", true);
        @SuppressWarnings("unchecked")
        var tools = (Map<String, Map<String, Object>>) info.get("tools");
        assertThat(tools.get("git")).containsEntry("available", true);
        assertThat((String) tools.get("git").get("version")).startsWith("git version");
        assertThat((String) tools.get("zip").get("version")).startsWith("This is Zip");
        assertThat(asMap(info.get("sandbox"))).containsEntry("name", sandbox.name()).containsEntry("available", true)
                .containsAllEntriesOf(sandbox.info());
        assertThat(asMap(info.get("limits"))).containsEntry("memoryMb", 512);
        assertThat(asMap(info.get("concurrency"))).containsEntry("maxConcurrent", 3);
        assertThat(info.get("goCache")).isIn("warm", "warming", "cold");
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> asMap(Object o) {
        return (Map<String, Object>) o;
    }
}
