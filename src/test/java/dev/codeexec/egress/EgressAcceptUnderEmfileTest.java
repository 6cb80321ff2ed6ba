package dev.codeexec.egress;

import dev.codeexec.testing.Requires;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A process out of descriptors (EMFILE) does not cost a run its proxy: the channel's accept loop waits and tries
 * again instead of ending. In a child JVM whose descriptor limit prlimit lowers, so this JVM's stays untouched.
 */
@Tag("slow")
class EgressAcceptUnderEmfileTest {

    @TempDir
    Path tmp;

    @Test
    void aChannelAcceptsAgainOnceDescriptorsAreFreeAfterRunningOut() throws Exception {
        Requires.that(Files.isExecutable(Path.of("/usr/bin/prlimit")), "prlimit (util-linux)");
        Path out = tmp.resolve("out.txt");
        ProcessBuilder pb = new ProcessBuilder("/usr/bin/prlimit", "--nofile=1024:1024",
                Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-cp", System.getProperty("java.class.path"),
                AcceptUnderEmfile.class.getName(), tmp.resolve("c.sock").toString());
        pb.redirectErrorStream(true);
        pb.redirectOutput(out.toFile());
        Process p = pb.start();
        try {
            boolean done = p.waitFor(90, TimeUnit.SECONDS);
            String said = Files.readString(out, StandardCharsets.UTF_8);
            assertThat(done).as("the child ended: " + said).isTrue();
            assertThat(said).contains("before: HTTP/1.1 403").contains("out of descriptors after")
                    .contains("after: HTTP/1.1 403").contains("accepting again");
            assertThat(p.exitValue()).as(said).isZero();
        } finally {
            p.destroyForcibly();
        }
    }
}
