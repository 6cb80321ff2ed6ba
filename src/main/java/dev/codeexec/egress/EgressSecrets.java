package dev.codeexec.egress;

import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigException;
import dev.codeexec.config.EnvRefs;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;
import java.util.regex.Pattern;

/**
 * The secrets an operator lets runs use without holding them (EGRESS_SECRETS_FILE):
 *
 * <pre>{@code
 * {"GITHUB_TOKEN": {"value": "${GITHUB_TOKEN}", "hosts": ["api.github.com"], "tenants": ["team-a"]}}
 * }</pre>
 *
 * <p>A run whose allow-list reaches one of a secret's hosts, and whose tenant may use it, gets the variable in its
 * environment with a placeholder of its own ({@link RunSecrets}); the proxy puts the real value in place of the
 * placeholder on the way to those hosts only. Decisions: a name is an environment variable name; {@code ${VAR}} in
 * the value comes from the server's environment when the file is read (an unset variable stops the start, naming
 * the secret and the variable, never a value); {@code hosts} are patterns as EGRESS_ALLOW's; {@code tenants}
 * absent: every tenant. Unknown fields are refused, so that a typo in {@code tenants} cannot give a secret to
 * everyone. {@link #toString} never shows a value.
 *
 * <p>A server that only lists the secrets (a gateway: its workers hold the values and make the placeholders) reads
 * the same file with {@link #listing}: checked as strictly, but {@code value} is never expanded nor kept, so it needs
 * none of the variables.
 */
public final class EgressSecrets {

    /** No secrets (no file). */
    public static final EgressSecrets NONE = new EgressSecrets(List.of());

