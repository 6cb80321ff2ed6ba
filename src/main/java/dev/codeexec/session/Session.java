package dev.codeexec.session;

import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.lang.Language;
import dev.codeexec.packages.PackageSet;
import dev.codeexec.packages.PackageStore;
import dev.codeexec.run.PackageInstalls;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.sandbox.SandboxException;
import dev.codeexec.workspace.Workspace;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Instant;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One named session of a tenant: which interpreter serves it now ({@link SessionInterpreter}), and the rules of its
 * life. Calls are serialized by a fair lock and run by {@link SessionCall}. An interpreter that dies ends the
 * session: the call in progress ends with the reason; if it died between calls, the next call is told once why
 * (without running its code), and the call after that starts a new session. {@link #stop} (reset, close, shutdown)
 * and {@link #endIfIdle} (idle expiry, memory) end it on purpose.
 */
public final class Session {

    private static final Logger log = LoggerFactory.getLogger(Session.class);

    private final Sessions owner;
    final SessionRef ref;
    final Language language;
    final Optional<Workspace> workspace;
    private final Limits launchLimits;
    private final ReentrantLock lock = new ReentrantLock(true);
    volatile Instant created = Instant.now();
    volatile Instant lastUsed = created;
    final AtomicLong calls = new AtomicLong();
    volatile boolean busy;
    /** The running interpreter; null before the first call and after it ended. Written under the lock. */
    private volatile SessionInterpreter proc;
    /** Set under the lock when the session was forgotten; a call that then gets the lock asks for a new one. */
    private boolean closed;
    /** Set by close before it waits for the lock, so calls queued behind it do not start a new interpreter here. */
    private volatile boolean closing;

    /**
     * What the session's interpreter may reach, fixed when the session was created; each call gets this under its
     * caller's allow-list as it is then ({@link #egressFor}).
     */
    final EgressPolicy egress;

    /** The packages its interpreter gets: fixed when the session was created, changed only by a reset. */
    private volatile Optional<PackageSet> packages;

    /** The creating call's 'env': the interpreter's environment (on top of the language's), for the session's life. */
    final java.util.Map<String, String> env;

    Session(Sessions owner, SessionRef ref, Language language, Optional<Workspace> workspace, Limits launchLimits,
            EgressPolicy egress, Optional<PackageSet> packages, java.util.Map<String, String> env) {
        this.env = java.util.Map.copyOf(env);
        this.packages = packages;
        this.egress = egress;
        this.owner = owner;
        this.ref = ref;
        this.language = language;
        this.workspace = workspace;
        this.launchLimits = launchLimits;
    }

    /** Memory of the session's sandbox now. */
    OptionalLong memoryBytes() {
        SessionInterpreter ip = proc;
        return ip == null || ip.ended ? OptionalLong.empty() : ip.process.memoryBytes();
    }

    /**
     * What the session counts against SESSIONS_MEMORY_MB: its sandbox's memory now, or its memory limit where that
     * cannot be measured; nothing while it has no interpreter.
     */
    long memoryCharge() {
        SessionInterpreter ip = proc;
        if (ip == null || ip.ended) return 0;
        return ip.process.memoryBytes().orElse(ip.limits.memoryBytes());
    }

    boolean matches(Language lang, Optional<Workspace> ws) {
        return lang.id().equals(language.id()) && ws.map(Workspace::name).equals(workspace.map(Workspace::name));
    }

    String describe() {
        return "session '" + ref.name() + "' runs " + language.id() + " in " + workspace.map(w -> "workspace '" + w.name() + "'")
                .orElse("no workspace") + " with network " + egress
                + packages.map(p -> " and packages " + p.specs()).orElse(" and no declared packages");
    }

    Optional<PackageSet> packages() {
        return packages;
    }

    Limits launchLimits() {
        return launchLimits;
    }

    /** Runs one call; null when the session was forgotten before the call got its turn (the caller asks anew). */
    ExecutionResult call(SessionCall call) {
        try {
            lock.lockInterruptibly();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return call.cancelledBeforeStart();
        }
        try {
            if (closed || closing) return null;
            busy = true;
            lastUsed = Instant.now();
            if (call.cancelled()) return call.cancelledBeforeStart();
            SessionInterpreter ip = proc;
            if (ip != null && ip.ended && ip.killedBecause == null) {
                String why = ip.death();
                forget(ip);
                return call.notice(idleNotice(why));
            }
            boolean created = false;
            if (ip == null || ip.ended) {
                if (ip != null) ip.discard();
                proc = null;
                Optional<String> noRoom = owner.fitMemory(this);
                if (noRoom.isPresent()) {
                    closed = true;
                    owner.forget(this);
                    return call.failedToStart(noRoom.get());
                }
                try {
                    ip = start(call);
                } catch (SandboxException e) {
                    closed = true;
                    owner.forget(this);
                    return call.failedToStart("the session's interpreter could not be started: " + e.getMessage());
                } catch (InterruptedException e) {
                    return call.cancelledBeforeStart(); // cancelled while its packages were installed: kept as it was
                }
                proc = ip;
                calls.set(0);
                created = true;
                owner.fitMemory(); // measured now: this session is busy, so others are ended if needed
            }
            calls.incrementAndGet();
            SessionCall.Done done = call.run(ip, created, workspace, egressFor(call.request()));
            PackageStore.Lease lease = ip.packages;
            if (done.sessionEnds()) forget(ip);
            else if (done.interpreterGone()) {
                ip.discard();
                proc = null;
            }
            return lease == null ? done.result() : done.result().withPackages(
                    new ExecutionResult.PackagesUsed(lease.resolved(), created ? lease.installMs() : 0));
        } finally {
            busy = false;
            lastUsed = Instant.now();
            lock.unlock();
        }
    }

    /**
     * The network of one call: the session's policy within what its caller may reach now. The request carries the
     * caller's allow-list as the surface computed it for this call from the key it presented (the key file is
     * re-read when it changes), so a tenant whose egress was narrowed or revoked gets that at its session's next
     * call, never more than the session was created with.
     */
    EgressPolicy egressFor(ExecutionRequest request) {
        return egress.intersect(request.egress());
    }

    /**
     * Starts the interpreter, with its packages' entry (installed first when the store does not have it).
     *
     * @param call the call that needs the interpreter, whose cancel ends a wait for the install; null for a reset
     *             (which installed the set already)
     * @throws InterruptedException {@code call} was cancelled while it waited for the install
     */
    private SessionInterpreter start(SessionCall call) throws SandboxException, InterruptedException {
        Optional<PackageSet> set = packages;
        PackageStore.Lease lease = null;
        if (set.isPresent()) {
            PackageInstalls installs = owner.packages().orElseThrow(() -> new SandboxException("declared packages are unavailable"));
            SessionCall.Install install = () -> installs.acquire(set.get(), launchLimits, ref.tenant());
            try {
                lease = call == null ? install.acquire() : call.whileInstalling(install);
            } catch (PackageStore.InstallFailed e) {
                throw new SandboxException("its packages could not be installed: " + e.getMessage());
            }
        }
        try {
            return SessionInterpreter.start(owner, ref, language, workspace, launchLimits, egress, env, lease,
                    set.map(PackageSet::ecosystem).orElse(null), this::endedByItself);
        } catch (SandboxException | RuntimeException e) {
            if (lease != null) lease.close();
            throw e;
        }
    }

    String idleNotice(String why) {
        return "session '" + ref.name() + "' ended while idle: " + why
                + ". Its state is gone; the next call starts a new session.";
    }

    /** Under the lock: the interpreter ended by itself; the session is removed. */
    private void forget(SessionInterpreter ip) {
        ip.discard();
        proc = null;
        closed = true;
        owner.forget(this);
    }

    /** Called when an interpreter's control channel closed: if no call is running, the session ends now. */
    private void endedByItself(SessionInterpreter ip) {
        if (ip.killedBecause != null || !lock.tryLock()) return;
        try {
            if (closed || proc != ip) return;
            String why = ip.death();
            forget(ip);
            owner.endedWhileIdle(ref, idleNotice(why));
        } finally {
            lock.unlock();
        }
    }

    /**
     * Kills the interpreter (a running call ends at once) for {@code because}, then, with the lock, either starts a
     * fresh one (reset) or marks the session closed. Returns false when it was already closed.
     */
    boolean stop(String because, boolean restart) {
        return stop(because, restart, packages);
    }

    /** {@link #stop(String, boolean)}; a restart gets {@code newPackages}. */
    boolean stop(String because, boolean restart, Optional<PackageSet> newPackages) {
        if (!restart) closing = true;
        SessionInterpreter running = proc;
        if (running != null) running.kill(because);
        lock.lock();
        try {
            if (closed) return false;
            SessionInterpreter ip = proc;
            if (ip != null) {
                ip.killedBecause = because;
                ip.discard();
            }
            proc = null;
            calls.set(0);
            if (!restart) {
                closed = true;
                return true;
            }
            created = Instant.now();
            packages = newPackages;
            try {
                proc = start(null);
            } catch (SandboxException e) {
                log.warn("session {}: restart after reset failed: {}", ref.name(), e.getMessage());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                log.warn("session {}: restart after reset interrupted", ref.name());
            }
            return true;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Ends the session if it is idle (no call, its lock free) and was last used before {@code cutoff}; true when it
     * did. {@code because} is what a call that raced in would be told.
     */
    boolean endIfIdle(Instant cutoff, String because) {
        if (busy || !lastUsed.isBefore(cutoff) || lock.isHeldByCurrentThread() || !lock.tryLock()) return false;
        try {
            if (closed || busy || !lastUsed.isBefore(cutoff)) return false;
            SessionInterpreter ip = proc;
            if (ip != null) {
                ip.kill(because);
                ip.discard();
            }
            proc = null;
            closed = true;
            return true;
        } finally {
            lock.unlock();
        }
    }
}
