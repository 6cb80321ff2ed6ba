package dev.codeexec.worker;

import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The combinations a worker refuses to start with, each naming the variable to fix. */
class WorkerSecurityTest {

    @TempDir
    Path tmp;

    private static void refused(String expected, String... pairs) {
        assertThatThrownBy(() -> WorkerSecurity.check(Config.of(pairs))).isInstanceOf(ConfigException.class)
                .hasMessageContaining(expected);
    }

    @Test
    void aNonLoopbackAddressNeedsAToken() {
        refused("WORKER_TOKEN", "WORKER_HOST", "0.0.0.0", "WORKER_PLAINTEXT", "true");
        refused("WORKER_TOKEN", "WORKER_HOST", "10.1.2.3", "WORKER_PLAINTEXT", "true");
    }

    @Test
    void aNonLoopbackAddressNeedsTlsOrPlaintextAllowedOnPurpose() {
        refused("WORKER_PLAINTEXT", "WORKER_HOST", "0.0.0.0", "WORKER_TOKEN", "t");
        assertThatCode(() -> WorkerSecurity.check(Config.of("WORKER_HOST", "0.0.0.0", "WORKER_TOKEN", "t",
                "WORKER_PLAINTEXT", "true"))).doesNotThrowAnyException();
    }

    @Test
    void loopbackNeedsNeither() {
        assertThatCode(() -> WorkerSecurity.check(Config.of())).doesNotThrowAnyException();
        assertThatCode(() -> WorkerSecurity.check(Config.of("WORKER_HOST", "localhost"))).doesNotThrowAnyException();
    }

    @Test
    void certificateAndKeyComeTogetherAndMustBeReadable() throws Exception {
        Path cert = Files.writeString(tmp.resolve("c.pem"), "x");
        Path key = Files.writeString(tmp.resolve("k.pem"), "x");
        refused("WORKER_TLS_KEY", "WORKER_TLS_CERT", cert.toString());
        refused("WORKER_TLS_CERT", "WORKER_TLS_KEY", key.toString());
        refused("WORKER_TLS_CERT /nope.pem cannot be read", "WORKER_TLS_CERT", "/nope.pem", "WORKER_TLS_KEY",
                key.toString());
        refused("WORKER_TLS_CA", "WORKER_TLS_CA", cert.toString());
        // Non-loopback with TLS and a token: allowed without WORKER_PLAINTEXT.
        assertThatCode(() -> WorkerSecurity.check(Config.of("WORKER_HOST", "0.0.0.0", "WORKER_TOKEN", "t",
                "WORKER_TLS_CERT", cert.toString(), "WORKER_TLS_KEY", key.toString()))).doesNotThrowAnyException();
    }
}
