package dev.codeexec.session;

import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.SessionControl;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.lang.Language;
import dev.codeexec.run.PackageInstalls;
import dev.codeexec.engine.RunEnd;
import dev.codeexec.codemode.CodeTools;
import dev.codeexec.egress.EgressChannels;
import dev.codeexec.packages.PackageSet;
import dev.codeexec.packages.PackageStore;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.Workspaces;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadFactory;

/**
 * The stateful sessions of all tenants, keyed by (tenant, name), at most MAX_SESSIONS per tenant. A call is
 * checked here when submitted (language, arguments, limits) and run here once the executor gave it a slot, so
 * calls queue and count like runs. Sessions idle for SESSION_IDLE_SECONDS are ended by a sweeper.
 *
 * <p><b>Memory.</b> An idle session holds no slot, so without a bound of their own idle interpreters could hold
 * MAX_SESSIONS x MEMORY_LIMIT_MB per tenant. All sessions together are kept under SESSIONS_MEMORY_MB
 * ({@link #fitMemory}): each counts what its cgroup holds now (or MEMORY_LIMIT_MB where that cannot be measured).
 * The budget is shared by the tenants with sessions ({@link SessionMemory} has the rule): before an interpreter
 * starts, when it has started, after every call and at every sweep, idle sessions of tenants over their share are
 * ended, the longest idle first, until the rest fit, and each one's next call is told, as for a session that died
 * while idle; a tenant within its share loses none, and a tenant at or over its share is refused a new interpreter
 * when only those could make room. A session in a call is not ended: its call holds a slot and the memory limit of
 * a run.
 *
 * <p>The session types, and what each is for: {@link SessionRef} names a session (tenant + name; a request carries
 * it). {@code Sessions} (this) keeps every tenant's sessions and their rules (checks, limits, idle expiry, notices
 * of sessions that died while idle); it is the {@link SessionControl} that surfaces use to list, reset and close
 * them. {@link Session} is one session: which interpreter serves it now, and its life (start, end, reset).
 * {@link SessionInterpreter} is that interpreter: a sandbox that lives across calls, its streams and control
 * channel. {@link SessionCall} is one call: it waits for a slot like a run, then drives the exchange with the
 * interpreter (sent → interrupting → answered / lost / killed) into a result through {@link RunEnd}.
 */
public final class Sessions implements SessionControl {

    /** How many "ended while idle" notices are kept for sessions nobody called again. */
    private static final int MAX_NOTICES = 1000;

    private static final Logger log = LoggerFactory.getLogger(Sessions.class);

