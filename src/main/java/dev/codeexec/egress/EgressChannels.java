package dev.codeexec.egress;

import dev.codeexec.config.Ids;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * Opens {@link EgressChannel}s for sandboxes, each on a socket of its own in DATA_DIR/egress (0711: a sandbox's
 * launcher reaches its own socket by name, no one lists them; each socket is 0600 and given to one sandbox's uid).
 * Also says what a run with egress gets in its environment.
 */
public final class EgressChannels {

    /** A unix socket's path must fit in sun_path (108 bytes with its NUL). */
    private static final int MAX_SOCKET_PATH = 107;
    /** Inside the sandbox, when EGRESS_CA_FILE is set: the system's certificates plus the operator's. */
    static final String CA_BUNDLE_IN_SANDBOX = "/run/codeexec/ca-bundle.pem";
    /** Inside the sandbox, when EGRESS_CA_FILE is set: the operator's certificates alone (Node adds them to its own). */
    static final String EXTRA_CA_IN_SANDBOX = "/run/codeexec/extra-ca.pem";
    /** Inside the sandbox: the preload that sends Node's fetch through the proxy. */
    static final String NODE_PRELOAD_IN_SANDBOX = "/run/codeexec/egress-node.js";
    private static final Path SYSTEM_CA_BUNDLE = Path.of("/etc/ssl/certs/ca-certificates.crt");

    private final EgressSettings settings;
    private final EgressDecision.Resolver resolver;
    private final Path dir;
    private final Optional<Path> caBundle;
    private final Path nodePreload;
    private final Optional<Path> extraCa;
    private final EgressSecrets secrets;
    private final Interception interception;

    private EgressChannels(EgressSettings settings, Path dir, Optional<Path> caBundle, Optional<Path> extraCa,
            Path nodePreload, EgressSecrets secrets, Interception interception) {
        this.settings = settings;
        this.extraCa = extraCa;
        this.secrets = secrets;
        this.interception = interception;
        this.resolver = EgressDecision.resolver(settings);
        this.dir = dir;
        this.caBundle = caBundle;
        this.nodePreload = nodePreload;
    }

    /**
     * The channels of a server with egress on, or empty when egress is off.
     *
     * @param dir         DATA_DIR/egress
     * @param nodePreload the host file of engine/codeexec_egress_node.js
     * @throws IOException the directory or the CA bundle cannot be made, or DATA_DIR is too long for a socket path
     */
    public static Optional<EgressChannels> of(EgressSettings settings, Path dir, Path nodePreload) throws IOException {
        return of(settings, dir, nodePreload, false);
    }

    /**
     * @param forLocalService channels are needed even with egress off: a local endpoint (code mode) travels on them;
     *                        their proxy then refuses every connection
     */
    public static Optional<EgressChannels> of(EgressSettings settings, Path dir, Path nodePreload, boolean forLocalService)
            throws IOException {
        return of(settings, dir, nodePreload, forLocalService, EgressSecrets.NONE, null);
    }

    /**
     * @param secrets EGRESS_SECRETS_FILE's: what runs get placeholders for ({@link #secretsFor})
     * @param interception how the proxy opens a secret's host's tunnels (null without secrets): runs trust its CA
     *                     besides the system's certificates and EGRESS_CA_FILE's
     */
    public static Optional<EgressChannels> of(EgressSettings settings, Path dir, Path nodePreload, boolean forLocalService,
            EgressSecrets secrets, Interception interception) throws IOException {
        if (!(settings.enabled() || forLocalService) || settings.unavailable().isPresent()) return Optional.empty();
        Files.createDirectories(dir);
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx--x--x"));
        if (dir.toAbsolutePath().toString().length() + 1 + 16 + 5 > MAX_SOCKET_PATH)
            throw new IOException("DATA_DIR is too long for the egress proxy's unix sockets (" + dir + ")");
        Optional<Path> bundle = Optional.empty();
        Optional<Path> extra = settings.caFile();
        if (interception != null) {
            // the operator's certificates and the secrets CA's, for Node (NODE_EXTRA_CA_CERTS takes one file)
            Path e = dir.resolve("extra-ca.pem");
            Files.writeString(e, (extra.isPresent() ? Files.readString(extra.get()) + "\n" : "") + interception.ca().certificatePem());
            Files.setPosixFilePermissions(e, PosixFilePermissions.fromString("rw-r--r--"));
            extra = Optional.of(e);
        }
        if (extra.isPresent()) {
            // one file with both, for the tools that read only the system bundle (OpenSSL, Python, curl, git, pip)
            Path b = dir.resolve("ca-bundle.pem");
            String all = (Files.isReadable(SYSTEM_CA_BUNDLE) ? Files.readString(SYSTEM_CA_BUNDLE) : "") + "\n" + Files.readString(extra.get());
            Files.writeString(b, all);
            Files.setPosixFilePermissions(b, PosixFilePermissions.fromString("rw-r--r--"));
            bundle = Optional.of(b);
        }
        return Optional.of(new EgressChannels(settings, dir, bundle, extra, nodePreload, secrets, interception));
    }

    public EgressSettings settings() {
        return settings;
    }

    /**
     * The secrets a run of {@code tenant} with {@code policy} gets placeholders for (none when its allow-list
     * reaches none of their hosts); the run's channel takes them with {@link EgressChannel#useSecrets}.
     */
    public RunSecrets secretsFor(EgressPolicy policy, String tenant) {
        return settings.enabled() && interception != null ? secrets.forRun(policy, tenant).with(interception) : RunSecrets.NONE;
    }

    /** A new channel on a socket of its own, serving {@code policy} until {@link EgressChannel#arm armed} again. */
    public EgressChannel open(EgressPolicy policy, String tenant, String runId) throws IOException {
        return EgressChannel.open(settings, resolver, dir.resolve(Ids.hex(8) + ".sock"),
                policy, tenant, runId);
    }

    /**
     * The variables a run with egress gets, so pip, npm, curl, git, requests, urllib and Node's fetch use the
     * proxy unchanged (Node 20's fetch through the preload the run's NODE_OPTIONS names, see languages.json).
     */
    public Map<String, String> environment() {
        Map<String, String> env = new LinkedHashMap<>();
        for (String k : new String[] {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"})
            env.put(k, EgressChannel.PROXY_URL);
        env.put("NO_PROXY", "localhost,127.0.0.1");
        env.put("no_proxy", "localhost,127.0.0.1");
        env.put("NODE_USE_ENV_PROXY", "1"); // Node 24+ (and 22.21+): fetch and http follow HTTP(S)_PROXY
        env.put("NODE_OPTIONS", "--require " + NODE_PRELOAD_IN_SANDBOX); // older Node: the preload does it
        if (caBundle.isPresent()) {
            env.put("NODE_EXTRA_CA_CERTS", EXTRA_CA_IN_SANDBOX);
            env.put("SSL_CERT_FILE", CA_BUNDLE_IN_SANDBOX);
            env.put("REQUESTS_CA_BUNDLE", CA_BUNDLE_IN_SANDBOX);
            env.put("CURL_CA_BUNDLE", CA_BUNDLE_IN_SANDBOX);
            env.put("PIP_CERT", CA_BUNDLE_IN_SANDBOX);
            env.put("GIT_SSL_CAINFO", CA_BUNDLE_IN_SANDBOX);
            env.put("NPM_CONFIG_CAFILE", CA_BUNDLE_IN_SANDBOX);
        }
        return env;
    }

    /** Files a run with egress gets read-only: path inside the sandbox → host path (Node's preload, the CA files). */
    public Map<String, Path> readOnlyFiles() {
        if (caBundle.isEmpty()) return Map.of(NODE_PRELOAD_IN_SANDBOX, nodePreload);
        return Map.of(NODE_PRELOAD_IN_SANDBOX, nodePreload, CA_BUNDLE_IN_SANDBOX, caBundle.get(),
                EXTRA_CA_IN_SANDBOX, extraCa.get());
    }
}
