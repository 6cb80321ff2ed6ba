package dev.codeexec.egress;

import dev.codeexec.http1.Http1;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.List;
import java.util.Optional;

/**
 * The proxy's decision about one requested connection, without connecting: the name against the run's policy,
 * then every address it resolves to against the address rules. Pure except for the lookup, which tests replace.
 */
public final class EgressDecision {

    private EgressDecision() {
    }

    /** Resolves a normalised name: EGRESS_RESOLVE's pins, else the host's resolver. */
    @FunctionalInterface
    public interface Resolver {
        List<InetAddress> resolve(String name) throws UnknownHostException;
    }

    /** The host's resolver behind the pins of the settings. */
    public static Resolver resolver(EgressSettings settings) {
        return name -> {
            Optional<List<InetAddress>> pinned = settings.pinnedFor(name);
            if (pinned.isPresent()) return pinned.get();
            return List.of(InetAddress.getAllByName(name));
        };
    }

    /** The outcome: the address to connect to, or a refusal or failure with its reason. */
    public record Verdict(String host, Optional<InetAddress> address, String decision, String reason, String message) {
        boolean connect() {
            return address.isPresent();
        }
    }

    /**
     * Decides about {@code rawHost:port} for a run with {@code policy}.
     *
     * @param rawHost the host as the program sent it (CONNECT target or URL authority)
     */
    public static Verdict decide(String rawHost, int port, EgressPolicy policy, AddressRules rules, Resolver resolver) {
        String host;
        try {
            host = HostNames.normalize(rawHost);
        } catch (IllegalArgumentException e) {
            return refused(shorten(rawHost), "bad_request", "'" + shorten(rawHost) + "' is not a valid host name");
        }
        if (policy.isOff()) return refused(host, "egress_off", "this run has no network access");
        if (port < 1 || port > 65535) return refused(host, "bad_request", "port " + port + " is not valid");
        if (HostNames.isIpLiteral(host))
            return refused(host, "ip_literal", host + " is an IP address; this run may only reach host names on its allow-list ("
                    + String.join(", ", policy.patterns()) + ")");
        if (!policy.allows(host, port))
            return refused(host, "not_allowed", host + ":" + port + " is not on this run's allow-list ("
                    + String.join(", ", policy.patterns()) + ")");
        List<InetAddress> addresses;
        try {
            addresses = resolver.resolve(host);
        } catch (UnknownHostException e) {
            return new Verdict(host, Optional.empty(), ConnectionRecord.FAILED, "resolve_failed", host + " could not be resolved");
        }
        if (addresses.isEmpty())
            return new Verdict(host, Optional.empty(), ConnectionRecord.FAILED, "resolve_failed", host + " could not be resolved");
        // Every address must pass: a name that also points inside (rebinding, a split-horizon record) is refused whole.
        for (InetAddress a : addresses) {
            Optional<String> why = rules.refusal(a);
            if (why.isPresent())
                return refused(host, why.get(), host + " resolves to " + a.getHostAddress() + ", a " + why.get().replace('_', ' ')
                        + " address this proxy does not connect to");
        }
        return new Verdict(host, Optional.of(addresses.get(0)), ConnectionRecord.ALLOWED, "", "");
    }

    static Verdict refused(String host, String reason, String message) {
        return new Verdict(host, Optional.empty(), ConnectionRecord.REFUSED, reason, message);
    }

    /** Client text for a record or log line: printable ASCII, at most 100 characters. */
    static String shorten(String s) {
        return Http1.shorten(s);
    }
}
