package dev.codeexec.egress;

import dev.codeexec.http1.RequestHead;

import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Locale;
import java.util.Optional;

/**
 * HTTP Basic credentials (RFC 7617) in a request's {@code Authorization} or {@code Proxy-Authorization} field:
 * {@code Basic base64(user:password)}. git and pip send a token given in a URL ({@code https://user:TOKEN@host/})
 * this way, so a placeholder in it never appears in clear in the head; the proxy decodes it here, in one place, both
 * where it swaps placeholders ({@link PlaceholderSwap}) and where it refuses them in plain {@code http://}
 * ({@link RunSecrets#foundIn(String, java.util.List)}). The decoded text keeps every byte (ISO-8859-1), so what is
 * encoded again differs from what came only where a placeholder was swapped. A value that is not valid base64 is
 * not credentials: it passes as it came.
 */
final class BasicCredentials {

    private static final String SCHEME = "basic";

    private BasicCredentials() {
    }

    /** Whether a field of this name can carry credentials. */
    static boolean carriesCredentials(String fieldName) {
        String n = fieldName.toLowerCase(Locale.ROOT);
        return n.equals("authorization") || n.equals("proxy-authorization");
    }

    /** The decoded {@code user:password} of a field's Basic credentials; empty for any other field or value. */
    static Optional<String> userPass(RequestHead.Field field) {
        return carriesCredentials(field.name()) ? userPass(field.value()) : Optional.empty();
    }

    /** The decoded {@code user:password} of a value {@code Basic X}; empty when it is not that, or X is not base64. */
    static Optional<String> userPass(String value) {
        String v = value.strip();
        if (v.length() <= SCHEME.length() || !v.regionMatches(true, 0, SCHEME, 0, SCHEME.length())
                || !Character.isWhitespace(v.charAt(SCHEME.length())))
            return Optional.empty();
        String token = v.substring(SCHEME.length()).strip();
        if (token.isEmpty()) return Optional.empty();
        try {
            return Optional.of(new String(Base64.getDecoder().decode(token), StandardCharsets.ISO_8859_1));
        } catch (IllegalArgumentException e) {
            return Optional.empty(); // not base64: passed on as it came
        }
    }

    /** The field value for these credentials: {@code Basic} and their base64. */
    static String basic(String userPass) {
        return "Basic " + Base64.getEncoder().encodeToString(userPass.getBytes(StandardCharsets.ISO_8859_1));
    }
}
