package dev.codeexec.warm;

import dev.codeexec.lang.Language;
import dev.codeexec.lang.Languages;
import dev.codeexec.lang.Placeholders;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.File;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

@Tag("slow")
class LanguageWarmupTest {

    private final Languages table = Languages.load();

    private static Map<String, String> placeholders(Path runtimeDir) throws Exception {
        for (String f : List.of("ts-loader.js", "ts-strip.js"))
            try (InputStream in = LanguageWarmupTest.class.getResourceAsStream("/engine/" + f)) {
                Files.copy(in, runtimeDir.resolve(f));
            }
        // Debian's node: the code cache is the typescript package's, for a Node that does not strip types
        return Map.of("runtimeDir", runtimeDir.toString(), "javaHome", System.getProperty("java.home"),
                "heapMb", "256", "goCache", "/unused", "tsNode", "/usr/bin/node");
    }

    /** Runs a language's run command directly (no sandbox): stdout and stderr kept apart. */
    private String run(Language lang, Map<String, String> placeholders, Path work, String code) throws Exception {
        Path file = work.resolve("code_1." + lang.fileExtension());
        Files.writeString(file, code);
        Map<String, String> ph = new java.util.HashMap<>(placeholders);
        ph.put("file", file.toString());
        ph.put("dir", work.toString());
        ProcessBuilder pb = new ProcessBuilder(Placeholders.fill(lang.run(), ph)).directory(work.toFile())
                .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
        pb.environment().clear();
        pb.environment().putAll(lang.environment(Map.of(), ph));
        pb.environment().put("HOME", work.toString());
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes());
        String err = new String(p.getErrorStream().readAllBytes());
        return p.waitFor() + "|" + out + "|" + err;
    }

    @Test
    void typescriptCodeCacheIsMadeUsedAndAGarbageOneOnlyCostsTime(@TempDir Path runtimeDir, @TempDir Path work)
            throws Exception {
        Language ts = table.find("typescript").orElseThrow();
        Map<String, String> ph = placeholders(runtimeDir);
        assertThat(LanguageWarmup.run(ts, ph, work.resolve("scratch"), new StartupProcesses())).isTrue();
        Path cache = runtimeDir.resolve("typescript.v8cache");
        assertThat(Files.size(cache)).isGreaterThan(100_000);
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(cache))).isEqualTo("rw-r--r--");
        try (var files = Files.list(runtimeDir)) {
            assertThat(files.map(p -> p.getFileName().toString())).containsExactlyInAnyOrder("ts-loader.js",
                    "ts-strip.js", "typescript.v8cache", "typescript.v8cache.made-for");
        }
        String code = "const n: number = 6 * 7; console.log(n)";
        assertThat(run(ts, ph, work, code)).isEqualTo("0|42\n|");
        assertThat(cacheRejected(ts, ph, work)).as("V8 takes the cache for the source the loader reads").isEqualTo("false");
        Files.write(cache, new byte[] {1, 2, 3, 4});
        assertThat(run(ts, ph, work, code)).isEqualTo("0|42\n|");
        assertThat(cacheRejected(ts, ph, work)).isEqualTo("true");
    }

    /** Whether V8 rejected the code cache when ts-loader compiled the transpiler (its own check of source and version). */
    private static String cacheRejected(Language ts, Map<String, String> ph, Path work) throws Exception {
        String loader = Path.of(ph.get("runtimeDir"), "ts-loader.js").toString();
        ProcessBuilder pb = new ProcessBuilder("/usr/bin/node", "-e", "process.stdout.write(String(require("
                + "process.argv[1]).loadTypescript('').script.cachedDataRejected))", loader).directory(work.toFile());
        pb.environment().putAll(ts.environment(Map.of(), ph));
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes());
        p.getErrorStream().readAllBytes();
        p.waitFor();
        return out;
    }

    @Test
    void javaAotCacheIsMadeAndAMissingOrGarbageOneNeverShowsInTheOutput(@TempDir Path runtimeDir, @TempDir Path work)
            throws Exception {
        Language java = table.find("java").orElseThrow();
        Map<String, String> ph = placeholders(runtimeDir);
        String code = "class Main { public static void main(String[] a) { System.out.println(\"hi\"); } }";
        // before the warm-up: no cache file at all
        assertThat(run(java, ph, work, code)).isEqualTo("0|hi\n|");
        assertThat(LanguageWarmup.run(java, ph, work.resolve("scratch"), new StartupProcesses())).isTrue();
        Path cache = runtimeDir.resolve("java-source.aot");
        assertThat(Files.size(cache)).isGreaterThan(1_000_000);
        assertThat(run(java, ph, work, code)).isEqualTo("0|hi\n|");
        Files.write(cache, new byte[] {1, 2, 3, 4});
        assertThat(run(java, ph, work, code)).isEqualTo("0|hi\n|");
    }

    /** A warm-up that counts its runs in a file beside its output. */
    private static Language counting(String program, Path runs) {
        return new Language("x", List.of(), "sh", java.util.Optional.empty(), List.of("/bin/sh", "{file}"),
                List.of(), Map.of(), List.of(), java.util.Optional.of(new Language.Warmup(
                program + "\necho run >> '" + runs + "'; echo made > \"$1\"\n",
                List.of("/bin/sh", "{file}", "{output}", "{runtimeDir}/tool.sh"), Map.of(),
                "{runtimeDir}/x.cache")));
    }

    @Test
    void aCurrentOutputIsKeptAndAChangeOfProgramOrNamedFileMakesItAgain(@TempDir Path runtimeDir) throws Exception {
        Map<String, String> ph = Map.of("runtimeDir", runtimeDir.toString(), "heapMb", "256");
        Path runs = runtimeDir.resolve("runs");
        Path tool = Files.writeString(runtimeDir.resolve("tool.sh"), "v1");
        assertThat(LanguageWarmup.run(counting("true", runs), ph, runtimeDir.resolve("s"), new StartupProcesses()))
                .isTrue();
        assertThat(LanguageWarmup.run(counting("true", runs), ph, runtimeDir.resolve("s"), new StartupProcesses()))
                .isTrue();
        assertThat(Files.readAllLines(runs)).as("the second start keeps the output").hasSize(1);
        assertThat(LanguageWarmup.run(counting(": changed", runs), ph, runtimeDir.resolve("s"),
                new StartupProcesses())).isTrue();
        assertThat(Files.readAllLines(runs)).as("a changed program makes it again").hasSize(2);
        Files.writeString(tool, "v2");
        assertThat(LanguageWarmup.run(counting(": changed", runs), ph, runtimeDir.resolve("s"),
                new StartupProcesses())).isTrue();
        assertThat(Files.readAllLines(runs)).as("a changed file its command names makes it again").hasSize(3);
        Files.delete(runtimeDir.resolve("x.cache"));
        assertThat(LanguageWarmup.run(counting(": changed", runs), ph, runtimeDir.resolve("s"),
                new StartupProcesses())).isTrue();
        assertThat(Files.readAllLines(runs)).as("a missing output is made again").hasSize(4);
    }

    @Test
    void aFailingWarmupInstallsNothing(@TempDir Path runtimeDir) throws Exception {
        Language broken = new Language("x", List.of(), "sh", java.util.Optional.empty(), List.of("/bin/sh", "{file}"),
                List.of(), Map.of(), List.of(), java.util.Optional.of(new Language.Warmup("exit 3",
                List.of("/bin/sh", "{file}"), Map.of(), "{runtimeDir}/x.cache")));
        assertThat(LanguageWarmup.run(broken, placeholders(runtimeDir), runtimeDir.resolve("scratch"),
                new StartupProcesses())).isFalse();
        assertThat(runtimeDir.resolve("x.cache")).doesNotExist();
    }
}
