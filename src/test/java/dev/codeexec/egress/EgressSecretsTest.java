package dev.codeexec.egress;

import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigException;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class EgressSecretsTest {

    static final Map<String, String> ENV = Map.of("GH", "ghp_real_value_1234", "GRAPH", "graph-secret");

    static EgressSecrets parse(String json) {
        return EgressSecrets.parse(json, ENV::get);
    }

    static final String FILE = """
            {"GITHUB_TOKEN": {"value": "${GH}", "hosts": ["api.github.com"]},
             "GRAPH_TOKEN": {"value": "Bearer ${GRAPH}", "hosts": ["*.graph.test", "graph.test:8443"], "tenants": ["team-a"]}}
            """;

    @Test
    void valuesComeFromTheServersEnvironmentAndHostsAreAllowListPatterns() {
        EgressSecrets s = parse(FILE);
        assertThat(s.secrets()).extracting(EgressSecrets.Secret::name).containsExactly("GITHUB_TOKEN", "GRAPH_TOKEN");
        assertThat(s.secrets().get(0).value()).isEqualTo("ghp_real_value_1234");
        assertThat(s.secrets().get(1).value()).isEqualTo("Bearer graph-secret");
        assertThat(s.secrets().get(1).hostPatterns()).containsExactly("*.graph.test", "graph.test:8443");
        assertThat(s.secrets().get(0).isFor("api.github.com", 443)).isTrue();
        assertThat(s.secrets().get(0).isFor("api.github.com", 8443)).isFalse();
        assertThat(s.secrets().get(0).isFor("github.com", 443)).isFalse();
    }

    @Test
    void noTextOfTheSecretsShowsAValue() {
        EgressSecrets s = parse(FILE);
        RunSecrets run = s.forRun(EgressPolicy.parse("api.github.com,*.graph.test"), "team-a");
        for (String text : new String[] {s.toString(), s.secrets().get(0).toString(), run.toString(),
                run.placeholders().get(0).toString()})
            assertThat(text).doesNotContain("ghp_real_value_1234").doesNotContain("graph-secret");
        assertThat(run.toString()).contains("GITHUB_TOKEN").doesNotContain(run.placeholders().get(0).placeholder());
    }

    @Test
    void aRunGetsAFreshPlaceholderForEachSecretItsAllowListReaches() {
        EgressSecrets s = parse(FILE);
        RunSecrets a = s.forRun(EgressPolicy.parse("api.github.com,pypi.org"), "team-b");
        RunSecrets b = s.forRun(EgressPolicy.parse("api.github.com"), "team-b");
        assertThat(a.environment()).containsOnlyKeys("GITHUB_TOKEN");
        assertThat(a.environment().get("GITHUB_TOKEN")).matches("cxs_[0-9a-f]{40}");
        assertThat(b.environment().get("GITHUB_TOKEN")).matches("cxs_[0-9a-f]{40}").isNotEqualTo(a.environment().get("GITHUB_TOKEN"));
        assertThat(a.forHost("api.github.com", 443)).extracting(RunSecrets.Placeholder::name).containsExactly("GITHUB_TOKEN");
        assertThat(a.forHost("pypi.org", 443)).isEmpty();
        assertThat(a.foundIn("Authorization: Bearer " + a.environment().get("GITHUB_TOKEN"))).map(RunSecrets.Placeholder::name)
                .contains("GITHUB_TOKEN");
        assertThat(a.foundIn("Authorization: Bearer " + b.environment().get("GITHUB_TOKEN"))).isEmpty();
    }

    @Test
    void aWildcardAllowListReachesASecretsHostAndAPortItDoesNotAllowDoesNot() {
        EgressSecrets s = parse(FILE);
        assertThat(s.forRun(EgressPolicy.parse("*.github.com"), "x").environment()).containsOnlyKeys("GITHUB_TOKEN");
        assertThat(s.forRun(EgressPolicy.parse("api.github.com:8443"), "x").isEmpty()).isTrue();
        assertThat(s.forRun(EgressPolicy.parse("github.com"), "x").isEmpty()).isTrue();
        assertThat(s.forRun(EgressPolicy.OFF, "x").isEmpty()).isTrue();
        // *.graph.test and graph.test:8443: a.graph.test reaches the first
        assertThat(s.forRun(EgressPolicy.parse("a.graph.test"), "team-a").environment()).containsOnlyKeys("GRAPH_TOKEN");
    }

    @Test
    void aSecretWithTenantsIsGivenToThoseTenantsOnly() {
        EgressSecrets s = parse(FILE);
        EgressPolicy both = EgressPolicy.parse("api.github.com,a.graph.test");
        assertThat(s.forRun(both, "team-a").environment()).containsOnlyKeys("GITHUB_TOKEN", "GRAPH_TOKEN");
        assertThat(s.forRun(both, "team-b").environment()).containsOnlyKeys("GITHUB_TOKEN");
        EgressSecrets.Listing listing = EgressSecrets.parseListing(FILE);
        assertThat(listing.forRun(both, "team-a")).extracting(EgressSecrets.Declared::name)
                .containsExactly("GITHUB_TOKEN", "GRAPH_TOKEN");
        assertThat(listing.forRun(both, "team-b")).extracting(EgressSecrets.Declared::name).containsExactly("GITHUB_TOKEN");
        assertThat(listing.forRun(EgressPolicy.parse("pypi.org"), "team-a")).isEmpty();
        assertThat(listing.forRun(EgressPolicy.OFF, "team-a")).isEmpty();
    }

    @Test
    void aListingNeedsNoneOfTheValuesVariablesAndHoldsNoValue() {
        // the gateway's read: ${NOPE} is set nowhere, and the file is still checked as strictly as the workers' read
        EgressSecrets.Listing listing = EgressSecrets.parseListing("""
                {"T": {"value": "${NOPE}", "hosts": ["a.test", "b.test:8443"], "description": "the T API"},
                 "U": {"value": "literal-secret-value", "hosts": ["u.test"], "tenants": ["team-a"]}}
                """);
        assertThat(listing.declared()).extracting(EgressSecrets.Declared::name).containsExactly("T", "U");
        assertThat(listing.declared().get(0).description()).isEqualTo("the T API");
        assertThat(listing.declared().get(0).hostPatterns()).containsExactly("a.test", "b.test:8443");
        assertThat(listing.declared().get(1).description()).isEmpty();
        assertThat(listing.toString()).doesNotContain("literal-secret-value").doesNotContain("NOPE");
        assertThatThrownBy(() -> EgressSecrets.parseListing("{\"T\": {\"value\": \"${NOPE}\", \"hosts\": [\"a.test\"], \"tenant\": [\"x\"]}}"))
                .isInstanceOf(ConfigException.class).hasMessageContaining("unknown field \"tenant\"");
        assertThatThrownBy(() -> EgressSecrets.parseListing("{\"T\": {\"value\": \"\", \"hosts\": [\"a.test\"]}}"))
                .isInstanceOf(ConfigException.class).hasMessageContaining("the value is empty");
        assertThatThrownBy(() -> EgressSecrets.parseListing("{\"T\": {\"value\": \"x\", \"hosts\": [\"a.test\"], \"description\": 5}}"))
                .isInstanceOf(ConfigException.class).hasMessageContaining("\"description\" must be a string");
    }

    @Test
    void aBadFileStopsTheStartNamingTheSecretAndNeverAValue() {
        assertThatThrownBy(() -> parse("{\"T\": {\"value\": \"${NOPE}\", \"hosts\": [\"a.test\"]}}"))
                .isInstanceOf(ConfigException.class).hasMessageContaining("\"T\"").hasMessageContaining("${NOPE} is not set");
        assertThatThrownBy(() -> parse("{\"T\": {\"value\": \"${GH}\", \"hosts\": [\"a.test\"], \"tenant\": [\"x\"]}}"))
                .isInstanceOf(ConfigException.class).hasMessageContaining("unknown field \"tenant\"")
                .hasMessageNotContaining("ghp_real_value_1234");
        assertThatThrownBy(() -> parse("{\"MY-TOKEN\": {\"value\": \"x\", \"hosts\": [\"a.test\"]}}"))
                .isInstanceOf(ConfigException.class).hasMessageContaining("environment variable name");
        assertThatThrownBy(() -> parse("{\"HTTPS_PROXY\": {\"value\": \"x\", \"hosts\": [\"a.test\"]}}"))
                .isInstanceOf(ConfigException.class).hasMessageContaining("sets HTTPS_PROXY itself");
        assertThatThrownBy(() -> parse("{\"T\": {\"value\": \"x\", \"hosts\": []}}"))
                .isInstanceOf(ConfigException.class).hasMessageContaining("\"hosts\" must be a non-empty list");
        assertThatThrownBy(() -> parse("{\"T\": {\"value\": \"x\", \"hosts\": [\"10.0.0.1\"]}}"))
                .isInstanceOf(ConfigException.class).hasMessageContaining("not IP addresses");
        assertThatThrownBy(() -> parse("{\"T\": {\"value\": \"a\\nb\", \"hosts\": [\"a.test\"]}}"))
                .isInstanceOf(ConfigException.class).hasMessageContaining("line break");
        assertThatThrownBy(() -> parse("{\"T\": {\"hosts\": [\"a.test\"]}}"))
                .isInstanceOf(ConfigException.class).hasMessageContaining("\"value\" must be a string");
        assertThatThrownBy(() -> parse("[1]")).isInstanceOf(ConfigException.class).hasMessageContaining("must be an object");
        assertThatThrownBy(() -> parse("{")).isInstanceOf(ConfigException.class).hasMessageContaining("not valid JSON");
    }

    @Test
    void theFileNeedsEgressOn() {
        assertThatThrownBy(() -> EgressSecrets.of(Config.of("EGRESS_SECRETS_FILE", "/nonexistent.json")))
                .isInstanceOf(ConfigException.class).hasMessageContaining("EGRESS is off");
        assertThatThrownBy(() -> EgressSecrets.of(Config.of("EGRESS", "on", "EGRESS_SECRETS_FILE", "/nonexistent.json")))
                .isInstanceOf(ConfigException.class).hasMessageContaining("cannot be read");
        assertThat(EgressSecrets.of(Config.of()).isEmpty()).isTrue();
        assertThatThrownBy(() -> EgressSecrets.listing(Config.of("EGRESS_SECRETS_FILE", "/nonexistent.json")))
                .isInstanceOf(ConfigException.class).hasMessageContaining("EGRESS is off");
        assertThat(EgressSecrets.listing(Config.of()).isEmpty()).isTrue();
    }
}
