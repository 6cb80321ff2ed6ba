package dev.codeexec.preview;

import java.util.Optional;
import java.util.regex.Pattern;

/**
 * Where one request goes: the preview's token and the request-target the app gets. Path form:
 * {@code /p/{token}/rest?query} goes to {@code /rest?query}, and {@code /p/{token}} (no slash) is redirected to
 * {@code /p/{token}/} so the app's relative links resolve under the prefix. Host form: {@code {token}.{domain}} (the
 * Host's port ignored, the domain compared in any case) keeps the path as it is.
 *
 * @param redirect where to send the client instead (308), or null
 */
record Route(String token, String path, boolean hostForm, String redirect) {

    static final Pattern TOKEN = Pattern.compile("[A-Za-z0-9_-]{22,64}");
    static final String PREFIX = "/p/";

    /** The route of a request for {@code target} with this Host (null when none), or empty: no such preview. */
    static Optional<Route> of(String target, String host, Optional<String> domain) {
        if (domain.isPresent() && host != null) {
            String name = stripPort(host);
            String suffix = "." + domain.get();
            if (name.length() > suffix.length() && name.regionMatches(true, name.length() - suffix.length(), suffix, 0, suffix.length())) {
                String label = name.substring(0, name.length() - suffix.length());
                if (!TOKEN.matcher(label).matches() || !target.startsWith("/")) return Optional.empty();
                return Optional.of(new Route(label, target, true, null));
            }
        }
        if (!target.startsWith(PREFIX)) return Optional.empty();
        int end = PREFIX.length();
        while (end < target.length() && target.charAt(end) != '/' && target.charAt(end) != '?') end++;
        String token = target.substring(PREFIX.length(), end);
        if (!TOKEN.matcher(token).matches()) return Optional.empty();
        if (end == target.length() || target.charAt(end) == '?')
            return Optional.of(new Route(token, null, false, PREFIX + token + "/" + target.substring(end)));
        return Optional.of(new Route(token, target.substring(end), false, null));
    }

    /** The prefix the app's paths sit under, for X-Forwarded-Prefix (path form only). */
    String prefix() {
        return PREFIX + token;
    }

    private static String stripPort(String host) {
        String h = host.strip();
        if (h.startsWith("[")) return h;
        int colon = h.lastIndexOf(':');
        return colon < 0 ? h : h.substring(0, colon);
    }
}
