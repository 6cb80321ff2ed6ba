package dev.codeexec.egress;

import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigException;

import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The server's egress configuration, checked at start: whether egress is on at all (EGRESS), the server's
 * allow-list (EGRESS_ALLOW), the address blocks the operator opens (EGRESS_ALLOW_CIDRS), names pinned to
 * addresses (EGRESS_RESOLVE), the per-run bounds, and the extra CA certificates runs with egress trust.
 *
 * @param enabled        EGRESS=on
 * @param serverPolicy   EGRESS_ALLOW: every tenant's list unless its key line carries its own
 * @param addresses      what resolved addresses the proxy refuses
 * @param pinned         EGRESS_RESOLVE: names answered from here instead of the host's resolver (the address
 *                       rules still apply)
 * @param maxConnections concurrent connections per run
 * @param maxBytes       bytes per run in each direction
 * @param connectTimeout connecting to the upstream
 * @param idleTimeout    a connection with no byte either way for this long is closed
 * @param caFile         EGRESS_CA_FILE: PEM certificates runs with egress trust besides the system's
 * @param unavailable    why this server cannot give runs egress at all, even with EGRESS=on (gVisor, no
 *                       sandbox); empty when it can
 * @param secrets        EGRESS_SECRETS_FILE without its values: what {@link #describe} lists for a caller (the
 *                       values, and so the placeholders, are the engine's: a gateway has only this)
 */
public record EgressSettings(boolean enabled, EgressPolicy serverPolicy, AddressRules addresses,
        Map<String, List<InetAddress>> pinned, int maxConnections, long maxBytes, Duration connectTimeout,
        Duration idleTimeout, Optional<Path> caFile, Optional<String> unavailable, EgressSecrets.Listing secrets) {

    /** Egress off: nothing leaves any run. */
    public static final EgressSettings OFF = new EgressSettings(false, EgressPolicy.OFF, new AddressRules(List.of()),
            Map.of(), 32, 1L << 30, Duration.ofSeconds(10), Duration.ofSeconds(60), Optional.empty(), Optional.empty(),
            EgressSecrets.Listing.NONE);

    public EgressSettings {
        pinned = Map.copyOf(pinned);
        caFile = caFile == null ? Optional.empty() : caFile;
        unavailable = unavailable == null ? Optional.empty() : unavailable;
        secrets = secrets == null ? EgressSecrets.Listing.NONE : secrets;
    }

    /**
     * The settings of this configuration.
     *
     * @throws ConfigException a bad pattern, block or pin, EGRESS_ALLOW without EGRESS=on, a CA file that cannot be
     *                         read, egress asked of a sandbox that cannot give it (gVisor, none), or a bad
     *                         EGRESS_SECRETS_FILE (read for its names only: no variable of a value is needed)
     */
    public static EgressSettings of(Config config) {
        boolean on = config.get(Config.EGRESS).equals("on");
        EgressPolicy server;
        try {
            server = EgressPolicy.parse(config.get(Config.EGRESS_ALLOW));
        } catch (IllegalArgumentException e) {
            throw new ConfigException("EGRESS_ALLOW: " + e.getMessage());
        }
        if (!on && !server.isOff())
            throw new ConfigException("EGRESS_ALLOW is set but EGRESS is off: set EGRESS=on to let runs reach the allowed hosts");
        List<Cidr> cidrs = new ArrayList<>();
        for (String c : config.get(Config.EGRESS_ALLOW_CIDRS).split(",")) {
            if (c.isBlank()) continue;
            try {
                cidrs.add(Cidr.parse(c));
            } catch (IllegalArgumentException e) {
                throw new ConfigException("EGRESS_ALLOW_CIDRS: " + e.getMessage());
            }
        }
        Map<String, List<InetAddress>> pins = new LinkedHashMap<>();
        for (String p : config.get(Config.EGRESS_RESOLVE).split(",")) {
            if (p.isBlank()) continue;
            String[] kv = p.strip().split("=", -1);
            try {
                if (kv.length != 2 || !kv[1].strip().matches("[0-9a-fA-F:.]+")) throw new IllegalArgumentException("x");
                String name = HostNames.normalize(kv[0]);
                pins.computeIfAbsent(name, k -> new ArrayList<>()).add(InetAddress.ofLiteral(kv[1].strip())); // never a lookup
            } catch (IllegalArgumentException e) {
                throw new ConfigException("EGRESS_RESOLVE: '" + p.strip() + "' must look like name=address");
            }
        }
        Optional<Path> ca = Optional.empty();
        String caText = config.get(Config.EGRESS_CA_FILE);
        if (!caText.isEmpty()) {
            Path f = Path.of(caText);
            if (!Files.isRegularFile(f) || !Files.isReadable(f))
                throw new ConfigException("EGRESS_CA_FILE " + caText + " cannot be read");
            ca = Optional.of(f.toAbsolutePath());
        }
        Optional<String> unavailable = Optional.empty();
        String sandbox = config.get(Config.SANDBOX);
        if (!sandbox.equals("bwrap")) {
            unavailable = Optional.of("egress is only available with SANDBOX=bwrap (this server runs SANDBOX=" + sandbox + ")");
            if (on) throw new ConfigException("EGRESS=on needs SANDBOX=bwrap: " + (sandbox.equals("gvisor")
                    ? "under gVisor the proxy's socket cannot be passed into the sandbox" : "SANDBOX=none has no network isolation to open"));
        }
        return new EgressSettings(on, server, new AddressRules(cidrs), pins, config.get(Config.EGRESS_MAX_CONNECTIONS),
                (long) config.get(Config.EGRESS_MAX_MB) << 20, Duration.ofMillis(config.get(Config.EGRESS_CONNECT_TIMEOUT_MS)),
                Duration.ofMillis(config.get(Config.EGRESS_IDLE_TIMEOUT_MS)), ca, unavailable, EgressSecrets.listing(config));
    }

    /**
     * The allow-list of a caller: its tenant's own ({@code egress=} in API_KEYS_FILE) when it has one, else the
     * server's; {@link EgressPolicy#OFF} when egress is off on this server.
     */
    public EgressPolicy policyFor(Optional<EgressPolicy> tenantOwn) {
        if (!enabled || unavailable.isPresent()) return EgressPolicy.OFF;
        return tenantOwn.orElse(serverPolicy);
    }

    /**
     * The policy of one call: the caller's whole list without {@code network}, nothing for {@code network: false},
     * or the patterns given, each of which must fall inside the caller's list.
     *
     * @param network {@code null} (not given), {@link Boolean}, or a list of pattern strings
     * @throws IllegalArgumentException a pattern that is bad or outside the caller's list, or another type
     */
    public EgressPolicy forCall(EgressPolicy caller, Object network) {
        if (network == null || Boolean.TRUE.equals(network)) return caller;
        if (Boolean.FALSE.equals(network)) return EgressPolicy.OFF;
        if (network instanceof List<?> list) {
            List<String> patterns = new ArrayList<>();
            for (Object o : list) {
                if (!(o instanceof String s)) throw new IllegalArgumentException("'network' must be false or a list of host patterns");
                patterns.add(s);
            }
            if (patterns.isEmpty()) return EgressPolicy.OFF;
            if (caller.isOff()) {
                String why = unavailable.orElse(enabled ? "your allow-list is empty" : "egress is off on this server (EGRESS=off)");
                throw new IllegalArgumentException("network pattern '" + patterns.get(0) + "' is not allowed: " + why);
            }
            return caller.narrow(patterns);
        }
        throw new IllegalArgumentException("'network' must be false or a list of host patterns");
    }

    /** The addresses EGRESS_RESOLVE pins this normalised name to, if any. */
    public Optional<List<InetAddress>> pinnedFor(String name) {
        return Optional.ofNullable(pinned.get(name));
    }

    /**
     * What runtime_info and code-exec://info show of a caller's policy; with EGRESS_SECRETS_FILE, {@code secrets}: the
     * placeholder secrets the caller's runs get with this policy (name, description, hosts; never a value).
     */
    public Map<String, Object> describe(EgressPolicy callerPolicy, String tenant) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("enabled", enabled && unavailable.isEmpty());
        m.put("allow", callerPolicy.patterns());
        if (unavailable.isPresent()) m.put("note", unavailable.get());
        else if (!enabled) m.put("note", "egress is off on this server: runs have no network (EGRESS=off)");
        else if (callerPolicy.isOff()) m.put("note", "your allow-list is empty: runs have no network");
        else {
            m.put("proxy", EgressChannel.PROXY_URL + " (HTTP_PROXY and HTTPS_PROXY are set in the run's environment)");
            m.put("howTo", "pass network: false or a narrower list of patterns to execute_code; code that ignores the proxy has no network");
            m.put("maxConnections", maxConnections);
            m.put("maxBytesEachWay", maxBytes);
            if (!secrets.isEmpty()) {
                List<Map<String, Object>> listed = new ArrayList<>();
                for (EgressSecrets.Declared d : secrets.forRun(callerPolicy, tenant)) {
                    Map<String, Object> e = new LinkedHashMap<>();
                    e.put("name", d.name());
                    if (!d.description().isEmpty()) e.put("description", d.description());
                    e.put("hosts", d.hostPatterns());
                    listed.add(e);
                }
                m.put("secrets", listed);
                m.put("secretsNote", "each is an environment variable of your runs holding a placeholder (cxs_...), not "
                        + "the secret: the proxy puts the real value in its place on the way to its hosts over https, and "
                        + "refuses it anywhere else; a run whose network does not reach its hosts, and a session, gets none");
            }
        }
        return m;
    }
}
