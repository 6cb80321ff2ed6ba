package dev.codeexec.engine;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

class GoCacheWarmerTest {

    private static final String GO = "/usr/lib/go-1.23/bin/go";

    private static Map<String, String> goEnv() {
        Language go = Languages.load().find("go").orElseThrow();
        return LocalExecutor.environment(go, Map.of(), Map.of("goCache", "/unused"));
    }

    @Test
    void warmsOnceWorldReadableAndAgainWhenWhatItWasWarmedForChanges(@TempDir Path dir) throws Exception {
        assumeTrue(Files.isExecutable(Path.of(GO)), "Go is not installed");
        Path cache = dir.resolve("cache");
        GoCacheWarmer w = new GoCacheWarmer(cache, GO, goEnv(), List.of("errors"));
        assertThat(w.state()).isEqualTo(GoCacheWarmer.State.COLD);
        w.warm();
        assertThat(w.state()).isEqualTo(GoCacheWarmer.State.WARM);
        Path marker = cache.resolve(GoCacheWarmer.MARKER);
        assertThat(Files.readString(marker)).startsWith("go version go1.23").contains("errors");
        try (Stream<Path> all = Files.walk(cache)) {
            all.forEach(p -> {
                String perms = PosixFilePermissions.toString(uncheckedPerms(p));
                assertThat(perms).as(p.toString()).isEqualTo(Files.isDirectory(p) ? "rwxr-xr-x" : "rw-r--r--");
            });
        }

        FileTime before = FileTime.fromMillis(1_000_000L);
        Files.setLastModifiedTime(marker, before);
        GoCacheWarmer again = new GoCacheWarmer(cache, GO, goEnv(), List.of("errors"));
        again.warm();
        assertThat(again.state()).isEqualTo(GoCacheWarmer.State.WARM);
        assertThat(Files.getLastModifiedTime(marker)).as("no second warm-up").isEqualTo(before);

        GoCacheWarmer changed = new GoCacheWarmer(cache, GO, goEnv(), List.of("errors", "unicode/utf8"));
        changed.warm();
        assertThat(changed.state()).isEqualTo(GoCacheWarmer.State.WARM);
        assertThat(Files.readString(marker)).contains("errors unicode/utf8");
    }

    @Test
    void aProgramThatDoesNotBuildLeavesTheCacheCold(@TempDir Path dir) {
        assumeTrue(Files.isExecutable(Path.of(GO)), "Go is not installed");
        GoCacheWarmer w = new GoCacheWarmer(dir.resolve("cache"), GO, goEnv(), List.of("no/such/package"));
        w.warm();
        assertThat(w.state()).isEqualTo(GoCacheWarmer.State.COLD);
        assertThat(dir.resolve("cache").resolve(GoCacheWarmer.MARKER)).doesNotExist();
    }

    @Test
    void warmUpProgramImportsEveryListedPackage() {
        assertThat(GoCacheWarmer.program(GoCacheWarmer.PACKAGES)).contains("_ \"net/http\"", "_ \"encoding/json\"",
                "_ \"container/heap\"").endsWith("func main() {}\n");
    }

    private static java.util.Set<java.nio.file.attribute.PosixFilePermission> uncheckedPerms(Path p) {
        try {
            return Files.getPosixFilePermissions(p);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
