package dev.codeexec.egress;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** One allow-list entry: parsing, printing, matching and covering. */
class HostPatternTest {

    @Test
    void parsesHostWildcardAndPort() {
        HostPattern plain = HostPattern.parse("PyPI.org");
        assertThat(plain.host()).isEqualTo("pypi.org");
        assertThat(plain.wildcard()).isFalse();
        assertThat(plain.ports()).containsExactly(80, 443);

        HostPattern wild = HostPattern.parse(" *.GitHubUserContent.com ");
        assertThat(wild.host()).isEqualTo("githubusercontent.com");
        assertThat(wild.wildcard()).isTrue();
        assertThat(wild.ports()).containsExactly(80, 443);

        HostPattern port = HostPattern.parse("mirror.example.com:8443");
        assertThat(port.host()).isEqualTo("mirror.example.com");
        assertThat(port.ports()).containsExactly(8443);

        HostPattern both = HostPattern.parse("*.example.com:8080");
        assertThat(both.wildcard()).isTrue();
        assertThat(both.ports()).containsExactly(8080);

        assertThat(HostPattern.parse("Bücher.example").host()).isEqualTo("xn--bcher-kva.example");
        assertThat(HostPattern.parse("example.com.").host()).isEqualTo("example.com");
    }

    @Test
    void printsAsWrittenInConfigurationAndParsesBack() {
        for (String text : new String[] {"pypi.org", "*.example.com", "example.com:8443", "*.example.com:8080", "example.com:80"}) {
            HostPattern p = HostPattern.parse(text);
            assertThat(p.toString()).isEqualTo(text);
            assertThat(HostPattern.parse(p.toString())).isEqualTo(p);
        }
        assertThat(HostPattern.parse("EXAMPLE.com.").toString()).isEqualTo("example.com");
    }

    @Test
    void refusesAddressesBadPortsAndMisplacedWildcards() {
        assertThatThrownBy(() -> HostPattern.parse("127.0.0.1")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'127.0.0.1'").hasMessageContaining("not IP addresses");
        assertThatThrownBy(() -> HostPattern.parse("10.0.0.1:443")).hasMessageContaining("not IP addresses");
        assertThatThrownBy(() -> HostPattern.parse("2130706433")).hasMessageContaining("not IP addresses");
        assertThatThrownBy(() -> HostPattern.parse("[::1]:443")).hasMessageContaining("not IP addresses");
        assertThatThrownBy(() -> HostPattern.parse("*.127.0.0.1")).hasMessageContaining("not IP addresses");

        for (String bad : new String[] {"example.com:0", "example.com:65536", "example.com:http", "example.com:", "example.com:-1"})
            assertThatThrownBy(() -> HostPattern.parse(bad)).as(bad).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("port must be a number from 1 to 65535");

        assertThatThrownBy(() -> HostPattern.parse("a.*.example.com")).hasMessageContaining("only a leading '*.'");
        assertThatThrownBy(() -> HostPattern.parse("*")).hasMessageContaining("only a leading '*.'");
        assertThatThrownBy(() -> HostPattern.parse("*example.com")).hasMessageContaining("only a leading '*.'");
        assertThatThrownBy(() -> HostPattern.parse("*.*.example.com")).hasMessageContaining("only a leading '*.'");
        // A wildcard needs a suffix with a dot: *.com would allow a whole top-level domain.
        assertThatThrownBy(() -> HostPattern.parse("*.com")).hasMessageContaining("a wildcard needs a suffix with a dot");

        assertThatThrownBy(() -> HostPattern.parse("")).hasMessageContaining("empty network pattern");
        assertThatThrownBy(() -> HostPattern.parse(null)).hasMessageContaining("empty network pattern");
        assertThatThrownBy(() -> HostPattern.parse("exa mple.com")).hasMessageContaining("'exa mple.com'")
                .hasMessageContaining("not a valid host name");
    }

    @Test
    void exactPatternMatchesTheNameOnItsPortsOnly() {
        HostPattern p = HostPattern.parse("pypi.org");
        assertThat(p.matches("pypi.org", 443)).isTrue();
        assertThat(p.matches("pypi.org", 80)).isTrue();
        assertThat(p.matches("pypi.org", 8443)).isFalse();
        assertThat(p.matches("files.pypi.org", 443)).isFalse();
        assertThat(p.matches("pypi.org.evil.com", 443)).isFalse();
        assertThat(p.matches("evilpypi.org", 443)).isFalse();

        HostPattern port = HostPattern.parse("pypi.org:8443");
        assertThat(port.matches("pypi.org", 8443)).isTrue();
        assertThat(port.matches("pypi.org", 443)).isFalse();
    }

    @Test
    void wildcardMatchesNamesBelowTheSuffixButNotTheSuffixItself() {
        HostPattern p = HostPattern.parse("*.example.com");
        assertThat(p.matches("api.example.com", 443)).isTrue();
        assertThat(p.matches("a.b.example.com", 80)).isTrue();
        assertThat(p.matches("example.com", 443)).isFalse();
        assertThat(p.matches("badexample.com", 443)).isFalse();
        assertThat(p.matches("example.com.evil.org", 443)).isFalse();
        assertThat(p.matches("api.example.com", 22)).isFalse();
    }

    @Test
    void coversWhatItAllowsAndNothingMore() {
        HostPattern exact = HostPattern.parse("example.com");
        assertThat(exact.covers(HostPattern.parse("example.com"))).isTrue();
        assertThat(exact.covers(HostPattern.parse("example.com:443"))).isTrue();
        assertThat(exact.covers(HostPattern.parse("example.com:8443"))).isFalse();
        assertThat(exact.covers(HostPattern.parse("api.example.com"))).isFalse();
        assertThat(exact.covers(HostPattern.parse("*.example.com"))).isFalse();

        HostPattern wild = HostPattern.parse("*.example.com");
        assertThat(wild.covers(HostPattern.parse("*.example.com"))).isTrue();
        assertThat(wild.covers(HostPattern.parse("*.a.example.com"))).isTrue();
        assertThat(wild.covers(HostPattern.parse("api.example.com:80"))).isTrue();
        assertThat(wild.covers(HostPattern.parse("example.com"))).isFalse();
        assertThat(wild.covers(HostPattern.parse("api.example.com:8443"))).isFalse();
        assertThat(wild.covers(HostPattern.parse("*.badexample.com"))).isFalse();

        HostPattern narrowWild = HostPattern.parse("*.a.example.com");
        assertThat(narrowWild.covers(HostPattern.parse("*.example.com"))).isFalse();
        assertThat(narrowWild.covers(HostPattern.parse("b.example.com"))).isFalse();

        HostPattern onePort = HostPattern.parse("example.com:443");
        assertThat(onePort.covers(HostPattern.parse("example.com"))).as("80 and 443 inside 443 alone").isFalse();
        assertThat(onePort.ports()).isEqualTo(List.of(443));
    }
}
