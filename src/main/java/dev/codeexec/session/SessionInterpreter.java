package dev.codeexec.session;

import dev.codeexec.codemode.CodeTools;
import dev.codeexec.config.Ids;
import dev.codeexec.egress.EgressChannel;
import dev.codeexec.egress.EgressChannels;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.egress.RunSecrets;
import dev.codeexec.engine.RunEnd;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.lang.Language;
import dev.codeexec.lang.Placeholders;
import dev.codeexec.packages.PackageStore;
import dev.codeexec.run.EgressStart;
import dev.codeexec.run.PackageInstalls;
import dev.codeexec.sandbox.ControlChannel;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.sandbox.SandboxException;
import dev.codeexec.sandbox.SandboxProcess;
import dev.codeexec.sandbox.SandboxSpec;
import dev.codeexec.sandbox.Termination;
import dev.codeexec.sandbox.WorkDirOwner;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.Workspaces;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * A session's interpreter (the language's {@code session} row in languages.json) in a sandbox that lives across
 * calls, and its lifecycle: started and ready, then used by calls one at a time, until it ends by itself (a limit,
 * a crash, {@code exit()}) or the server kills it (reset, close, idle expiry, shutdown). Its stdout and stderr are
 * drained for its whole life and cut into calls by markers ({@link MarkerSplitter}); its control channel carries
 * the calls and their answers (docs/interpreter-protocol.md). What one call does with it is {@link SessionCall}'s.
 *
 * <p>The sandbox's memory and process limits hold for the interpreter's whole life (its cgroup); each call gets a
 * fresh CPU budget through the soft limit, under a hard limit that bounds the whole life
 * ({@link #LIFETIME_CPU_CALLS}), and a file-size cap as soft and hard limit both, like a run's (the space left under
 * its workspace's quota, which the code cannot raise).
 */
final class SessionInterpreter {

    /** How long the interpreter may take to start and say it is ready. */
    static final Duration START_TIMEOUT = Duration.ofSeconds(30);
    /** CPU seconds the interpreter may spend starting, on top of the limit the calls get. */
    static final int START_CPU_SECONDS = 30;
    /**
     * A session's interpreter may use this many times the per-call CPU limit over its whole life (the hard
     * RLIMIT_CPU, which cannot be raised again without privileges); each call is cut at the per-call limit by the
     * soft limit, moved at every call.
     */
    static final int LIFETIME_CPU_CALLS = 20;

    /** What {@link #messages} holds after the last message: the control channel closed. */
    static final Object END = new Object();

    private static final Logger log = LoggerFactory.getLogger(SessionInterpreter.class);
    private static final JsonMapper JSON = JsonMapper.shared();
    /**
     * Platform threads: these block in reads of pipes and FIFOs for the session's whole life, and such reads pin a
     * virtual thread's carrier; a few idle sessions would starve every other virtual thread.
     */
    private static final ThreadFactory READERS = Thread.ofPlatform().name("session-io-", 0).daemon(true).factory();

    final SandboxProcess process;
    final Limits limits;
    private final ControlChannel control;
    final MarkerSplitter out;
    final MarkerSplitter err;
    /** The runner's answers, then {@link #END}. */
    final LinkedBlockingQueue<Object> messages = new LinkedBlockingQueue<>();
    volatile boolean ended;
    /** Why the server killed it on purpose (reset, close, idle, shutdown); null when it died by itself. */
    volatile String killedBecause;
    /** Keeps the session's workspace from expiring while the interpreter has it as its working directory. */
    private volatile Workspaces.Hold workspaceHold;
    /** The entry of the session's declared packages, held while this interpreter lives (released by discard). */
    volatile PackageStore.Lease packages;

    /** The interpreter's channel, when the session has network access or code tools; else null. */
    final EgressChannel egress;
    /**
     * The placeholder secrets in its environment (made at its start, new for each interpreter); its channel serves
     * every call with them.
     */
    final RunSecrets secrets;
    /** Its channel and tool library (closed with it). */
    private final EgressStart.Started link;

    private SessionInterpreter(SandboxProcess process, ControlChannel control, Limits limits, EgressStart.Started link,
            RunSecrets secrets) {
        this.link = link;
        this.secrets = secrets;
        this.egress = link.channel();
        this.process = process;
        this.control = control;
        this.limits = limits;
        this.out = new MarkerSplitter(process.stdout(), limits.outputBytes());
        this.err = new MarkerSplitter(process.stderr(), limits.outputBytes());
    }

    /**
     * Starts the interpreter and waits until it says it is ready.
     *
     * @param onEnd told (on a thread of {@code threads}) when the interpreter's channel closed: it ended, by itself
     *              or killed
     */
    static SessionInterpreter start(Sessions owner, SessionRef ref, Language language, Optional<Workspace> workspace,
            Limits callLimits, EgressPolicy egress, Map<String, String> sessionEnv, PackageStore.Lease packages, String ecosystem,
            Consumer<SessionInterpreter> onEnd) throws SandboxException {
        Language.Interpreter recipe = language.session()
                .orElseThrow(() -> new SandboxException(language.id() + " has no session interpreter"));
        Map<String, String> ph = owner.placeholders();
        Map<String, String> env = new LinkedHashMap<>();
        String runId = "ses-" + Ids.hex(8);
        CodeTools codeTools = owner.codeTools().orElse(null);
        EgressChannels channels = egress.isOff() && codeTools == null ? null : owner.egress().orElseThrow(() -> new SandboxException(
                "network access is off on this server (EGRESS=off)"));
        env.putAll(language.environment(sessionEnv, ph));
        recipe.env().forEach((k, v) -> env.put(k, Placeholders.fill(v, ph)));
        Limits limits = new Limits(callLimits.timeout(),
                callLimits.cpuSeconds() * LIFETIME_CPU_CALLS + START_CPU_SECONDS, callLimits.memoryBytes(),
                callLimits.maxProcesses(), callLimits.outputBytes(), callLimits.diskBytes(), callLimits.drainBytes());
        SandboxSpec spec = SandboxSpec.builder(runId, Placeholders.fill(recipe.argv(), ph), Placeholders.WORK_DIR,
                limits)
                .readOnlyDirs(List.of(Path.of(ph.get("runtimeDir")))).env(env)
                .workDirSource(workspace.map(w -> w.fs().root()))
                .previewDir(owner.previewRoot().map(r -> r.resolve(ref.previewKey()))).build()
                .withControl(false).withWorkDirOwner(workspace.isPresent() ? workspace.get()::handOver : WorkDirOwner.NONE);
        if (packages != null) spec = PackageInstalls.mount(spec, ecosystem, packages);
        // placeholders for the secrets its allow-list reaches, for the interpreter's life (a restart makes new ones)
        RunSecrets secrets = channels == null ? RunSecrets.NONE : channels.secretsFor(egress, ref.tenant());
        // the channel serves nothing until a call arms it: a session has network only while a call runs
        EgressStart.Started started = EgressStart.start(owner.sandbox(), spec, channels, EgressPolicy.OFF, ref.tenant(),
                codeTools, null, secrets);
        SandboxProcess p = started.process();
        SessionInterpreter ip;
        try {
            ip = new SessionInterpreter(p, p.control().orElseThrow(() -> new SandboxException("no control channel")),
                    limits, started, secrets);
        } catch (SandboxException | RuntimeException e) {
            p.close();
            started.closeLink();
            throw e;
        }
        ip.startReaders(owner.threads(), onEnd);
        try {
            Object first = ip.messages.poll(START_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            if (first instanceof JsonNode n && n.path("ready").asBoolean(false)) {
                ip.workspaceHold = workspace.map(Workspace::hold).orElse(null);
                ip.packages = packages;
                return ip;
            }
            String why = first == null ? "it did not become ready within " + START_TIMEOUT.toSeconds() + " s"
                    : first == END ? "it ended at start: " + ip.death() : "it sent an unexpected first message";
            // its last words, for the log: what it wrote before a marker was ever asked for (the reader may lag)
            Thread.sleep(100);
            String text = ip.err.idleText().strip();
            if (!text.isEmpty()) log.warn("session {}: interpreter failed to start: {}", ref.name(),
                    text.length() > 2000 ? text.substring(text.length() - 2000) : text);
            ip.discard();
            throw new SandboxException(why);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            ip.discard();
            throw new SandboxException("interrupted while the interpreter started");
        }
    }

    private void startReaders(ThreadFactory callbacks, Consumer<SessionInterpreter> onEnd) {
        READERS.newThread(out).start();
        READERS.newThread(err).start();
        READERS.newThread(() -> {
            readControl();
            callbacks.newThread(() -> onEnd.accept(this)).start();
        }).start();
    }

    private void readControl() {
        try {
            String line;
            while ((line = control.receive()) != null) {
                try {
                    JsonNode n = JSON.readTree(line);
                    if (n.isObject()) messages.add(n);
                } catch (JacksonException e) {
                    // the user's code can write to the channel too: a line that is not JSON is ignored
                }
            }
        } catch (IOException e) {
            // closed when discarded, or a line over the maximum: either way the interpreter is unusable
        }
        ended = true;
        messages.add(END);
    }

    /** Hands a call to the runner. */
    void send(Map<String, String> message) throws IOException {
        control.send(JSON.writeValueAsString(message));
    }

    /** Kills it on purpose; {@code because} is what the call in progress is told ("reset", ...). */
    void kill(String because) {
        killedBecause = because;
        process.kill();
    }

    /** Its wait status once it ended (waiting briefly for the sandbox to report), or null when unknown. */
    Termination termination() {
        try {
            process.waitFor(Duration.ofSeconds(5));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            return process.termination();
        } catch (RuntimeException e) {
            return null;
        }
    }

    /** Why it died by itself, in words for a client ("its memory limit of 512 MB was exceeded"). */
    String death() {
        Termination t = termination();
        return RunEnd.interpreterDeath(t, process.memoryLimitHit(), process.cpuLimitHit(), limits);
    }

    /** Closes its channel, kills what is left and releases its workspace. */
    void discard() {
        control.close();
        process.kill();
        process.close();
        link.closeLink();
        Workspaces.Hold h = workspaceHold;
        workspaceHold = null;
        if (h != null) h.close();
        PackageStore.Lease l = packages;
        packages = null;
        if (l != null) l.close();
    }

}
