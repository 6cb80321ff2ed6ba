package dev.codeexec.local;

import dev.codeexec.engine.Outcome;
import dev.codeexec.lang.Language;
import dev.codeexec.warm.PythonSite;
import dev.codeexec.warm.StartupWork;
import dev.codeexec.warm.WarmPool;
import dev.codeexec.config.DataDir;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The in-sandbox interpreter runners (src/main/resources/engine/{warm,session}_{python,node}.*) started directly,
 * without a sandbox, on FIFOs as fds 8 and 9 the way the server starts them. Warm runs are compared with the cold
 * `python3 -u file` / `node file` they stand in for.
 */
@Tag("slow")
@Timeout(value = 30, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class RunnerScriptsTest {

    private static final Path ENGINE = Path.of("src/main/resources/engine").toAbsolutePath();
    /** The engine files installed as the server installs them, with python-site and the compiled runner modules. */
    private static Path runtime;
    private static final String PYTHON = "/usr/bin/python3";
    private static final String NODE = "/usr/bin/node";
    private static final JsonMapper JSON = JsonMapper.builder().build();
    private static final String RUNNER_NAMES = "(warm_python|run_python|session_python|codeexec_|warm_node|session_node|"
            + "codeexec_node)";

    @BeforeAll
    static void installRuntime(@TempDir Path dir) throws IOException {
        DataDir data = DataDir.at(dir);
        runtime = data.prepareRuntime();
        for (String f : StartupWork.RUNTIME_FILES) Files.copy(ENGINE.resolve(f), runtime.resolve(f));
        assertThat(PythonSite.prepare(PYTHON, data)).as("python-site measured").isTrue();
    }

    private static String[] warmPython() {
        return new String[] {PYTHON, "-S", "-u", script("warm_python.py")};
    }

    /** The cold run's command, as languages.json has it. */
    private static List<String> coldPython(Path file, List<String> args) {
        return concat(List.of(PYTHON, "-S", "-u", script("run_python.py"), file.toString()), args);
    }

    // ---------------------------------------------------------------------------------------------- warm python

    static Stream<Arguments> ordinaryPythonPrograms() {
        return Stream.of(
                Arguments.of("hello and args", "import sys\nprint('hello', sys.argv[1:], __name__)\n",
                        List.of("a", "b c", "", "\u00e9 \u2603"), ""),
                Arguments.of("empty program", "", List.of("", "x"), ""),
                Arguments.of("main module", """
                        import sys, os
                        print(__file__, sys.argv[0], sys.path[0], os.getcwd())
                        print(sorted(globals()), __loader__.name, __spec__, __package__, __cached__)
                        print(sys.modules['__main__'] is sys.modules[__name__], [m for m in sys.modules if 'codeexec' in m])
                        """, List.of(), ""),
                Arguments.of("stdin", "import sys\nprint(input().upper())\nprint(sys.stdin.read().split())\n",
                        List.of(), "first\nsecond third\n"),
                Arguments.of("open fds", "import os\nprint(sorted(os.listdir('/proc/self/fd')))\n", List.of(), ""),
                Arguments.of("sys.exit(3)", "print('before')\nimport sys\nsys.exit(3)\n", List.of(), ""),
                Arguments.of("sys.exit(msg)", "import sys\nsys.exit('bad input')\n", List.of(), ""),
                Arguments.of("uncaught chain", """
                        def f(a, b):
                            return a['x'] / b
                        try:
                            f({'x': 1}, 0)
                        except Exception as e:
                            raise ValueError('wrapped') from e
                        """, List.of(), ""),
                Arguments.of("syntax error", "print('never')\nx = (\n", List.of(), ""),
                Arguments.of("keyboard interrupt", "import atexit\natexit.register(print, 'atexit ran')\n"
                        + "raise KeyboardInterrupt\n", List.of(), ""),
                Arguments.of("workspace module named like a standard one the runner uses",
                        "import token, json\nprint(token.VALUE, json.dumps([1]))\n", List.of(), ""),
                Arguments.of("env and thread", """
                        import os, threading, time
                        print(sorted(k for k in os.environ if k.startswith('CODE_EXEC')))
                        threading.Thread(target=lambda: (time.sleep(0.05), print('thread done'))).start()
                        print('main done')
                        """, List.of(), ""));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("ordinaryPythonPrograms")
    void warmPythonBehavesLikeAColdRun(String name, String code, List<String> args, String stdin,
            @TempDir Path dir) throws Exception {
        WarmAndCold r = warmAndCold(dir, code, args, stdin, baseEnv());
        assertThat(r.warm()).isEqualTo(r.cold());
        assertThat(r.warm().stderr()).doesNotContainPattern(RUNNER_NAMES);
    }

    /**
     * The program as a cold run has it: {@code code_ab12cd34.py} in the working directory, beside a {@code token.py}
     * that shadows the standard module of that name (the runners must not hand the user's code theirs).
     */
    private static Path stage(Path dir, String code) throws IOException {
        Path file = work(dir).resolve("code_ab12cd34.py");
        Files.writeString(file, code);
        Files.writeString(work(dir).resolve("token.py"), "VALUE = 'mine'\n");
        return file;
    }

    /** {@code python3 -u FILE args} in the working directory: what every runner is compared with. */
    private static Outcome runPlain(Path dir, Path file, List<String> args, String stdin) throws Exception {
        return runCold(work(dir), baseEnv(), stdin, concat(List.of(PYTHON, "-u", file.toString()), args));
    }

    /** Both runs' outcomes, and the content of {@code left.txt} each left in the working directory (or null). */
    record WarmAndCold(Outcome cold, Outcome warm, String coldFile, String warmFile) {
    }

    /** The same program run cold ({@code python3 -u file args}) and then by the warm runner with {@code warmEnv}. */
    private static WarmAndCold warmAndCold(Path dir, String code, List<String> args, String stdin,
            Map<String, String> warmEnv) throws Exception {
        Path file = stage(dir, code);
        Path left = work(dir).resolve("left.txt");
        Outcome cold = runPlain(dir, file, args, stdin);
        String coldFile = Files.exists(left) ? Files.readString(left) : null;
        Files.deleteIfExists(left);
        Outcome warm = runWarm(dir, warmEnv, stdin, code, file.toString(), args, warmPython());
        String warmFile = Files.exists(left) ? Files.readString(left) : null;
        return new WarmAndCold(cold, warm, coldFile, warmFile);
    }

    static Stream<Arguments> programsEndingAfterAPreload() {
        return Stream.concat(ordinaryPythonPrograms(), Stream.of(
                Arguments.of("file never closed", "f = open('left.txt', 'w')\nf.write('flushed at exit')\n"
                        + "import atexit\natexit.register(lambda: print('atexit', open('left.txt').read() == ''))\n",
                        List.of(), ""),
                Arguments.of("exit codes", "import sys\nsys.exit(256 + 7)\n", List.of(), ""),
                Arguments.of("exit None", "raise SystemExit\n", List.of(), ""),
                Arguments.of("daemon thread", "import threading, time\n"
                        + "threading.Thread(target=lambda: (time.sleep(5), print('never')), daemon=True).start()\n"
                        + "print('main done')\n", List.of(), "")));
    }

    /**
     * With a preload, the warm runner leaves without the interpreter's module teardown (too slow with numpy and
     * pandas loaded): threads, atexit handlers, unclosed files and exit codes must still end as in a cold run.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("programsEndingAfterAPreload")
    void warmPythonWithAPreloadEndsLikeAColdRun(String name, String code, List<String> args, String stdin,
            @TempDir Path dir) throws Exception {
        Map<String, String> env = baseEnv();
        env.put("CODE_EXEC_PRELOAD", "json");
        WarmAndCold r = warmAndCold(dir, code, args, stdin, env);
        assertThat(r.warm()).isEqualTo(r.cold());
        assertThat(r.warmFile()).isEqualTo(r.coldFile());
    }

    @Test
    void warmPythonUncaughtExceptionShowsTheUsersSourceLinesEvenWithoutTheFile(@TempDir Path dir) throws Exception {
        String file = work(dir).resolve("code_notwritten.py").toString();
        Outcome warm = runWarm(dir, baseEnv(), "", "def boom():\n    raise RuntimeError('kaput')\nboom()\n", file,
                List.of(), warmPython());
        assertThat(warm.exit()).isEqualTo(1);
        assertThat(warm.stderr()).isEqualTo("""
                Traceback (most recent call last):
                  File "%1$s", line 3, in <module>
                    boom()
                  File "%1$s", line 2, in boom
                    raise RuntimeError('kaput')
                RuntimeError: kaput
                """.formatted(file));
    }

    @Test
    void warmPythonPreloadsModulesSilentlyAndHidesTheSetting(@TempDir Path dir) throws Exception {
        Map<String, String> env = baseEnv();
        // `this` prints the Zen of Python when imported; the missing module must be skipped without a word.
        env.put("CODE_EXEC_PRELOAD", "this, no_such_module_xyz,numpy");
        String code = "import sys, os\nprint('numpy' in sys.modules, 'this' in sys.modules, "
                + "'CODE_EXEC_PRELOAD' in os.environ)\nimport numpy\nprint(numpy.arange(3).sum())\n";
        Outcome warm = runWarm(dir, env, "", code, work(dir).resolve("p.py").toString(), List.of(), warmPython());
        assertThat(warm).isEqualTo(new Outcome(0, "True True False\n3\n", ""));
    }

    // ------------------------------------------------- warm python over stdin and stdout (gVisor: no fds 8 and 9)

    /**
     * Over stdio the ready line is the first line of stdout, the run message comes in on stdin ahead of the user's
     * input, and what follows must be exactly a cold run's output: nothing of the user's stdin taken with the
     * message, nothing of the protocol left in the output.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("ordinaryPythonPrograms")
    void warmPythonOverStdioBehavesLikeAColdRun(String name, String code, List<String> args, String stdin,
            @TempDir Path dir) throws Exception {
        Path file = stage(dir, code);
        Outcome warm = runWarmOverStdio(dir, code, file.toString(), args, stdin);
        assertThat(warm).isEqualTo(runPlain(dir, file, args, stdin));
    }

    @Test
    void warmPythonOverStdioPlacesTheCodeFileItWasSent(@TempDir Path dir) throws Exception {
        Path file = work(dir).resolve("code_placed.py");
        String code = "import os, stat\nprint(open(__file__).read() == open(__file__).read(), "
                + "oct(stat.S_IMODE(os.stat(__file__).st_mode)))\nprint(len(open(__file__).read()))\n";
        Outcome warm = runWarmOverStdio(dir, code, file.toString(), List.of(), "");
        assertThat(warm).isEqualTo(new Outcome(0, "True 0o444\n" + code.length() + "\n", ""));
        assertThat(Files.readString(file)).isEqualTo(code);
        // with fds 8 and 9 the server places the file (a late working directory) or the run goes on without it
        Path notPlaced = work(dir).resolve("code_not_placed.py");
        assertThat(runWarm(dir, baseEnv(), "", "print(1)\n", notPlaced.toString(), List.of(), warmPython()))
                .isEqualTo(new Outcome(0, "1\n", ""));
        assertThat(notPlaced).doesNotExist();
    }

    @Test
    void warmPythonOverStdioExitsQuietlyWhenDiscardedBeforeItGetsCode(@TempDir Path dir) throws Exception {
        assertThat(endWith(startOverStdio(dir), new byte[0])).isEqualTo(new Outcome(0, "{\"ready\":true}\n", ""));
    }

    /** Gives the process {@code input} as its whole stdin and waits for its end (small outputs only). */
    private static Outcome endWith(Process p, byte[] input) throws Exception {
        try (OutputStream in = p.getOutputStream()) {
            in.write(input);
        }
        assertThat(p.waitFor(10, TimeUnit.SECONDS)).isTrue();
        return new Outcome(p.exitValue(), new String(p.getInputStream().readAllBytes(), UTF_8),
                new String(p.getErrorStream().readAllBytes(), UTF_8));
    }

    private static Process startOverStdio(Path dir) throws IOException {
        return startOverStdio(dir, baseEnv(), warmPython());
    }

    /** {@code command} with {@code --stdio} added, as a gVisor sandbox's warm pool starts it. */
    private static Process startOverStdio(Path dir, Map<String, String> env, String... command) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(concat(List.of(command), List.of("--stdio"))).directory(work(dir).toFile());
        pb.environment().clear();
        pb.environment().putAll(env);
        return pb.start();
    }

    /** The runner as a gVisor sandbox starts it: `--stdio`, message and then the user's input on stdin. */
    private static Outcome runWarmOverStdio(Path dir, String code, String file, List<String> args, String stdin)
            throws Exception {
        return runWarmOverStdio(dir, baseEnv(), code, file, args, stdin, warmPython());
    }

    private static Outcome runWarmOverStdio(Path dir, Map<String, String> env, String code, String file,
            List<String> args, String stdin, String... command) throws Exception {
        Process p = startOverStdio(dir, env, command);
        Collector out = new Collector(p.getInputStream());
        Collector err = new Collector(p.getErrorStream());
        try (OutputStream in = p.getOutputStream()) {
            in.write(WarmPool.runMessage(file, code, args));
            in.write(stdin.getBytes(UTF_8));
        }
        assertThat(p.waitFor(20, TimeUnit.SECONDS)).isTrue();
        String stdout = out.rest();
        assertThat(stdout).as("the ready line first").startsWith("{\"ready\":true}\n");
        return new Outcome(p.exitValue(), stdout.substring("{\"ready\":true}\n".length()), err.rest());
    }

    @Test
    void warmPythonRefusesMalformedRunMessages(@TempDir Path dir) throws Exception {
        List<byte[]> bad = List.of(WarmPool.runMessage("relative.py", "print('x')", List.of()),
                "run 3 x\nabc".getBytes(UTF_8), "run -1 2\n".getBytes(UTF_8), "walk 1 1\nab".getBytes(UTF_8));
        int i = 0;
        for (byte[] message : bad) {
            Path attempt = Files.createDirectories(dir.resolve("attempt" + i++));
            try (Runner r = Runner.start(attempt, baseEnv(), warmPython())) {
                assertThat(r.reply()).isEqualTo(JSON.readTree("{\"ready\":true}"));
                r.send(message);
                r.control.close();
                assertThat(r.process.waitFor(10, TimeUnit.SECONDS)).isTrue();
                assertThat(new Outcome(r.process.exitValue(), r.out.rest(), r.err.rest()))
                        .as(new String(message, UTF_8)).isEqualTo(new Outcome(2, "", ""));
            }
        }
    }

    // ------------------------------------------------------------------------------ cold python and python start-up

    /** Every cold Python run goes through run_python.py: it must be indistinguishable from `python3 -u FILE`. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("ordinaryPythonPrograms")
    void coldPythonRunnerBehavesLikeAPlainRun(String name, String code, List<String> args, String stdin,
            @TempDir Path dir) throws Exception {
        Path file = stage(dir, code);
        Outcome plain = runPlain(dir, file, args, stdin);
        Outcome runner = runCold(work(dir), baseEnv(), stdin, coldPython(file, args));
        assertThat(runner).isEqualTo(plain);
    }

    /** What `site` makes at start-up, compared with a plain start in the same situations (codeexec_site.py). */
    static Stream<Arguments> siteSituations() {
        return Stream.of(
                Arguments.of("plain", Map.of()),
                Arguments.of("PYTHONPATH with relative, duplicate and unnormalised entries",
                        Map.of("PYTHONPATH", "lib:/usr/lib/python3.11:WORK/lib/../lib/:WORK/custom")),
                Arguments.of("a user site directory with a .pth file", Map.of("HOME", "WORK/home")),
                Arguments.of("PYTHONUSERBASE", Map.of("PYTHONUSERBASE", "WORK/home/.local")),
                Arguments.of("PYTHONNOUSERSITE", Map.of("HOME", "WORK/home", "PYTHONNOUSERSITE", "1")));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("siteSituations")
    void pythonStartUpMakesWhatSiteMakes(String name, Map<String, String> extraEnv, @TempDir Path dir)
            throws Exception {
        Path work = work(dir);
        String version = "python3.11";
        Path userSite = Files.createDirectories(work.resolve("home/.local/lib/" + version + "/site-packages"));
        Files.writeString(userSite.resolve("extra.pth"), "import sys; sys.user_pth_ran = True\n" + work.resolve("pthdir") + "\n");
        Files.createDirectories(work.resolve("pthdir"));
        Files.writeString(userSite.resolve("usermod.py"), "WHERE = 'user site'\n");
        Path custom = Files.createDirectories(work.resolve("custom"));
        Files.writeString(custom.resolve("sitecustomize.py"), "import sys\nsys.customized = 'site'\n");
        Files.writeString(custom.resolve("usercustomize.py"), "import sys\nsys.user_customized = 'user'\n");
        Files.createDirectories(work.resolve("lib"));
        String code = """
                import sys, builtins
                print(sys.path[1:])
                print(repr(exit), repr(quit), exit.name, quit.eof, type(exit).__module__)
                print(repr(help), type(help).__module__)
                for p in (copyright, credits, license):
                    print(type(p).__module__, sorted(vars(p).items()))
                print(repr(license)[:40])
                print(getattr(sys, 'customized', None), getattr(sys, 'user_customized', None))
                print(getattr(sys, 'user_pth_ran', None), callable(getattr(sys, '__interactivehook__', None)))
                try:
                    import usermod
                    print(usermod.WHERE)
                except ImportError as e:
                    print('no usermod')
                """;
        Path file = work.resolve("code_site.py");
        Files.writeString(file, code);
        Map<String, String> env = baseEnv();
        extraEnv.forEach((k, v) -> env.put(k, v.replace("WORK", work.toString())));
        Outcome plain = runCold(work, env, "", List.of(PYTHON, "-u", file.toString()));
        Outcome runner = runCold(work, env, "", coldPython(file, List.of()));
        assertThat(plain.exit()).as(plain.stderr()).isZero();
        assertThat(runner).isEqualTo(plain);
    }

    @Test
    void pythonStartUpLeavesOutOnlyTheImportsOfSystemPthFilesAndSaysSoInItsFlags(@TempDir Path dir) throws Exception {
        Path file = work(dir).resolve("code_flags.py");
        Files.writeString(file, """
                import sys
                print(sys.flags.no_site, 'site' in sys.modules, 'os' in sys.modules)
                import mpl_toolkits, os
                print(os.path.basename(list(mpl_toolkits.__path__)[0]))
                """);
        Outcome plain = runCold(work(dir), baseEnv(), "", List.of(PYTHON, "-u", file.toString()));
        Outcome runner = runCold(work(dir), baseEnv(), "", coldPython(file, List.of()));
        assertThat(plain).isEqualTo(new Outcome(0, "0 True True\nmpl_toolkits\n", ""));
        assertThat(runner).isEqualTo(new Outcome(0, "1 False False\nmpl_toolkits\n", ""));
    }

    @Test
    void pythonStartUpFallsBackToTheRealSiteWithoutTheMeasuredFile(@TempDir Path dir) throws Exception {
        Path copy = Files.createDirectories(dir.resolve("bare-runtime"));
        for (String f : StartupWork.RUNTIME_FILES) Files.copy(ENGINE.resolve(f), copy.resolve(f));
        Path file = work(dir).resolve("code_fallback.py");
        Files.writeString(file, "import sys\nprint(sys.path[1:], 'site' in sys.modules)\n");
        Outcome plain = runCold(work(dir), baseEnv(), "", List.of(PYTHON, "-u", file.toString()));
        Outcome runner = runCold(work(dir), baseEnv(), "",
                List.of(PYTHON, "-S", "-u", copy.resolve("run_python.py").toString(), file.toString()));
        assertThat(runner).isEqualTo(plain);
        assertThat(runner.stdout()).contains("dist-packages").endsWith("True\n");
    }

    @Test
    void coldPythonRunnerReportsAMissingFileAsTheInterpreterDoes(@TempDir Path dir) throws Exception {
        Path missing = work(dir).resolve("gone.py");
        Outcome plain = runCold(work(dir), baseEnv(), "", List.of(PYTHON, "-u", missing.toString()));
        Outcome runner = runCold(work(dir), baseEnv(), "", coldPython(missing, List.of()));
        assertThat(runner).isEqualTo(plain);
        assertThat(runner.exit()).isEqualTo(2);
    }

    @Test
    void pythonCodeWithACodingCookieIsDecodedAsAFileWouldBe(@TempDir Path dir) throws Exception {
        String code = "# -*- coding: latin-1 -*-\nprint(len('\u00e9'))\nraise ValueError('\u00e9')\n";
        Path file = work(dir).resolve("code_cookie.py");
        Files.writeString(file, code);
        Outcome plain = runCold(work(dir), baseEnv(), "", List.of(PYTHON, "-u", file.toString()));
        Outcome runner = runCold(work(dir), baseEnv(), "", coldPython(file, List.of()));
        Outcome warm = runWarm(dir, baseEnv(), "", code, file.toString(), List.of(), warmPython());
        assertThat(plain.stdout()).isEqualTo("2\n");
        assertThat(runner).isEqualTo(plain);
        assertThat(warm).isEqualTo(plain);
        // without the file, the traceback's source line comes from the code, decoded the same way
        Path second = Files.createDirectories(dir.resolve("second"));
        Outcome unwritten = runWarm(second, baseEnv(), "", code, work(second).resolve("code_unwritten.py").toString(),
                List.of(), warmPython());
        assertThat(unwritten.stderr()).contains("raise ValueError('\u00c3\u00a9')");
    }

    @Test
    void warmPythonExitsQuietlyWhenDiscardedBeforeItGetsCode(@TempDir Path dir) throws Exception {
        assertDiscardedQuietly(dir, warmPython());
    }

    @Test
    void warmRunnersRefuseAMalformedMessageWithExitCodeTwoAndNoOutput(@TempDir Path dir) throws Exception {
        for (String[] command : List.of(warmPython(), new String[] {NODE, script("warm_node.js")})) {
            Path attempt = Files.createDirectories(dir.resolve(command[0].replace('/', '_')));
            try (Runner r = Runner.start(attempt, baseEnv(), command)) {
                assertThat(r.reply()).isEqualTo(JSON.readTree("{\"ready\":true}"));
                r.send(Map.of("code", "print('x')", "file", "relative.py", "args", List.of()));
                assertThat(r.process.waitFor(10, TimeUnit.SECONDS)).isTrue();
                assertThat(new Outcome(r.process.exitValue(), r.out.rest(), r.err.rest()))
                        .isEqualTo(new Outcome(2, "", ""));
            }
        }
    }

    // ------------------------------------------------------------------------------------------------ warm node

    static Stream<Arguments> ordinaryNodePrograms() {
        return Stream.of(
                Arguments.of("hello, args and main module", """
                        console.log('hello', process.argv.slice(2), process.argv[1], require.main === module);
                        console.log(__filename, __dirname, module.id, process.cwd(), typeof main, typeof channel);
                        console.log(Object.keys(require.cache), process.mainModule === module);
                        console.log(Object.keys(process.env).filter((k) => k.startsWith('CODE_EXEC')));
                        """, List.of("a", "b c", "", "\u00e9 \u2603"), ""),
                Arguments.of("empty program", "", List.of("", "x"), ""),
                Arguments.of("event loop order", """
                        // far enough apart that a loaded machine cannot reorder them (30 ms could, before setImmediate)
                        setTimeout(() => console.log('timeout'), 250);
                        setImmediate(() => console.log('immediate'));
                        process.nextTick(() => console.log('tick'));
                        Promise.resolve().then(() => console.log('microtask'));
                        (async () => { await new Promise((r) => setTimeout(r, 500)); console.log('awaited'); })();
                        console.log('sync');
                        """, List.of(), ""),
                Arguments.of("stdin", """
                        let s = '';
                        process.stdin.on('data', (d) => { s += d; }).on('end', () => console.log(s.toUpperCase()));
                        """, List.of(), "some input\nmore\n"),
                Arguments.of("require relative", "console.log(require('./helper').value, module.loaded);\n"
                        + "setImmediate(() => console.log(module.loaded));\n", List.of(), ""),
                Arguments.of("process.exit(3)", "console.log('before'); process.exit(3); console.log('after');\n",
                        List.of(), ""),
                Arguments.of("exitCode", "process.exitCode = 4; setTimeout(() => console.error('late'), 10);\n",
                        List.of(), ""));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("ordinaryNodePrograms")
    void warmNodeBehavesLikeAColdRun(String name, String code, List<String> args, String stdin, @TempDir Path dir)
            throws Exception {
        Path file = work(dir).resolve("code_ab12cd34.js");
        Files.writeString(file, code);
        Files.writeString(work(dir).resolve("helper.js"), "module.exports = { value: require.main.filename };\n");
        Outcome cold = runCold(work(dir), baseEnv(), stdin, concat(List.of(NODE, file.toString()), args));
        Outcome warm = runWarm(dir, baseEnv(), stdin, code, file.toString(), args, NODE, script("warm_node.js"));
        assertThat(warm).isEqualTo(cold);
    }

    @Test
    void warmNodeUncaughtErrorExitsOneWithOnlyTheUsersFrames(@TempDir Path dir) throws Exception {
        String file = work(dir).resolve("code_e.js").toString();
        Outcome warm = runWarm(dir, baseEnv(), "", "function boom() {\n  throw new Error('kaput');\n}\nboom();\n",
                file, List.of(), NODE, script("warm_node.js"));
        assertThat(warm.exit()).isEqualTo(1);
        assertThat(warm.stdout()).isEmpty();
        assertThat(warm.stderr())
                .startsWith(file + ":2\n  throw new Error('kaput');\n  ^\n\nError: kaput\n    at boom (" + file + ":2:9)\n")
                .doesNotContainPattern(RUNNER_NAMES);
    }

    @Test
    void warmNodeExitsQuietlyWhenDiscardedBeforeItGetsCode(@TempDir Path dir) throws Exception {
        assertDiscardedQuietly(dir, NODE, script("warm_node.js"));
    }

    // --------------------------------------------------- warm node over stdin and stdout (gVisor: no fds 8 and 9)

    @ParameterizedTest(name = "{0}")
    @MethodSource("ordinaryNodePrograms")
    void warmNodeOverStdioBehavesLikeAColdRun(String name, String code, List<String> args, String stdin,
            @TempDir Path dir) throws Exception {
        Path file = work(dir).resolve("code_ab12cd34.js");
        Files.writeString(file, code);
        Files.writeString(work(dir).resolve("helper.js"), "module.exports = { value: require.main.filename };\n");
        Outcome cold = runCold(work(dir), baseEnv(), stdin, concat(List.of(NODE, file.toString()), args));
        Outcome warm = runWarmOverStdio(dir, baseEnv(), code, file.toString(), args, stdin, NODE,
                script("warm_node.js"));
        assertThat(warm).isEqualTo(cold);
    }

    @Test
    void warmNodeOverStdioTakesOnlyItsMessageFromMoreThanAPipeOfInputAndPlacesTheCodeFile(@TempDir Path dir)
            throws Exception {
        Path file = work(dir).resolve("code_placed.js");
        // more than a pipe's worth of code and of input: the message ends exactly where the user's input starts
        String code = "const fs = require('fs');\nlet s = '';\nprocess.stdin.setEncoding('utf8');\n"
                + "process.stdin.on('data', (d) => { s += d; }).on('end', () => console.log(s.length, s.slice(0, 6), "
                + "s.slice(-6), fs.readFileSync(__filename, 'utf8').startsWith('const fs'), "
                + "(fs.statSync(__filename).mode & 0o777).toString(8), fs.readFileSync(__filename).length));\n//"
                + "c".repeat(100_000) + "\u00e9\n";
        String stdin = "<head>" + "i".repeat(300_000) + "<tail>";
        Outcome warm = runWarmOverStdio(dir, baseEnv(), code, file.toString(), List.of(), stdin, NODE,
                script("warm_node.js"));
        int bytes = code.getBytes(UTF_8).length;
        assertThat(warm).isEqualTo(new Outcome(0, "300012 <head> <tail> true 444 " + bytes + "\n", ""));
        assertThat(Files.readString(file)).isEqualTo(code);
    }

    /** Node 22 from npm (scripts/install-deps.sh), which strips TypeScript's types itself (engine/ts-strip.js). */
    static final String STRIPPING_NODE = dev.codeexec.lang.Placeholders.TYPESCRIPT_NODE.toString();

    /** Debian's node (the typescript package) and Node 22 (its own type stripping): the same answers. */
    static java.util.stream.Stream<String> typescriptNodes() {
        assertThat(Path.of(STRIPPING_NODE)).as("scripts/install-deps.sh installs it").isExecutable();
        return java.util.stream.Stream.of(NODE, STRIPPING_NODE);
    }

    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.MethodSource("typescriptNodes")
    void warmTypescriptOverStdioTranspilesAndRunsLikeAColdRun(String node, @TempDir Path dir) throws Exception {
        Path file = work(dir).resolve("code_ts.ts");
        String code = "const n: number = Number(process.argv[2]);\ninterface P { x: number }\n"
                + "const p: P = { x: n * 2 };\nlet s = '';\nprocess.stdin.on('data', (d) => { s += d; })"
                + ".on('end', () => console.log(p.x, s.trim(), __filename));\n";
        Map<String, String> env = baseEnv();
        env.put("NODE_PATH", "/usr/local/lib/node_modules:/usr/lib/node_modules");
        Outcome warm = runWarmOverStdio(dir, env, code, file.toString(), List.of("21"), "typed input\n", node,
                script("warm_node.js"), "--typescript");
        assertThat(warm).isEqualTo(new Outcome(0, "42 typed input " + file + "\n", ""));
        // a file with imports is CommonJS made by the transpiler on either Node: CommonJS's names are there
        Path esm = work(dir).resolve("code_esm.ts");
        String module = "import * as os from 'os';\nenum E { A = 2 }\n"
                + "console.log(E.A, typeof os.cpus, require('path').basename(__filename), require.main === module);\n";
        Outcome m = runWarmOverStdio(dir, env, module, esm.toString(), List.of(), "", node, script("warm_node.js"),
                "--typescript");
        assertThat(m).isEqualTo(new Outcome(0, "2 function code_esm.ts true\n", ""));
        Path plainEnum = work(dir).resolve("code_enum.ts");
        Outcome e = runWarmOverStdio(dir, env, "enum C { Red, Green }\nconsole.log(C.Green);\nthrow new Error('at 3');\n",
                plainEnum.toString(), List.of(), "", node, script("warm_node.js"), "--typescript");
        assertThat(e.exit()).isEqualTo(1);
        assertThat(e.stdout()).isEqualTo("1\n");
        assertThat(e.stderr()).as("the TypeScript's line").contains("code_enum.ts:3");
    }

    @Test
    void warmNodeOverStdioExitsQuietlyWhenDiscardedAndRefusesAMalformedMessage(@TempDir Path dir) throws Exception {
        assertThat(endWith(startOverStdio(dir, baseEnv(), NODE, script("warm_node.js")), new byte[0]))
                .isEqualTo(new Outcome(0, "{\"ready\":true}\n", ""));
        assertThat(endWith(new ProcessBuilder(NODE, script("warm_node.js"), "--stdio", "--bogus").start(), new byte[0]))
                .as("an unknown argument").isEqualTo(new Outcome(2, "", ""));
        List<byte[]> bad = List.of(WarmPool.runMessage("relative.js", "console.log('x')", List.of()),
                ("run 1 " + "2".repeat(5000) + "\n").getBytes(UTF_8),
                "run 3 x\nabc".getBytes(UTF_8), "{\"code\":\"console.log(1)\",\"file\":\"/tmp/a.js\"}\n".getBytes(UTF_8));
        for (byte[] message : bad) {
            assertThat(endWith(startOverStdio(dir, baseEnv(), NODE, script("warm_node.js")), message))
                    .as(new String(message, UTF_8)).isEqualTo(new Outcome(2, "{\"ready\":true}\n", ""));
        }
    }

    // ------------------------------------------------------------------------------------------- session python

    @Test
    void pythonSessionKeepsVariablesImportsAndFunctions(@TempDir Path dir) throws Exception {
        try (Runner s = pythonSession(dir)) {
            assertThat(s.call("import math\nx = 41\ndef twice(v):\n    return 2 * v\n").reply()).isEqualTo(
                    reply(null, null, false));
            Call c = s.call("x += 1\nprint(math.sqrt(16), twice(x))\n");
            assertThat(c.stdout()).isEqualTo("4.0 84\n");
            assertThat(c.stderr()).isEmpty();
            assertThat(s.call("x").result()).isEqualTo("42");
        }
    }

    @Test
    void pythonSessionResultIsTheReprOfAFinalExpressionOnly(@TempDir Path dir) throws Exception {
        try (Runner s = pythonSession(dir)) {
            assertThat(s.call("y = 'text'\ny").result()).isEqualTo("'text'");
            assertThat(s.call("[y] * 2").result()).isEqualTo("['text', 'text']");
            assertThat(s.call("None").result()).isNull();
            assertThat(s.call("print('printed')").reply()).isEqualTo(reply(null, null, false));
            assertThat(s.call("z = 5").result()).isNull();
            assertThat(s.call("for i in range(2):\n    z += i\n").result()).isNull();
            assertThat(s.call("z").result()).isEqualTo("6");
        }
    }

    @Test
    void pythonSessionErrorGoesToStderrAndKeepsEarlierState(@TempDir Path dir) throws Exception {
        try (Runner s = pythonSession(dir)) {
            s.call("kept = [1, 2]");
            Call failed = s.call("kept.append(3)\ndef f():\n    return 1 / 0\nf()");
            assertThat(failed.reply()).isEqualTo(reply(null, "ZeroDivisionError: division by zero", false));
            assertThat(failed.stderr()).isEqualTo("""
                    Traceback (most recent call last):
                      File "<cell 2>", line 4, in <module>
                        f()
                      File "<cell 2>", line 3, in f
                        return 1 / 0
                               ~~^~~
                    ZeroDivisionError: division by zero
                    """);
            Call syntax = s.call("kept = (");
            assertThat(syntax.reply().get("error").asString()).isEqualTo("SyntaxError: '(' was never closed");
            assertThat(syntax.stderr()).startsWith("  File \"<cell 3>\", line 1\n    kept = (\n");
            Call exit = s.call("import sys\nsys.exit(3)");
            assertThat(exit.reply().get("error").asString()).isEqualTo("SystemExit: 3");
            assertThat(s.call("kept").result()).isEqualTo("[1, 2, 3]");
        }
    }

    @Test
    void pythonSessionReadsEachCallsStdinFromTheRequest(@TempDir Path dir) throws Exception {
        try (Runner s = pythonSession(dir)) {
            Call c = s.call("name = input('who? ')\nimport sys\nrest = sys.stdin.read()\nprint(name.upper())", "ada\nx\ny\n");
            assertThat(c.stdout()).isEqualTo("who? ADA\n");
            assertThat(s.call("rest").result()).isEqualTo("'x\\ny\\n'");
            assertThat(s.call("sys.stdin.read()", "").result()).isEqualTo("''");
        }
    }

    @Test
    void pythonSessionInterruptStopsTheCellAndTheSessionGoesOn(@TempDir Path dir) throws Exception {
        try (Runner s = pythonSession(dir)) {
            s.call("n = 0");
            String id = s.send("import os\nos.write(1, b'started\\n')\nwhile True:\n    n += 1\n", "");
            s.out.awaitText("started\n");
            s.interrupt();
            Call c = s.finish(id);
            assertThat(c.reply()).isEqualTo(reply(null, "KeyboardInterrupt", true));
            assertThat(c.stdout()).isEqualTo("started\n");
            assertThat(c.stderr()).startsWith("Traceback (most recent call last):\n  File \"<cell 2>\", line")
                    .endsWith("KeyboardInterrupt\n").doesNotContainPattern(RUNNER_NAMES);
            assertThat(s.call("n > 0").result()).isEqualTo("True");
            // Blocked in a system call rather than running bytecode.
            id = s.send("import time\nos.write(1, b'sleeping\\n')\ntime.sleep(60)\n", "");
            s.out.awaitText("sleeping\n");
            s.interrupt();
            assertThat(s.finish(id).reply().get("interrupted").asBoolean()).isTrue();
        }
    }

    @Test
    void pythonSessionRunsTopLevelAwaitAndKeepsItsState(@TempDir Path dir) throws Exception {
        try (Runner s = pythonSession(dir)) {
            assertThat(s.call("import asyncio, os\nasync def twice(v):\n    await asyncio.sleep(0.01)\n"
                    + "    return 2 * v\nx = await twice(4)\nx").result()).isEqualTo("8");
            assertThat(s.call("x + await twice(1)").result()).isEqualTo("10");
            Call failed = s.call("async def bad():\n    raise ValueError('inner')\nawait bad()");
            assertThat(failed.reply().get("error").asString()).isEqualTo("ValueError: inner");
            assertThat(failed.stderr()).startsWith("Traceback (most recent call last):\n  File \"<cell 3>\", line 3")
                    .doesNotContain("asyncio").doesNotContainPattern(RUNNER_NAMES);
            String id = s.send("os.write(1, b'awaiting\\n')\nawait asyncio.sleep(1)\nprint('resumed')", "");
            s.out.awaitText("awaiting\n");
            s.interrupt();
            assertThat(s.finish(id).reply()).isEqualTo(reply(null, "KeyboardInterrupt", true));
            // Long enough for the interrupted cell's sleep to end, were it still scheduled.
            Call after = s.call("await asyncio.sleep(1.3)\nx");
            assertThat(after.stdout()).as("the interrupted cell stays stopped").isEmpty();
            assertThat(after.result()).isEqualTo("8");
            assertThat(s.call("asyncio.run(twice(x))").result()).as("a plain cell may run its own loop").isEqualTo("16");
        }
    }

    /**
     * kill(2) has queued each SIGINT before interrupt() returns, and Python runs its handler as the signal breaks the
     * read of the control channel, before it can read the next call: the call answering shows both were handled.
     */
    @Test
    void pythonSessionIgnoresAnInterruptWhileIdle(@TempDir Path dir) throws Exception {
        try (Runner s = pythonSession(dir)) {
            s.call("v = 7");
            s.interrupt();
            s.interrupt();
            Call c = s.call("import time\ntime.sleep(0.2)\nv * 6");
            assertThat(c.reply()).isEqualTo(reply("42", null, false));
            assertThat(c.stderr()).isEmpty();
            assertThat(s.process.isAlive()).isTrue();
        }
    }

    @Test
    void pythonSessionReturnsShownAndUnshownFiguresAsPngs(@TempDir Path dir) throws Exception {
        try (Runner s = pythonSession(dir)) {
            assertThat(s.call("import sys\n'matplotlib' in sys.modules").result())
                    .as("matplotlib stays unimported until used").isEqualTo("False");
            Call shown = s.call("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()");
            assertThat(shown.reply().get("figures")).hasSize(1);
            assertPng(shown.reply().get("figures").get(0));
            assertThat(shown.stderr()).isEmpty();
            assertThat(s.call("len(plt.get_fignums())").result()).as("show() closed it").isEqualTo("0");

            Call unshown = s.call("fig = plt.figure()\nplt.bar(['a', 'b'], [1, 2])\nprint('drawn')");
            assertThat(unshown.stdout()).isEqualTo("drawn\n");
            assertThat(unshown.reply().get("figures")).hasSize(1);
            assertPng(unshown.reply().get("figures").get(0));

            Call two = s.call("plt.figure(); plt.plot([1]); plt.show()\nplt.figure(); plt.plot([2])\n1");
            assertThat(two.reply().get("figures")).hasSize(2);
            assertThat(two.result()).isEqualTo("1");
            assertThat(s.call("2").reply().get("figures")).isEmpty();
        }
    }

    @Test
    void pythonSessionRichOutputsComeInTheOrderMadeWithTheirMimeTypes(@TempDir Path dir) throws Exception {
        try (Runner s = pythonSession(dir)) {
            assertThat(s.call("builtins = __import__('builtins')\ncallable(builtins.display)").result()).isEqualTo("True");
            assertThat(s.call("1 + 1").reply().has("outputs")).as("a plain value is only the result").isFalse();

            Call frame = s.call("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})\ndf");
            assertThat(frame.result()).isEqualTo("   a  b\n0  1  x\n1  2  y");
            JsonNode out = frame.reply().get("outputs");
            assertThat(out).hasSize(1);
            assertThat(out.get(0).get("kind").asString()).isEqualTo("result");
            assertThat(out.get(0).get("data").get("text/html").asString()).contains("<table").contains("<td>x</td>");
            assertThat(out.get(0).get("data").get("text/plain").asString()).isEqualTo(frame.result());

            Call shown = s.call(String.join("\n",
                    "class R:",
                    "    def _repr_html_(self): return '<b>R!</b>'",
                    "    def _repr_markdown_(self): return None",
                    "class Broken:",
                    "    def _repr_html_(self): raise ValueError('no')",
                    "display(1, R(), Broken())",
                    "print('between')",
                    "display({'text/markdown': '# raw', 'application/json': {'k': [1]}}, raw=True)",
                    "R()"));
            assertThat(shown.stdout()).isEqualTo("between\n");
            JsonNode o = shown.reply().get("outputs");
            assertThat(o).hasSize(5);
            assertThat(o.get(0).get("data").properties()).hasSize(1);
            assertThat(o.get(0).get("data").get("text/plain").asString()).isEqualTo("1");
            assertThat(o.get(1).get("data").get("text/html").asString()).isEqualTo("<b>R!</b>");
            assertThat(o.get(1).get("data").has("text/markdown")).as("a method returning None offers nothing").isFalse();
            assertThat(o.get(2).get("data").has("text/html")).as("a failing method offers nothing").isFalse();
            assertThat(o.get(3).get("data").get("text/markdown").asString()).isEqualTo("# raw");
            assertThat(o.get(3).get("data").get("application/json").asString()).isEqualTo("{\"k\": [1]}");
            assertThat(o.get(3).get("data").has("text/plain")).isTrue();
            assertThat(o.get(4).get("kind").asString()).isEqualTo("result");
            assertThat(o.get(4).get("data").get("text/html").asString()).isEqualTo("<b>R!</b>");
            assertThat(shown.result()).startsWith("<__main__.R object at 0x");

            Call image = s.call("from PIL import Image\nim = Image.new('RGB', (8, 4), 'red')\nim.show()\nim");
            JsonNode io = image.reply().get("outputs");
            assertThat(io).hasSize(2);
            for (JsonNode each : io) {
                byte[] png = Base64.getDecoder().decode(each.get("data").get("image/png").asString());
                assertThat(Arrays.copyOf(png, 8)).as("a PNG").isEqualTo(new byte[] {(byte) 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'});
            }
            assertThat(io.get(0).get("kind").asString()).as("Image.show() displays").isEqualTo("display");
            assertThat(io.get(1).get("kind").asString()).isEqualTo("result");

            Call ipython = s.call("from IPython.display import display as d, HTML, Markdown, Image as I\n"
                    + "d(HTML('<i>h</i>'), Markdown('**m**'))\nimport base64, io\nb = io.BytesIO(); im.save(b, 'PNG')\nI(data=b.getvalue())");
            JsonNode ip = ipython.reply().get("outputs");
            assertThat(ip).as(ipython.stderr()).hasSize(3);
            assertThat(ip.get(0).get("data").get("text/html").asString()).isEqualTo("<i>h</i>");
            assertThat(ip.get(1).get("data").get("text/markdown").asString()).isEqualTo("**m**");
            assertThat(ip.get(2).get("data").has("image/png")).isTrue();

            Call many = s.call("for i in range(70): display(i)");
            assertThat(many.reply().get("outputs")).hasSize(64);
            assertThat(many.stderr()).contains("[6 more outputs dropped: at most 64 per call]");
        }
    }

    @Test
    void pythonSessionMarkersSplitEachCallsOutput(@TempDir Path dir) throws Exception {
        try (Runner s = pythonSession(dir)) {
            Call first = s.call("import sys\nprint('out 1')\nsys.stderr.write('err 1')\nsys.stdout.write('no newline')");
            assertThat(first.stdout()).isEqualTo("out 1\nno newline");
            assertThat(first.stderr()).isEqualTo("err 1");
            Call second = s.call("print('out 2', file=sys.stderr)\nsys.stdout = open(1, 'w', closefd=False)\n"
                    + "sys.stdout.write('buffered')");
            assertThat(second.stdout()).as("flushed before the marker").isEqualTo("buffered");
            assertThat(second.stderr()).isEqualTo("out 2\n");
            Call third = s.call("print('out 3')");
            assertThat(third.stdout()).isEqualTo("out 3\n");
            assertThat(third.stderr()).isEmpty();
        }
    }

    @Test
    void pythonSessionControlChannelIsNotInheritedByChildren(@TempDir Path dir) throws Exception {
        try (Runner s = pythonSession(dir)) {
            Call c = s.call("import os\nos.system('ls /proc/self/fd')");
            assertThat(c.stdout().split("\n")).containsExactly("0", "1", "2", "3");
        }
    }

    @Test
    void pythonSessionImportsResolveFromTheWorkingDirectoryFirst(@TempDir Path dir) throws Exception {
        Files.writeString(work(dir).resolve("token.py"), "VALUE = 'mine'\n");
        try (Runner s = pythonSession(dir)) {
            Call c = s.call("import sys, token\nsys.path[0], token.VALUE, __name__, 'codeexec_main' in sys.modules");
            assertThat(c.result()).isEqualTo("('" + work(dir) + "', 'mine', '__main__', False)");
        }
    }

    // --------------------------------------------------------------------------------------------- session node

    @Test
    void nodeSessionKeepsVarLetConstFunctionsAndGlobals(@TempDir Path dir) throws Exception {
        try (Runner s = nodeSession(dir)) {
            Call first = s.call("var a = 1; let b = 2; const c = 3;\nfunction sum() { return a + b + c + globalThis.d; }\n"
                    + "globalThis.d = 4; const path = require('path');");
            assertThat(first.reply()).as("a script's completion value skips declarations")
                    .isEqualTo(reply("4", null, false));
            Call second = s.call("a += 10; console.log(sum(), path.basename('/x/y.txt'));\n"
                    + "[typeof module, typeof exports, typeof process, typeof Buffer, typeof setTimeout, typeof main]");
            assertThat(second.stdout()).isEqualTo("20 y.txt\n");
            assertThat(second.result()).isEqualTo("[ 'object', 'object', 'object', 'function', 'function', 'undefined' ]");
            assertThat(s.call("a + b + c + d").result()).isEqualTo("20");
        }
    }

    @Test
    void nodeSessionResultIsTheCompletionValueAwaitedWhenAPromise(@TempDir Path dir) throws Exception {
        try (Runner s = nodeSession(dir)) {
            assertThat(s.call("const o = { k: [1, 'two'] }; o").result()).isEqualTo("{ k: [ 1, 'two' ] }");
            assertThat(s.call("let u;").result()).isNull();
            assertThat(s.call("console.log('x')").result()).isNull();
            assertThat(s.call("new Promise((r) => setTimeout(() => r(o.k.length), 20))").result()).isEqualTo("2");
            Call awaited = s.call("const got = await new Promise((r) => setTimeout(() => r(40), 10));\ngot + 2");
            assertThat(awaited.result()).isEqualTo("42");
            assertThat(s.call("Promise.reject(new TypeError('refused'))").reply())
                    .isEqualTo(reply(null, "TypeError: refused", false));
        }
    }

    @Test
    void nodeSessionErrorGoesToStderrAndKeepsEarlierState(@TempDir Path dir) throws Exception {
        try (Runner s = nodeSession(dir)) {
            s.call("var kept = [1];");
            Call failed = s.call("kept.push(2);\nmissing.call();");
            assertThat(failed.reply()).isEqualTo(reply(null, "ReferenceError: missing is not defined", false));
            assertThat(failed.stderr()).contains("ReferenceError: missing is not defined\n    at <cell-2>:2:1")
                    .doesNotContainPattern(RUNNER_NAMES).doesNotContain("node:vm").doesNotContain("node:inspector");
            assertThat(s.call("x = (").reply().get("error").asString()).startsWith("SyntaxError: ");
            assertThat(s.call("throw 'plain'").reply().get("error").asString()).isEqualTo("Uncaught 'plain'");
            assertThat(s.call("kept").result()).isEqualTo("[ 1, 2 ]");
        }
    }

    @Test
    void nodeSessionInterruptBreaksABusyLoopAndAnAwait(@TempDir Path dir) throws Exception {
        try (Runner s = nodeSession(dir)) {
            s.call("var n = 0;");
            String id = s.send("process.stdout.write('started\\n');\nwhile (true) { n++; }", "");
            s.out.awaitText("started\n");
            s.interrupt();
            Call busy = s.finish(id);
            assertThat(busy.reply().get("interrupted").asBoolean()).isTrue();
            assertThat(busy.stdout()).isEqualTo("started\n");
            assertThat(s.call("n > 0").result()).isEqualTo("true");

            // Interrupted once past the script's end, in the await: a SIGINT in the instant the script returns can
            // be lost by Node's breakOnSigint watchdog (the protocol doc asks the server to repeat it). An immediate
            // callback runs only after the script has returned and the runner has begun to await its promise.
            id = s.send("setImmediate(() => console.log('awaiting'));\nnew Promise(() => {})", "");
            s.out.awaitText("awaiting\n");
            s.interrupt();
            assertThat(s.finish(id).reply().get("interrupted").asBoolean()).isTrue();

            // An interrupt while idle is harmless. Without the runner's listener Node would die of the signal as it
            // arrives, before it could read another call.
            s.interrupt();
            assertThat(s.call("n > 0").reply()).as("an interrupt while idle is harmless")
                    .isEqualTo(reply("true", null, false));
            // Node runs signal listeners later, on its event loop, in the order they were added: a listener of the
            // cell's own, after the runner's, says when the runner has handled an idle interrupt. It is added once
            // the cell has returned: Node 20 leaves a listener added during a breakOnSigint script without its
            // signal handler, and the next SIGINT would end the process.
            s.call("setImmediate(() => {\n  process.on('SIGINT', () => console.log('SIGINT while idle'));\n"
                    + "  console.log('listening');\n});");
            s.out.awaitText("listening\n");
            s.interrupt();
            s.out.awaitText("SIGINT while idle\n");
            assertThat(s.call("n > 0").reply()).as("the runner's handler did nothing while idle")
                    .isEqualTo(reply("true", null, false));
        }
    }

    @Test
    void nodeSessionIsAReplDeclarationsPersistAndMayBeDeclaredAgain(@TempDir Path dir) throws Exception {
        Path pkg = Files.createDirectories(dir.resolve("work/node_modules/esm-only"));
        Files.writeString(pkg.resolve("package.json"), "{\"name\":\"esm-only\",\"type\":\"module\",\"exports\":{\"import\":\"./i.js\"}}");
        Files.writeString(pkg.resolve("i.js"), "export const answer = 42;\nexport default 'the default';\n");
        try (Runner s = nodeSession(dir)) {
            assertThat(s.call("let k = 1; const c = 'one'; class K { v() { return 1; } }").reply()).isEqualTo(reply(null, null, false));
            assertThat(s.call("let k = 2; const c = 'two'; class K { v() { return 2; } }\n[k, c, new K().v()]").result())
                    .as("let, const and class declared again by a later cell").isEqualTo("[ 2, 'two', 2 ]");
            assertThat(s.call("const got = await new Promise((r) => setTimeout(() => r(40), 5));").reply())
                    .isEqualTo(reply(null, null, false));
            assertThat(s.call("got + 2").result()).as("a declaration with top-level await persists").isEqualTo("42");
            assertThat(s.call("import { readFileSync as read } from 'fs';\nimport * as paths from \"node:path\"\n"
                    + "import def, { answer } from 'esm-only'\nimport 'node:os';").reply()).isEqualTo(reply(null, null, false));
            assertThat(s.call("[typeof read, paths.basename('/a/b.txt'), def, answer]").result())
                    .as("static imports, resolved from the working directory").isEqualTo("[ 'function', 'b.txt', 'the default', 42 ]");
            assertThat(s.call("(await import('esm-only')).answer").result()).isEqualTo("42");
            assertThat(s.call("export const exported = 7\nexported").result()).isEqualTo("7");
            assertThat(s.call("'Hello World!'").result()).as("a string reads as text, as a notebook shows it").isEqualTo("Hello World!");
            assertThat(s.call("[typeof __filename, typeof main, typeof session, typeof inspector]").result())
                    .as("the runner's names stay its own").isEqualTo("[ 'undefined', 'undefined', 'undefined', 'undefined' ]");
            Call syntax = s.call("x = (");
            assertThat(syntax.stderr()).startsWith("<cell-11>:1\nx = (\n     ^\n\nSyntaxError: Unexpected end of input");
            assertThat(syntax.stderr()).doesNotContain("sourceURL");
        }
    }

    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.MethodSource("typescriptNodes")
    void typescriptSessionErasesTypesAndReportsTheTypescriptLines(String node, @TempDir Path dir) throws Exception {
        Map<String, String> env = baseEnv();
        env.put("NODE_PATH", "/usr/local/lib/node_modules:/usr/lib/node_modules");
        Runner r = Runner.start(dir, env, node, script("session_node.js"), "--typescript");
        r.process.getOutputStream().close();
        try (Runner s = r) {
            assertThat(s.reply()).isEqualTo(JSON.readTree("{\"ready\":true}"));
            assertThat(s.call("interface P { name: string }\nconst p: P = { name: 'ts' };\nimport { basename } from 'path';\n"
                    + "basename('/x/' + p.name)").result()).isEqualTo("ts");
            assertThat(s.call("const n: number = await Promise.resolve<number>(41);\nn + 1").result()).isEqualTo("42");
            Call failed = s.call("type T = number;\ninterface Q { a: T }\nfunction g(x: T): T {\n  throw new RangeError('r' + x);\n}\ng(p.name.length)");
            assertThat(failed.reply().get("error").asString()).isEqualTo("RangeError: r2");
            assertThat(failed.stderr()).as("the lines of the TypeScript, not of its JavaScript")
                    .contains("at g (<cell-3>:4:9)").contains("at <cell-3>:6:1");
            Call bad = s.call("const bad: = 1");
            assertThat(bad.reply().get("error").asString()).startsWith("SyntaxError: Type expected");
            assertThat(bad.stderr()).contains("error TS1110");
            assertThat(s.call("p.name").result()).isEqualTo("ts");
            // code generated for an enum: its errors still name the TypeScript's lines
            assertThat(s.call("enum Color { Red, Green }\nColor.Green").result()).isEqualTo("1");
            Call inEnum = s.call("enum K { A }\n\nfunction h(k: K): never {\n  throw new Error('k' + k);\n}\nh(K.A)");
            assertThat(inEnum.reply().get("error").asString()).isEqualTo("Error: k0");
            assertThat(inEnum.stderr()).contains("<cell-7>:4:");
        }
    }

    @Test
    void nodeSessionControlChannelIsNotInheritedByChildren(@TempDir Path dir) throws Exception {
        try (Runner s = nodeSession(dir)) {
            Call c = s.call("require('child_process').execSync('ls /proc/self/fd', { stdio: ['ignore', 'pipe', 'inherit'] })"
                    + ".toString().split('\\n').filter(Boolean).join(' ')");
            assertThat(c.result()).as("a string result is its text").isEqualTo("0 1 2 3");
        }
    }

    // ------------------------------------------------------------------------------------------------- helpers

    private static String script(String name) {
        return runtime.resolve(name).toString();
    }

    private static Path work(Path dir) throws IOException {
        return Files.createDirectories(dir.resolve("work"));
    }

    /** The environment the server gives a run, minus the sandbox. */
    private static Map<String, String> baseEnv() {
        Map<String, String> env = Language.baseEnvironment("/tmp");
        env.put("PYTHONDONTWRITEBYTECODE", "1");
        return env;
    }

    private static List<String> concat(List<String> a, List<String> b) {
        List<String> all = new ArrayList<>(a);
        all.addAll(b);
        return all;
    }

    private static Runner pythonSession(Path dir) throws Exception {
        Map<String, String> env = baseEnv();
        env.put("MPLBACKEND", "module://codeexec_mpl");
        Runner r = Runner.start(dir, env, PYTHON, "-S", "-u", script("session_python.py"));
        r.process.getOutputStream().close();
        assertThat(r.reply()).isEqualTo(JSON.readTree("{\"ready\":true}"));
        return r;
    }

    private static Runner nodeSession(Path dir) throws Exception {
        Runner r = Runner.start(dir, baseEnv(), NODE, script("session_node.js"));
        r.process.getOutputStream().close();
        assertThat(r.reply()).isEqualTo(JSON.readTree("{\"ready\":true}"));
        return r;
    }

    private static JsonNode reply(String result, String error, boolean interrupted) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("result", result);
        m.put("error", error);
        m.put("interrupted", interrupted);
        m.put("figures", List.of());
        return JSON.valueToTree(m);
    }

    private static void assertPng(JsonNode figure) {
        assertThat(figure.get("mimeType").asString()).isEqualTo("image/png");
        byte[] png = Base64.getDecoder().decode(figure.get("data").asString());
        assertThat(Arrays.copyOf(png, 8)).isEqualTo(new byte[] {(byte) 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'});
        assertThat(png.length).isGreaterThan(1000);
    }

    record Outcome(int exit, String stdout, String stderr) {
    }

    private static Outcome runCold(Path workDir, Map<String, String> env, String stdin, List<String> argv)
            throws Exception {
        ProcessBuilder pb = new ProcessBuilder(argv).directory(workDir.toFile());
        pb.environment().clear();
        pb.environment().putAll(env);
        Process p = pb.start();
        Collector out = new Collector(p.getInputStream());
        Collector err = new Collector(p.getErrorStream());
        try (OutputStream in = p.getOutputStream()) {
            in.write(stdin.getBytes(UTF_8));
        }
        assertThat(p.waitFor(20, TimeUnit.SECONDS)).isTrue();
        return new Outcome(p.exitValue(), out.rest(), err.rest());
    }

    private static Outcome runWarm(Path dir, Map<String, String> env, String stdin, String code, String file,
            List<String> args, String... command) throws Exception {
        try (Runner r = Runner.start(dir, env, command)) {
            assertThat(r.reply()).isEqualTo(JSON.readTree("{\"ready\":true}"));
            if (command[command.length - 1].endsWith("warm_python.py")) r.send(WarmPool.runMessage(file, code, args));
            else r.send(Map.of("code", code, "file", file, "args", args));
            try (OutputStream in = r.process.getOutputStream()) {
                in.write(stdin.getBytes(UTF_8));
            }
            assertThat(r.process.waitFor(20, TimeUnit.SECONDS)).isTrue();
            assertThat(r.replies.readLine()).as("nothing more on the control channel").isNull();
            return new Outcome(r.process.exitValue(), r.out.rest(), r.err.rest());
        }
    }

    private static void assertDiscardedQuietly(Path dir, String... command) throws Exception {
        try (Runner r = Runner.start(dir, baseEnv(), command)) {
            assertThat(r.reply()).isEqualTo(JSON.readTree("{\"ready\":true}"));
            r.control.close();
            assertThat(r.process.waitFor(10, TimeUnit.SECONDS)).isTrue();
            assertThat(new Outcome(r.process.exitValue(), r.out.rest(), r.err.rest())).isEqualTo(new Outcome(0, "", ""));
        }
    }

    record Call(String stdout, String stderr, JsonNode reply) {
        String result() {
            JsonNode r = reply.get("result");
            return r.isNull() ? null : r.asString();
        }
    }

    /** A runner started as the server starts it: `exec interpreter script 8<control-in 9>control-out`. */
    static final class Runner implements AutoCloseable {
        final Process process;
        final OutputStream control;
        final BufferedReader replies;
        final Collector out;
        final Collector err;
        /** Calls finished so far: the next reply's executionCount is one more. */
        private int calls;

        private Runner(Process process, OutputStream control, BufferedReader replies) {
            this.process = process;
            this.control = control;
            this.replies = replies;
            this.out = new Collector(process.getInputStream());
            this.err = new Collector(process.getErrorStream());
        }

        static Runner start(Path dir, Map<String, String> env, String... command) throws Exception {
            Path in = dir.resolve("control-in");
            Path out = dir.resolve("control-out");
            Process mkfifo = new ProcessBuilder("mkfifo", in.toString(), out.toString()).start();
            assertThat(mkfifo.waitFor()).isZero();
            String shell = "exec " + String.join(" ", command) + " 8<" + in + " 9>" + out;
            ProcessBuilder pb = new ProcessBuilder("/bin/sh", "-c", shell).directory(work(dir).toFile());
            pb.environment().clear();
            pb.environment().putAll(env);
            Process p = pb.start();
            // The shell opens control-in, then control-out; opening in the same order cannot deadlock.
            OutputStream control = new FileOutputStream(in.toFile());
            BufferedReader replies = new BufferedReader(new InputStreamReader(new FileInputStream(out.toFile()), UTF_8));
            return new Runner(p, control, replies);
        }

        JsonNode reply() throws IOException {
            String line = replies.readLine();
            assertThat(line).as("a reply line (stderr: %s)", err.snapshot()).isNotNull();
            return JSON.readTree(line);
        }

        void send(byte[] raw) throws IOException {
            control.write(raw);
            control.flush();
        }

        void send(Map<String, ?> message) throws IOException {
            control.write((JSON.writeValueAsString(message) + "\n").getBytes(UTF_8));
            control.flush();
        }

        String send(String code, String stdin) throws IOException {
            byte[] raw = new byte[16];
            ThreadLocalRandom.current().nextBytes(raw);
            String id = HexFormat.of().formatHex(raw);
            send(Map.of("id", id, "code", code, "stdin", stdin));
            return id;
        }

        Call finish(String id) throws Exception {
            String stdout = out.next(id);
            String stderr = err.next(id);
            JsonNode reply = reply();
            assertThat(reply.get("id").asString()).isEqualTo(id);
            tools.jackson.databind.node.ObjectNode o = (tools.jackson.databind.node.ObjectNode) reply;
            o.remove("id");
            // checked here for every call, so the tests' whole-reply comparisons stay about the rest:
            // the cell's number counts the calls, and a structured error comes exactly with an error
            JsonNode count = o.remove("executionCount");
            if (count != null) assertThat(count.asInt()).isEqualTo(++calls);
            // rich outputs (Python) are compared where a test makes them; an empty list is no news
            if (o.get("outputs") != null && o.get("outputs").isEmpty()) o.remove("outputs");
            JsonNode info = o.remove("errorInfo");
            if (info != null) {
                assertThat(info.isNull()).as("errorInfo with error " + o.get("error")).isEqualTo(o.get("error").isNull()
                        || o.get("interrupted").asBoolean());
                if (!info.isNull()) assertThat(info.get("traceback").asString()).contains(info.get("name").asString());
            }
            return new Call(stdout, stderr, reply);
        }

        Call call(String code) throws Exception {
            return call(code, "");
        }

        Call call(String code, String stdin) throws Exception {
            return finish(send(code, stdin));
        }

        void interrupt() throws Exception {
            Process kill = new ProcessBuilder("kill", "-INT", Long.toString(process.pid())).start();
            assertThat(kill.waitFor()).isZero();
        }

        @Override
        public void close() throws IOException {
            process.destroyForcibly();
            control.close();
            replies.close();
        }
    }

    /** Reads a stream as it comes, so that a call's output can be taken up to its marker. */
    static final class Collector {
        private final ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        private final Thread reader;
        private int position;
        private boolean ended;

        Collector(InputStream in) {
            reader = Thread.ofVirtual().start(() -> pump(in));
        }

        private void pump(InputStream in) {
            byte[] chunk = new byte[8192];
            try (in) {
                int n;
                while ((n = in.read(chunk)) > 0) {
                    synchronized (this) {
                        buffer.write(chunk, 0, n);
                        notifyAll();
                    }
                }
            } catch (IOException e) {
                // The process was destroyed: what was read is all there is.
            }
            synchronized (this) {
                ended = true;
                notifyAll();
            }
        }

        /** The text up to the marker (consumed with it). */
        synchronized String next(String marker) throws InterruptedException {
            for (;;) {
                String all = buffer.toString(UTF_8);
                int at = all.indexOf(marker, position);
                if (at >= 0) {
                    String text = all.substring(position, at);
                    position = at + marker.length();
                    return text;
                }
                assertThat(ended).as("stream ended before marker %s: %s", marker, all.substring(position)).isFalse();
                wait(100);
            }
        }

        synchronized void awaitText(String text) throws InterruptedException {
            while (!buffer.toString(UTF_8).substring(position).contains(text)) {
                assertThat(ended).as("stream ended before %s", text).isFalse();
                wait(100);
            }
        }

        synchronized String snapshot() {
            return buffer.toString(UTF_8);
        }

        /** Everything not yet taken, once the stream has ended. */
        String rest() throws InterruptedException {
            reader.join();
            synchronized (this) {
                return buffer.toString(StandardCharsets.UTF_8).substring(position);
            }
        }
    }
}
