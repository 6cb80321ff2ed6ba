package dev.codeexec.egress;

import java.util.ArrayList;
import java.util.List;

/**
 * What one run may reach through the egress proxy: a list of {@link HostPattern}s. {@link #OFF} (empty) allows
 * nothing and starts no proxy.
 */
public record EgressPolicy(List<HostPattern> allow) {

    public static final EgressPolicy OFF = new EgressPolicy(List.of());

    public EgressPolicy {
        allow = List.copyOf(allow);
    }

    /**
     * A comma-separated list as written in EGRESS_ALLOW or a tenant's {@code egress=}; {@code off} or empty text is
     * {@link #OFF}.
     *
     * @throws IllegalArgumentException naming the first bad pattern
     */
    public static EgressPolicy parse(String text) {
        if (text == null || text.isBlank() || text.strip().equalsIgnoreCase("off")) return OFF;
        List<String> parts = new ArrayList<>();
        for (String p : text.split(",")) if (!p.isBlank()) parts.add(p);
        return of(parts);
    }

    /** The patterns given; an empty list is {@link #OFF}. */
    public static EgressPolicy of(List<String> patterns) {
        List<HostPattern> out = new ArrayList<>();
        for (String p : patterns) out.add(HostPattern.parse(p));
        return new EgressPolicy(out);
    }

    public boolean isOff() {
        return allow.isEmpty();
    }

    /** Whether a connection to this normalised name and port is allowed. */
    public boolean allows(String name, int port) {
        for (HostPattern p : allow) if (p.matches(name, port)) return true;
        return false;
    }

    /**
     * The policy a call asks for, which must lie inside this one: each requested pattern must be covered by one of
     * ours.
     *
     * @throws IllegalArgumentException naming the first pattern that is bad or would widen this policy
     */
    public EgressPolicy narrow(List<String> requested) {
        EgressPolicy wanted = of(requested);
        for (HostPattern w : wanted.allow) {
            boolean covered = false;
            for (HostPattern mine : allow) covered |= mine.covers(w);
            if (!covered)
                throw new IllegalArgumentException("network pattern '" + w + "' is outside your allow-list ("
                        + (isOff() ? "network access is off for you" : String.join(", ", patterns())) + ")");
        }
        return wanted;
    }

    /**
     * What both policies allow: a session's policy (fixed when it was created) under its caller's allow-list as it
     * is at the call (the key file may have narrowed or revoked it since).
     */
    public EgressPolicy intersect(EgressPolicy other) {
        List<HostPattern> both = new ArrayList<>();
        for (HostPattern mine : allow)
            for (HostPattern theirs : other.allow)
                mine.intersection(theirs).filter(p -> !both.contains(p)).ifPresent(both::add);
        return new EgressPolicy(both);
    }

    /** The patterns as written. */
    public List<String> patterns() {
        return allow.stream().map(HostPattern::toString).toList();
    }

    @Override
    public String toString() {
        return isOff() ? "off" : String.join(",", patterns());
    }
}
