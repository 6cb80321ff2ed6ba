package dev.codeexec.local;

import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.lang.Languages;
import dev.codeexec.config.Config;
import dev.codeexec.sandbox.Sandbox;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import static dev.codeexec.local.TestSupport.await;
import static dev.codeexec.local.TestSupport.request;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Every language of the table end to end through {@link LocalExecutor}: hello world, stdin, args, stderr and the
 * exit code, in the real sandbox when it can run here (else the fake). Prints the measured durations.
 */
@Tag("sandbox")
class LanguageSmokeTest {

    static Config config;
    static Sandbox sandbox;
    static LocalExecutor executor;

    @BeforeAll
    static void start() throws InterruptedException {
        config = TestSupport.config("MAX_CONCURRENT", "2");
        sandbox = TestSandboxes.realOrFake(config);
        executor = new LocalExecutor(config, sandbox, Languages.load());
        // The first runs must not pay for the start-time warm-ups (Go build cache, TypeScript and Java caches).
        executor.awaitWarmups(Duration.ofMinutes(5));
        System.out.println("smoke: sandbox=" + sandbox.name() + " goCache=" + executor.goCacheState());
    }

    @AfterAll
    static void stop() {
        executor.close();
    }

    /** Each program prints "hello <stdin> <args>" on stdout, "warn" on stderr, and exits with 3. */
    static Stream<Arguments> programs() {
        return Stream.of(
                Arguments.of("python", """
                        import sys
                        print("hello", sys.stdin.read().strip(), " ".join(sys.argv[1:]))
                        print("warn", file=sys.stderr)
                        sys.exit(3)
                        """),
                Arguments.of("nodejs", """
                        const input = require('fs').readFileSync(0, 'utf8').trim();
                        console.log('hello', input, process.argv.slice(2).join(' '));
                        console.error('warn');
                        process.exit(3);
                        """),
                Arguments.of("typescript", """
                        import * as fs from 'fs';
                        interface Greeting { word: string }
                        const g: Greeting = { word: 'hello' };
                        const input: string = fs.readFileSync(0, 'utf8').trim();
                        console.log(g.word, input, process.argv.slice(2).join(' '));
                        console.error('warn');
                        process.exit(3);
                        """),
                Arguments.of("go", """
                        package main

                        import (
                        	"fmt"
                        	"io"
                        	"os"
                        	"strings"
                        )

                        func main() {
                        	in, _ := io.ReadAll(os.Stdin)
                        	fmt.Println("hello", strings.TrimSpace(string(in)), strings.Join(os.Args[1:], " "))
                        	fmt.Fprintln(os.Stderr, "warn")
                        	os.Exit(3)
                        }
                        """),
                Arguments.of("java", """
                        import java.io.*;

                        public class Main {
                            public static void main(String[] args) throws IOException {
                                String in = new String(System.in.readAllBytes()).trim();
                                System.out.println("hello " + in + " " + String.join(" ", args));
                                System.err.println("warn");
                                System.exit(3);
                            }
                        }
                        """),
                Arguments.of("shell", """
                        read line
                        echo "hello $line $*"
                        echo warn >&2
                        exit 3
                        """),
                Arguments.of("bash", """
                        read -r line
                        arr=("$@")
                        echo "hello $line ${arr[*]}"
                        echo warn >&2
                        exit 3
                        """),
                Arguments.of("c", """
                        #include <stdio.h>
                        #include <string.h>
                        int main(int argc, char **argv) {
                            char line[256] = {0};
                            if (fgets(line, sizeof line, stdin)) line[strcspn(line, "\\n")] = 0;
                            printf("hello %s %s %s\\n", line, argv[1], argv[2]);
                            fprintf(stderr, "warn\\n");
                            return 3;
                        }
                        """));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("programs")
    void helloStdinArgsStderrExitCode(String language, String code) throws Exception {
        ExecutionRequest req = request(config, language, code, "world\n", List.of("a", "b c"), Map.of(), 60_000L);
        long t0 = System.nanoTime();
        ExecutionResult r = await(executor.submit(req, OutputListener.NONE));
        long ms = (System.nanoTime() - t0) / 1_000_000;
        System.out.printf("smoke: %-10s %5d ms end to end, %5d ms in sandbox (%s)%n", language, ms, r.durationMs(),
                r.sandbox());
        assertThat(r.stderr()).as("stderr").isEqualTo("warn\n");
        assertThat(r.stdout()).isEqualTo("hello world a b c\n");
        assertThat(r.exitCode()).isEqualTo(3);
        assertThat(r.outcome()).isEqualTo(Outcome.EXITED);
    }

    @Test
    void everyLanguageIsAvailableWithAVersion() {
        @SuppressWarnings("unchecked")
        var langs = (Map<String, Map<String, Object>>) executor.runtimeInfo().get("languages");
        langs.forEach((id, m) -> {
            assertThat(m.get("available")).as(id).isEqualTo(true);
            assertThat((String) m.get("version")).as(id).isNotBlank().doesNotContain("unknown");
        });
    }

    @Test
    void goHelloWorldAfterWarmCache() throws Exception {
        String code = "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n";
        for (int i = 0; i < 3; i++) {
            long t0 = System.nanoTime();
            ExecutionResult r = await(executor.submit(request(config, "go", code), OutputListener.NONE));
            System.out.printf("smoke: go hello #%d %d ms end to end (goCache=%s)%n", i + 1,
                    (System.nanoTime() - t0) / 1_000_000, executor.goCacheState());
            assertThat(r.stdout()).isEqualTo("hello\n");
            assertThat(r.exitCode()).isZero();
        }
    }

    /**
     * Issue 42: Go programs are linked with {@code -ldflags=-s -w} (no DWARF, no symbol table), which takes about a
     * third off the link, the largest step of a Go hello's build (measured 220 ms -> 160 ms wall). A panic's trace
     * keeps its function names and file:line (they come from the pclntab, which stays). The program looks for the
     * section names in its own file; it builds them at run time so that its own string constants cannot match.
     */
    @Test
    void goProgramsAreLinkedWithoutDebugInfoAndStillTraceBack() throws Exception {
        String code = """
                package main

                import (
                	"bytes"
                	"fmt"
                	"os"
                )

                func main() {
                	exe, err := os.Executable()
                	if err != nil {
                		panic(err)
                	}
                	b, err := os.ReadFile(exe)
                	if err != nil {
                		panic(err)
                	}
                	dwarf := bytes.Contains(b, bytes.ToLower([]byte("DEBUG_INFO")))
                	symtab := bytes.Contains(b, bytes.ToLower([]byte(".SYMTAB")))
                	fmt.Println("dwarf", dwarf, "symtab", symtab)
                	panic("boom")
                }
                """;
        ExecutionResult r = await(executor.submit(request(config, "go", code), OutputListener.NONE));
        assertThat(r.stdout()).isEqualTo("dwarf false symtab false\n");
        assertThat(r.exitCode()).isEqualTo(2);
        assertThat(r.stderr()).contains("panic: boom").contains("main.main()").containsPattern("\\.go:\\d+");
    }

    /**
     * Issue 42: Go's telemetry is off for the sandboxed build. GOTELEMETRY=off in the environment did not do it
     * (Go reads the mode from a file under the user's config directory, here a new /tmp at every run): every build
     * wrote counter files to /tmp/.config/go/telemetry and started a telemetry sidecar process. The program runs
     * right after its build in the same sandbox, so it sees what the build left in /tmp.
     */
    @Test
    void goBuildRunsWithTelemetryOff() throws Exception {
        String code = """
                package main

                import (
                	"fmt"
                	"os"
                	"path/filepath"
                )

                func main() {
                	_, err := os.Stat("/tmp/.config/go/telemetry")
                	mode, _ := os.ReadFile(filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "go", "telemetry", "mode"))
                	fmt.Println("counters in /tmp:", !os.IsNotExist(err), "mode:", string(mode))
                }
                """;
        ExecutionResult r = await(executor.submit(request(config, "go", code), OutputListener.NONE));
        assertThat(r.stderr()).isEmpty();
        assertThat(r.stdout()).isEqualTo("counters in /tmp: false mode: off\n");
    }

    /** The read-only shared cache must not break standard packages the warm-up did not compile. */
    @Test
    void goStandardPackagesOutsideTheWarmListWork() throws Exception {
        String code = """
                package main

                import (
                	"archive/zip"
                	"compress/gzip"
                	"fmt"
                	"os"
                )

                func main() {
                	_ = zip.NewWriter(os.Stdout)
                	fmt.Println(gzip.BestSpeed)
                }
                """;
        ExecutionResult r = await(executor.submit(request(config, "go", code), OutputListener.NONE));
        assertThat(r.stderr()).isEmpty();
        assertThat(r.stdout()).isEqualTo("1\n");
    }

    /** A program that does not compile is a normal result whose stderr says where. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("brokenPrograms")
    void compileErrorsAreNormalResultsWithTheLocation(String language, String code, String expected) throws Exception {
        ExecutionResult r = await(executor.submit(request(config, language, code), OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.EXITED);
        assertThat(r.exitCode()).isNotZero();
        assertThat(r.stdout()).isEmpty();
        assertThat(r.stderr()).contains(expected);
    }

    static Stream<Arguments> brokenPrograms() {
        return Stream.of(
                Arguments.of("typescript", "let x: = 3;\n", "(1,8): error TS"),
                Arguments.of("go", "package main\n\nfunc main() { undefinedThing() }\n", ":3:15: undefined: undefinedThing"),
                Arguments.of("java", "class A { void f() { int x = \"s\"; } }", "incompatible types"),
                Arguments.of("c", "int main(void) { return missing; }", "missing’ undeclared"),
                Arguments.of("python", "def f(:\n", "SyntaxError"));
    }

    /** Informative only (no timing assertion): median of five hello worlds per language. */
    @Test
    void printMedianHelloWorldDurations() throws Exception {
        Map<String, String> hello = Map.of(
                "python", "print('hello')", "nodejs", "console.log('hello')",
                "typescript", "const s: string = 'hello'; console.log(s)",
                "go", "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n",
                "java", "class Main { public static void main(String[] a) { System.out.println(\"hello\"); } }",
                "shell", "echo hello", "bash", "echo hello",
                "c", "#include <stdio.h>\nint main(void) { puts(\"hello\"); return 0; }");
        for (String lang : Languages.load().ids()) {
            long[] ms = new long[5];
            for (int i = 0; i < ms.length; i++) {
                long t0 = System.nanoTime();
                ExecutionResult r = await(executor.submit(request(config, lang, hello.get(lang)), OutputListener.NONE));
                ms[i] = (System.nanoTime() - t0) / 1_000_000;
                assertThat(r.stdout()).as(lang).isEqualTo("hello\n");
            }
            java.util.Arrays.sort(ms);
            System.out.printf("timing: %-10s median %4d ms (min %4d, max %4d) via LocalExecutor in %s%n", lang, ms[2],
                    ms[0], ms[4], sandbox.name());
        }
    }
}
