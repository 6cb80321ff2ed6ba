package dev.codeexec.egress;

import org.junit.jupiter.api.Test;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Which resolved addresses the proxy refuses. Every address here is built from a literal (InetAddress.ofLiteral,
 * getByAddress): no lookup, and nothing is ever connected to.
 */
class AddressRulesTest {

    static final AddressRules NONE_OPEN = new AddressRules(List.of());

    static InetAddress ip(String literal) {
        return InetAddress.ofLiteral(literal);
    }

    /** An IPv6 address kept as IPv6, even when it is IPv4-mapped (InetAddress.ofLiteral would give the IPv4 one). */
    static InetAddress v6(String literal) throws Exception {
        byte[] b = InetAddress.ofLiteral(literal).getAddress();
        if (b.length == 4) b = new byte[] {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (byte) 0xff, (byte) 0xff, b[0], b[1], b[2], b[3]};
        return Inet6Address.getByAddress(null, b, -1);
    }

    @Test
    void refusesEveryAddressThatIsNotPlainlyPublic() {
        assertRefused("127.0.0.1", "loopback");
        assertRefused("127.255.0.9", "loopback");
        assertRefused("10.1.2.3", "private");
        assertRefused("172.16.0.1", "private");
        assertRefused("172.31.255.255", "private");
        assertRefused("192.168.1.1", "private");
        assertRefused("100.64.0.1", "cgnat");
        assertRefused("100.127.255.254", "cgnat");
        assertRefused("169.254.1.1", "link_local");
        assertRefused("169.254.169.254", "metadata");
        assertRefused("169.254.170.2", "metadata");
        assertRefused("100.100.100.200", "metadata");
        assertRefused("fd00:ec2::254", "metadata");
        assertRefused("fc00::1", "ula");
        assertRefused("fd12::1", "ula");
        assertRefused("fe80::1", "link_local");
        assertRefused("224.0.0.1", "multicast");
        assertRefused("239.255.255.250", "multicast");
        assertRefused("ff02::1", "multicast");
        assertRefused("0.0.0.0", "unspecified");
        assertRefused("0.1.2.3", "unspecified");
        assertRefused("::", "unspecified");
        assertRefused("::1", "loopback");
        assertRefused("255.255.255.255", "reserved");
        assertRefused("240.0.0.1", "reserved");
        assertRefused("192.0.2.1", "reserved");
        assertRefused("198.18.0.1", "reserved");
        assertRefused("2001:db8::1", "reserved");
    }

    @Test
    void ipv6OutsideGlobalUnicastIsReserved() {
        assertRefused("4000::1", "reserved");
        assertRefused("::ffff:0:0a00:1", "reserved"); // SIIT form: not unwrapped, and outside 2000::/3
    }

    @Test
    void ipv4InsideIpv6IsUnwrappedFirst() throws Exception {
        assertThat(NONE_OPEN.refusal(v6("::ffff:127.0.0.1"))).contains("loopback");
        assertThat(NONE_OPEN.refusal(v6("::ffff:169.254.169.254"))).contains("metadata");
        assertThat(NONE_OPEN.refusal(v6("::ffff:10.0.0.1"))).contains("private");
        assertThat(NONE_OPEN.refusal(ip("64:ff9b::a00:1"))).contains("private");        // NAT64 of 10.0.0.1
        assertThat(NONE_OPEN.refusal(ip("64:ff9b::7f00:1"))).contains("loopback");      // NAT64 of 127.0.0.1
        assertThat(NONE_OPEN.refusal(ip("64:ff9b::a9fe:a9fe"))).contains("metadata");   // NAT64 of 169.254.169.254
        assertThat(NONE_OPEN.refusal(ip("::a00:1"))).contains("private");              // IPv4-compatible 10.0.0.1
        assertThat(NONE_OPEN.refusal(ip("::7f00:1"))).contains("loopback");             // IPv4-compatible 127.0.0.1
        // The JDK itself turns a mapped literal into IPv4: refused the same way.
        assertThat(ip("::ffff:127.0.0.1")).isInstanceOf(Inet4Address.class);
        assertThat(NONE_OPEN.refusal(ip("::ffff:127.0.0.1"))).contains("loopback");

        assertThat(AddressRules.unwrap(v6("::ffff:8.8.8.8"))).isEqualTo(ip("8.8.8.8"));
        assertThat(AddressRules.unwrap(ip("64:ff9b::808:808"))).isEqualTo(ip("8.8.8.8"));
        assertThat(AddressRules.unwrap(ip("::1"))).isEqualTo(ip("::1"));
        assertThat(AddressRules.unwrap(ip("::"))).isEqualTo(ip("::"));
        assertThat(AddressRules.unwrap(ip("2606:4700::1111"))).isEqualTo(ip("2606:4700::1111"));
        assertThat(AddressRules.unwrap(ip("1.2.3.4"))).isEqualTo(ip("1.2.3.4"));
    }

