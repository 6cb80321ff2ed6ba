package dev.codeexec.warm;

import dev.codeexec.lang.Language;
import dev.codeexec.lang.Languages;
import dev.codeexec.config.DataDir;
import dev.codeexec.testing.Poll;
import dev.codeexec.testing.Requires;
import org.junit.jupiter.api.Tag;
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

@Tag("slow")
class GoCacheWarmerTest {

    private static final String GO = "/usr/lib/go-1.23/bin/go";

    private static Map<String, String> goEnv() {
        Language go = Languages.load().find("go").orElseThrow();
        return go.environment(Map.of(), Map.of("goCache", "/unused"));
    }

    @Test
    void warmsOnceWorldReadableAndAgainWhenWhatItWasWarmedForChanges(@TempDir Path dir) throws Exception {
        Requires.that(Files.isExecutable(Path.of(GO)), "Go 1.23 (" + GO + ")");
        Path cache = DataDir.at(dir).goCache();
        GoCacheWarmer w = new GoCacheWarmer(DataDir.at(dir), GO, goEnv(),
                List.of("errors"), new StartupProcesses());
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
        GoCacheWarmer again = new GoCacheWarmer(DataDir.at(dir), GO, goEnv(),
                List.of("errors"), new StartupProcesses());
        again.warm();
        assertThat(again.state()).isEqualTo(GoCacheWarmer.State.WARM);
        assertThat(Files.getLastModifiedTime(marker)).as("no second warm-up").isEqualTo(before);

        GoCacheWarmer changed = new GoCacheWarmer(DataDir.at(dir), GO, goEnv(),
                List.of("errors", "unicode/utf8"), new StartupProcesses());
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
        GoCacheWarmer w = warmedForAnotherUid(dir);
        Path cache = DataDir.at(dir).goCache();
        assertThat(w.state()).isEqualTo(GoCacheWarmer.State.WARM);
        BuildResult r = buildAsSandboxUid(dir, cache, "archive/zip", "_ = zip.NewWriter(os.Stdout)");
        assertThat(r.exit()).as(r.output()).isZero();
    }

    /**
     * The other read-only trap: Go trims its cache daily and fails the build when it cannot write trim.txt. A
     * day-old stamp (what a server up for a day would have without the hourly refresh) breaks every build; the
     * warmer's stamp makes it work again.
     */
    @Test
    void aStaleTrimStampBreaksReadOnlyBuildsUntilTheWarmerStampsIt(@TempDir Path dir) throws Exception {
        GoCacheWarmer w = warmedForAnotherUid(dir);
        Path cache = DataDir.at(dir).goCache();
        long dayAndAHourAgo = System.currentTimeMillis() / 1000 - 25 * 3600;
        Files.writeString(cache.resolve("trim.txt"), Long.toString(dayAndAHourAgo));
        BuildResult stale = buildAsSandboxUid(dir, cache, "errors", "_ = errors.New(\"x\")");
        assertThat(stale.exit()).isNotZero();
        assertThat(stale.output()).contains("failed to trim cache");
        w.stampTrim();
        BuildResult fresh = buildAsSandboxUid(dir, cache, "errors", "_ = errors.New(\"x\")");
        assertThat(fresh.exit()).as(fresh.output()).isZero();
    }

    /** A cache warmed with one package in dir's go-cache, for builds as uid 65534 (needs Go, root and setpriv). */
    private static GoCacheWarmer warmedForAnotherUid(Path dir) {
        Requires.that(Files.isExecutable(Path.of(GO)), "Go 1.23 (" + GO + ")");
        Requires.that("root".equals(System.getProperty("user.name")) && Files.isExecutable(Path.of("/usr/bin/setpriv")),
                "root and setpriv, to act as another uid");
        GoCacheWarmer w = new GoCacheWarmer(DataDir.at(dir), GO, goEnv(),
                List.of("errors"), new StartupProcesses());
        w.warm();
        return w;
    }

    private record BuildResult(int exit, String output) {
    }

