package dev.codeexec.engine;

import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Where the preview listener is reached, for preview URLs: {@code https://{token}.DOMAIN/} when PREVIEW_DOMAIN is
 * set, else {@code BASE/p/{token}/}; and why previews cannot be made, while they cannot.
 */
public final class PreviewAddress {

    /** What a token looks like: 48 lowercase hex digits (a DNS label as it is, for the host form). */
    public static final Pattern TOKEN = Pattern.compile("[0-9a-f]{48}");
    private static final Pattern IN_URL = Pattern.compile("(?:/p/|//)([0-9a-f]{48})(?:[/.]|$)");
    static final String STARTING = "previews are starting";

    private final Optional<String> domain;
    private volatile String base;
    private volatile String unavailable;

    /** @param unavailable why previews cannot be made here at all, or null when a listener may tell where it is */
    public PreviewAddress(Optional<String> domain, String unavailable) {
        this.domain = domain.map(d -> d.strip().toLowerCase(java.util.Locale.ROOT)).filter(d -> !d.isEmpty());
        this.unavailable = unavailable == null ? STARTING : unavailable;
    }

    /** The listener listens: URLs start with {@code base} (its public address) from now on. */
    public void listening(String base) {
        if (STARTING.equals(unavailable)) {
            this.base = base.endsWith("/") ? base.substring(0, base.length() - 1) : base;
            unavailable = null;
        }
    }

    /** No listener (a port in use): expose_port says {@code why}. */
    public void unavailable(String why) {
        unavailable = why;
    }

    /** Why previews cannot be made here, or empty when they can. */
    public Optional<String> unavailableReason() {
        return Optional.ofNullable(unavailable);
    }

    /** Whether a listener may still tell where it is (nothing has said previews cannot be served). */
    public boolean starting() {
        return STARTING.equals(unavailable);
    }

    public String url(String token) {
        return domain.map(d -> "https://" + token + "." + d + "/").orElseGet(() -> base + "/p/" + token + "/");
    }

    /** The token in a preview URL (either form), or the text itself when it is a token; empty otherwise. */
    public static Optional<String> tokenOf(String urlOrToken) {
        if (TOKEN.matcher(urlOrToken).matches()) return Optional.of(urlOrToken);
        Matcher m = IN_URL.matcher(urlOrToken);
        return m.find() ? Optional.of(m.group(1)) : Optional.empty();
    }
}
