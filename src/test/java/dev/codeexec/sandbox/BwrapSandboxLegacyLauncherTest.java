package dev.codeexec.sandbox;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;

import static dev.codeexec.sandbox.SandboxTesting.UID;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Every isolation promise and limit of {@link BwrapSandboxTest} again, with the launcher a server uses where
 * codeexec-helper cannot run: a dash script, setpriv and a dash init with env.
 */
class BwrapSandboxLegacyLauncherTest extends BwrapSandboxTest {

    @BeforeAll
    static void setUp() throws Exception {
        dataDir = Files.createTempDirectory("code-exec-data-");
        sandbox = new BwrapSandbox(UID, UID, dataDir, Cgroups.detect(), false);
        assertThat(sandbox.unavailableReason()).isEmpty();
        assertThat(sandbox.usesHelper()).isFalse();
    }

    @Test
    void infoNamesTheLauncher() {
        assertThat(sandbox.info()).containsEntry("launcher", "dash+setpriv").containsEntry("spawn", "ProcessBuilder")
                .containsEntry("mountNamespace", "the server's (needs codeexec-helper)");
    }
}
