package dev.codeexec.egress;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The one spelling of a host name that policies compare, and what counts as an address rather than a name. */
class HostNamesTest {

    @Test
    void normalizesCaseTrailingDotAndIdna() {
        assertThat(HostNames.normalize("PyPI.Org")).isEqualTo("pypi.org");
        assertThat(HostNames.normalize("pypi.org.")).isEqualTo("pypi.org");
        assertThat(HostNames.normalize("  pypi.org  ")).isEqualTo("pypi.org");
        assertThat(HostNames.normalize("Bücher.Example.")).isEqualTo("xn--bcher-kva.example");
        // Already punycode: unchanged, so both spellings compare equal.
        assertThat(HostNames.normalize("XN--BCHER-KVA.example")).isEqualTo("xn--bcher-kva.example");
        assertThat(HostNames.normalize("a-b.c1.example")).isEqualTo("a-b.c1.example");
    }

    @Test
    void rejectsNamesThatAreNotHostNames() {
        for (String bad : new String[] {"", "   ", ".", "..", "a..b", ".example.com", "-a.com", "a-.com", "a b.com",
                "a/b.com", "ex@mple.com", "*.example.com", "example.com..", "x".repeat(64) + ".com",
                ("a".repeat(60) + ".").repeat(5) + "com"}) {
            assertThatThrownBy(() -> HostNames.normalize(bad)).as(bad).isInstanceOf(IllegalArgumentException.class);
        }
        assertThatThrownBy(() -> HostNames.normalize(null)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> HostNames.normalize("a b.com")).hasMessageContaining("'a b.com' is not a valid host name");
    }

    @Test
    void aNormalizedNameNeverEndsWithADot() {
        // The contract is "without a trailing dot": a name with two is not a name, not "example.com." (which no
        // pattern would match and no SNI would equal).
        assertThatThrownBy(() -> HostNames.normalize("example.com..")).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void ipv6LiteralsAreKeptForTheRefusal() {
        assertThat(HostNames.normalize("[::1]")).isEqualTo("[::1]");
        assertThat(HostNames.normalize("FE80::1")).isEqualTo("fe80::1");
    }

    @Test
    void everyIpv4SpellingAResolverAcceptsIsAnIpLiteral() {
        for (String ip : new String[] {"127.0.0.1", "127.1", "2130706433", "0x7f.0.0.1", "0177.0.0.1", "0x7f000001",
                "[::1]", "::1", "::ffff:127.0.0.1"}) {
            assertThat(HostNames.isIpLiteral(HostNames.normalize(ip))).as(ip).isTrue();
        }
        // Full-width digits and the ideographic full stop become 127.0.0.1 under IDNA: still an address.
        String fullWidth = HostNames.normalize("１２７。０。０。１");
        assertThat(fullWidth).isEqualTo("127.0.0.1");
        assertThat(HostNames.isIpLiteral(fullWidth)).isTrue();
    }

    @Test
    void namesAreNotIpLiterals() {
        for (String name : new String[] {"pypi.org", "a1.example.com", "1password.com", "localhost", "xn--bcher-kva.example",
                "127.0.0.1.example.com"}) {
            assertThat(HostNames.isIpLiteral(HostNames.normalize(name))).as(name).isFalse();
        }
    }
}
