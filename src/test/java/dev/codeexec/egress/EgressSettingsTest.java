package dev.codeexec.egress;

import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The server's egress configuration, and the policy of a caller and of a call. */
class EgressSettingsTest {

    @TempDir
    Path dir;

    static EgressSettings on(String... more) {
        String[] pairs = new String[4 + more.length];
        pairs[0] = "EGRESS";
        pairs[1] = "on";
        pairs[2] = "EGRESS_ALLOW";
        pairs[3] = "pypi.org,*.example.com";
        System.arraycopy(more, 0, pairs, 4, more.length);
        return EgressSettings.of(Config.of(pairs));
    }

    @Test
    void defaultsAreOff() {
        EgressSettings s = EgressSettings.of(Config.of());
        assertThat(s.enabled()).isFalse();
        assertThat(s.serverPolicy().isOff()).isTrue();
        assertThat(s.unavailable()).isEmpty();
        assertThat(s.policyFor(Optional.empty())).isEqualTo(EgressPolicy.OFF);
        assertThat(s.policyFor(Optional.of(EgressPolicy.parse("pypi.org")))).as("a tenant's list needs EGRESS=on")
                .isEqualTo(EgressPolicy.OFF);
        assertThat(EgressSettings.OFF.enabled()).isFalse();
    }

    @Test
    void readsEveryKey() throws Exception {
        Path ca = Files.writeString(dir.resolve("ca.pem"), "-----BEGIN CERTIFICATE-----\n");
        EgressSettings s = on("EGRESS_ALLOW_CIDRS", "10.1.2.0/24, fd00::/8", "EGRESS_RESOLVE", "Mirror.Test.=10.1.2.3,mirror.test=fd00::1",
                "EGRESS_MAX_CONNECTIONS", "5", "EGRESS_MAX_MB", "7", "EGRESS_CONNECT_TIMEOUT_MS", "1500",
                "EGRESS_IDLE_TIMEOUT_MS", "2500", "EGRESS_CA_FILE", ca.toString());
        assertThat(s.enabled()).isTrue();
        assertThat(s.unavailable()).isEmpty();
        assertThat(s.serverPolicy().patterns()).containsExactly("pypi.org", "*.example.com");
        assertThat(s.addresses().allowed()).containsExactly(Cidr.parse("10.1.2.0/24"), Cidr.parse("fd00::/8"));
        assertThat(s.pinnedFor("mirror.test")).contains(List.of(InetAddress.ofLiteral("10.1.2.3"), InetAddress.ofLiteral("fd00::1")));
        assertThat(s.pinnedFor("other.test")).isEmpty();
        assertThat(s.maxConnections()).isEqualTo(5);
        assertThat(s.maxBytes()).isEqualTo(7L << 20);
        assertThat(s.connectTimeout()).isEqualTo(Duration.ofMillis(1500));
        assertThat(s.idleTimeout()).isEqualTo(Duration.ofMillis(2500));
        assertThat(s.caFile()).contains(ca.toAbsolutePath());
    }

    @Test
    void allowWithoutOnStopsTheStart() {
        assertThatThrownBy(() -> EgressSettings.of(Config.of("EGRESS_ALLOW", "pypi.org"))).isInstanceOf(ConfigException.class)
                .hasMessageContaining("EGRESS_ALLOW is set but EGRESS is off");
        assertThatThrownBy(() -> EgressSettings.of(Config.of("EGRESS", "off", "EGRESS_ALLOW", "pypi.org")))
                .isInstanceOf(ConfigException.class);
        // "off" written out is no list.
        assertThat(EgressSettings.of(Config.of("EGRESS_ALLOW", "off")).enabled()).isFalse();
    }

    @Test
    void onNeedsBubblewrap() {
        assertThatThrownBy(() -> on("SANDBOX", "gvisor")).isInstanceOf(ConfigException.class)
                .hasMessageContaining("EGRESS=on needs SANDBOX=bwrap").hasMessageContaining("gVisor");
        assertThatThrownBy(() -> on("SANDBOX", "none")).isInstanceOf(ConfigException.class)
                .hasMessageContaining("EGRESS=on needs SANDBOX=bwrap").hasMessageContaining("SANDBOX=none");
        // Off on those sandboxes is fine, and says why egress cannot be had.
        EgressSettings gvisor = EgressSettings.of(Config.of("SANDBOX", "gvisor"));
        assertThat(gvisor.unavailable()).hasValueSatisfying(u -> assertThat(u).contains("SANDBOX=gvisor"));
        assertThat(gvisor.describe(EgressPolicy.OFF, "t")).containsEntry("enabled", false).containsKey("note");
    }

