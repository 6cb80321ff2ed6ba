package dev.codeexec.local;

import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.lang.Languages;
import dev.codeexec.testing.Requires;
import dev.codeexec.warm.GoCacheWarmer;
import dev.codeexec.config.Config;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.TimeUnit;

import static dev.codeexec.local.TestSupport.await;
import static dev.codeexec.local.TestSupport.request;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A Go run that arrives while the shared build cache is still being warmed waits for the warm-up, holding no slot,
 * instead of building the standard library in its own /tmp (see {@link GoCacheWarmer} for what that did).
 *
 * <p>The fast tests give the executor a languages table whose "go" is a script: as the warm-up's {@code go build}
 * it blocks until the test writes a line into a FIFO; as a run's compile step it fails unless the warm-up's marker
 * is there, that is unless the cache was warm when the run started.
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class GoCacheWaitTest {

    @TempDir
    Path dir;
    private LocalExecutor executor;

    @AfterEach
    void close() {
        if (executor != null) executor.close();
    }

    /** The executor over {@link FakeSandbox} with the scripted "go" and a shell; its warm-up blocks on the FIFO. */
    private Path startWithScriptedGo(String afterRelease, String... config) throws Exception {
        Path fifo = dir.resolve("release");
        assertThat(new ProcessBuilder("mkfifo", fifo.toString()).start().waitFor()).isZero();
        Path go = dir.resolve("go");
        Files.writeString(go, """
                #!/bin/sh
                case "$1" in
                  version) echo "go version scripted" ;;
                  build) read line < '%s'; %s ;;
                  list) ;;
                  user-build) test -f "$GOCACHE/.code-exec-warm" || { echo "the build cache is cold" >&2; exit 1; } ;;
                  user-run) echo "built with a warm cache" ;;
                esac
                """.formatted(fifo, afterRelease));
        Files.setPosixFilePermissions(go, PosixFilePermissions.fromString("rwxr-xr-x"));
        String table = """
                {"languages": [
                  {"id": "go", "aliases": [], "extension": "go", "compile": ["%1$s", "user-build", "{file}"],
                   "run": ["%1$s", "user-run"], "version": ["%1$s", "version"], "env": {"GOCACHE": "{goCache}"},
                   "binds": ["{goCache}"]},
                  {"id": "shell", "aliases": [], "extension": "sh", "run": ["/bin/sh", "{file}"],
                   "version": ["/bin/sh", "-c", "echo sh"], "env": {}, "binds": []}
                ]}
                """.formatted(go);
        String[] pairs = new String[config.length + 4];
        pairs[0] = "DATA_DIR";
        pairs[1] = dir.resolve("data").toString();
        pairs[2] = "WARM_POOL";
        pairs[3] = "off";
        System.arraycopy(config, 0, pairs, 4, config.length);
        executor = new LocalExecutor(Config.of(pairs), new FakeSandbox(),
                Languages.parse(new ByteArrayInputStream(table.getBytes(StandardCharsets.UTF_8))));
        // The warm-up says "warming" once it has asked "go version", just before its build, which blocks on the FIFO.
        Poll.until("the warm-up in its build", () -> executor.goCacheState().equals("warming"));
        return fifo;
    }

    @Test
    void aGoRunDuringTheWarmUpWaitsForItWithoutHoldingTheOnlySlot() throws Exception {
        Path release = startWithScriptedGo("exit 0", "MAX_CONCURRENT", "1");
        RunHandle go = executor.submit(request(executor.config, "go", "package main"), OutputListener.NONE);
        // One slot: had the Go run taken it, the shell run would have waited for the Go run to end.
        ExecutionResult shell = await(executor.submit(request(executor.config, "shell", "echo next"), OutputListener.NONE));
        assertThat(shell.stdout()).isEqualTo("next\n");
        assertThat(go.result()).as("the Go run is still waiting for the warm-up").isNotDone();
        assertThat(executor.goCacheState()).isEqualTo("warming");

        Files.writeString(release, "go\n");
        ExecutionResult r = await(go);
        assertThat(r.stdout()).as(r.stderr()).isEqualTo("built with a warm cache\n");
        assertThat(executor.goCacheState()).isEqualTo("warm");
    }

    @Test
    void aGoRunCancelledWhileItWaitsForTheWarmUpEndsCancelledAndTheWarmUpGoesOn() throws Exception {
        startWithScriptedGo("exit 0");
        RunHandle go = executor.submit(request(executor.config, "go", "package main"), OutputListener.NONE);
        go.cancel();
        ExecutionResult r = await(go);
        assertThat(r.outcome()).isEqualTo(Outcome.CANCELLED);
        assertThat(r.stdout()).isEmpty();
        assertThat(executor.goCacheState()).isEqualTo("warming");
    }

    @Test
    void aGoRunWaitingForAWarmUpThatFailsRunsColdOnceItHasEnded() throws Exception {
        Path release = startWithScriptedGo("exit 1", "MAX_CONCURRENT", "1");
        RunHandle go = executor.submit(request(executor.config, "go", "package main"), OutputListener.NONE);
        await(executor.submit(request(executor.config, "shell", "echo next"), OutputListener.NONE));
        assertThat(go.result()).as("the Go run is still waiting for the warm-up").isNotDone();

        Files.writeString(release, "go\n");
        ExecutionResult r = await(go);
        assertThat(executor.goCacheState()).isEqualTo("cold");
        assertThat(r.outcome()).isEqualTo(Outcome.EXITED);
        assertThat(r.stderr()).isEqualTo("the build cache is cold\n");
    }

    /**
     * The failure this fixes, with the real Go and sandbox: a hello world submitted to an executor with a fresh
     * DATA_DIR, with 16 MB of /tmp (what a workspace run gets when its workspace has 16 MB left). Racing the
     * warm-up it failed ("failed to initialize build cache", or fmt's dependencies compiled into /tmp: "no space
     * left on device"); waiting, it runs from the warm cache. Takes one whole warm-up (1-2 minutes here).
     */
    @Test
    @Tag("sandbox")
    @Timeout(value = 20, unit = TimeUnit.MINUTES)
    void aFirstGoRunOnAFreshDataDirRunsFromTheWarmedCacheWithinSixteenMegabytesOfTmp() throws Exception {
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx--x--x"));
        Config config = TestSupport.config("DATA_DIR", dir.resolve("data").toString(), "MAX_DISK_MB", "16",
                "WARM_POOL", "off");
        Sandbox real = TestSandboxes.required(config);
        Requires.that(Files.isExecutable(Path.of("/usr/lib/go-1.23/bin/go")), "Go 1.23 (/usr/lib/go-1.23/bin/go)");
        executor = new LocalExecutor(config, real, Languages.load());
        RunHandle go = executor.submit(request(config, "go",
                "package main\nimport \"fmt\"\nfunc main() { fmt.Println(\"hello\") }"), OutputListener.NONE);
        ExecutionResult r = go.result().get(15, TimeUnit.MINUTES);
        assertThat(r.stdout()).as(r.stderr()).isEqualTo("hello\n");
        assertThat(executor.goCacheState()).isEqualTo("warm");
    }
}
