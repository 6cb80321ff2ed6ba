package dev.codeexec.surface;

import dev.codeexec.config.Config;
import dev.codeexec.config.DataDir;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.JobControl;
import dev.codeexec.engine.JobHandle;
import dev.codeexec.engine.JobState;
import dev.codeexec.engine.PreviewAddress;
import dev.codeexec.engine.PreviewControl;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.sandbox.SandboxSpec;

import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * The port previews of this server: which token reaches which port of which session's or background job's sandbox,
 * for whom ({@code expose_port}, {@code unexpose_port}; the preview listener asks {@link #find}). A preview lives
 * while its sandbox does and at most PREVIEW_MAX_AGE_HOURS: a preview whose session or job has ended is gone (its
 * token then finds nothing, as a wrong one). Kept in memory: previews end with the server, as their sandboxes do.
 *
 * <p>The token is the capability: 24 random bytes (192 bits) in lowercase hex, 48 characters: a DNS label as it is
 * (browsers lowercase host names, so the host form {@code {token}.PREVIEW_DOMAIN} needs a token without capitals). A
 * {@code key} preview also asks for the tenant's API key on every request (the listener checks it).
 */
public final class Previews implements PreviewControl {

    /** How long a liveness check of a preview's sandbox holds (each request does not ask the engine). */
    static final Duration CHECK_EVERY = Duration.ofSeconds(1);

    private static final SecureRandom RANDOM = new SecureRandom();

    private final Executor executor;
    private final Supplier<Optional<JobControl<?>>> jobs;
    private final Path root;
    private final Duration maxAge;
    private final int perSandbox;
    private final PreviewAddress address;
    private final String tokenPrefix;
    private final Clock clock;
    private final Map<String, Preview> byToken = new ConcurrentHashMap<>();
    private final Map<String, Instant> checked = new ConcurrentHashMap<>();
    public Previews(Config config, Executor executor, Supplier<Optional<JobControl<?>>> jobs, Clock clock) {
        this(config, executor, jobs, clock, "");
    }

    /**
     * @param tokenPrefix what tokens start with (a worker's: its instance id's first 16 hex digits, which route a
     *                    gateway's requests to it), the rest random
     */
    public Previews(Config config, Executor executor, Supplier<Optional<JobControl<?>>> jobs, Clock clock,
            String tokenPrefix) {
        this.executor = executor;
        this.jobs = jobs;
        this.root = DataDir.of(config).previews();
        this.maxAge = Duration.ofHours(config.get(Config.PREVIEW_MAX_AGE_HOURS));
        this.perSandbox = config.get(Config.PREVIEW_MAX_PER_SANDBOX);
        this.tokenPrefix = tokenPrefix;
        this.clock = clock;
        this.address = new PreviewAddress(Optional.of(config.get(Config.PREVIEW_DOMAIN)),
                config.get(Config.PREVIEWS).equals("off") ? "port previews are off on this server (PREVIEWS=off)" : null);
    }

    @Override
    public PreviewAddress address() {
        return address;
    }

    /**
     * Makes (or returns the existing) preview of {@code port} in the tenant's session or job.
     *
     * @throws ExecutionException.InvalidRequest no such live session or running job, a bad port, too many previews
     * @throws ExecutionException.Unavailable    previews are off or cannot be served here
     */
    @Override
    public Preview expose(String tenant, Sandbox sandbox, int port, boolean key) {
        Optional<String> unavailable = address.unavailableReason();
        if (unavailable.isPresent()) throw new ExecutionException.Unavailable(unavailable.get());
        if (port < 1 || port > 65535) throw new ExecutionException.InvalidRequest("'port' must be 1 to 65535");
        Path socket = socketOf(tenant, sandbox).orElseThrow(() -> new ExecutionException.InvalidRequest(
                sandbox.kind() == Kind.SESSION ? "no session '" + sandbox.name() + "' (session_list shows yours)"
                        : "no running job '" + sandbox.name() + "' (a preview needs a job that runs: job_list shows yours)"));
        synchronized (this) {
            List<Preview> mine = list(tenant, sandbox);
            for (Preview p : mine) if (p.port() == port && p.key() == key) return p;
            if (mine.size() >= perSandbox)
                throw new ExecutionException.InvalidRequest("the " + sandbox.label() + " has " + mine.size()
                        + " previews, the most one may have (PREVIEW_MAX_PER_SANDBOX): unexpose_port one first");
            byte[] b = new byte[24];
            RANDOM.nextBytes(b);
            String token = tokenPrefix + java.util.HexFormat.of().formatHex(b).substring(tokenPrefix.length());
            Instant now = clock.instant();
            Preview p = new Preview(token, tenant, sandbox, port,
                    key, now, now.plus(maxAge), socket);
            byToken.put(p.token(), p);
            checked.put(p.token(), now);
            return p;
        }
    }

    /**
     * {@inheritDoc}
     */
    @Override
    public int unexpose(String tenant, Optional<Sandbox> sandbox, Optional<String> token, Optional<Integer> port) {
        int n = 0;
        List<Preview> mine = sandbox.map(sb -> list(tenant, sb)).orElseGet(() -> byToken.values().stream()
                .filter(p -> p.tenant().equals(tenant)).toList());
        for (Preview p : mine) {
            boolean match = token.map(p.token()::equals).orElse(false) || port.map(x -> x == p.port()).orElse(false);
            if (match && byToken.remove(p.token()) != null) n++;
        }
        return n;
    }

    @Override
    public List<Preview> list(String tenant, Sandbox sandbox) {
        List<Preview> out = new ArrayList<>();
        for (Preview p : List.copyOf(byToken.values())) {
            if (p.tenant().equals(tenant) && p.sandbox().equals(sandbox) && live(p)) out.add(p);
        }
        out.sort(java.util.Comparator.comparing(Preview::createdAt));
        return out;
    }

    @Override
    public Optional<Preview> find(String token) {
        Preview p = token == null ? null : byToken.get(token);
        return p != null && live(p) ? Optional.of(p) : Optional.empty();
    }

    /** Whether the preview has not expired and its sandbox still runs; an ended one is forgotten. */
    private boolean live(Preview p) {
        Instant now = clock.instant();
        boolean ok = now.isBefore(p.expiresAt());
        if (ok) {
            Instant last = checked.get(p.token());
            if (last == null || Duration.between(last, now).compareTo(CHECK_EVERY) >= 0) {
                ok = socketOf(p.tenant(), p.sandbox()).filter(p.socket()::equals).isPresent();
                if (ok) checked.put(p.token(), now);
            }
        }
        if (!ok) {
            byToken.remove(p.token());
            checked.remove(p.token());
        }
        return ok;
    }

    /**
     * The preview socket of the tenant's live session or running job, or empty when there is none. A session's
     * directory is named by the session (its interpreter restarts keep it), a job's by its run.
     */
    private Optional<Path> socketOf(String tenant, Sandbox sandbox) {
        if (sandbox.kind() == Kind.SESSION) {
            boolean alive = executor.sessions().list(tenant).stream().anyMatch(s -> s.name().equals(sandbox.name()));
            return alive ? Optional.of(root.resolve(new SessionRef(tenant, sandbox.name()).previewKey())
                    .resolve(SandboxSpec.PREVIEW_SOCKET)) : Optional.empty();
        }
        Optional<? extends JobHandle> job = jobs.get().flatMap(j -> j.find(Optional.of(tenant), sandbox.name()));
        if (job.isEmpty() || !(job.get() instanceof dev.codeexec.job.Job local)) return Optional.empty();
        if (!local.state().status().equals(JobState.RUNNING)) return Optional.empty();
        return local.runId().map(id -> root.resolve(id).resolve(SandboxSpec.PREVIEW_SOCKET));
    }
}
