package dev.codeexec.engine;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

class TypeScriptCacheTest {

    private final Language ts = Languages.load().find("typescript").orElseThrow();

    private static Path installLoader(Path runtimeDir) throws Exception {
        try (InputStream in = TypeScriptCacheTest.class.getResourceAsStream("/engine/ts-loader.js")) {
            Files.copy(in, runtimeDir.resolve("ts-loader.js"));
        }
        return runtimeDir;
    }

    private String runTs(Path runtimeDir, Path work, String code) throws Exception {
        Path file = work.resolve("prog.ts");
        Files.writeString(file, code);
        ProcessBuilder pb = new ProcessBuilder(Placeholders.fill(ts.run(),
                Map.of("runtimeDir", runtimeDir.toString(), "file", file.toString()))).redirectErrorStream(true);
        pb.environment().clear();
        pb.environment().putAll(LocalExecutor.baseEnvironment(work.toString()));
        pb.environment().putAll(ts.env());
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes());
        p.waitFor();
        return p.exitValue() + ":" + out;
    }

    @Test
    void buildsACacheThatRunsUseAndAGarbageCacheOnlyCostsTime(@TempDir Path runtimeDir, @TempDir Path work) throws Exception {
        installLoader(runtimeDir);
        TypeScriptCache.build(ts, Map.of("runtimeDir", runtimeDir.toString()), runtimeDir);
        Path cache = runtimeDir.resolve(TypeScriptCache.FILE);
        assertThat(cache).exists();
        assertThat(Files.size(cache)).isGreaterThan(100_000);
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(cache))).isEqualTo("rw-r--r--");
        assertThat(runTs(runtimeDir, work, "const n: number = 6 * 7; console.log(n)")).isEqualTo("0:42\n");

        Files.write(cache, new byte[] {1, 2, 3, 4});
        assertThat(runTs(runtimeDir, work, "const n: number = 6 * 7; console.log(n)")).isEqualTo("0:42\n");
    }

    @Test
    void missingTypescriptPackageSaysSo(@TempDir Path runtimeDir, @TempDir Path work) throws Exception {
        installLoader(runtimeDir);
        Path file = work.resolve("prog.ts");
        Files.writeString(file, "console.log(1)");
        ProcessBuilder pb = new ProcessBuilder(List.of("/usr/bin/node", runtimeDir.resolve("ts-loader.js").toString(),
                file.toString())).redirectErrorStream(true);
        pb.environment().clear();
        pb.environment().put("NODE_PATH", work.toString());
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes());
        assertThat(p.waitFor()).isEqualTo(127);
        assertThat(out).contains("typescript is not installed");
    }
}