    @Test
    void badBlocksPinsPatternsAndCaFilesAreNamed() {
        assertThatThrownBy(() -> on("EGRESS_ALLOW_CIDRS", "10.0.0.0/8,10.0.0.0/40")).isInstanceOf(ConfigException.class)
                .hasMessageContaining("EGRESS_ALLOW_CIDRS").hasMessageContaining("10.0.0.0/40");
        assertThatThrownBy(() -> on("EGRESS_ALLOW_CIDRS", "mirror.example.com")).isInstanceOf(ConfigException.class)
                .hasMessageContaining("EGRESS_ALLOW_CIDRS");
        for (String bad : new String[] {"mirror.test", "mirror.test=", "mirror.test=mirror.example", "=10.0.0.1",
                "bad name=10.0.0.1", "a=1=2"})
            assertThatThrownBy(() -> on("EGRESS_RESOLVE", bad)).as(bad).isInstanceOf(ConfigException.class)
                    .hasMessageContaining("EGRESS_RESOLVE").hasMessageContaining("must look like name=address");
        assertThatThrownBy(() -> on("EGRESS_ALLOW", "pypi.org,10.0.0.1")).isInstanceOf(ConfigException.class)
                .hasMessageContaining("EGRESS_ALLOW").hasMessageContaining("10.0.0.1");
        Path missing = dir.resolve("nope.pem");
        assertThatThrownBy(() -> on("EGRESS_CA_FILE", missing.toString())).isInstanceOf(ConfigException.class)
                .hasMessageContaining("EGRESS_CA_FILE").hasMessageContaining("cannot be read");
        assertThatThrownBy(() -> on("EGRESS_CA_FILE", dir.toString())).as("a directory").isInstanceOf(ConfigException.class)
                .hasMessageContaining("EGRESS_CA_FILE");
        assertThatThrownBy(() -> on("EGRESS_IDLE_TIMEOUT_MS", "999")).isInstanceOf(ConfigException.class);
    }

    @Test
    void aPinsAddressIsALiteralNeverANameLookedUp() {
        for (String bad : new String[] {"mirror.test=cafe", "mirror.test=dead.beef", "mirror.test=10.0.0.1.5"})
            assertThatThrownBy(() -> on("EGRESS_RESOLVE", bad)).as(bad).isInstanceOf(ConfigException.class)
                    .hasMessageContaining("must look like name=address");
    }

    @Test
    void aTenantsOwnListReplacesTheServers() {
        EgressSettings s = on();
        assertThat(s.policyFor(Optional.empty()).patterns()).containsExactly("pypi.org", "*.example.com");
        assertThat(s.policyFor(Optional.of(EgressPolicy.parse("npmjs.org"))).patterns()).containsExactly("npmjs.org");
        assertThat(s.policyFor(Optional.of(EgressPolicy.OFF))).isEqualTo(EgressPolicy.OFF);
    }

    @Test
    void aCallGetsTheCallersListNoneOrANarrowerOne() {
        EgressSettings s = on();
        EgressPolicy caller = s.policyFor(Optional.empty());
        assertThat(s.forCall(caller, null)).isEqualTo(caller);
        assertThat(s.forCall(caller, true)).isEqualTo(caller);
        assertThat(s.forCall(caller, false)).isEqualTo(EgressPolicy.OFF);
        assertThat(s.forCall(caller, List.of())).isEqualTo(EgressPolicy.OFF);
        assertThat(s.forCall(caller, List.of("api.example.com", "pypi.org:443")).patterns())
                .containsExactly("api.example.com", "pypi.org:443");
        assertThatThrownBy(() -> s.forCall(caller, List.of("pypi.org", "npmjs.org"))).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'npmjs.org'").hasMessageContaining("outside your allow-list");
        assertThatThrownBy(() -> s.forCall(caller, List.of("*.com"))).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'*.com'");
    }

