package dev.codeexec.engine;

import dev.codeexec.lang.Languages;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.config.Config;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class RequestValidatorTest {

    private final Config config = Config.of("DEFAULT_TIMEOUT_MS", "5000", "MAX_TIMEOUT_MS", "60000",
            "CPU_LIMIT_SECONDS", "7", "MEMORY_LIMIT_MB", "256", "MAX_PROCESSES", "32", "MAX_OUTPUT_KB", "100",
            "MAX_DISK_MB", "64");
    private final RequestValidator v = new RequestValidator(config, Languages.load());

    private ExecutionRequest args(Map<String, Object> a) {
        return v.parse(a, null).request();
    }

    private static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new HashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }

    @Test
    void resolvesAliasAndLimitsFromConfig() {
        ExecutionRequest r = args(map("language", "py", "code", "print(1)"));
        assertThat(r.language()).isEqualTo("python");
        assertThat(r.limits()).isEqualTo(new Limits(Duration.ofMillis(5000), 7, 256L << 20, 32, 100 * 1024, 64L << 20));
        assertThat(r.stdin()).isEmpty();
        assertThat(r.args()).isEmpty();
        assertThat(r.env()).isEmpty();
    }

    @Test
    void takesTimeoutArgsEnvAndStdin() {
        ExecutionRequest r = args(map("language", "bash", "code", "x", "stdin", "in", "timeout_ms", 60000,
                "args", List.of("a", "b"), "env", Map.of("FOO_1", "bar")));
        assertThat(r.limits().timeout()).isEqualTo(Duration.ofMinutes(1));
        assertThat(r.args()).containsExactly("a", "b");
        assertThat(r.env()).containsExactly(Map.entry("FOO_1", "bar"));
        assertThat(r.stdin()).isEqualTo("in");
        assertThat(args(map("language", "go", "code", "", "timeout_ms", 1.0)).limits().timeout()).isEqualTo(Duration.ofMillis(1));
    }

    @Test
    void timeoutOutOfRangeNamesTheRange() {
        assertThatThrownBy(() -> args(map("language", "python", "code", "", "timeout_ms", 60001)))
                .isInstanceOf(ExecutionException.InvalidRequest.class)
                .hasMessage("'timeout_ms' must be between 1 and 60000, got 60001 (a longer run can go on as a background job: "
                        + "`background: true`)");
        assertThatThrownBy(() -> args(map("language", "python", "code", "", "timeout_ms", 0)))
                .hasMessage("'timeout_ms' must be between 1 and 60000, got 0");
        assertThatThrownBy(() -> args(map("language", "python", "code", "", "timeout_ms", 1.5)))
                .hasMessage("'timeout_ms' must be a whole number of milliseconds");
        assertThatThrownBy(() -> args(map("language", "python", "code", "", "timeout_ms", "100")))
                .hasMessage("'timeout_ms' must be a whole number of milliseconds");
    }

    @Test
    void unknownOrMissingLanguageListsTheSupportedOnes() {
        assertThatThrownBy(() -> args(map("language", "cobol", "code", "")))
                .isInstanceOf(ExecutionException.InvalidRequest.class)
                .hasMessage("unknown language 'cobol'; supported: python, nodejs, typescript, go, java, shell, bash, c");
        assertThatThrownBy(() -> args(map("code", "")))
                .hasMessageStartingWith("'language' is required; supported: python");
        assertThatThrownBy(() -> args(map("language", "python")))
                .hasMessage("'code' is required");
        assertThatThrownBy(() -> args(map("language", 3, "code", "")))
                .hasMessage("'language' must be a string");
    }

    @Test
    void envNamesAreChecked() {
        for (String bad : List.of("1ABC", "A-B", "A B", "", "X".repeat(129), "É")) {
            assertThatThrownBy(() -> args(map("language", "sh", "code", "", "env", Map.of(bad, "v"))))
                    .as(bad).isInstanceOf(ExecutionException.InvalidRequest.class)
                    .hasMessageContaining("is not valid: use letters, digits and '_'");
        }
        assertThat(args(map("language", "sh", "code", "", "env", Map.of("_x" + "Y".repeat(126), "v"))).env()).hasSize(1);
        assertThatThrownBy(() -> args(map("language", "sh", "code", "", "env", Map.of("A", 1))))
                .hasMessage("'env.A' must be a string");
        assertThatThrownBy(() -> args(map("language", "sh", "code", "", "env", Map.of("A", "a\0b"))))
                .hasMessage("'env.A' contains a NUL character");
        Map<String, String> many = new HashMap<>();
        for (int i = 0; i < 65; i++) many.put("V" + i, "x");
        assertThatThrownBy(() -> args(map("language", "sh", "code", "", "env", many)))
                .hasMessage("'env' may have at most 64 variables, got 65");
        assertThatThrownBy(() -> args(map("language", "sh", "code", "", "env", List.of())))
                .hasMessage("'env' must be an object of string values");
    }

    @Test
    void argsAndSizesAreBounded() {
        assertThatThrownBy(() -> args(map("language", "sh", "code", "", "args", List.of("a", 2))))
                .hasMessage("'args[1]' must be a string");
        assertThatThrownBy(() -> args(map("language", "sh", "code", "", "args", "a b")))
                .hasMessage("'args' must be an array of strings");
        assertThatThrownBy(() -> args(map("language", "sh", "code", "", "args", java.util.Collections.nCopies(257, "a"))))
                .hasMessage("'args' may have at most 256 entries, got 257");
        assertThatThrownBy(() -> args(map("language", "sh", "code", "", "args", List.of("x".repeat(4097)))))
                .hasMessage("'args[0]' is longer than 4096 characters");
        assertThatThrownBy(() -> args(map("language", "sh", "code", "€".repeat(400_000))))
                .hasMessage("'code' is larger than 1024 KB");
        assertThat(args(map("language", "sh", "code", "a".repeat(1024 * 1024))).code()).hasSize(1024 * 1024);
        assertThatThrownBy(() -> args(map("language", "sh", "code", "", "stdin", "s".repeat(1024 * 1024 + 1))))
                .hasMessage("'stdin' is larger than 1024 KB");
    }

    @Test
    @SuppressWarnings("unchecked")
    void everyArgumentTheSchemaNamesIsReadAndAWrongTypeNamesIt() {
        Map<String, Object> props = (Map<String, Object>) v.inputSchema().get("properties");
        assertThat(props).containsOnlyKeys("language", "code", "stdin", "timeout_ms", "args", "env", "workspace",
                "session", "network", "packages", "background");
        for (String name : props.keySet()) {
            // a type no argument takes for all but env, whose wrong type is a string
            Object wrong = name.equals("env") ? "A=1" : Map.of("x", 1);
            Map<String, Object> a = map("language", "python", "code", "");
            a.put(name, wrong);
            assertThatThrownBy(() -> v.parse(a, null)).as(name)
                    .isInstanceOf(ExecutionException.InvalidRequest.class).hasMessageStartingWith("'" + name + "' must be");
        }
    }

    @Test
    @SuppressWarnings("unchecked")
    void theSchemasBoundsAreTheOnesEnforced() {
        Map<String, Object> props = (Map<String, Object>) v.inputSchema().get("properties");
        int maxArgs = (Integer) ((Map<String, Object>) props.get("args")).get("maxItems");
        assertThat(args(map("language", "sh", "code", "", "args", java.util.Collections.nCopies(maxArgs, "a"))).args())
                .hasSize(maxArgs);
        assertThatThrownBy(() -> args(map("language", "sh", "code", "", "args", java.util.Collections.nCopies(maxArgs + 1, "a"))))
                .isInstanceOf(ExecutionException.InvalidRequest.class);
        int maxEnv = (Integer) ((Map<String, Object>) props.get("env")).get("maxProperties");
        Map<String, String> env = new HashMap<>();
        for (int i = 0; i < maxEnv; i++) env.put("V" + i, "x");
        assertThat(args(map("language", "sh", "code", "", "env", env)).env()).hasSize(maxEnv);
        env.put("ONE_MORE", "x");
        assertThatThrownBy(() -> args(map("language", "sh", "code", "", "env", env)))
                .isInstanceOf(ExecutionException.InvalidRequest.class);
        Map<String, Object> timeout = (Map<String, Object>) props.get("timeout_ms");
        // one schema for both kinds of call: the maximum is a background job's; the description names both bounds,
        // and the foreground bound is the one enforced without `background`
        assertThat(timeout).containsEntry("maximum", 3600000).containsEntry("default", 5000);
        assertThat((String) timeout.get("description")).contains("at most 60000", "at most 3600000");
        assertThatThrownBy(() -> args(map("language", "sh", "code", "", "timeout_ms", 60001)))
                .isInstanceOf(ExecutionException.InvalidRequest.class);
        assertThat(args(map("language", "sh", "code", "", "background", true, "timeout_ms", 3600000)).limits().timeout())
                .isEqualTo(Duration.ofMillis(3600000));
        assertThatThrownBy(() -> args(map("language", "sh", "code", "", "background", true, "timeout_ms", 3600001)))
                .hasMessageContaining("for a background job");
        assertThat(args(map("language", "sh", "code", "")).limits().timeout()).isEqualTo(Duration.ofMillis(5000));
        assertThat((List<String>) ((Map<String, Object>) props.get("language")).get("enum")).contains("python", "py", "bash");
    }

    @Test
    void workspaceSessionAndNetworkAreCheckedAndLeftToTheCallersContext() {
        RequestValidator.Arguments a = v.parse(map("language", "python", "code", "", "workspace", "proj",
                "session", "s-1", "network", List.of("pypi.org")), null);
        assertThat(a.workspace()).contains("proj");
        assertThat(a.session()).contains("s-1");
        assertThat(a.network()).isEqualTo(List.of("pypi.org"));
        assertThat(a.request().workspace()).as("opened by the caller, for its tenant").isEmpty();
        assertThat(v.parse(map("language", "python", "code", "", "network", false), null).network()).isEqualTo(false);
        assertThat(v.parse(map("language", "python", "code", ""), null).network()).isNull();
        assertThatThrownBy(() -> v.parse(map("language", "python", "code", "", "session", "../x"), null))
                .isInstanceOf(dev.codeexec.workspace.WorkspaceException.class).hasMessageStartingWith("bad session name '../x'");
        assertThatThrownBy(() -> v.parse(map("language", "python", "code", "", "network", List.of("a.test", 7)), null))
                .isInstanceOf(ExecutionException.InvalidRequest.class)
                .hasMessage("'network' must be false or a list of host patterns");
        assertThatThrownBy(() -> v.parse(map("language", "python", "code", "", "packages", List.of("x @ http://e.test/x.whl")), null))
                .isInstanceOf(ExecutionException.InvalidRequest.class).hasMessageContaining("refused");
        assertThat(v.parse(map("language", "python", "code", "", "packages", List.of("requests==2.32.3")), null)
                .request().packages()).isPresent();
    }
}
