package dev.codeexec.egress;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArraySet;

/**
 * What a tunnel to a secret's host ({@link SecretTunnel}) does to the text it relays. In a request head each
 * placeholder of a secret for this host becomes the real value: in clear, and inside Basic credentials
 * ({@link BasicCredentials}: decoded, swapped, encoded again), where git and pip put a token given in a URL. A
 * placeholder of a secret that is not for this host is {@link NotAllowed}. In what comes back every real value of
 * the run's secrets becomes its placeholder again, and so does each Basic credential this tunnel encoded with a
 * value in it (a server that echoes the request's headers would otherwise hand the program the value in base64).
 * It remembers the names of the secrets it put in ({@link #applied}).
 */
final class PlaceholderSwap {

    /** Basic credentials remembered for scrubbing: the latest, which the responses on their way echo. */
    private static final int ENCODED_KEPT = 64;

    /** A placeholder of a secret that may not go to this host. */
    static final class NotAllowed extends Exception {
        private final transient RunSecrets.Placeholder placeholder;

        NotAllowed(RunSecrets.Placeholder placeholder) {
            super("the placeholder of " + placeholder.name() + " is not for this host", null, false, false);
            this.placeholder = placeholder;
        }

        RunSecrets.Placeholder placeholder() {
            return placeholder;
        }
    }

    private final RunSecrets secrets;
    private final String host;
    private final int port;
    /** Read by the channel's thread that ends the run while the tunnel may still add to it. */
    private final Set<String> applied = new CopyOnWriteArraySet<>();
    /** Base64 of Basic credentials as the host got them (with a value) → as the program wrote them. */
    private final Map<String, String> encoded = new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
            return size() > ENCODED_KEPT;
        }
    };

    PlaceholderSwap(RunSecrets secrets, String host, int port) {
        this.secrets = secrets;
        this.host = host;
        this.port = port;
    }

    /** The names of the secrets put in so far. */
    Set<String> applied() {
        return applied;
    }

    /** {@code text} (a request line, a field's value) with each placeholder of a secret for this host swapped. */
    String text(String text) throws NotAllowed {
        if (!text.contains(RunSecrets.PREFIX)) return text;
        String out = text;
        for (RunSecrets.Placeholder p : secrets.placeholders()) {
            if (!out.contains(p.placeholder())) continue;
            if (!p.secret().isFor(host, port)) throw new NotAllowed(p);
            out = out.replace(p.placeholder(), p.secret().value());
            applied.add(p.name());
        }
        return out;
    }

    /** A request header field's value swapped: in clear, or inside its Basic credentials. */
    String field(String name, String value) throws NotAllowed {
        if (BasicCredentials.carriesCredentials(name)) {
            Optional<String> userPass = BasicCredentials.userPass(value);
            if (userPass.isPresent() && userPass.get().contains(RunSecrets.PREFIX)) {
                String swapped = text(userPass.get());
                if (!swapped.equals(userPass.get())) {
                    String out = BasicCredentials.basic(swapped);
                    encoded.put(token(out), token(value));
                    return out;
                }
            }
        }
        return text(value);
    }

    /** Every real value of the run's secrets, and every Basic credential encoded here, replaced by what the program sent. */
    String scrub(String text) {
        String out = text;
        for (Map.Entry<String, String> e : encoded.entrySet()) out = out.replace(e.getKey(), e.getValue());
        for (RunSecrets.Placeholder p : secrets.placeholders()) out = out.replace(p.secret().value(), p.placeholder());
        return out;
    }

    byte[] scrub(byte[] body) {
        byte[] out = body;
        for (Map.Entry<String, String> e : encoded.entrySet())
            out = SecretTunnel.replace(out, e.getKey().getBytes(StandardCharsets.US_ASCII), e.getValue().getBytes(StandardCharsets.US_ASCII));
        for (RunSecrets.Placeholder p : secrets.placeholders())
            out = SecretTunnel.replace(out, p.secret().value().getBytes(StandardCharsets.UTF_8), p.placeholder().getBytes(StandardCharsets.US_ASCII));
        return out;
    }

    /** The base64 of a {@code Basic X} value: X. */
    private static String token(String basic) {
        return basic.strip().substring("basic".length()).strip();
    }
}
