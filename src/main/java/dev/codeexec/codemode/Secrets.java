package dev.codeexec.codemode;

import tools.jackson.databind.json.JsonMapper;

import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The credential values of UPSTREAM_MCP_FILE, and the one place that takes them out of text from an upstream before
 * it reaches sandboxed code or a caller: tool lists, results, error messages, the reason a server is unavailable.
 * An upstream (or a proxy in front of it) may answer with what it was sent, headers included, so nothing an upstream
 * says is passed on unscrubbed ({@link Upstreams} is the boundary).
 *
 * <p>Decisions. What counts as secret: every value a {@code ${VAR}} resolved to, wherever in the file (the file's
 * documented way to keep a secret out of it), every value of {@code headers} and the credential after its scheme
 * ({@code Bearer TOKEN} gives {@code TOKEN} too; headers are how an HTTP upstream is given credentials, even when
 * written literally), and a URL's user info and query values. A literal {@code env}, {@code args} or {@code command}
 * value is not: it is configuration that results may rightly contain (a files server's root). A value shorter than
 * {@link #MIN_LENGTH} is not scrubbed: too short to be a credential, and taking it out of every result would garble
 * them. Each secret is also looked for as JSON escapes it (with and without {@code \/}) and URL-encoded, the forms an
 * echo of a request most likely takes. Longer forms go first, so a secret inside another is never half replaced.
 */
public final class Secrets {

    /** Values shorter than this are not treated as secrets. */
    static final int MIN_LENGTH = 6;
    /** What a secret is replaced with. */
    static final String MASK = "[redacted]";
    public static final Secrets NONE = new Secrets(List.of());
    private static final JsonMapper JSON = JsonMapper.shared();

    private final List<String> forms;

    private Secrets(List<String> forms) {
        this.forms = forms;
    }

    /** The secrets among {@code values}, with the forms they may take in an echo. */
    static Secrets of(Collection<String> values) {
        Set<String> forms = new LinkedHashSet<>();
        for (String v : values) {
            if (v == null || v.length() < MIN_LENGTH) continue;
            forms.add(v);
            String json = JSON.writeValueAsString(v);
            forms.add(json.substring(1, json.length() - 1));
            forms.add(json.substring(1, json.length() - 1).replace("/", "\\/"));
            forms.add(URLEncoder.encode(v, StandardCharsets.UTF_8));
            forms.add(URLEncoder.encode(v, StandardCharsets.UTF_8).replace("+", "%20"));
        }
        List<String> sorted = new ArrayList<>(forms);
        sorted.sort(Comparator.comparingInt(String::length).reversed());
        return new Secrets(List.copyOf(sorted));
    }

    /** The credential part of a header value: what follows its scheme ({@code Bearer}, {@code Basic}, ...), if any. */
    static List<String> headerValue(String value) {
        String v = value.strip();
        int sp = v.indexOf(' ');
        return sp < 0 ? List.of(v) : List.of(v, v.substring(sp + 1).strip());
    }

    /** {@code text} with every secret replaced by {@link #MASK}; null stays null. */
    public String scrub(String text) {
        if (text == null || forms.isEmpty()) return text;
        String out = text;
        for (String f : forms) if (out.contains(f)) out = out.replace(f, MASK);
        return out;
    }

    /** A JSON value (maps, lists, strings, numbers, ...) with every string in it, keys too, scrubbed. */
    public Object scrubJson(Object value) {
        if (forms.isEmpty()) return value;
        return switch (value) {
            case String s -> scrub(s);
            case Map<?, ?> m -> {
                Map<Object, Object> out = new LinkedHashMap<>();
                for (Map.Entry<?, ?> e : m.entrySet()) out.put(scrubJson(e.getKey()), scrubJson(e.getValue()));
                yield out;
            }
            case List<?> l -> {
                List<Object> out = new ArrayList<>(l.size());
                for (Object x : l) out.add(scrubJson(x));
                yield out;
            }
            case null, default -> value;
        };
    }

    /** Never the values: how many forms are looked for. */
    @Override
    public String toString() {
        return "Secrets[" + forms.size() + " forms]";
    }
}
