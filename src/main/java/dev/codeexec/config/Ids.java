package dev.codeexec.config;

import java.security.SecureRandom;
import java.util.HexFormat;

/**
 * The server's one source of random ids and names: run ids, request ids, the names of sockets, directories and
 * temporary files, API keys. From one {@link SecureRandom}: a name a sandbox sees (its working directory's, its
 * socket's) or a key must not be guessable, and ids that are only unique cost nothing more this way.
 */
public final class Ids {

    private static final SecureRandom RANDOM = new SecureRandom();
    private static final HexFormat HEX = HexFormat.of();

    private Ids() {
    }

    /** {@code bytes} random bytes as twice as many lowercase hex digits. */
    public static String hex(int bytes) {
        return HEX.formatHex(bytes(bytes));
    }

    /** {@code n} random bytes (a secret's, such as an API key's). */
    public static byte[] bytes(int n) {
        byte[] b = new byte[n];
        RANDOM.nextBytes(b);
        return b;
    }
}
