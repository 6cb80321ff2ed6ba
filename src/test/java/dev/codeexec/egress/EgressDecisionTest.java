package dev.codeexec.egress;

import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

/** The decision about one requested connection, with a fake resolver: no DNS, no connection. */
class EgressDecisionTest {

    static final EgressPolicy POLICY = EgressPolicy.parse("pypi.org,*.example.com,mirror.test:8443");
    static final AddressRules RULES = new AddressRules(List.of());

    /** Answers from a fixed table and counts the names it was asked. */
    static final class FakeResolver implements EgressDecision.Resolver {
        final Map<String, List<InetAddress>> table;
        final List<String> asked = new ArrayList<>();

        FakeResolver(Map<String, List<InetAddress>> table) {
            this.table = table;
        }

        @Override
        public List<InetAddress> resolve(String name) throws UnknownHostException {
            asked.add(name);
            List<InetAddress> a = table.get(name);
            if (a == null) throw new UnknownHostException(name);
            return a;
        }
    }

    static InetAddress ip(String literal) {
        return InetAddress.ofLiteral(literal);
    }

    final FakeResolver dns = new FakeResolver(Map.of(
            "pypi.org", List.of(ip("151.101.0.223"), ip("151.101.64.223")),
            "api.example.com", List.of(ip("8.8.8.8"), ip("10.0.0.1")),
            "v6.example.com", List.of(ip("2606:4700::1111"), ip("fd00:ec2::254")),
            "meta.example.com", List.of(ip("169.254.169.254")),
            "mirror.test", List.of(ip("1.1.1.1")),
            "empty.example.com", List.of()));

    @Test
    void allowedReturnsTheFirstAddressOfAnAnswerThatPassesWhole() {
        EgressDecision.Verdict v = EgressDecision.decide("PyPI.org.", 443, POLICY, RULES, dns);
        assertThat(v.decision()).isEqualTo(ConnectionRecord.ALLOWED);
        assertThat(v.connect()).isTrue();
        assertThat(v.host()).isEqualTo("pypi.org");
        assertThat(v.address()).contains(ip("151.101.0.223"));
        assertThat(v.reason()).isEmpty();
        assertThat(dns.asked).containsExactly("pypi.org");

        assertThat(EgressDecision.decide("mirror.test", 8443, POLICY, RULES, dns).address()).contains(ip("1.1.1.1"));
    }

    @Test
    void offRefusesEverythingWithoutALookup() {
        EgressDecision.Verdict v = EgressDecision.decide("pypi.org", 443, EgressPolicy.OFF, RULES, dns);
        assertThat(v.decision()).isEqualTo(ConnectionRecord.REFUSED);
        assertThat(v.reason()).isEqualTo("egress_off");
        assertThat(v.connect()).isFalse();
        assertThat(dns.asked).isEmpty();
    }

    @Test
    void ipLiteralsAreRefusedWhateverTheSpelling() {
        for (String ip : new String[] {"127.0.0.1", "127.1", "2130706433", "0x7f.0.0.1", "[::1]", "::1", "8.8.8.8"}) {
            EgressDecision.Verdict v = EgressDecision.decide(ip, 443, POLICY, RULES, dns);
            assertThat(v.reason()).as(ip).isEqualTo("ip_literal");
            assertThat(v.decision()).isEqualTo(ConnectionRecord.REFUSED);
            assertThat(v.message()).contains("pypi.org, *.example.com, mirror.test:8443");
        }
        assertThat(dns.asked).isEmpty();
    }

    @Test
    void namesAndPortsOffTheListAreRefusedWithoutALookup() {
        assertThat(EgressDecision.decide("npmjs.org", 443, POLICY, RULES, dns).reason()).isEqualTo("not_allowed");
        assertThat(EgressDecision.decide("pypi.org", 22, POLICY, RULES, dns).reason()).isEqualTo("not_allowed");
        assertThat(EgressDecision.decide("example.com", 443, POLICY, RULES, dns).reason()).isEqualTo("not_allowed");
        assertThat(EgressDecision.decide("mirror.test", 443, POLICY, RULES, dns).reason()).isEqualTo("not_allowed");
        EgressDecision.Verdict v = EgressDecision.decide("npmjs.org", 443, POLICY, RULES, dns);
        assertThat(v.message()).contains("npmjs.org:443").contains("allow-list");
        assertThat(v.host()).isEqualTo("npmjs.org");
        assertThat(dns.asked).isEmpty();
    }

