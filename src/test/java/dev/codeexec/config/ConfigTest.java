package dev.codeexec.config;

import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ConfigTest {

    @Test
    void defaultsMatchTheDocumentedContract() {
        Config c = Config.load(Map.of());
        assertThat(c.get(Config.HOST)).isEqualTo("127.0.0.1");
        assertThat(c.get(Config.PORT)).isEqualTo(8080);
        assertThat(c.get(Config.DEFAULT_TIMEOUT_MS)).isEqualTo(30000);
        assertThat(c.get(Config.MAX_TIMEOUT_MS)).isEqualTo(120000);
        assertThat(c.get(Config.MAX_OUTPUT_KB)).isEqualTo(256);
        assertThat(c.get(Config.MEMORY_LIMIT_MB)).isEqualTo(2048);
        assertThat(c.get(Config.CPU_LIMIT_SECONDS)).isEqualTo(30);
        assertThat(c.get(Config.MAX_PROCESSES)).isEqualTo(128);
        assertThat(c.get(Config.MAX_CONCURRENT)).isEqualTo(4);
        assertThat(c.get(Config.MAX_BODY_MB)).isEqualTo(4);
        assertThat(c.get(Config.SANDBOX)).isEqualTo("bwrap");
        assertThat(c.get(Config.SANDBOX_UID)).isEqualTo(65534);
    }

    @Test
    void badValueStopsWithTheKeyNamed() {
        assertThatThrownBy(() -> Config.of("PORT", "eighty")).isInstanceOf(ConfigException.class)
                .hasMessageContaining("PORT").hasMessageContaining("eighty");
        assertThatThrownBy(() -> Config.of("MAX_CONCURRENT", "0")).hasMessageContaining("MAX_CONCURRENT")
                .hasMessageContaining("between 1 and");
        assertThatThrownBy(() -> Config.of("SANDBOX", "docker")).hasMessageContaining("SANDBOX")
                .hasMessageContaining("bwrap, gvisor, none");
        assertThatThrownBy(() -> Config.of("SANDBOX_UID", "0")).hasMessageContaining("SANDBOX_UID");
        assertThatThrownBy(() -> Config.of("ALLOW_UNAUTHENTICATED", "maybe")).hasMessageContaining("true or false");
    }

    @Test
    void nonLoopbackHostNeedsAKeyOrAnExplicitOptIn() {
        assertThatThrownBy(() -> Config.of("HOST", "0.0.0.0")).isInstanceOf(ConfigException.class)
                .hasMessageContaining("HOST").hasMessageContaining("API_KEY");
        assertThat(Config.of("HOST", "0.0.0.0", "API_KEY", "k").get(Config.HOST)).isEqualTo("0.0.0.0");
        assertThat(Config.of("HOST", "0.0.0.0", "API_KEYS_FILE", "/etc/keys").get(Config.HOST)).isEqualTo("0.0.0.0");
        assertThat(Config.of("HOST", "0.0.0.0", "API_KEYS_FILE", "/etc/keys").hasKeys()).isTrue();
        assertThat(Config.of("HOST", "0.0.0.0", "ALLOW_UNAUTHENTICATED", "true").hasKeys()).isFalse();
        assertThat(Config.of("HOST", "0.0.0.0", "ALLOW_UNAUTHENTICATED", "true").get(Config.HOST)).isEqualTo("0.0.0.0");
        assertThat(Config.of("HOST", "localhost").get(Config.HOST)).isEqualTo("localhost");
    }

    @Test
    void aNonLoopbackPreviewListenerNeedsAKeyOrAnExplicitOptInAsTheMainOneDoes() {
        Config open = Config.of("PREVIEW_HOST", "0.0.0.0");
        assertThatThrownBy(open::checkPreviewHost).isInstanceOf(ConfigException.class)
                .hasMessageContaining("PREVIEW_HOST").hasMessageContaining("API_KEY");
        Config.of("PREVIEW_HOST", "0.0.0.0", "API_KEY", "k").checkPreviewHost();
        Config.of("PREVIEW_HOST", "0.0.0.0", "ALLOW_UNAUTHENTICATED", "true").checkPreviewHost();
        Config.of("PREVIEW_HOST", "0.0.0.0", "PREVIEWS", "off").checkPreviewHost(); // no listener, no rule
        Config.of("PREVIEW_HOST", "127.0.0.1").checkPreviewHost();
    }

    @Test
    void wildcardCorsNeedsAnApiKey() {
        assertThatThrownBy(() -> Config.of("CORS_ORIGINS", "*")).hasMessageContaining("CORS_ORIGINS");
        assertThat(Config.of("CORS_ORIGINS", "*", "API_KEY", "k").corsOrigins()).containsExactly("*");
        assertThat(Config.of("CORS_ORIGINS", "*", "API_KEYS_FILE", "/etc/keys").corsOrigins()).containsExactly("*");
        assertThat(Config.of("CORS_ORIGINS", "https://a.example, https://b.example").corsOrigins())
                .containsExactly("https://a.example", "https://b.example");
    }

    @Test
    void defaultTimeoutCannotExceedTheMaximum() {
        assertThatThrownBy(() -> Config.of("DEFAULT_TIMEOUT_MS", "5000", "MAX_TIMEOUT_MS", "1000"))
                .hasMessageContaining("DEFAULT_TIMEOUT_MS");
    }

    @Test
    void theBodyBudgetHoldsAtLeastTwoOfTheLargestBodies() {
        assertThatThrownBy(() -> Config.of("MAX_BODY_MB", "65")).hasMessageContaining("BODY_MEMORY_MB")
                .hasMessageContaining("MAX_BODY_MB");
        assertThat(Config.of("MAX_BODY_MB", "65", "BODY_MEMORY_MB", "130").get(Config.BODY_MEMORY_MB)).isEqualTo(130);
    }

    /**
     * The configuration reference's tables list exactly the keys the server reads, with the same defaults (read
     * from the file as a user reads it; ConfigReferenceTest checks the whole file), and the README points to it.
     */
    @Test
    void theConfigurationReferenceListsEveryKeyWithItsDefault() throws Exception {
        String reference = Files.readString(Path.of("docs/configuration.md"));
        Matcher m = Pattern.compile("(?m)^\\| `([A-Z_]+)` \\| `?([^|`]*)`? \\|").matcher(reference);
        Map<String, String> documented = new java.util.HashMap<>();
        while (m.find()) assertThat(documented.put(m.group(1), m.group(2).trim())).as("rows of " + m.group(1)).isNull();
        Set<String> keys = Config.KEYS.stream().map(ConfigKey::name).collect(Collectors.toCollection(TreeSet::new));
        assertThat(new TreeSet<>(documented.keySet())).isEqualTo(keys);
        for (ConfigKey<?> k : Config.KEYS) {
            String def = k.defaultValue().isEmpty() ? "(unset)" : k.defaultValue();
            assertThat(documented.get(k.name())).as("documented default of " + k.name()).isEqualTo(def);
        }
        assertThat(Files.readString(Path.of("README.md"))).contains("](docs/configuration.md)");
    }

    @Test
    void loopbackIsDecidedByTheSpellingOfAnAddressNotAHostNamePrefix() {
        assertThat(Config.isLoopback("127.0.0.1")).isTrue();
        assertThat(Config.isLoopback("127.0.0.2")).isTrue();
        assertThat(Config.isLoopback("localhost")).isTrue();
        assertThat(Config.isLoopback("::1")).isTrue();
        // a name under someone's domain is not loopback, whatever its prefix: plaintext and no token would follow
        assertThat(Config.isLoopback("127.example.com")).isFalse();
        assertThat(Config.isLoopback("127.0.0.1.nip.io")).isFalse();
        assertThat(Config.isLoopback("0.0.0.0")).isFalse();
        assertThatThrownBy(() -> Config.of("HOST", "127.evil.example"))
                .isInstanceOf(ConfigException.class).hasMessageContaining("not a loopback");
    }
}
