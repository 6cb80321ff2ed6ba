package dev.codeexec.egress;

import dev.codeexec.config.Config;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The per-server factory of channels: where sockets go, and what a run with egress gets. */
class EgressChannelsTest {

    @TempDir
    Path dir;

    static EgressSettings on(String... more) {
        String[] pairs = new String[4 + more.length];
        System.arraycopy(new String[] {"EGRESS", "on", "EGRESS_ALLOW", "pypi.org"}, 0, pairs, 0, 4);
        System.arraycopy(more, 0, pairs, 4, more.length);
        return EgressSettings.of(Config.of(pairs));
    }

    @Test
    void offGivesNoChannels() throws IOException {
        assertThat(EgressChannels.of(EgressSettings.of(Config.of()), dir.resolve("egress"), dir.resolve("p.js"))).isEmpty();
        assertThat(EgressChannels.of(EgressSettings.of(Config.of("SANDBOX", "none")), dir.resolve("egress"), dir.resolve("p.js")))
                .isEmpty();
        assertThat(dir.resolve("egress")).doesNotExist();
    }

    @Test
    void channelsLiveInAPrivateDirectoryWithSocketsOfTheirOwn() throws IOException {
        Path egress = dir.resolve("egress");
        EgressChannels channels = EgressChannels.of(on(), egress, dir.resolve("p.js")).orElseThrow();
        assertThat(Files.getPosixFilePermissions(egress)).isEqualTo(PosixFilePermissions.fromString("rwx--x--x"));
        try (EgressChannel a = channels.open(EgressPolicy.parse("pypi.org"), "t", "r1");
                EgressChannel b = channels.open(EgressPolicy.OFF, "t", "r2")) {
            assertThat(a.socket().getParent()).isEqualTo(egress);
            assertThat(a.socket().getFileName().toString()).matches("[0-9a-f]{16}\\.sock");
            assertThat(b.socket()).isNotEqualTo(a.socket());
            assertThat(a.policy().patterns()).containsExactly("pypi.org");
            assertThat(b.policy().isOff()).isTrue();
            assertThat(a.socket()).exists();
        }
        try (var s = Files.list(egress)) {
            assertThat(s.toList()).isEmpty();
        }
    }

    @Test
    void aDataDirTooLongForASocketPathStopsTheStart() {
        Path deep = dir.resolve("d".repeat(100));
        assertThatThrownBy(() -> EgressChannels.of(on(), deep, dir.resolve("p.js"))).isInstanceOf(IOException.class)
                .hasMessageContaining("too long");
    }

    @Test
    void theProxysPortIsTheOneTheSandboxsRelayListensOn() throws IOException {
        // the relay is C (codeexec-helper init --relay): its port is compiled in, so the two are compared here
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("(?m)^#define RELAY_PORT (\\d+)\\b")
                .matcher(Files.readString(Path.of("src/main/c/codeexec-helper.c")));
        assertThat(m.find()).as("codeexec-helper.c defines RELAY_PORT").isTrue();
        assertThat(Integer.parseInt(m.group(1))).isEqualTo(EgressChannel.PROXY_PORT);
        assertThat(EgressChannel.PROXY_URL).isEqualTo("http://127.0.0.1:" + EgressChannel.PROXY_PORT);
    }

    @Test
    void aRunsEnvironmentPointsEveryToolAtTheProxy() throws IOException {
        EgressChannels channels = EgressChannels.of(on(), dir.resolve("egress"), dir.resolve("p.js")).orElseThrow();
        Map<String, String> env = channels.environment();
        for (String k : new String[] {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"})
            assertThat(env).containsEntry(k, EgressChannel.PROXY_URL);
        assertThat(env).containsEntry("NO_PROXY", "localhost,127.0.0.1").containsKey("NODE_OPTIONS")
                .doesNotContainKeys("SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS");
        assertThat(channels.readOnlyFiles()).containsOnlyKeys(EgressChannels.NODE_PRELOAD_IN_SANDBOX);
    }

    @Test
    void anOperatorsCaIsTrustedThroughABundle() throws IOException {
        Path ca = Files.writeString(dir.resolve("corp.pem"), "-----BEGIN CERTIFICATE-----\nCORP\n-----END CERTIFICATE-----\n");
        EgressChannels channels = EgressChannels.of(on("EGRESS_CA_FILE", ca.toString()), dir.resolve("egress"), dir.resolve("p.js"))
                .orElseThrow();
        Map<String, Path> files = channels.readOnlyFiles();
        assertThat(files).containsEntry(EgressChannels.EXTRA_CA_IN_SANDBOX, ca.toAbsolutePath())
                .containsKey(EgressChannels.CA_BUNDLE_IN_SANDBOX);
        assertThat(Files.readString(files.get(EgressChannels.CA_BUNDLE_IN_SANDBOX))).contains("CORP");
        assertThat(channels.environment()).containsEntry("SSL_CERT_FILE", EgressChannels.CA_BUNDLE_IN_SANDBOX)
                .containsEntry("NODE_EXTRA_CA_CERTS", EgressChannels.EXTRA_CA_IN_SANDBOX)
                .containsEntry("PIP_CERT", EgressChannels.CA_BUNDLE_IN_SANDBOX);
        assertThat(channels.settings().caFile()).isEqualTo(Optional.of(ca.toAbsolutePath()));
    }
}