    @Test
    void publicAddressesAreAllowed() throws Exception {
        for (String a : new String[] {"8.8.8.8", "1.1.1.1", "151.101.0.223", "172.32.0.1", "100.128.0.1", "11.0.0.1",
                "2606:4700::1111", "2a00:1450:4001:80b::200e"})
            assertThat(NONE_OPEN.refusal(ip(a))).as(a).isEmpty();
        assertThat(NONE_OPEN.refusal(v6("::ffff:8.8.8.8"))).isEmpty();
        assertThat(NONE_OPEN.refusal(ip("64:ff9b::808:808"))).isEmpty();
    }

    @Test
    void anOperatorsBlockOpensExactlyThatBlock() throws Exception {
        AddressRules rules = new AddressRules(List.of(Cidr.parse("127.0.0.1/32"), Cidr.parse("10.1.2.0/24"), Cidr.parse("fd00::/8")));
        assertThat(rules.allowed()).hasSize(3);
        assertThat(rules.refusal(ip("127.0.0.1"))).isEmpty();
        assertThat(rules.refusal(v6("::ffff:127.0.0.1"))).isEmpty();
        assertThat(rules.refusal(ip("127.0.0.2"))).contains("loopback");
        assertThat(rules.refusal(ip("10.1.2.200"))).isEmpty();
        assertThat(rules.refusal(ip("10.1.3.1"))).contains("private");
        assertThat(rules.refusal(ip("fd12::1"))).isEmpty();
        // fd00:ec2::254 lies inside fd00::/8: the operator opened it, so it is allowed.
        assertThat(rules.refusal(ip("fd00:ec2::254"))).isEmpty();
        assertThat(rules.refusal(ip("fc00::1"))).contains("ula");
        assertThat(rules.refusal(ip("169.254.169.254"))).contains("metadata");
    }

    @Test
    void cidrParsesAndContains() {
        Cidr c = Cidr.parse("10.1.2.3/16");
        assertThat(c.toString()).isEqualTo("10.1.0.0/16");
        assertThat(c.bits()).isEqualTo(16);
        assertThat(c).isEqualTo(Cidr.parse(" 10.1.0.0/16 ")).hasSameHashCodeAs(Cidr.parse("10.1.0.0/16"));
        assertThat(c.contains(ip("10.1.255.255"))).isTrue();
        assertThat(c.contains(ip("10.1.0.0"))).isTrue();
        assertThat(c.contains(ip("10.2.0.0"))).isFalse();
        assertThat(c.contains(ip("::ffff:10.1.0.1"))).isTrue(); // the JDK's IPv4 form
        assertThat(c.contains(ip("fd00::1"))).isFalse();         // another family is never inside

        Cidr host = Cidr.parse("192.168.1.7");
        assertThat(host.bits()).isEqualTo(32);
        assertThat(host.contains(ip("192.168.1.7"))).isTrue();
        assertThat(host.contains(ip("192.168.1.8"))).isFalse();

        Cidr odd = Cidr.parse("172.16.0.0/12");
        assertThat(odd.contains(ip("172.31.255.255"))).isTrue();
        assertThat(odd.contains(ip("172.32.0.0"))).isFalse();

        Cidr v6 = Cidr.parse("fd00:ec2::/32");
        assertThat(v6.toString()).isEqualTo("fd00:ec2:0:0:0:0:0:0/32");
        assertThat(v6.contains(ip("fd00:ec2::254"))).isTrue();
        assertThat(v6.contains(ip("fd00:ec3::254"))).isFalse();
        assertThat(v6.contains(ip("10.0.0.1"))).isFalse();

        Cidr all = Cidr.parse("0.0.0.0/0");
        assertThat(all.contains(ip("8.8.8.8"))).isTrue();
        assertThat(all.contains(ip("::1"))).isFalse();
    }

    @Test
    void cidrRejectsWhatIsNotABlock() {
        for (String bad : new String[] {"", "example.com/8", "10.0.0.0/33", "fd00::/129", "10.0.0.0/x", "10.0.0.0/-1",
                "10.0.0.0/", "1.2.3.4.5", "10.0.0.0/8/8", "[::1]/128", "10.0.0.1%eth0"})
            assertThatThrownBy(() -> Cidr.parse(bad)).as(bad).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> Cidr.parse("10.0.0.0/33")).hasMessageContaining("prefix length must be 0 to 32");
        assertThatThrownBy(() -> Cidr.parse("fd00::/129")).hasMessageContaining("prefix length must be 0 to 128");
        assertThatThrownBy(() -> Cidr.parse("10.0.0.0/x")).hasMessageContaining("prefix length must be a number");
        assertThatThrownBy(() -> Cidr.parse("example.com/8")).hasMessageContaining("not an address block");
    }

    @Test
    void cidrNeverLooksANameUp() {
        // Names spelt with hex digits only pass the character check; they must be refused as not literals rather
        // than resolved (the answer would depend on the DNS of the machine that reads the configuration).
        for (String name : new String[] {"cafe", "bad.cafe/16", "dead.beef", "add", "face.b00c/24"})
            assertThatThrownBy(() -> Cidr.parse(name)).as(name).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("not an address block");
    }

    private static void assertRefused(String literal, String reason) {
        assertThat(NONE_OPEN.refusal(ip(literal))).as(literal).contains(reason);
    }
}
