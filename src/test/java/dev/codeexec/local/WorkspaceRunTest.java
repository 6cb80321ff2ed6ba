package dev.codeexec.local;

import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.lang.Languages;
import dev.codeexec.config.Config;
import dev.codeexec.testing.Requires;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.Workspaces;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.stream.Stream;

import static dev.codeexec.local.TestSupport.await;
import static dev.codeexec.local.TestSupport.request;
import static org.assertj.core.api.Assertions.assertThat;

/** Runs in a persistent workspace, in the real sandbox: files persist, code files never clash, quota holds. */
@Tag("sandbox")
class WorkspaceRunTest {

    @TempDir
    Path tmp;
    LocalExecutor executor;
    Workspaces workspaces;
    Workspace ws;

    @BeforeEach
    void setUp() throws Exception {
        Files.setPosixFilePermissions(tmp, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Config config = TestSupport.config();
        executor = new LocalExecutor(config, TestSandboxes.required(config), Languages.load());
        workspaces = new Workspaces(tmp.resolve("ws"), 16 << 20, Duration.ofHours(1), 65534, 65534);
        ws = workspaces.open("alice", "proj", true);
    }

    @AfterEach
    void tearDown() {
        if (executor != null) executor.close();
    }

    private ExecutionResult run(String language, String code) throws Exception {
        return await(executor.submit(request(executor.config, language, code).inWorkspace(ws), OutputListener.NONE));
    }

    private String[] namesInWorkspace() throws Exception {
        try (Stream<Path> s = Files.list(ws.fs().root())) {
            return s.map(p -> p.getFileName().toString()).sorted().toArray(String[]::new);
        }
    }

    @Test
    void writeCompileRunAcrossCalls() throws Exception {
        ExecutionResult write = run("shell", "printf '#include <stdio.h>\\nint main(){puts(\"built\");return 0;}\\n' > main.c");
        assertThat(write.exitCode()).as(write.stderr()).isZero();
        ExecutionResult compile = run("shell", "gcc -o prog main.c && echo compiled");
        assertThat(compile.stdout()).as(compile.stderr()).isEqualTo("compiled\n");
        assertThat(compile.files()).extracting(ExecutionResult.FileArtifact::path).containsExactly("prog");
        ExecutionResult exec = run("bash", "./prog");
        assertThat(exec.stdout()).isEqualTo("built\n");
        assertThat(exec.files()).isEmpty();
        assertThat(namesInWorkspace()).containsExactly("main.c", "prog");
    }

    /**
     * Each sandbox runs as a host uid of its own, so what the API wrote (SANDBOX_UID) and what an earlier run left
     * (another uid, private modes) would be out of reach without the hand-over before each run.
     */
    @Test
    void eachRunOwnsWhatTheApiAndEarlierRunsLeftInItsWorkspace() throws Exception {
        ws.write(RelPath.parse("tool.sh"), new ByteArrayInputStream("echo tool ran\n".getBytes()), 1000);
        ExecutionResult first = run("shell", "chmod +x tool.sh && ./tool.sh && mkdir d && umask 077 && echo secret > d/private && chmod 700 d");
        assertThat(first.stdout()).as(first.stderr()).isEqualTo("tool ran\n");
        ExecutionResult second = run("shell", "echo more >> d/private && chmod 600 d/private && rm tool.sh && cat d/private");
        assertThat(second.stdout()).as(second.stderr()).isEqualTo("secret\nmore\n");
        assertThat(namesInWorkspace()).containsExactly("d");
        // the API still reads and replaces what runs made, however private its mode
        assertThat(new String(ws.fs().openRead(RelPath.parse("d/private")).readAllBytes())).isEqualTo("secret\nmore\n");
    }

    /** Runs at once in one workspace: the later one owns the tree, the earlier still writes through the group. */
    @Test
    void runsAtTheSameTimeInOneWorkspaceAllWriteIt() throws Exception {
        var runs = new java.util.ArrayList<java.util.concurrent.CompletableFuture<ExecutionResult>>();
        for (int i = 0; i < 3; i++) {
            runs.add(executor.submit(request(executor.config, "shell",
                    "sleep 1; mkdir -p shared && echo " + i + " > shared/out" + i + " && cat shared/out" + i).inWorkspace(ws),
                    OutputListener.NONE).result());
        }
        for (int i = 0; i < runs.size(); i++) {
            ExecutionResult r = runs.get(i).get(60, java.util.concurrent.TimeUnit.SECONDS);
            assertThat(r.stdout()).as(r.stderr()).isEqualTo(i + "\n");
        }
    }

    @Test
    void codeFileNeverTouchesTheUsersFilesAndImportsFromTheWorkspaceWork() throws Exception {
        ws.write(RelPath.parse("main.py"), new ByteArrayInputStream("print('users main')\n".getBytes()), 1000);
        ws.write(RelPath.parse("helper.py"), new ByteArrayInputStream("VALUE = 42\n".getBytes()), 1000);
        ExecutionResult r = run("python", "import helper, os\nprint(helper.VALUE, open('main.py').read().strip())");
        assertThat(r.stdout()).as(r.stderr()).isEqualTo("42 print('users main')\n");
        assertThat(namesInWorkspace()).containsExactly("helper.py", "main.py"); // no code_* left behind
        ExecutionResult go = run("go", "package main\nimport \"fmt\"\nfunc main(){ fmt.Println(\"go in ws\") }");
        assertThat(go.stdout()).as(go.stderr()).isEqualTo("go in ws\n");
        assertThat(namesInWorkspace()).containsExactly("helper.py", "main.py");
    }

    @Test
    void resultListsCreatedAndModifiedFiles() throws Exception {
        ws.write(RelPath.parse("data.csv"), new ByteArrayInputStream("a\n1\n".getBytes()), 1000);
        ws.write(RelPath.parse("same.txt"), new ByteArrayInputStream("x".getBytes()), 1000);
        ExecutionResult r = run("python", """
                import os
                os.makedirs('out', exist_ok=True)
                open('out/report.json', 'w').write('{}')
                open('data.csv', 'a').write('2\\n')
                os.symlink('/etc/passwd', 'link')
                """);
        assertThat(r.exitCode()).as(r.stderr()).isZero();
        assertThat(r.files()).containsExactly(
                new ExecutionResult.FileArtifact("data.csv", 6, "text/csv", "modified"),
                new ExecutionResult.FileArtifact("out/report.json", 2, "application/json", "created"));
    }

    @Test
    void matplotlibChartIsListedAsAnImage() throws Exception {
        ExecutionResult r = run("python", """
                import matplotlib.pyplot as plt
                plt.plot([1, 2, 3], [1, 4, 9])
                plt.savefig('chart.png')
                """);
        assertThat(r.exitCode()).as(r.stderr()).isZero();
        assertThat(r.files()).singleElement().satisfies(f -> {
            assertThat(f.path()).isEqualTo("chart.png");
            assertThat(f.mimeType()).isEqualTo("image/png");
            assertThat(f.size()).isGreaterThan(1000);
        });
        byte[] png = Files.readAllBytes(ws.fs().root().resolve("chart.png"));
        assertThat(new String(png, 1, 3, StandardCharsets.US_ASCII)).isEqualTo("PNG");
    }

    /** The workspace quota (16 MB here) caps what code can write: the write fails with EFBIG, not silently. */
    @Test
    void codeWritingPastTheQuotaGetsAnError() throws Exception {
        ExecutionResult r = run("python", """
                try:
                    with open('big.bin', 'wb') as f:
                        f.write(b'x' * (40 * 1024 * 1024))
                    print('wrote all')
                except OSError as e:
                    print('errno', e.errno)
                """);
        assertThat(r.stdout()).as(r.stderr()).isEqualTo("errno 27\n");
        assertThat(ws.usage().bytes()).isLessThanOrEqualTo(ws.quotaBytes());
    }

    @Test
    void theSandboxSeesOnlyItsOwnWorkspace() throws Exception {
        Workspace other = workspaces.open("bob", "proj", true);
        other.write(RelPath.parse("secret.txt"), new ByteArrayInputStream("bob".getBytes()), 100);
        ExecutionResult r = run("shell", "ls -a /work; ls " + other.fs().root() + " 2>&1; ls " + tmp + " 2>&1; echo done");
        assertThat(r.stdout()).doesNotContain("secret.txt").contains("done");
        assertThat(r.stdout()).contains("No such file or directory");
    }

    /**
     * Without a kernel quota (this machine: ext4) the watchdog measures a running program's workspace and stops the
     * run once it holds more than WORKSPACE_MAX_ENTRIES entries: 200,000 empty files would otherwise all be made.
     */
    @Test
    void aRunFloodingTheWorkspaceWithFilesIsStoppedPastTheEntryLimit() throws Exception {
        Workspaces small = new Workspaces(tmp.resolve("small"), 16 << 20, 2000, Duration.ofHours(1), 65534, 65534);
        Requires.onlyWhere(small.enforcement().equals("measured"), "a workspace root without a kernel quota (here EDQUOT, not a stop)");
        ws = small.open("alice", "flood", true);
        ExecutionResult r = run("python", """
                import os
                for i in range(200000):
                    os.close(os.open('f%d' % i, os.O_CREAT | os.O_WRONLY, 0o644))
                print('made them all')
                """);
        assertThat(r.outcome()).as(r.stderr()).isEqualTo(Outcome.WORKSPACE_LIMIT);
        assertThat(r.stdout()).doesNotContain("made them all");
        assertThat(r.stderr()).contains("[terminated] workspace limit").contains("WORKSPACE_MAX_ENTRIES");

        // over its limit now: no run starts until entries are deleted, then runs work again
        ExecutionResult refused = run("python", "print('ran')");
        assertThat(refused.outcome()).isEqualTo(Outcome.FAILED_TO_START);
        assertThat(refused.stderr()).contains("more than 2000 files and directories").contains("delete some");
        try (Stream<Path> files = Files.list(ws.fs().root())) {
            for (Path f : files.toList()) ws.fs().delete(RelPath.parse(f.getFileName().toString()), false);
        }
        assertThat(run("python", "print('ran')").stdout()).isEqualTo("ran\n");
    }

    /** Many files, each under the per-file cap (RLIMIT_FSIZE), that together go past the quota: the run is stopped. */
    @Test
    void aRunWritingPastTheQuotaInManyFilesIsStopped() throws Exception {
        Requires.onlyWhere(workspaces.enforcement().equals("measured"), "a workspace root without a kernel quota (here EDQUOT, not a stop)");
        ExecutionResult r = run("python", """
                import time
                for i in range(64):
                    with open('part%d.bin' % i, 'wb') as f:
                        f.write(b'x' * (1024 * 1024))
                time.sleep(20)  # alive until the watchdog measured it
                print('wrote 64 MB')
                """);
        assertThat(r.outcome()).as(r.stderr()).isEqualTo(Outcome.WORKSPACE_LIMIT);
        assertThat(r.stdout()).doesNotContain("wrote 64 MB");
    }

    /**
     * A chain of 25,000 directories (the issue's {@code os.mkdir('d'); os.chdir('d')}): the scans before and after the
     * run, the workspace's info and its deletion all still work, and nothing overflows the server's stack.
     */
    @Test
    void aChainOf25000DirectoriesLeavesTheWorkspaceUsableAndDeletable() throws Exception {
        ExecutionResult r = run("python", """
                import os
                for i in range(25000):
                    os.mkdir('d')
                    os.chdir('d')
                open('bottom.txt', 'w').write('deep')
                print('deep')
                """);
        assertThat(r.stdout()).as(r.stderr()).isEqualTo("deep\n");
        assertThat(r.filesTruncated()).isTrue(); // listed down to MAX_WALK_DEPTH levels, not to the bottom
        Workspace.Info info = ws.info();
        assertThat(info.directories()).isEqualTo(25000);
        assertThat(info.files()).isEqualTo(1);
        assertThat(info.complete()).isTrue();
        assertThat(run("python", "print('still usable')").stdout()).isEqualTo("still usable\n");
        workspaces.delete("alice", "proj");
        assertThat(workspaces.names("alice")).isEmpty();
    }
}