    @Test
    void badNamesAndPortsAreBadRequests() {
        EgressDecision.Verdict v = EgressDecision.decide("bad name\u0001\"x", 443, POLICY, RULES, dns);
        assertThat(v.reason()).isEqualTo("bad_request");
        assertThat(v.decision()).isEqualTo(ConnectionRecord.REFUSED);
        assertThat(v.host()).isEqualTo("bad name??x"); // shortened: printable ASCII, no quote
        assertThat(EgressDecision.decide("", 443, POLICY, RULES, dns).reason()).isEqualTo("bad_request");
        assertThat(EgressDecision.decide("pypi.org", 0, POLICY, RULES, dns).reason()).isEqualTo("bad_request");
        assertThat(EgressDecision.decide("pypi.org", 65536, POLICY, RULES, dns).reason()).isEqualTo("bad_request");
        assertThat(EgressDecision.decide("x".repeat(300), 443, POLICY, RULES, dns).host()).hasSize(100);
        assertThat(dns.asked).isEmpty();
    }

    @Test
    void aNameThatCannotBeResolvedFails() {
        EgressDecision.Verdict v = EgressDecision.decide("nowhere.example.com", 443, POLICY, RULES, dns);
        assertThat(v.decision()).isEqualTo(ConnectionRecord.FAILED);
        assertThat(v.reason()).isEqualTo("resolve_failed");
        assertThat(v.connect()).isFalse();
        assertThat(EgressDecision.decide("empty.example.com", 443, POLICY, RULES, dns).reason()).isEqualTo("resolve_failed");
        assertThat(dns.asked).containsExactly("nowhere.example.com", "empty.example.com");
    }

    @Test
    void everyAddressMustPassNotOnlyTheFirst() {
        // A name that also points inside (DNS rebinding, a split answer) is refused whole.
        EgressDecision.Verdict v = EgressDecision.decide("api.example.com", 443, POLICY, RULES, dns);
        assertThat(v.decision()).isEqualTo(ConnectionRecord.REFUSED);
        assertThat(v.reason()).isEqualTo("private");
        assertThat(v.address()).isEmpty();
        assertThat(v.message()).contains("10.0.0.1").contains("private");

        assertThat(EgressDecision.decide("v6.example.com", 443, POLICY, RULES, dns).reason()).isEqualTo("metadata");
        EgressDecision.Verdict meta = EgressDecision.decide("meta.example.com", 80, POLICY, RULES, dns);
        assertThat(meta.reason()).isEqualTo("metadata");
        assertThat(meta.message()).contains("169.254.169.254");
    }

    @Test
    void theOperatorsBlocksApplyToResolvedAddresses() {
        AddressRules open = new AddressRules(List.of(Cidr.parse("10.0.0.0/8")));
        EgressDecision.Verdict v = EgressDecision.decide("api.example.com", 443, POLICY, open, dns);
        assertThat(v.decision()).isEqualTo(ConnectionRecord.ALLOWED);
        assertThat(v.address()).contains(ip("8.8.8.8"));
    }

    @Test
    void theResolverIsCalledOnlyForAllowedNames() {
        AtomicInteger calls = new AtomicInteger();
        EgressDecision.Resolver counting = name -> {
            calls.incrementAndGet();
            return List.of(ip("8.8.8.8"));
        };
        EgressDecision.decide("npmjs.org", 443, POLICY, RULES, counting);
        EgressDecision.decide("127.0.0.1", 443, POLICY, RULES, counting);
        EgressDecision.decide("pypi.org", 443, EgressPolicy.OFF, RULES, counting);
        EgressDecision.decide("pypi.org", 8080, POLICY, RULES, counting);
        EgressDecision.decide("bad name", 443, POLICY, RULES, counting);
        assertThat(calls).hasValue(0);
        assertThat(EgressDecision.decide("a.b.example.com", 443, POLICY, RULES, counting).connect()).isTrue();
        assertThat(calls).hasValue(1);
    }

    @Test
    void theServersResolverAnswersPinnedNamesItself() throws Exception {
        EgressSettings s = EgressSettings.of(dev.codeexec.config.Config.of("EGRESS", "on", "EGRESS_ALLOW", "fixture.test",
                "EGRESS_RESOLVE", "fixture.test=127.0.0.1,Fixture.Test.=::1,other.test=10.9.8.7"));
        EgressDecision.Resolver r = EgressDecision.resolver(s);
        assertThat(r.resolve("fixture.test")).containsExactly(ip("127.0.0.1"), ip("::1"));
        assertThat(r.resolve("other.test")).containsExactly(ip("10.9.8.7"));
    }

    @Test
    void shortenKeepsPrintableAsciiUpToAHundred() {
        assertThat(EgressDecision.shorten(null)).isEmpty();
        assertThat(EgressDecision.shorten("a\r\nb\\c\"dé")).isEqualTo("a??b?c?d?");
        assertThat(EgressDecision.shorten("y".repeat(500))).hasSize(100);
    }
}
