package dev.codeexec.gateway;

import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigException;
import io.grpc.ChannelCredentials;
import io.grpc.ClientInterceptor;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.TlsChannelCredentials;
import io.grpc.stub.MetadataUtils;

import java.io.File;
import java.io.IOException;
import java.security.Security;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * How the gateway talks to workers: credentials (TLS from WORKER_TLS_CA, optional client certificate for mTLS,
 * plaintext only where it exposes nothing), the worker token on every call, keepalive, and the two balanced
 * channels over WORKERS: one spreading stateless runs over healthy workers by load, one pinning sessions by
 * consistent hashing. All checks run at construction, so a bad combination stops the start.
 */
final class WorkerChannels {

    static final String SERVICE = "codeexec.worker.v1.Worker";
    /** The ring_hash request hash header: same session key, same worker, at every gateway. */
    static final String SESSION_KEY_HEADER = "x-session-key";
    static final Metadata.Key<String> SESSION_KEY = Metadata.Key.of(SESSION_KEY_HEADER, Metadata.ASCII_STRING_MARSHALLER);
    private static final Metadata.Key<String> AUTHORIZATION =
            Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

    /** Largest message either way: a run's result carries its output and session figures. */
    static final int MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

    static {
        // ring_hash reads its request hash header only with this flag in grpc-java 1.85.1 (gRFC A76); without it
        // every session call fails INTERNAL. Read when a service config is parsed, so before the first channel.
        System.setProperty("GRPC_EXPERIMENTAL_RING_HASH_SET_REQUEST_HASH_KEY", "true");
    }

    final WorkersTarget target;
    private final ChannelCredentials credentials;
    private final boolean tls;
    private final Optional<ClientInterceptor> token;
    private final String balancing;

    WorkerChannels(Config config) {
        target = WorkersTarget.parse(config.get(Config.WORKERS));
        tls = !config.get(Config.WORKER_TLS_CA).isBlank();
        credentials = credentials(config, target);
        String t = config.get(Config.WORKER_TOKEN);
        if (t.isEmpty()) {
            token = Optional.empty();
        } else {
            Metadata md = new Metadata();
            md.put(AUTHORIZATION, "Bearer " + t);
            token = Optional.of(MetadataUtils.newAttachHeadersInterceptor(md));
        }
        balancing = config.get(Config.WORKER_BALANCING);
        StaticNameResolverProvider.register();
    }

    /**
     * The JDK caches DNS answers for 30 s by default (forever with a security manager): Kubernetes pods that come
     * and go behind a headless Service would be found late. grpc re-resolves when connections are recycled (the
     * worker's max connection age); these make that lookup see the change.
     */
    static void shortDnsCache() {
        Security.setProperty("networkaddress.cache.ttl", "1");
        // grpc's DNS resolver keeps its own cache and reads this as a *system* property (default 30 s): without it,
        // a re-resolution asked for by a recycled connection is skipped, and a new pod waits up to 30 s for work.
        System.setProperty("networkaddress.cache.ttl", "1");
        Security.setProperty("networkaddress.cache.negative.ttl", "1");
        System.setProperty("sun.net.inetaddr.ttl", "1");
    }

    private static ChannelCredentials credentials(Config config, WorkersTarget target) {
        String ca = config.get(Config.WORKER_TLS_CA);
        String cert = config.get(Config.WORKER_TLS_CERT);
        String key = config.get(Config.WORKER_TLS_KEY);
        if (cert.isBlank() != key.isBlank()) {
            throw new ConfigException("WORKER_TLS_CERT and WORKER_TLS_KEY go together: set both (a client "
                    + "certificate for mTLS) or neither");
        }
        if (ca.isBlank()) {
            if (!cert.isBlank()) {
                throw new ConfigException("WORKER_TLS_CERT is set but WORKER_TLS_CA is not: a gateway uses TLS to "
                        + "workers only with WORKER_TLS_CA (the roots workers' certificates chain to)");
            }
            if (!target.allLoopback() && !config.get(Config.WORKER_PLAINTEXT)) {
                throw new ConfigException("WORKERS " + target.target() + " is not on loopback: plaintext gRPC would "
                        + "expose code, output and WORKER_TOKEN on the network; set WORKER_TLS_CA (TLS to workers) "
                        + "or WORKER_PLAINTEXT=true (e.g. a cluster network guarded by a NetworkPolicy)");
            }
            return InsecureChannelCredentials.create();
        }
        try {
            TlsChannelCredentials.Builder b = TlsChannelCredentials.newBuilder().trustManager(certificates("WORKER_TLS_CA", ca));
            if (!cert.isBlank()) b.keyManager(certificates("WORKER_TLS_CERT", cert), readable("WORKER_TLS_KEY", key));
            return b.build();
        } catch (IOException | IllegalArgumentException e) {
            throw new ConfigException("WORKER_TLS_CA/WORKER_TLS_CERT/WORKER_TLS_KEY could not be loaded: " + e.getMessage());
        }
    }

    /**
     * grpc reads PEM files lazily, at the first connection: a wrong file would only show as failing runs. Parsing
     * here makes it a start-up error naming the key.
     */
    private static File certificates(String key, String path) {
        File f = readable(key, path);
        try (var in = new java.io.FileInputStream(f)) {
            if (java.security.cert.CertificateFactory.getInstance("X.509").generateCertificates(in).isEmpty()) {
                throw new ConfigException(key + " " + path + " holds no PEM certificate");
            }
        } catch (IOException | java.security.cert.CertificateException e) {
            throw new ConfigException(key + " " + path + " is not a PEM certificate file: " + e.getMessage());
        }
        return f;
    }

