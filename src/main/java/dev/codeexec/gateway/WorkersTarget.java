package dev.codeexec.gateway;

import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigException;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * WORKERS parsed once at start: either grpc's own {@code dns:///host:port} (a Kubernetes headless Service, each A
 * record one worker) or {@code static:///h1:port,h2:port} (served by {@link StaticNameResolverProvider}). Every
 * mistake stops the start with a message naming WORKERS, because a gateway with a target it cannot use would
 * accept calls it can never run.
 *
 * @param target    the string the channels are built for, spelled exactly as configured: the ring of the session
 *                  channel hashes resolved addresses, so gateways given the same string agree on placement
 * @param dns       true for {@code dns:///}
 * @param addresses the static addresses, or the one DNS name with its port
 */
record WorkersTarget(String target, boolean dns, List<HostPort> addresses) {

    /** One {@code host:port}; the host is a name or an IP literal (IPv6 only as a DNS answer, shown in brackets). */
    record HostPort(String host, int port) {
        @Override
        public String toString() {
            return (host.contains(":") ? "[" + host + "]" : host) + ":" + port;
        }
    }

    static final String STATIC_PREFIX = "static:///";
    static final String DNS_PREFIX = "dns:///";

    static WorkersTarget parse(String raw) {
        String target = raw.trim();
        String lower = target.toLowerCase(Locale.ROOT);
        if (lower.startsWith(STATIC_PREFIX)) {
            List<HostPort> list = parseStaticList(target.substring(STATIC_PREFIX.length()));
            return new WorkersTarget(target, false, list);
        }
        if (lower.startsWith(DNS_PREFIX)) {
            String rest = target.substring(DNS_PREFIX.length());
            if (rest.contains(",")) {
                throw new ConfigException("WORKERS " + target + ": dns:/// takes one name (a headless Service); "
                        + "list several addresses with static:///h1:30031,h2:30031");
            }
            return new WorkersTarget(target, true, List.of(hostPort(rest, "dns:///")));
        }
        throw new ConfigException("WORKERS must be dns:///<host>:<port> (a Kubernetes headless Service) or "
                + "static:///<host>:<port>,<host>:<port>; got '" + target + "'");
    }

    /** The addresses of a {@code static:///} target (without the prefix), in the order given. */
    static List<HostPort> parseStaticList(String list) {
        if (list.isBlank()) throw new ConfigException("WORKERS static:/// lists no address; e.g. static:///10.0.0.5:30031");
        List<HostPort> out = new ArrayList<>();
        Set<String> seen = new LinkedHashSet<>();
        for (String part : list.split(",", -1)) {
            HostPort hp = hostPort(part.trim(), "static:///");
            if (!seen.add(hp.toString().toLowerCase(Locale.ROOT))) {
                throw new ConfigException("WORKERS static:/// lists " + hp + " twice");
            }
            out.add(hp);
        }
        return List.copyOf(out);
    }

    private static HostPort hostPort(String s, String scheme) {
        if (s.isEmpty()) throw new ConfigException("WORKERS " + scheme + " has an empty address (stray comma?)");
        if (s.startsWith("[") || s.chars().filter(c -> c == ':').count() > 1) {
            throw new ConfigException("WORKERS " + scheme + " entry '" + s + "': IPv6 literals are not supported "
                    + "here; use a host name that resolves to it");
        }
        int colon = s.lastIndexOf(':');
        if (colon < 0) {
            throw new ConfigException("WORKERS " + scheme + " entry '" + s + "' needs a port, e.g. " + s + ":30031");
        }
        String host = s.substring(0, colon);
        String portText = s.substring(colon + 1);
        if (host.isEmpty()) throw new ConfigException("WORKERS " + scheme + " entry '" + s + "' has no host");
        if (!host.matches("[A-Za-z0-9._-]+")) {
            throw new ConfigException("WORKERS " + scheme + " entry '" + s + "': '" + host + "' is not a host name");
        }
        int port;
        try {
            port = Integer.parseInt(portText);
        } catch (NumberFormatException e) {
            throw new ConfigException("WORKERS " + scheme + " entry '" + s + "': port '" + portText
                    + "' is not a number");
        }
        if (port < 1 || port > 65535) {
            throw new ConfigException("WORKERS " + scheme + " entry '" + s + "': port must be 1-65535");
        }
        return new HostPort(host, port);
    }

    /** Every worker this target names is on this machine, where plaintext exposes nothing. */
    boolean allLoopback() {
        return addresses.stream().allMatch(a -> dns ? a.host().equalsIgnoreCase("localhost")
                : Config.isLoopback(a.host()));
    }
}