    /** Builds a one-import program as uid 65534, to which the root-owned cache is read-only. */
    private static BuildResult buildAsSandboxUid(Path dir, Path cache, String importPath, String body) throws Exception {
        Path work = Files.createTempDirectory(dir, "work");
        Files.writeString(work.resolve("z.go"), "package main\n\nimport (\n\t\"" + importPath + "\"\n\t\"os\"\n)\n\n"
                + "var _ = os.Stdout\n\nfunc main() { " + body + " }\n");
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        Files.setPosixFilePermissions(work, PosixFilePermissions.fromString("rwxr-xr-x"));
        Files.setAttribute(work, "unix:uid", 65534);
        ProcessBuilder pb = new ProcessBuilder("/usr/bin/setpriv", "--reuid", "65534", "--regid", "65534",
                "--clear-groups", GO, "build", "-o", "z", "z.go").directory(work.toFile()).redirectErrorStream(true);
        pb.environment().clear();
        pb.environment().putAll(goEnv());
        pb.environment().putAll(Map.of("GOCACHE", cache.toString(), "HOME", work.toString(), "GOTMPDIR", work.toString(),
                "GOPATH", work.resolve("gopath").toString()));
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes());
        int exit = p.waitFor();
        if (exit == 0) assertThat(work.resolve("z")).isExecutable();
        return new BuildResult(exit, out);
    }

    @Test
    void aProgramThatDoesNotBuildLeavesTheCacheCold(@TempDir Path dir) {
        Requires.that(Files.isExecutable(Path.of(GO)), "Go 1.23 (" + GO + ")");
        GoCacheWarmer w = new GoCacheWarmer(DataDir.at(dir), GO, goEnv(),
                List.of("no/such/package"), new StartupProcesses());
        w.warm();
        assertThat(w.state()).isEqualTo(GoCacheWarmer.State.COLD);
        assertThat(DataDir.at(dir).goCache().resolve(GoCacheWarmer.MARKER)).doesNotExist();
    }

    @Test
    void stoppingEndsTheWarmUpAndRemovesItsScratchDirectory(@TempDir Path dir) throws Exception {
        Requires.that(Files.isExecutable(Path.of(GO)), "Go 1.23 (" + GO + ")");
        StartupProcesses processes = new StartupProcesses();
        GoCacheWarmer w = new GoCacheWarmer(DataDir.at(dir), GO, goEnv(),
                GoCacheWarmer.PACKAGES, processes);
        Thread t = Thread.ofVirtual().start(w::warm);
        // Into the build of the whole package list (tens of seconds on a cold cache): its go process is running.
        Poll.until("the warm-up's go build running", () -> ProcessHandle.current().descendants()
                .anyMatch(p -> p.info().arguments().map(a -> a.length > 0 && a[0].equals("build")).orElse(false)));
        processes.stopAll();
        assertThat(t.join(java.time.Duration.ofSeconds(20))).isTrue();
        assertThat(w.state()).isEqualTo(GoCacheWarmer.State.COLD);
        assertThat(DataDir.at(dir).goCache().resolve(GoCacheWarmer.MARKER)).doesNotExist();
        try (Stream<Path> left = Files.list(DataDir.at(dir).scratch())) {
            assertThat(left).isEmpty();
        }
        assertThat(ProcessHandle.current().descendants()
                .filter(p -> p.info().command().orElse("").contains("go"))).isEmpty();
    }

    /**
     * Servers sharing DATA_DIR start together: the second waits for the first's warm-up and finds the cache warm,
     * instead of building the same packages into the same cache at the same time. A stand-in for go logs each build.
     */
    @Test
    void twoServersWarmingOneCacheAtOnceBuildItOnceAndBothEndWarm(@TempDir Path dir) throws Exception {
        Path builds = dir.resolve("builds.log");
        Path go = dir.resolve("go");
        Files.writeString(go, String.join("\n", "#!/bin/sh",
                "case \"$1\" in",
                "  version) echo go version go1.99 stand-in ;;",
                "  build) echo build >> " + builds + "; sleep 1; touch \"$3\" ;;",
                "esac", ""));
        Files.setPosixFilePermissions(go, PosixFilePermissions.fromString("rwxr-xr-x"));
        DataDir data = DataDir.at(dir.resolve("data"));
        GoCacheWarmer first = new GoCacheWarmer(data, go.toString(), Map.of(), List.of("errors"), new StartupProcesses());
        GoCacheWarmer second = new GoCacheWarmer(data, go.toString(), Map.of(), List.of("errors"), new StartupProcesses());

        Thread a = Thread.ofPlatform().start(first::warm);
        Thread b = Thread.ofPlatform().start(second::warm);
        a.join();
        b.join();

        assertThat(List.of(first.state(), second.state())).containsOnly(GoCacheWarmer.State.WARM);
        assertThat(Files.readAllLines(builds)).containsExactly("build");
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
