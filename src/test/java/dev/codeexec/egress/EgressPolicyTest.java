package dev.codeexec.egress;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** A run's allow-list: parsing, matching, and narrowing by a call. */
class EgressPolicyTest {

    static final EgressPolicy SERVER = EgressPolicy.parse("pypi.org, files.pythonhosted.org, *.example.com, mirror.test:8443");

    @Test
    void offAndEmptyAreOff() {
        assertThat(EgressPolicy.parse("off")).isEqualTo(EgressPolicy.OFF);
        assertThat(EgressPolicy.parse(" OFF ")).isEqualTo(EgressPolicy.OFF);
        assertThat(EgressPolicy.parse("")).isEqualTo(EgressPolicy.OFF);
        assertThat(EgressPolicy.parse(null)).isEqualTo(EgressPolicy.OFF);
        assertThat(EgressPolicy.parse(" , ")).isEqualTo(EgressPolicy.OFF);
        assertThat(EgressPolicy.OFF.isOff()).isTrue();
        assertThat(EgressPolicy.OFF.toString()).isEqualTo("off");
        assertThat(EgressPolicy.OFF.allows("pypi.org", 443)).isFalse();
    }

    @Test
    void parsesACommaSeparatedListAndPrintsItBack() {
        assertThat(SERVER.isOff()).isFalse();
        assertThat(SERVER.patterns()).containsExactly("pypi.org", "files.pythonhosted.org", "*.example.com", "mirror.test:8443");
        assertThat(SERVER.toString()).isEqualTo("pypi.org,files.pythonhosted.org,*.example.com,mirror.test:8443");
        assertThat(EgressPolicy.parse(SERVER.toString())).isEqualTo(SERVER);
        assertThat(EgressPolicy.parse("a.example,,b.example").patterns()).containsExactly("a.example", "b.example");
    }

    @Test
    void aBadPatternIsNamed() {
        assertThatThrownBy(() -> EgressPolicy.parse("pypi.org,10.0.0.1,npmjs.org")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'10.0.0.1'");
        assertThatThrownBy(() -> EgressPolicy.parse("pypi.org,*.com")).hasMessageContaining("'*.com'");
    }

    @Test
    void allowsWhatAnyPatternMatches() {
        assertThat(SERVER.allows("pypi.org", 443)).isTrue();
        assertThat(SERVER.allows("api.example.com", 80)).isTrue();
        assertThat(SERVER.allows("mirror.test", 8443)).isTrue();
        assertThat(SERVER.allows("mirror.test", 443)).isFalse();
        assertThat(SERVER.allows("example.com", 443)).isFalse();
        assertThat(SERVER.allows("npmjs.org", 443)).isFalse();
    }

    @Test
    void aCallMayNarrow() {
        EgressPolicy narrowed = SERVER.narrow(List.of("pypi.org", "api.example.com", "*.a.example.com", "*.example.com",
                "pypi.org:443", "mirror.test:8443"));
        assertThat(narrowed.patterns()).containsExactly("pypi.org", "api.example.com", "*.a.example.com", "*.example.com",
                "pypi.org:443", "mirror.test:8443");
        assertThat(narrowed.allows("pypi.org", 443)).isTrue();
        assertThat(narrowed.allows("files.pythonhosted.org", 443)).isFalse();
        assertThat(SERVER.narrow(List.of()).isOff()).isTrue();
    }

    @Test
    void aCallMayNotWidenAndTheOffendingPatternIsNamed() {
        assertWidens(SERVER, List.of("pypi.org", "npmjs.org"), "npmjs.org");          // another host
        assertWidens(SERVER, List.of("pypi.org:8443"), "pypi.org:8443");              // another port
        assertWidens(SERVER, List.of("mirror.test"), "mirror.test");                  // 80 and 443 where only 8443 is allowed
        assertWidens(SERVER, List.of("example.com"), "example.com");                  // the suffix of a wildcard is not below it
        assertWidens(SERVER, List.of("*.pypi.org"), "*.pypi.org");                    // a wildcard wider than an exact host
        assertWidens(SERVER, List.of("*.com"), "*.com");                              // bad pattern: named too
        EgressPolicy exactOnly = EgressPolicy.parse("api.example.com,*.a.example.com");
        assertWidens(exactOnly, List.of("*.example.com"), "*.example.com");           // wildcard wider than its names
        assertWidens(exactOnly, List.of("b.example.com"), "b.example.com");
        assertWidens(exactOnly, List.of("a.example.com"), "a.example.com");
        assertThatThrownBy(() -> SERVER.narrow(List.of("npmjs.org"))).hasMessageContaining("outside your allow-list")
                .hasMessageContaining("pypi.org, files.pythonhosted.org, *.example.com, mirror.test:8443");
        assertThatThrownBy(() -> EgressPolicy.OFF.narrow(List.of("pypi.org"))).hasMessageContaining("'pypi.org'")
                .hasMessageContaining("network access is off for you");
    }

    private static void assertWidens(EgressPolicy mine, List<String> requested, String offending) {
        assertThatThrownBy(() -> mine.narrow(requested)).as(requested.toString()).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'" + offending + "'");
    }

    @Test
    void aSessionsPolicyUnderItsCallersListNowIsWhatBothAllow() {
        // the caller's list unchanged or wider: the session keeps its own
        EgressPolicy session = EgressPolicy.parse("pypi.org,*.example.com,mirror.test:8443");
        assertThat(session.intersect(SERVER)).isEqualTo(session);
        assertThat(session.intersect(EgressPolicy.parse("npmjs.org,pypi.org,*.example.com,mirror.test:8443"))).isEqualTo(session);
        // revoked: nothing
        assertThat(session.intersect(EgressPolicy.OFF)).isEqualTo(EgressPolicy.OFF);
        assertThat(EgressPolicy.OFF.intersect(SERVER)).isEqualTo(EgressPolicy.OFF);
        // narrowed: the narrower name, the ports both allow, nothing either lacks
        EgressPolicy now = EgressPolicy.parse("api.example.com,*.a.example.com,pypi.org:443,mirror.test:443,other.test");
        EgressPolicy both = session.intersect(now);
        assertThat(both.patterns()).containsExactly("pypi.org:443", "api.example.com", "*.a.example.com");
        assertThat(both.allows("pypi.org", 80)).isFalse();
        assertThat(both.allows("b.example.com", 443)).isFalse();
        assertThat(both.allows("x.a.example.com", 443)).isTrue();
        assertThat(both.allows("mirror.test", 8443)).isFalse();
        assertThat(both.allows("other.test", 443)).isFalse();
        // a wildcard meets a wildcard below it, and the same pattern listed twice counts once
        assertThat(EgressPolicy.parse("*.example.com").intersect(EgressPolicy.parse("*.a.example.com,*.a.example.com")).patterns())
                .containsExactly("*.a.example.com");
        assertThat(EgressPolicy.parse("example.com").intersect(EgressPolicy.parse("*.example.com"))).isEqualTo(EgressPolicy.OFF);
    }
}
