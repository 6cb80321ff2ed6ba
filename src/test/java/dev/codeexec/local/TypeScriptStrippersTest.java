package dev.codeexec.local;

import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.testing.Poll;
import dev.codeexec.warm.TypeScriptStrippers;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;

import static dev.codeexec.local.TestSupport.request;
import static dev.codeexec.local.WarmRuns.run;
import static dev.codeexec.local.WarmRuns.warm;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * TypeScript made JavaScript ahead of its run by the tenant's stripper (warm/TypeScriptStrippers), in the real
 * sandbox: warm and cold runs get it and run it as the runner would have run the code itself (output, arguments,
 * stdin, {@code __filename}, a stack naming the TypeScript's lines, a file with import or export, an enum), a syntax
 * error is left to the run and worded as ever; one stripper per tenant, bounded, sandboxed as a run, and started
 * again when it dies.
 */
@Tag("sandbox")
@Timeout(value = 240, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class TypeScriptStrippersTest {

    private final List<LocalExecutor> executors = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        executors.forEach(LocalExecutor::close);
        Poll.until("no stripper left after the executors closed", TypeScriptStrippersTest::stripperPids, List::isEmpty);
    }

    private LocalExecutor executor(String... pairs) throws Exception {
        return WarmRuns.executor(executors, Sandbox::supportsControl, "a sandbox with a control channel (bwrap)",
                TestSupport.config(pairs));
    }

    /** The tenant's stripper, once it answers (a first request starts it in the background). */
    private static TypeScriptStrippers ready(LocalExecutor e, String tenant) throws InterruptedException {
        TypeScriptStrippers s = e.typescript.orElseThrow();
        Poll.until("the stripper of " + tenant + " answers",
                () -> s.prepare(tenant, "/work/probe.ts", "const probe: number = 1;\n").isPresent());
        return s;
    }

    @Test
    void runsGetTheirJavaScriptFromTheTenantsStripperAndRunItAsTheRunnerWould() throws Exception {
        LocalExecutor hot = executor("WARM_POOL", "typescript=1");
        LocalExecutor cold = executor("WARM_POOL", "off");
        @SuppressWarnings("unchecked")
        var langs = (Map<String, Map<String, Object>>) hot.runtimeInfo().get("languages");
        assertThat((String) langs.get("typescript").get("stripping")).as("runtime_info says which way")
                .startsWith("ahead of each run");
        // requests of the tests name no tenant: their runs are "-"'s
        TypeScriptStrippers hotStripper = ready(hot, "-");
        TypeScriptStrippers coldStripper = ready(cold, "-");

        String script = """
                const input: string = require('fs').readFileSync(0, 'utf8').trim();
                const argv: string[] = process.argv.slice(2);
                console.log('got', input, argv.join(','), require.main === module, __filename.endsWith('.ts'));
                function fail(why: string): never {
                  throw new Error(why);
                }
                fail('on line 5');
                """;
        String enumFile = """
                enum Colour { Red = 'r', Green = 'g' }
                const c: Colour = Colour.Green;
                console.log(c, Colour.Red);

                throw new Error('on line 5 of the TypeScript');
                """;
        String module = """
                import * as path from 'path';
                import { readFileSync } from 'fs';
                export const n: number = 6 * 7;
                console.log(n, path.basename(__filename).endsWith('.ts'), readFileSync(0, 'utf8'));
                throw new Error('line 5');
                """;
        for (LocalExecutor e : List.of(hot, cold)) {
            TypeScriptStrippers s = e == hot ? hotStripper : coldStripper;
            for (String code : List.of(script, enumFile, module)) {
                long before = s.preparedCount();
                ExecutionRequest r = request(e.config, "typescript", code, "some input", List.of("a", "b"), Map.of(), null);
                ExecutionResult res = e == hot ? warm(e, r) : run(e, r);
                assertThat(s.preparedCount()).as("prepared by the stripper: " + code).isEqualTo(before + 1);
                assertThat(res.exitCode()).as(res.stderr()).isEqualTo(1);
                assertThat(res.outcome()).isEqualTo(Outcome.EXITED);
                // the stack names the TypeScript file and the line where the throw is in it
                assertThat(res.stderr()).as(code).containsPattern("/work/code_[0-9a-f]{8}\\.ts:5:\\d+")
                        .doesNotContain("CODE_EXEC_TS_JS");
                if (code == script) assertThat(res.stdout()).isEqualTo("got some input a,b true true\n");
                if (code == enumFile) assertThat(res.stdout()).isEqualTo("g r\n");
                if (code == module) assertThat(res.stdout()).isEqualTo("42 true some input\n");
            }
            // the runner's variable is not the program's
            long before = s.preparedCount();
            ExecutionRequest env = request(e.config, "typescript",
                    "console.log(Object.keys(process.env).filter((k: string) => k.startsWith('CODE_EXEC')).join());\n");
            assertThat((e == hot ? warm(e, env) : run(e, env)).stdout()).isEqualTo("\n");
            assertThat(s.preparedCount()).isEqualTo(before + 1);
            // a syntax error is the run's: the typescript package's diagnostic with its line and column, as ever
            before = s.preparedCount();
            ExecutionRequest broken = request(e.config, "typescript", "let x: = 3;\n");
            ExecutionResult b = e == hot ? warm(e, broken) : run(e, broken);
            assertThat(s.preparedCount()).as("left to the run").isEqualTo(before);
            assertThat(b.exitCode()).isEqualTo(1);
            assertThat(b.stderr()).contains("(1,8): error TS");
        }
    }

    @Test
    void oneStripperPerTenantBoundedSandboxedAndStartedAgainWhenItDies() throws Exception {
        LocalExecutor e = executor("WARM_POOL", "off");
        TypeScriptStrippers s = ready(e, "alice");
        assertThat(s.prepare("alice", "/work/a.ts", "const a: number = 1;\nconsole.log(a);\n"))
                .hasValueSatisfying(js -> assertThat(js).isEqualTo("const a         = 1;\nconsole.log(a);\n"));
        ready(e, "bob");
        assertThat(s.tenants()).containsExactlyInAnyOrder("alice", "bob");
        List<Long> pids = stripperPids();
        assertThat(pids).as("a process each").hasSize(2);
        for (long pid : pids) {
            // the sandbox's own uid (never root), and no network but loopback in its namespace
            assertThat(status(pid, "Uid:")).doesNotStartWith("0\t");
            assertThat(Files.readString(Path.of("/proc/" + pid + "/net/dev"))).doesNotContain("eth").doesNotContain("ens");
        }
        // room for MAX_STRIPPERS tenants: the least recently used goes for the next
        for (int i = 0; i < TypeScriptStrippers.MAX_STRIPPERS; i++) ready(e, "t" + i);
        assertThat(s.tenants()).hasSize(TypeScriptStrippers.MAX_STRIPPERS).doesNotContain("alice", "bob");
        Poll.until("the evicted strippers' processes gone", TypeScriptStrippersTest::stripperPids,
                p -> p.size() == TypeScriptStrippers.MAX_STRIPPERS);
        // a stripper killed from outside: its run strips itself, the next request starts it again
        List<Long> before = stripperPids();
        new ProcessBuilder("kill", "-9", Long.toString(before.get(0))).start().waitFor();
        Poll.until("a stripper again for every tenant", () -> Stream.of("t0", "t1", "t2", "t3")
                .allMatch(t -> s.prepare(t, "/work/x.ts", "let x: number = 2;\n").isPresent()));
        assertThat(stripperPids()).hasSize(TypeScriptStrippers.MAX_STRIPPERS).doesNotContain(before.get(0));
        // a source past the bound is the run's
        assertThat(s.prepare("t0", "/work/big.ts", "//" + "x".repeat(TypeScriptStrippers.MAX_SOURCE_BYTES))).isEmpty();
    }

    /** The pids of this machine's stripper processes (Node running ts-strip-server.js). */
    private static List<Long> stripperPids() throws IOException {
        List<Long> out = new ArrayList<>();
        try (Stream<Path> procs = Files.list(Path.of("/proc"))) {
            for (Path p : procs.filter(p -> p.getFileName().toString().matches("\\d+")).toList()) {
                String cmd;
                try {
                    cmd = new String(Files.readAllBytes(p.resolve("cmdline"))).replace('\0', ' ');
                } catch (IOException gone) {
                    continue;
                }
                // Node itself, not the bwrap and init that started it (their command lines name the script too)
                if (cmd.contains("ts-strip-server.js") && cmd.split(" ")[0].endsWith("/node"))
                    out.add(Long.parseLong(p.getFileName().toString()));
            }
        }
        return out;
    }

    private static String status(long pid, String field) throws IOException {
        Optional<String> line = Files.readAllLines(Path.of("/proc/" + pid + "/status")).stream()
                .filter(l -> l.startsWith(field)).findFirst();
        return line.orElseThrow().substring(field.length()).strip();
    }
}