    private static final Pattern NAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,127}");
    private static final Set<String> FIELDS = Set.of("value", "hosts", "tenants", "description");
    /** Variables the server sets in a run with egress itself: a secret may not take their place. */
    private static final Set<String> RESERVED = Set.of("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY",
            "all_proxy", "NO_PROXY", "no_proxy", "NODE_USE_ENV_PROXY", "NODE_OPTIONS", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE",
            "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO", "NPM_CONFIG_CAFILE", "PATH", "HOME",
            "LANG", "TMPDIR", "PYTHONPATH", "NODE_PATH");

    /**
     * One secret.
     *
     * @param name    the environment variable a run gets its placeholder in
     * @param value   the real value, which only the proxy uses
     * @param hosts   where the proxy puts it in place of the placeholder
     * @param tenants who may use it; empty: everyone
     */
    public record Secret(String name, String value, List<HostPattern> hosts, Optional<Set<String>> tenants) {

        public Secret {
            hosts = List.copyOf(hosts);
            tenants = tenants.map(Set::copyOf);
        }

        /** Whether a connection to this normalised name and port is one of the secret's hosts. */
        public boolean isFor(String host, int port) {
            for (HostPattern h : hosts) if (h.matches(host, port)) return true;
            return false;
        }

        /** Whether a run of {@code tenant} with {@code policy} may use it: its tenant's, and a host within reach. */
        boolean reachableBy(EgressPolicy policy, String tenant) {
            return reaches(hosts, tenants, policy, tenant);
        }

        /** The hosts as written. */
        public List<String> hostPatterns() {
            return hosts.stream().map(HostPattern::toString).toList();
        }

        @Override
        public String toString() {
            return "Secret[" + name + " for " + hostPatterns() + "]";
        }
    }

    /**
     * A secret as a listing shows it: what the file declares, without the value.
     *
     * @param description the file's {@code description}, empty when it has none
     */
    public record Declared(String name, String description, List<HostPattern> hosts, Optional<Set<String>> tenants) {

        public Declared {
            hosts = List.copyOf(hosts);
            tenants = tenants.map(Set::copyOf);
        }

        /** The hosts as written. */
        public List<String> hostPatterns() {
            return hosts.stream().map(HostPattern::toString).toList();
        }
    }

    /** The secrets of the file without their values: what runtime_info and code-exec://info show a caller. */
    public record Listing(List<Declared> declared) {

        /** No file. */
        public static final Listing NONE = new Listing(List.of());

        public Listing {
            declared = List.copyOf(declared);
        }

        public boolean isEmpty() {
            return declared.isEmpty();
        }

        /**
         * The secrets a run of {@code tenant} with {@code policy} gets a placeholder for: the same choice as
         * {@link EgressSecrets#forRun}.
         */
        public List<Declared> forRun(EgressPolicy policy, String tenant) {
            if (policy.isOff()) return List.of();
            return declared.stream().filter(d -> reaches(d.hosts(), d.tenants(), policy, tenant)).toList();
        }
    }

    private final List<Secret> secrets;

    private EgressSecrets(List<Secret> secrets) {
        this.secrets = List.copyOf(secrets);
    }

    public List<Secret> secrets() {
        return secrets;
    }

    public boolean isEmpty() {
        return secrets.isEmpty();
    }

    /**
     * The secrets of this configuration: {@link #NONE} without EGRESS_SECRETS_FILE.
     *
     * @throws ConfigException a bad file, an unset variable, or the file without EGRESS=on
     */
    public static EgressSecrets of(Config config) {
        Optional<Path> file = file(config);
        return file.isEmpty() ? NONE : read(file.get(), System::getenv);
    }

    /**
     * The secrets of this configuration without their values ({@link Listing#NONE} without EGRESS_SECRETS_FILE): the
     * file checked as {@link #of} checks it, except that {@code ${VAR}} in a value is neither expanded nor needed.
     *
     * @throws ConfigException a bad file, or the file without EGRESS=on
     */
    public static Listing listing(Config config) {
        Optional<Path> file = file(config);
        if (file.isEmpty()) return Listing.NONE;
        return parseListing(text(file.get()));
    }

    /** Parses the file's text without expanding or keeping any value (see {@link #listing}). */
    public static Listing parseListing(String text) {
        return new Listing(entries(text).stream().map(Entry::declared).toList());
    }

    private static Optional<Path> file(Config config) {
        String file = config.get(Config.EGRESS_SECRETS_FILE);
        if (file.isBlank()) return Optional.empty();
        if (!config.get(Config.EGRESS).equals("on"))
            throw new ConfigException("EGRESS_SECRETS_FILE is set but EGRESS is off: placeholder secrets travel through the "
                    + "egress proxy; set EGRESS=on");
        return Optional.of(Path.of(file));
    }

    /** Reads {@code file} (EGRESS_SECRETS_FILE); {@code env} resolves {@code ${VAR}}. Any problem: a ConfigException. */
    public static EgressSecrets read(Path file, Function<String, String> env) {
        return parse(text(file), env);
    }

    private static String text(Path file) {
        try {
            return Files.readString(file);
        } catch (IOException e) {
            throw new ConfigException("EGRESS_SECRETS_FILE " + file + " cannot be read: " + e.getMessage());
        }
    }

    /** Parses the file's text; see the class comment for the format. */
    public static EgressSecrets parse(String text, Function<String, String> env) {
        List<Secret> out = new ArrayList<>();
        for (Entry e : entries(text)) {
            Declared d = e.declared();
            String where = "EGRESS_SECRETS_FILE secret \"" + d.name() + "\"";
            String value = EnvRefs.expand(e.value(), where, env);
            if (value.isEmpty()) throw new ConfigException(where + ": the value is empty");
            if (value.indexOf('\r') >= 0 || value.indexOf('\n') >= 0 || value.indexOf(0) >= 0)
                throw new ConfigException(where + ": the value holds a line break or a NUL, which no header may carry");
            out.add(new Secret(d.name(), value, d.hosts(), d.tenants()));
        }
        return new EgressSecrets(out);
    }

    /** One secret of the file as written: its value not yet expanded. */
    private record Entry(Declared declared, String value) {
    }

    /** Every check but those of an expanded value. */
    private static List<Entry> entries(String text) {
        JsonNode root;
        try {
            root = JsonMapper.shared().readTree(text);
        } catch (JacksonException e) {
            String m = e.getOriginalMessage();
            throw new ConfigException("EGRESS_SECRETS_FILE is not valid JSON: " + (m == null ? "" : m.lines().findFirst().orElse("")));
        }
        if (root == null || !root.isObject())
            throw new ConfigException("EGRESS_SECRETS_FILE must be an object: {\"NAME\": {\"value\": \"${VAR}\", \"hosts\": [...]}, ...}");
        List<Entry> out = new ArrayList<>();
        for (Map.Entry<String, JsonNode> e : root.properties()) {
            String name = e.getKey();
            JsonNode s = e.getValue();
            String where = "EGRESS_SECRETS_FILE secret \"" + name + "\"";
            if (!NAME.matcher(name).matches())
                throw new ConfigException(where + ": a name must be an environment variable name (letters, digits and _, "
                        + "not starting with a digit)");
            if (RESERVED.contains(name)) throw new ConfigException(where + ": the server sets " + name + " itself");
            if (!s.isObject()) throw new ConfigException(where + ": must be an object with \"value\" and \"hosts\"");
            for (String field : s.propertyNames())
                if (!FIELDS.contains(field))
                    throw new ConfigException(where + ": unknown field \"" + field + "\" (known: value, hosts, tenants, description)");
            JsonNode v = s.path("value");
            if (!v.isString()) throw new ConfigException(where + ": \"value\" must be a string, such as \"${" + name + "}\"");
            if (v.asString().isEmpty()) throw new ConfigException(where + ": the value is empty");
            JsonNode h = s.path("hosts");
            if (!h.isArray() || h.isEmpty())
                throw new ConfigException(where + ": \"hosts\" must be a non-empty list of host patterns, as in EGRESS_ALLOW");
            List<HostPattern> hosts = new ArrayList<>();
            for (JsonNode x : h) {
                if (!x.isString()) throw new ConfigException(where + ": \"hosts\" must be a list of strings");
                try {
                    hosts.add(HostPattern.parse(x.asString()));
                } catch (IllegalArgumentException ex) {
                    throw new ConfigException(where + ": " + ex.getMessage());
                }
            }
            JsonNode description = s.path("description");
            if (!description.isMissingNode() && !description.isString())
                throw new ConfigException(where + ": \"description\" must be a string");
            out.add(new Entry(new Declared(name, description.isMissingNode() ? "" : description.asString(), hosts,
                    tenants(s, where)), v.asString()));
        }
        return out;
    }

    /**
     * The secrets a run of {@code tenant} with {@code policy} gets, each with a fresh placeholder; none when its
     * policy reaches none of their hosts.
     */
    public RunSecrets forRun(EgressPolicy policy, String tenant) {
        if (secrets.isEmpty() || policy.isOff()) return RunSecrets.NONE;
        List<Secret> mine = new ArrayList<>();
        for (Secret s : secrets) if (s.reachableBy(policy, tenant)) mine.add(s);
        return mine.isEmpty() ? RunSecrets.NONE : RunSecrets.of(mine);
    }

    /** Whether a run of {@code tenant} with {@code policy} may use a secret: its tenant's, and a host within reach. */
    private static boolean reaches(List<HostPattern> hosts, Optional<Set<String>> tenants, EgressPolicy policy, String tenant) {
        if (tenants.isPresent() && !tenants.get().contains(tenant)) return false;
        for (HostPattern allowed : policy.allow())
            for (HostPattern h : hosts) if (allowed.intersection(h).isPresent()) return true;
        return false;
    }

    private static Optional<Set<String>> tenants(JsonNode s, String where) {
        JsonNode v = s.path("tenants");
        if (v.isMissingNode()) return Optional.empty();
        if (!v.isArray()) throw new ConfigException(where + ": \"tenants\" must be a list of strings");
        Set<String> out = new LinkedHashSet<>();
        for (JsonNode x : v) {
            if (!x.isString() || x.asString().isBlank())
                throw new ConfigException(where + ": \"tenants\" must be a list of non-empty strings");
            out.add(x.asString());
        }
        return Optional.of(out);
    }

    @Override
    public String toString() {
        return "EgressSecrets" + secrets;
    }
}
