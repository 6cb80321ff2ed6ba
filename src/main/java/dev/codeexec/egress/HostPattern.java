package dev.codeexec.egress;

import java.util.List;

/**
 * One entry of an allow-list: {@code host} or {@code *.suffix}, optionally {@code :port}. Without a port the
 * pattern allows ports 80 and 443. {@code *.example.com} allows every name below {@code example.com}
 * ({@code api.example.com}, {@code a.b.example.com}) but not {@code example.com} itself: list both when both are
 * meant.
 *
 * @param host     normalised name ({@link HostNames}); for a wildcard, the suffix without {@code *.}
 * @param wildcard whether the pattern is {@code *.host}
 * @param ports    the ports allowed
 */
public record HostPattern(String host, boolean wildcard, List<Integer> ports) {

    static final List<Integer> DEFAULT_PORTS = List.of(80, 443);

    public HostPattern {
        ports = List.copyOf(ports);
    }

    /**
     * Parses one pattern.
     *
     * @throws IllegalArgumentException with a reason a user can act on
     */
    public static HostPattern parse(String text) {
        String t = text == null ? "" : text.strip();
        if (t.isEmpty()) throw new IllegalArgumentException("empty network pattern");
        List<Integer> ports = DEFAULT_PORTS;
        int colon = t.lastIndexOf(':');
        if (colon >= 0) {
            String p = t.substring(colon + 1);
            int port;
            try {
                port = Integer.parseInt(p);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("'" + text + "': the port must be a number from 1 to 65535");
            }
            if (port < 1 || port > 65535) throw new IllegalArgumentException("'" + text + "': the port must be a number from 1 to 65535");
            ports = List.of(port);
            t = t.substring(0, colon);
        }
        boolean wildcard = t.startsWith("*.");
        if (wildcard) t = t.substring(2);
        if (t.contains("*")) throw new IllegalArgumentException("'" + text + "': only a leading '*.' is allowed");
        String host;
        try {
            host = HostNames.normalize(t);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("'" + text + "': " + e.getMessage());
        }
        if (HostNames.isIpLiteral(host))
            throw new IllegalArgumentException("'" + text + "': allow-lists name hosts, not IP addresses");
        if (wildcard && !host.contains("."))
            throw new IllegalArgumentException("'" + text + "': a wildcard needs a suffix with a dot, such as *.example.com");
        return new HostPattern(host, wildcard, ports);
    }

    /** Whether a connection to this normalised name and port is allowed by this pattern. */
    public boolean matches(String name, int port) {
        if (!ports.contains(port)) return false;
        return wildcard ? name.endsWith("." + host) : name.equals(host);
    }

    /** Whether everything {@code other} allows is allowed by this pattern (a call may narrow, never widen). */
    public boolean covers(HostPattern other) {
        return ports.containsAll(other.ports) && other.within(this);
    }

    /**
     * What this pattern and {@code other} both allow, as one pattern (the narrower name, the ports they share);
     * empty when they have nothing in common.
     */
    public java.util.Optional<HostPattern> intersection(HostPattern other) {
        List<Integer> shared = ports.stream().filter(other.ports::contains).toList();
        if (shared.isEmpty()) return java.util.Optional.empty();
        HostPattern narrower = other.within(this) ? other : within(other) ? this : null;
        return narrower == null ? java.util.Optional.empty()
                : java.util.Optional.of(new HostPattern(narrower.host, narrower.wildcard, shared));
    }

    /** Whether every name this pattern matches is matched by {@code wider}, ports aside. */
    private boolean within(HostPattern wider) {
        if (!wider.wildcard) return !wildcard && host.equals(wider.host);
        return host.endsWith("." + wider.host) || (wildcard && host.equals(wider.host));
    }

    /** As written in configuration: {@code *.example.com}, {@code example.com:8443}. */
    @Override
    public String toString() {
        String name = (wildcard ? "*." : "") + host;
        return ports.equals(DEFAULT_PORTS) ? name : name + ":" + ports.get(0);
    }
}
