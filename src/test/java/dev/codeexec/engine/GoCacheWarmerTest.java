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

    /**
     * The read-only trap: as another uid (the cache is read-only to it), a standard package that the warm-up did
     * not compile must still build. Without the std index written by the warm-up Go says "not in std".
     */
    @Test
    void aStandardPackageOutsideTheWarmListBuildsWithTheCacheReadOnly(@TempDir Path dir) throws Exception {
        assumeTrue(Files.isExecutable(Path.of(GO)), "Go is not installed");
        assumeTrue("root".equals(System.getProperty("user.name")) && Files.isExecutable(Path.of("/usr/bin/setpriv")),
                "needs root and setpriv to act as another uid");
        Path cache = dir.resolve("cache");
        GoCacheWarmer w = new GoCacheWarmer(cache, GO, goEnv(), List.of("errors"));
        w.warm();
        assertThat(w.state()).isEqualTo(GoCacheWarmer.State.WARM);
        Path work = dir.resolve("work");
        Files.createDirectories(work);
        Files.writeString(work.resolve("z.go"), "package main\n\nimport (\n\t\"archive/zip\"\n\t\"os\"\n)\n\n"
                + "func main() { _ = zip.NewWriter(os.Stdout) }\n");
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        Files.setAttribute(work, "unix:uid", 65534);
        ProcessBuilder pb = new ProcessBuilder("/usr/bin/setpriv", "--reuid", "65534", "--regid", "65534",
                "--clear-groups", GO, "build", "-o", "z", "z.go").directory(work.toFile()).redirectErrorStream(true);
        pb.environment().clear();
        pb.environment().putAll(goEnv());
        pb.environment().putAll(Map.of("GOCACHE", cache.toString(), "HOME", work.toString(), "GOTMPDIR", work.toString(),
                "GOPATH", work.resolve("gopath").toString()));
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes());
        assertThat(p.waitFor()).as(out).isZero();
        assertThat(work.resolve("z")).isExecutable();
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
