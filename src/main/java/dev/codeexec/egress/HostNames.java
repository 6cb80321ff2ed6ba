package dev.codeexec.egress;

import java.net.IDN;
import java.util.Locale;

/**
 * The one spelling of a host name that policies compare: lower case, IDNA (punycode, {@code bücher.example} →
 * {@code xn--bcher-kva.example}), without a trailing dot. Anything that is, or could be read by a resolver as, an IP
 * address is an {@link #isIpLiteral IP literal}: allow-lists name hosts, never addresses.
 */
public final class HostNames {

    private HostNames() {
    }

    /**
     * The normalised name.
     *
     * @throws IllegalArgumentException a name that is empty, too long, or not a valid host name after IDNA
     */
    public static String normalize(String name) {
        if (name == null) throw new IllegalArgumentException("empty host name");
        String n = name.strip();
        if (n.endsWith(".")) n = n.substring(0, n.length() - 1);
        if (n.isEmpty()) throw new IllegalArgumentException("empty host name");
        if (n.startsWith("[") || n.indexOf(':') >= 0) return n.toLowerCase(Locale.ROOT); // IPv6 literal: kept for the refusal
        String ascii;
        try {
            ascii = IDN.toASCII(n, IDN.USE_STD3_ASCII_RULES);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("'" + name + "' is not a valid host name");
        }
        ascii = ascii.toLowerCase(Locale.ROOT);
        if (ascii.length() > 253 || ascii.isEmpty() || ascii.startsWith(".") || ascii.endsWith(".") || ascii.contains(".."))
            throw new IllegalArgumentException("'" + name + "' is not a valid host name");
        for (String label : ascii.split("\\.")) {
            if (label.isEmpty() || label.length() > 63 || !label.matches("[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?"))
                throw new IllegalArgumentException("'" + name + "' is not a valid host name");
        }
        return ascii;
    }

    /**
     * Whether a normalised name is an address rather than a name: an IPv6 literal, or a last label that starts
     * with a digit (every IPv4 spelling a resolver accepts, {@code 127.1}, {@code 2130706433}, {@code 0x7f.0.0.1},
     * ends that way, and no top-level domain does).
     */
    public static boolean isIpLiteral(String normalized) {
        if (normalized.startsWith("[") || normalized.indexOf(':') >= 0) return true;
        int dot = normalized.lastIndexOf('.');
        String last = normalized.substring(dot + 1);
        return !last.isEmpty() && Character.isDigit(last.charAt(0));
    }
}
