package dev.codeexec.egress;

import dev.codeexec.config.Ids;
import dev.codeexec.http1.RequestHead;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The secrets of one run (or of one session's interpreter, for all its calls): each {@link EgressSecrets.Secret}
 * with a placeholder made for this run alone, {@code cxs_} and 40 hex digits (160 random bits). The run's environment holds the placeholder
 * ({@link #environment}); its channel holds this object, so its proxy knows which placeholder stands for which
 * value and where it may go. A placeholder is worth nothing outside the run: no other run, and no host but the
 * secret's, ever sees it turned into the value. {@link #toString} names the secrets only.
 */
public final class RunSecrets {

    /** No secrets. */
    public static final RunSecrets NONE = new RunSecrets(List.of(), null);
    /** What every placeholder starts with: a reader of a log or a result knows it for what it is. */
    public static final String PREFIX = "cxs_";

    /** One secret of the run and its placeholder. */
    public record Placeholder(EgressSecrets.Secret secret, String placeholder) {
        public String name() {
            return secret.name();
        }

        @Override
        public String toString() {
            return "Placeholder[" + secret.name() + "]";
        }
    }

    private final List<Placeholder> placeholders;
    private final Interception interception;

    private RunSecrets(List<Placeholder> placeholders, Interception interception) {
        this.placeholders = List.copyOf(placeholders);
        this.interception = interception;
    }

    /** Fresh placeholders for these secrets. */
    static RunSecrets of(List<EgressSecrets.Secret> secrets) {
        List<Placeholder> out = new ArrayList<>();
        for (EgressSecrets.Secret s : secrets) out.add(new Placeholder(s, PREFIX + Ids.hex(20)));
        return new RunSecrets(out, null);
    }

    /** The same placeholders, with what the proxy opens their hosts' tunnels with. */
    RunSecrets with(Interception interception) {
        return isEmpty() ? this : new RunSecrets(placeholders, interception);
    }

    /** What the proxy opens a secret's host's tunnel with; null when it cannot (no CA: a test's channel). */
    Interception interception() {
        return interception;
    }

    public boolean isEmpty() {
        return placeholders.isEmpty();
    }

    public List<Placeholder> placeholders() {
        return placeholders;
    }

    /** What the run's environment gets: each secret's name with its placeholder. */
    public Map<String, String> environment() {
        Map<String, String> env = new LinkedHashMap<>();
        for (Placeholder p : placeholders) env.put(p.name(), p.placeholder());
        return env;
    }

    /** The secrets whose hosts include this normalised name and port: a connection there is intercepted. */
    public List<Placeholder> forHost(String host, int port) {
        List<Placeholder> out = new ArrayList<>(1);
        for (Placeholder p : placeholders) if (p.secret().isFor(host, port)) out.add(p);
        return out;
    }

    /** The first placeholder that {@code text} holds, if any. */
    public Optional<Placeholder> foundIn(String text) {
        if (placeholders.isEmpty() || !text.contains(PREFIX)) return Optional.empty();
        for (Placeholder p : placeholders) if (text.contains(p.placeholder())) return Optional.of(p);
        return Optional.empty();
    }

    /**
     * The first placeholder a request head holds: in clear in its text, or inside the Basic credentials of one of
     * its fields ({@link BasicCredentials}), where a token given in a URL travels in base64.
     */
    Optional<Placeholder> foundIn(String head, List<RequestHead.Field> fields) {
        Optional<Placeholder> clear = foundIn(head);
        if (clear.isPresent() || placeholders.isEmpty()) return clear;
        for (RequestHead.Field f : fields) {
            Optional<Placeholder> p = BasicCredentials.userPass(f).flatMap(this::foundIn);
            if (p.isPresent()) return p;
        }
        return Optional.empty();
    }

    @Override
    public String toString() {
        return "RunSecrets" + placeholders;
    }
}
