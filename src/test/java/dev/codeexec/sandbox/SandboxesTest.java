package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;
import dev.codeexec.config.Config;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import static org.assertj.core.api.Assertions.assertThat;

@Tag("sandbox")
class SandboxesTest {

    @Test
    void createsTheConfiguredSandboxAndAPrivateDataDir() throws Exception {
        Path parent = Files.createTempDirectory("sandboxes-");
        Files.setPosixFilePermissions(parent, PosixFilePermissions.fromString("rwx--x--x"));
        Path data = parent.resolve("data");
        try {
            Sandbox bwrap = Sandboxes.create(Config.of("DATA_DIR", data.toString()));
            assertThat(bwrap.name()).isEqualTo("bwrap");
            assertThat(bwrap.unavailableReason()).isEmpty();
            assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(data))).isEqualTo("rwx--x--x");
            assertThat(data.resolve("seccomp.bpf")).exists();
            assertThat(Sandboxes.create(Config.of("SANDBOX", "none", "DATA_DIR", data.toString())).name()).isEqualTo("none");
            assertThat(Sandboxes.create(Config.of("SANDBOX", "gvisor", "DATA_DIR", data.toString())).name()).isEqualTo("gvisor");
        } finally {
            DataDir.deleteTree(parent);
        }
    }
}
