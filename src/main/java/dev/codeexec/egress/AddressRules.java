package dev.codeexec.egress;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Which resolved addresses the proxy refuses to connect to, whatever name led there: every address that is not
 * plainly on the public internet. The operator may open blocks with EGRESS_ALLOW_CIDRS (an on-prem package mirror,
 * the tests' loopback fixtures); nothing else opens them.
 */
public final class AddressRules {

    /** Refused blocks and the reason each gives. Checked in order; IPv4-mapped and NAT64 forms are unwrapped first. */
    static final List<Map.Entry<Cidr, String>> REFUSED = List.of(
            rule("169.254.169.254/32", "metadata"), // cloud instance metadata (AWS, GCP, Azure, OpenStack)
            rule("169.254.170.2/32", "metadata"),   // ECS task metadata
            rule("100.100.100.200/32", "metadata"), // Alibaba Cloud metadata
            rule("fd00:ec2::254/128", "metadata"),  // AWS metadata over IPv6
            rule("0.0.0.0/8", "unspecified"),
            rule("127.0.0.0/8", "loopback"),
            rule("10.0.0.0/8", "private"),
            rule("172.16.0.0/12", "private"),
            rule("192.168.0.0/16", "private"),
            rule("100.64.0.0/10", "cgnat"),
            rule("169.254.0.0/16", "link_local"),
            rule("192.0.0.0/24", "reserved"),
            rule("192.0.2.0/24", "reserved"),
            rule("198.18.0.0/15", "reserved"),
            rule("198.51.100.0/24", "reserved"),
            rule("203.0.113.0/24", "reserved"),
            rule("224.0.0.0/4", "multicast"),
            rule("240.0.0.0/4", "reserved"), // includes 255.255.255.255
            rule("::/128", "unspecified"),
            rule("::1/128", "loopback"),
            rule("fc00::/7", "ula"),
            rule("fe80::/10", "link_local"),
            rule("fec0::/10", "link_local"),
            rule("ff00::/8", "multicast"),
            rule("2001:db8::/32", "reserved"),
            rule("100::/64", "reserved"));

    private final List<Cidr> allowed;

    public AddressRules(List<Cidr> allowed) {
        this.allowed = List.copyOf(allowed);
    }

    /** The operator's exceptions, as configured. */
    public List<Cidr> allowed() {
        return allowed;
    }

    private static Map.Entry<Cidr, String> rule(String cidr, String reason) {
        return Map.entry(Cidr.parse(cidr), reason);
    }

    /**
     * Why the proxy must not connect to this address ({@code loopback}, {@code private}, {@code link_local},
     * {@code cgnat}, {@code ula}, {@code multicast}, {@code metadata}, {@code unspecified}, {@code reserved}), or empty
     * when it may. An address inside an allowed block is always allowed.
     */
    public Optional<String> refusal(InetAddress address) {
        InetAddress a = unwrap(address);
        for (Cidr c : allowed) if (c.contains(a) || c.contains(address)) return Optional.empty();
        for (Map.Entry<Cidr, String> r : REFUSED) if (r.getKey().contains(a)) return Optional.of(r.getValue());
        if (a instanceof Inet6Address && (a.getAddress()[0] & 0xe0) != 0x20)
            return Optional.of("reserved"); // outside 2000::/3, the only global unicast IPv6 space
        return Optional.empty();
    }

    /** The IPv4 address inside an IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible or NAT64 (64:ff9b::/96) IPv6 one. */
    static InetAddress unwrap(InetAddress a) {
        if (!(a instanceof Inet6Address)) return a;
        byte[] b = a.getAddress();
        boolean mapped = allZero(b, 0, 10) && (b[10] & 0xff) == 0xff && (b[11] & 0xff) == 0xff;
        boolean compatible = allZero(b, 0, 12) && !allZero(b, 12, 16) && !(allZero(b, 12, 15) && b[15] == 1);
        boolean nat64 = (b[0] & 0xff) == 0 && (b[1] & 0xff) == 0x64 && (b[2] & 0xff) == 0xff && (b[3] & 0xff) == 0x9b
                && allZero(b, 4, 12);
        if (!mapped && !compatible && !nat64) return a;
        try {
            return Inet4Address.getByAddress(new byte[] {b[12], b[13], b[14], b[15]});
        } catch (UnknownHostException e) {
            return a;
        }
    }

    private static boolean allZero(byte[] b, int from, int to) {
        for (int i = from; i < to; i++) if (b[i] != 0) return false;
        return true;
    }
}