    private final Sandbox sandbox;
    private final Map<String, String> placeholders;
    private final ThreadFactory threads;
    private final int maxPerTenant;
    private final Duration idle;
    private final long memoryBudget;
    /** Held while sessions are ended for memory, so two threads never end more than needed. */
    private final Object fitting = new Object();
    private final Map<SessionRef, Session> sessions = new ConcurrentHashMap<>();
    /** Sessions whose interpreter died between calls: the next call is told why, once. Guarded by itself. */
    private final Map<SessionRef, String> notices = new LinkedHashMap<>(16, 0.75f, false) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<SessionRef, String> eldest) {
            return size() > MAX_NOTICES;
        }
    };
    private final Object create = new Object();
    private volatile boolean closed;
    private final Thread sweeper;
    private final Duration progressInterval;
    private final List<String> languages;
    private final Optional<EgressChannels> egress;
    private final Optional<CodeTools> codeTools;
    private final Optional<PackageInstalls> packages;

    /**
     * @param memoryBudget     bytes all sessions may hold together (SESSIONS_MEMORY_MB)
     * @param languages        the ids of the languages that have a session interpreter
     * @param progressInterval how long streamed output is gathered (PROGRESS_INTERVAL_MS)
     */
    public Sessions(Sandbox sandbox, Map<String, String> placeholders, ThreadFactory threads, int maxPerTenant, Duration idle,
            long memoryBudget, List<String> languages, Duration progressInterval) {
        this(sandbox, placeholders, threads, maxPerTenant, idle, memoryBudget, languages, progressInterval, Optional.empty(),
                Optional.empty(), Optional.empty());
    }

    /**
     * @param egress    the channels when EGRESS=on or the server has code tools: a session with network access or
     *                  code tools gets one
     * @param codeTools code mode, when configured: every session's interpreter gets the tool library, each call its
     *                  own endpoint
     * @param packages  declared packages, when runs can declare them: a session's interpreter gets its set's entry
     */
    public Sessions(Sandbox sandbox, Map<String, String> placeholders, ThreadFactory threads, int maxPerTenant, Duration idle,
            long memoryBudget, List<String> languages, Duration progressInterval, Optional<EgressChannels> egress,
            Optional<CodeTools> codeTools, Optional<PackageInstalls> packages) {
        this.packages = packages;
        this.egress = egress;
        this.codeTools = codeTools;
        this.sandbox = sandbox;
        this.placeholders = placeholders;
        this.threads = threads;
        this.maxPerTenant = maxPerTenant;
        this.idle = idle;
        this.memoryBudget = memoryBudget;
        this.languages = List.copyOf(languages);
        this.progressInterval = progressInterval;
        this.sweeper = Thread.ofVirtual().name("session-sweeper").unstarted(this::sweep);
        if (maxPerTenant > 0) sweeper.start();
    }

    Sandbox sandbox() {
        return sandbox;
    }

    Optional<EgressChannels> egress() {
        return egress;
    }

    Optional<CodeTools> codeTools() {
        return codeTools;
    }

    Optional<PackageInstalls> packages() {
        return packages;
    }

    /** Where sessions' preview directories go (DATA_DIR/previews); empty: sessions get no previews. */
    private volatile Optional<java.nio.file.Path> previewRoot = Optional.empty();

    /** Gives every session started from now on a preview directory under {@code root}. */
    public void previewsIn(java.nio.file.Path root) {
        previewRoot = Optional.of(root);
    }

    Optional<java.nio.file.Path> previewRoot() {
        return previewRoot;
    }

    Map<String, String> placeholders() {
        return placeholders;
    }

    ThreadFactory threads() {
        return threads;
    }

    Duration progressInterval() {
        return progressInterval;
    }

    /** The languages a session can run in. */
    public List<String> languages() {
        return languages;
    }

    public int maxPerTenant() {
        return maxPerTenant;
    }

    public Duration idleTimeout() {
        return idle;
    }

    public long memoryBudget() {
        return memoryBudget;
    }

    @Override
    public int count() {
        return sessions.size();
    }

    /**
     * Checks a request for a session when it is submitted, so what can never work fails at once with a clear
     * message; returns the call to run once a slot is free.
     */
    public SessionCall prepare(ExecutionRequest request, Language lang, OutputListener listener) {
        SessionRef ref = request.session().orElseThrow();
        if (maxPerTenant == 0)
            throw new ExecutionException.Unavailable("stateful sessions are turned off on this server (MAX_SESSIONS=0)");
        if (!sandbox.supportsControl())
            throw new ExecutionException.Unavailable("stateful sessions need the bwrap sandbox; this server runs code in '"
                    + sandbox.name() + "'. Run the code without 'session'.");
        try {
            Workspaces.checkName("session", ref.name());
        } catch (WorkspaceException e) {
            throw new ExecutionException.InvalidRequest(e.getMessage());
        }
        if (lang.session().isEmpty())
            throw new ExecutionException.InvalidRequest("sessions support " + naturalList(languages) + ", not '"
                    + lang.id() + "'; run " + lang.id() + " code without 'session'");
        if (!request.args().isEmpty())
            throw new ExecutionException.InvalidRequest("'args' cannot be used with 'session': a session's interpreter "
                    + "is already running; pass values in the code instead");
        if (!lang.session().get().stdin() && !request.stdin().isEmpty())
            throw new ExecutionException.InvalidRequest("'stdin' is not supported in " + lang.id() + " sessions");
        Session s = sessions.get(ref);
        if (s != null) {
            String mismatch = mismatch(s, lang, request);
            if (mismatch != null) throw new ExecutionException.InvalidRequest(mismatch);
        } else if (countOf(ref.tenant()) >= maxPerTenant) {
            throw new ExecutionException.InvalidRequest(limitMessage());
        }
        return new SessionCall(this, request, lang, listener);
    }

    /** "a", "a and b", "a, b and c". */
    static String naturalList(List<String> items) {
        if (items.size() <= 1) return String.join("", items);
        return String.join(", ", items.subList(0, items.size() - 1)) + " and " + items.getLast();
    }

    private String limitMessage() {
        return "this tenant already has " + maxPerTenant + " sessions, the most allowed (MAX_SESSIONS); end one with "
                + "session_close, or wait until an idle one ends after " + idle.toSeconds() + " s";
    }

    private static String mismatch(Session s, Language lang, ExecutionRequest request) {
        Optional<Workspace> ws = request.workspace();
        if (request.egressAsked() && !request.egress().equals(s.egress))
            return s.describe() + "; this call asks for network " + request.egress()
                    + ". A session keeps the network access it was created with: call without 'network', or "
                    + "session_close it (or use another session name) to start one with the new policy.";
        if (request.packages().isPresent() && !request.packages().equals(s.packages()))
            return s.describe() + "; this call declares packages " + request.packages().get().specs()
                    + ". A session keeps the packages it was created with: call without 'packages' to use them, or "
                    + "call session_reset with the new 'packages' (its state is lost), or use another session name.";
        if (!request.env().isEmpty() && !request.env().equals(s.env))
            return s.describe() + "; this call sets 'env' " + new java.util.TreeMap<>(request.env()).keySet()
                    + ". A session's environment is set when it is created (the first call's 'env'), for its "
                    + "interpreter and everything that starts: call without 'env' (or with the same), set os.environ / "
                    + "process.env in the code for what the code starts from now on, or session_close it and create it "
                    + "again with the new 'env'.";
        if (s.matches(lang, ws)) return null;
        return s.describe() + "; this call asks for " + lang.id() + " in "
                + ws.map(w -> "workspace '" + w.name() + "'").orElse("no workspace")
                + ". Use another session name, or session_close this one first.";
    }

    private int countOf(String tenant) {
        int n = 0;
        for (SessionRef r : sessions.keySet()) if (r.tenant().equals(tenant)) n++;
        return n;
    }

    /** Runs a call on the thread of the slot it holds: finds or creates its session and runs the code in it. */
    ExecutionResult execute(SessionCall call) {
        SessionRef ref = call.ref();
        for (int attempt = 0; attempt < 5; attempt++) {
            Session s;
            synchronized (create) {
                if (closed) return call.failedToStart("the server is shutting down");
                String notice;
                synchronized (notices) {
                    notice = notices.remove(ref);
                }
                if (notice != null) return call.notice(notice);
                s = sessions.get(ref);
                if (s == null) {
                    if (countOf(ref.tenant()) >= maxPerTenant) return call.failedToStart(limitMessage());
                    s = new Session(this, ref, call.language(), call.request().workspace(), call.request().limits(),
                            call.request().egress(), call.request().packages(), call.request().env());
                    sessions.put(ref, s);
                } else {
                    String mismatch = mismatch(s, call.language(), call.request());
                    if (mismatch != null) return call.failedToStart(mismatch);
                }
            }
            ExecutionResult r = s.call(call);
            if (r != null) {
                fitMemory();
                return r;
            }
        }
        return call.failedToStart("the session kept ending while this call waited for it; try again");
    }

    /** A session's interpreter ended between calls: its next call gets this notice. */
    void endedWhileIdle(SessionRef ref, String notice) {
        log.info("session tenant={} name={}: {}", ref.tenant(), ref.name(), notice);
        synchronized (notices) {
            notices.put(ref, notice);
        }
    }

    void forget(Session s) {
        sessions.remove(s.ref, s);
    }

    /**
     * Ends idle sessions of tenants over their share until all sessions' memory fits SESSIONS_MEMORY_MB
     * ({@link SessionMemory} has the rule). Each session is measured once per pass; one in a call, or whose lock is
     * taken, is passed over (it is not idle).
     */
    void fitMemory() {
        fitMemory(null);
    }

    /**
     * {@link #fitMemory()} when {@code starting} (busy, its lock held by the caller) is about to start an
     * interpreter: the room must be below the budget, and a tenant at or over its share is refused rather than given
     * room from tenants within theirs. Returns why it is refused, or empty.
     */
    Optional<String> fitMemory(Session starting) {
        synchronized (fitting) {
            Optional<String> tenant = Optional.ofNullable(starting).map(s -> s.ref.tenant());
            SessionMemory.Plan<Session> plan;
            boolean allEnded;
            int passes = 0;
            do { // a session chosen may have started a call meanwhile: then measure again and choose anew
                List<SessionMemory.Holding<Session>> holdings = new ArrayList<>();
                for (Session s : sessions.values())
                    holdings.add(new SessionMemory.Holding<>(s, s.ref.tenant(), s.memoryCharge(), !s.busy && s != starting,
                            s.lastUsed));
                plan = SessionMemory.plan(holdings, memoryBudget, tenant);
                allEnded = true;
                for (SessionMemory.Ending<Session> e : plan.toEnd()) {
                    Session s = e.holding().key();
                    if (!s.endIfIdle(Instant.MAX, "ended to free memory")) {
                        allEnded = false;
                        continue;
                    }
                    endedWhileIdle(s.ref, s.idleNotice("the server needed its memory: all sessions together may hold "
                            + RunEnd.mb(memoryBudget) + " (SESSIONS_MEMORY_MB), an equal share of "
                            + SessionMemory.mb(e.share()) + " for each of the " + e.tenants() + " tenants with sessions; "
                            + "this tenant's held " + SessionMemory.mb(e.tenantBytes()) + ", over its share, and this "
                            + "session was its one unused longest"));
                    sessions.remove(s.ref, s);
                }
            } while (!allEnded && ++passes < 3);
            return plan.refusal();
        }
    }

    @Override
    public List<SessionInfo> list(String tenant) {
        List<SessionInfo> out = new ArrayList<>();
        for (Session s : sessions.values()) {
            if (!s.ref.tenant().equals(tenant)) continue;
            out.add(new SessionInfo(s.ref.name(), s.language.id(), s.workspace.map(Workspace::name), s.created,
                    s.lastUsed, s.memoryBytes(), s.calls.get(), s.busy));
        }
        out.sort(Comparator.comparing(SessionInfo::name));
        return out;
    }

    @Override
    public boolean reset(String tenant, String name) {
        Session s = sessions.get(new SessionRef(tenant, name));
        return s != null && s.stop("reset", true);
    }

    /**
     * A reset that also changes the session's packages ({@code set}; empty: none): the new set is installed first,
     * so that a set that cannot be installed leaves the session as it was and the caller learns why.
     */
    @Override
    public boolean reset(String tenant, String name, Optional<dev.codeexec.packages.PackageSet> set) {
        Session s = sessions.get(new SessionRef(tenant, name));
        if (s == null) return false;
        if (set.isPresent() && PackageSet.ecosystemOf(s.language.id()) != null
                && !set.get().ecosystem().equals(PackageSet.ecosystemOf(s.language.id())))
            throw new ExecutionException.InvalidRequest("session '" + name + "' runs " + s.language.id()
                    + ", which takes " + PackageSet.ecosystemOf(s.language.id()) + " packages");
        if (set.isPresent()) {
            PackageInstalls installs = packages.orElseThrow(() -> new ExecutionException.InvalidRequest(
                    "'packages' cannot be used on this server: declared packages are unavailable"));
            try (PackageStore.Lease ignored = installs.acquire(set.get(), s.launchLimits(), tenant)) {
                return s.stop("reset", true, set);
            } catch (PackageStore.InstallFailed e) {
                throw new ExecutionException.InvalidRequest("the session was not reset: its new packages could not be "
                        + "installed: " + e.getMessage());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new ExecutionException.InvalidRequest("the session was not reset: the wait for its new packages "
                        + "was interrupted");
            }
        }
        return s.stop("reset", true, set);
    }

    @Override
    public boolean close(String tenant, String name) {
        Session s = sessions.remove(new SessionRef(tenant, name));
        if (s == null) return false;
        s.stop("closed", false);
        return true;
    }

    private void sweep() {
        long every = Math.max(50, Math.min(1000, idle.toMillis() / 4));
        while (!closed) {
            try {
                Thread.sleep(every);
            } catch (InterruptedException e) {
                return;
            }
            Instant cutoff = Instant.now().minus(idle);
            for (Session s : sessions.values()) {
                if (s.endIfIdle(cutoff, "closed after being idle")) {
                    sessions.remove(s.ref, s);
                    log.info("session tenant={} name={} ended after {} s idle", s.ref.tenant(), s.ref.name(),
                            idle.toSeconds());
                }
            }
            fitMemory();
        }
    }

    /** Ends every session (server shutdown); a call still running ends as cancelled. */
    public void closeAll() {
        synchronized (create) {
            closed = true;
        }
        sweeper.interrupt();
        List<Session> all = new ArrayList<>(sessions.values());
        sessions.clear();
        for (Session s : all) s.stop("ended (the server is shutting down)", false);
    }
}