    @Test
    void aListWhenTheCallerHasNoNetworkSaysWhy() {
        EgressSettings on = on();
        assertThatThrownBy(() -> on.forCall(EgressPolicy.OFF, List.of("pypi.org"))).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'pypi.org'").hasMessageContaining("your allow-list is empty");
        EgressSettings off = EgressSettings.of(Config.of());
        assertThatThrownBy(() -> off.forCall(off.policyFor(Optional.empty()), List.of("pypi.org")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'pypi.org'")
                .hasMessageContaining("egress is off on this server");
        EgressSettings gvisor = EgressSettings.of(Config.of("SANDBOX", "gvisor"));
        assertThatThrownBy(() -> gvisor.forCall(EgressPolicy.OFF, List.of("pypi.org"))).hasMessageContaining("SANDBOX=bwrap");
        // Off and nothing asked: no error.
        assertThat(off.forCall(EgressPolicy.OFF, null)).isEqualTo(EgressPolicy.OFF);
        assertThat(off.forCall(EgressPolicy.OFF, false)).isEqualTo(EgressPolicy.OFF);
    }

    @Test
    void networkOfAnotherTypeIsAnError() {
        EgressSettings s = on();
        EgressPolicy caller = s.policyFor(Optional.empty());
        for (Object bad : new Object[] {"pypi.org", 1, Map.of("allow", "pypi.org"), java.util.Arrays.asList("pypi.org", null),
                List.of("pypi.org", 5)})
            assertThatThrownBy(() -> s.forCall(caller, bad)).as(String.valueOf(bad)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("'network' must be false or a list of host patterns");
    }

    @Test
    void describeShowsWhatTheCallerGets() {
        EgressSettings s = on("EGRESS_MAX_CONNECTIONS", "3");
        Map<String, Object> d = s.describe(s.policyFor(Optional.empty()), "t");
        assertThat(d).containsEntry("enabled", true).containsEntry("allow", List.of("pypi.org", "*.example.com"))
                .containsEntry("maxConnections", 3).containsKey("proxy").doesNotContainKey("note");
        Map<String, Object> empty = s.describe(EgressPolicy.OFF, "t");
        assertThat(empty).containsEntry("enabled", true).containsEntry("allow", List.of());
        assertThat((String) empty.get("note")).contains("allow-list is empty");
        Map<String, Object> off = EgressSettings.of(Config.of()).describe(EgressPolicy.OFF, "t");
        assertThat(off).containsEntry("enabled", false).containsEntry("allow", List.of());
        assertThat((String) off.get("note")).contains("EGRESS=off");
    }

    @Test
    @SuppressWarnings("unchecked")
    void describeListsTheSecretsTheCallersRunsGetWithoutValuesAndATenantNotAllowedSeesNone() throws Exception {
        // read for its names only: ${GW_TEST_UNSET_TOKEN} is set nowhere (a gateway holds none of the values)
        Path file = Files.writeString(dir.resolve("secrets.json"), """
                {"GITHUB_TOKEN": {"value": "${GW_TEST_UNSET_TOKEN}", "hosts": ["api.github.com"], "description": "GitHub"},
                 "TEAM_TOKEN": {"value": "literal-value-never-shown", "hosts": ["*.example.com"], "tenants": ["team-a"]}}
                """);
        EgressSettings s = on("EGRESS_ALLOW", "api.github.com,*.example.com", "EGRESS_SECRETS_FILE", file.toString());
        Map<String, Object> a = s.describe(s.policyFor(Optional.empty()), "team-a");
        assertThat((List<Map<String, Object>>) a.get("secrets")).containsExactly(
                Map.of("name", "GITHUB_TOKEN", "description", "GitHub", "hosts", List.of("api.github.com")),
                Map.of("name", "TEAM_TOKEN", "hosts", List.of("*.example.com")));
        assertThat((String) a.get("secretsNote")).contains("placeholder");
        assertThat(a.toString()).doesNotContain("literal-value-never-shown").doesNotContain("GW_TEST_UNSET_TOKEN");
        // another tenant: only the secret for everyone; a list that reaches no secret's host: none
        assertThat((List<Map<String, Object>>) s.describe(s.policyFor(Optional.empty()), "team-b").get("secrets"))
                .extracting(m -> m.get("name")).containsExactly("GITHUB_TOKEN");
        assertThat((List<Object>) s.describe(EgressPolicy.parse("pypi.org"), "team-a").get("secrets")).isEmpty();
        assertThat(s.describe(EgressPolicy.OFF, "team-a")).doesNotContainKey("secrets");
        // without the file: no secrets entry at all
        assertThat(on().describe(on().policyFor(Optional.empty()), "team-a")).doesNotContainKey("secrets");
    }
}