    private static File readable(String key, String path) {
        File f = new File(path);
        if (!f.canRead()) throw new ConfigException(key + " " + path + " is not a readable file");
        return f;
    }

    boolean tls() {
        return tls;
    }

    Optional<ClientInterceptor> token() {
        return token;
    }

    /**
     * Stateless runs: WORKER_BALANCING over workers that pass health checks, and a retry of Execute on
     * UNAVAILABLE / RESOURCE_EXHAUSTED / CANCELLED. grpc retries a call only until the first response message
     * arrives; a worker sends {@code accepted} before the run starts, so a retried run has never run anywhere.
     * CANCELLED before that is a worker going down with the call in hand (its server resets open streams); a
     * cancel of this gateway's own is never retried by grpc.
     */
    ManagedChannel stateless() {
        Map<String, Object> child = "least_request".equals(balancing)
                ? Map.of("least_request_experimental", Map.of("choiceCount", 2.0))
                // The worker reports load in each call's trailers (ORCA); out-of-band reports would come every 30 s.
                // No blackout: grpc's default (10 s) ignores a worker's weight for 10 s of reports after each new
                // connection, and workers recycle connections every WORKER_MAX_CONNECTION_AGE_SECONDS (30 s): each
                // worker's weight was off a third of the time or more, and a gateway connected a minute before its
                // load came spread it as plain round robin (13/13/13 where the 1-slot worker gets ~8 of 50). The
                // reports are smoothed on the worker, and a new connection does not make them less true.
                : Map.of("weighted_round_robin", Map.of("enableOobLoadReport", false, "blackoutPeriod", "0s"));
        String childName = child.keySet().iterator().next();
        String wrapped = HealthCheckedPolicyProvider.register(childName);
        Map<String, Object> serviceConfig = Map.of(
                "loadBalancingConfig", List.of(Map.of(wrapped, child.get(childName))),
                "healthCheckConfig", Map.of("serviceName", SERVICE),
                "methodConfig", executeRetry(5, "0.05s", "UNAVAILABLE", "RESOURCE_EXHAUSTED", "CANCELLED"));
        return balanced(serviceConfig);
    }

    /**
     * Session calls: ring_hash keyed by {@link #SESSION_KEY_HEADER}. The ring is built from the resolved addresses'
     * strings, so gateways with the same WORKERS string place every session on the same worker without talking to
     * each other. No health wrapper here: moving a session off a worker that is briefly not SERVING would start a
     * fresh interpreter elsewhere while the old one lives on; the call is refused instead.
     */
    ManagedChannel sessions() {
        Map<String, Object> serviceConfig = Map.of(
                "loadBalancingConfig", List.of(Map.of("ring_hash_experimental",
                        Map.of("requestHashHeader", SESSION_KEY_HEADER))),
                "methodConfig", executeRetry(3, "0.1s", "UNAVAILABLE"));
        return balanced(serviceConfig);
    }

    /**
     * grpc's retry policy for Execute: safe because a worker starts a run only after the gateway saw
     * {@code accepted}, and grpc never retries a call that has had a response.
     */
    private static List<Map<String, Object>> executeRetry(int maxAttempts, String initialBackoff, String... codes) {
        return List.of(Map.of(
                "name", List.of(Map.of("service", SERVICE, "method", "Execute")),
                "retryPolicy", Map.of(
                        "maxAttempts", (double) maxAttempts,
                        "initialBackoff", initialBackoff,
                        "maxBackoff", "1s",
                        "backoffMultiplier", 2.0,
                        "retryableStatusCodes", List.of(codes))));
    }

    private ManagedChannel balanced(Map<String, Object> serviceConfig) {
        ManagedChannelBuilder<?> b = Grpc.newChannelBuilder(target.target(), credentials)
                .defaultServiceConfig(serviceConfig)
                .disableServiceConfigLookUp()
                .enableRetry()
                .maxRetryAttempts(5)
                // Retried calls are buffered until committed: room for large code and stdin.
                .perRpcBufferLimit(16L * 1024 * 1024)
                .retryBufferSize(64L * 1024 * 1024);
        return common(b).build();
    }

    /** One worker alone (status polls, session listing): pick_first to that address. */
    ManagedChannel single(WorkersTarget.HostPort address, Optional<String> authority) {
        ManagedChannelBuilder<?> b = Grpc.newChannelBuilderForAddress(address.host(), address.port(), credentials);
        if (tls) authority.ifPresent(b::overrideAuthority);
        return common(b).build();
    }

    private ManagedChannelBuilder<?> common(ManagedChannelBuilder<?> b) {
        // A hung (SIGSTOPped) worker is noticed by keepalive within about 8 s; workers permit pings this often.
        b.keepAliveTime(5, TimeUnit.SECONDS)
                .keepAliveTimeout(3, TimeUnit.SECONDS)
                .keepAliveWithoutCalls(true)
                .maxInboundMessageSize(MAX_MESSAGE_BYTES);
        token.ifPresent(b::intercept);
        return b;
    }
}
