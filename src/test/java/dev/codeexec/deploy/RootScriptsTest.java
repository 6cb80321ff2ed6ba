package dev.codeexec.deploy;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The README's two commands, {@code ./scripts/run.sh} and {@code ./scripts/test.sh}, work from a root shell without
 * sudo (a container has none) and for a normal user with sudo: run by someone else than root, each runs itself again
 * through sudo with the caller's variables, or says that it needs root. The scripts run with a PATH of this test's
 * own: an {@code id} that answers the uid the test chooses and, where the test wants one, a {@code sudo} that only
 * prints what it was asked to run, so nothing is installed or started.
 */
class RootScriptsTest {

    private static final Path SCRIPTS = Path.of("scripts").toAbsolutePath();

    @TempDir
    Path bin;

    @BeforeEach
    void tools() throws IOException {
        Files.createSymbolicLink(bin.resolve("dirname"), Path.of("/usr/bin/dirname"));
    }

    @Test
    void aNormalUserRunsTheServerScriptAgainThroughSudoWithItsVariablesAndArguments() throws Exception {
        fakeId(1000);
        fakeSudo();
        Result r = run(SCRIPTS.resolve("run.sh"), Map.of("JAVA_HOME", "/opt/jdk-25", "EGRESS", "on",
                "EGRESS_ALLOW", "pypi.org,*.example.com", "HOME", "/home/you", "XDG_DATA_HOME", "/home/you/.local/share",
                "SUDO_USER", "someone"), "worker", "two words");
        assertThat(r.exit).as(r.stderr).isZero();
        List<String> asked = r.stdout.lines().toList();
        assertThat(asked.subList(0, 2)).containsExactly("--", "env");
        assertThat(asked).contains("JAVA_HOME=/opt/jdk-25", "EGRESS=on", "EGRESS_ALLOW=pypi.org,*.example.com");
        assertThat(asked).as("root gets its own HOME, PATH and session").noneMatch(a -> a.startsWith("HOME=")
                || a.startsWith("PATH=") || a.startsWith("XDG_") || a.startsWith("SUDO_"));
        assertThat(asked.subList(asked.size() - 3, asked.size()))
                .containsExactly(SCRIPTS.resolve("run.sh").toString(), "worker", "two words");
        assertThat(r.stderr).contains("run.sh: not root: running it again through sudo");
    }

    @Test
    void aNormalUserRunsTheTestScriptAgainThroughSudo() throws Exception {
        fakeId(1000);
        fakeSudo();
        Result r = run(SCRIPTS.resolve("test.sh"), Map.of("JAVA_HOME", "/opt/jdk-25"));
        assertThat(r.exit).as(r.stderr).isZero();
        List<String> asked = r.stdout.lines().toList();
        assertThat(asked).contains("JAVA_HOME=/opt/jdk-25");
        assertThat(asked.getLast()).isEqualTo(SCRIPTS.resolve("test.sh").toString());
    }

    @Test
    void withoutSudoANormalUserIsToldThatTheScriptNeedsARootShell() throws Exception {
        fakeId(1000);
        for (String script : List.of("run.sh", "test.sh")) {
            Result r = run(SCRIPTS.resolve(script), Map.of());
            assertThat(r.exit).as(script).isEqualTo(1);
            assertThat(r.stderr).as(script).contains(script + ": needs root").contains("sudo is not installed")
                    .contains("root shell").contains("docs/desktop.md");
            assertThat(r.stdout).as(script).isEmpty();
        }
    }

    @Test
    void rootGoesOnWithoutSudo() throws Exception {
        fakeId(0);
        // no sudo on the PATH: as a root shell in a container
        Result r = bash("source " + SCRIPTS.resolve("lib/as-root.sh") + "; as_root /somewhere/run.sh --x; echo went on",
                Map.of());
        assertThat(r.exit).as(r.stderr).isZero();
        assertThat(r.stdout).isEqualTo("went on\n");
        assertThat(r.stderr).isEmpty();
    }

    private void fakeId(int uid) throws IOException {
        script("id", "#!/bin/sh\necho " + uid + "\n");
    }

    /** A sudo that prints each argument it was given on a line of its own, and runs nothing. */
    private void fakeSudo() throws IOException {
        script("sudo", "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n");
    }

    private void script(String name, String text) throws IOException {
        Path p = bin.resolve(name);
        Files.writeString(p, text);
        Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
    }

    private Result run(Path script, Map<String, String> env, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of("/bin/bash", script.toString()));
        cmd.addAll(List.of(args));
        return exec(cmd, env);
    }

    private Result bash(String code, Map<String, String> env) throws Exception {
        return exec(List.of("/bin/bash", "-c", code), env);
    }

    private Result exec(List<String> cmd, Map<String, String> env) throws Exception {
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.environment().clear();
        pb.environment().putAll(env);
        pb.environment().put("PATH", bin.toString());
        Path out = bin.resolve("out"), err = bin.resolve("err");
        pb.redirectOutput(out.toFile()).redirectError(err.toFile()).redirectInput(ProcessBuilder.Redirect.from(
                Path.of("/dev/null").toFile()));
        Process p = pb.start();
        if (!p.waitFor(30, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("the script did not end: " + cmd);
        }
        return new Result(p.exitValue(), Files.readString(out), Files.readString(err));
    }

    private record Result(int exit, String stdout, String stderr) {
    }
}
