package dev.codeexec.warm;

import dev.codeexec.config.Ids;
import dev.codeexec.lang.Language;
import dev.codeexec.lang.Placeholders;
import dev.codeexec.sandbox.ControlChannel;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.SandboxException;
import dev.codeexec.sandbox.SandboxProcess;
import dev.codeexec.sandbox.SandboxSpec;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * TypeScript made JavaScript ahead of its run, so that a TypeScript run costs what a Node run does (issue 42): loading
 * Node's type stripper (WebAssembly) takes about 0.1 s of CPU in every new process, and the typescript package's
 * 9 MB more; a stripper that stays loaded answers a hello in about a millisecond. The run then gets the JavaScript
 * (the warm runner in its run message, a cold run as a read-only file named by CODE_EXEC_TS_JS) and loads neither.
 *
 * <p>Decisions:
 * <ul>
 * <li>One stripper per tenant, never shared: the stripper parses untrusted code, and what it answers runs in the next
 * run, so a stripper one tenant's source could subvert must not write another tenant's programs. Each is a sandbox like
 * a run's (the sandbox uid, no network, no workspace, the run's memory (at least {@link #MIN_MEMORY_BYTES}) and process
 * limits; a lifetime CPU budget of
 * {@link #LIFETIME_CPU_SECONDS}, after which it is started again), running engine/ts-strip-server.js on the language's
 * Node.</li>
 * <li>Bounded: at most {@link #MAX_STRIPPERS} at once (the least recently used idle one is stopped for a new tenant),
 * each stopped after {@link #IDLE} without a request. A source over {@link #MAX_SOURCE_BYTES} is left to the run.</li>
 * <li>Never in a run's way: a tenant's first TypeScript run starts its stripper in the background and runs as before
 * (the runner strips it itself); so does a run whose stripper is busy past {@link #WAIT_FOR_TURN}, or does not answer
 * within {@link #ANSWER_TIMEOUT} (the stripper is then stopped). A syntax error is always left to the run, whose
 * runner reports it with the TypeScript's lines as ever.</li>
 * <li>Only where the sandbox has control channels (bwrap): under gVisor the warm TypeScript runner loads both ahead
 * instead.</li>
 * </ul>
 */
public final class TypeScriptStrippers implements AutoCloseable {

    /** Strippers alive at once, one per tenant. */
    public static final int MAX_STRIPPERS = 4;
    /** A stripper without a request for this long is stopped. */
    public static final Duration IDLE = Duration.ofMinutes(10);
    /** Sources larger than this (UTF-8 bytes) are left to the run's own runner. */
    public static final int MAX_SOURCE_BYTES = 1 << 20;
    /** How long a run waits for its tenant's stripper to finish another run's request. */
    static final Duration WAIT_FOR_TURN = Duration.ofMillis(500);
    /** How long a stripper may take to answer; one that does not is stopped. */
    static final Duration ANSWER_TIMEOUT = Duration.ofSeconds(5);
    /** How long a stripper may take to start and say it is ready. */
    static final Duration READY_TIMEOUT = Duration.ofSeconds(30);
    /**
     * A stripper's memory limit at least (else the run's): the typescript package, loaded for a file with import or
     * export, takes about 150 MB; a server whose runs get less would see its stripper killed by every such file.
     */
    static final long MIN_MEMORY_BYTES = 256L << 20;
    /** After a stripper failed to start, no other starts for this long (runs strip their own code meanwhile). */
    static final Duration RETRY_AFTER_FAILURE = Duration.ofSeconds(60);
    /** CPU seconds a stripper may use over its life (the hard RLIMIT_CPU); it is started again after. */
    static final int LIFETIME_CPU_SECONDS = 600;

    private static final Logger log = LoggerFactory.getLogger(TypeScriptStrippers.class);
    private static final JsonMapper JSON = JsonMapper.shared();
    /** Platform threads: they block in pipe reads for a stripper's whole life (which would pin virtual carriers). */
    private static final ThreadFactory READERS = Thread.ofPlatform().name("ts-strip-io-", 0).daemon(true).factory();

    private final Sandbox sandbox;
    private final List<String> command;
    private final Map<String, String> env;
    private final List<Path> readOnlyDirs;
    private final Limits limits;
    /** Tenant → its stripper, least recently used first. Guarded by this. */
    private final LinkedHashMap<String, Stripper> strippers = new LinkedHashMap<>(16, 0.75f, true);
    private final AtomicLong prepared = new AtomicLong();
    private boolean closed;
    /** When a stripper last failed to start (System.nanoTime), or 0: none is started for a while after. */
    private volatile long lastFailure;

    TypeScriptStrippers(Sandbox sandbox, List<String> command, Map<String, String> env, List<Path> readOnlyDirs,
            Limits runLimits) {
        this.sandbox = sandbox;
        this.command = List.copyOf(command);
        this.env = Map.copyOf(env);
        this.readOnlyDirs = List.copyOf(readOnlyDirs);
        this.limits = new Limits(runLimits.timeout(), LIFETIME_CPU_SECONDS, Math.max(runLimits.memoryBytes(), MIN_MEMORY_BYTES),
                runLimits.maxProcesses(), runLimits.outputBytes(), runLimits.diskBytes(), runLimits.drainBytes());
        Thread.ofVirtual().name("ts-strip-idle").start(this::stopIdleOnesEveryMinute);
    }

    /** Idle strippers go even when no TypeScript run comes to notice them. */
    private void stopIdleOnesEveryMinute() {
        while (true) {
            try {
                Thread.sleep(Duration.ofMinutes(1));
            } catch (InterruptedException e) {
                return;
            }
            synchronized (this) {
                if (closed) return;
            }
            stopIdle();
        }
    }

    /** Stops the strippers that died or were idle for {@link #IDLE}. */
    private void stopIdle() {
        List<Stripper> stop = new ArrayList<>();
        synchronized (this) {
            long now = System.nanoTime();
            for (Iterator<Stripper> it = strippers.values().iterator(); it.hasNext(); ) {
                Stripper o = it.next();
                if (o.dead() || (o.idleSince(now) > IDLE.toNanos() && !o.busy())) {
                    it.remove();
                    stop.add(o);
                }
            }
        }
        stop.forEach(Stripper::stop);
    }

    /**
     * The strippers for {@code typescript}'s row, where this sandbox can keep one (a control channel: bwrap); empty
     * elsewhere, and for a table without TypeScript.
     */
    public static Optional<TypeScriptStrippers> create(Sandbox sandbox, Optional<Language> typescript,
            Map<String, String> placeholders, Limits runLimits) {
        if (typescript.isEmpty() || !sandbox.supportsControl() || sandbox.unavailableReason().isPresent())
            return Optional.empty();
        Language ts = typescript.get();
        String runtime = placeholders.get("runtimeDir");
        String node = Placeholders.fill(ts.run().get(0), placeholders);
        return Optional.of(new TypeScriptStrippers(sandbox, List.of(node, runtime + "/ts-strip-server.js"),
                ts.environment(Map.of(), placeholders), List.of(Path.of(runtime)), runLimits));
    }

    /**
     * The JavaScript to run for {@code code} (to be placed at {@code file} in the run), or empty: the run strips or
     * transpiles it itself (see the class's decisions for when). Blocks for the stripper's answer, a millisecond or
     * so for a small source; never longer than {@link #WAIT_FOR_TURN} plus {@link #ANSWER_TIMEOUT}.
     */
    public Optional<String> prepare(String tenant, String file, String code) {
        if (code.length() > MAX_SOURCE_BYTES || code.getBytes(StandardCharsets.UTF_8).length > MAX_SOURCE_BYTES)
            return Optional.empty();
        Stripper s = stripperOf(tenant);
        if (s == null) return Optional.empty();
        Optional<String> js = s.strip(file, code);
        if (js.isPresent()) prepared.incrementAndGet();
        return js;
    }

    /** How many runs got their JavaScript from a stripper. */
    public long preparedCount() {
        return prepared.get();
    }

    /** The tenants whose strippers are alive or starting. */
    public synchronized List<String> tenants() {
        return List.copyOf(strippers.keySet());
    }

    /**
     * The tenant's stripper when it is ready; else null, having started it in the background when it is not
     * starting yet. Stops idle strippers first, and the least recently used idle one when a new tenant needs room.
     */
    private Stripper stripperOf(String tenant) {
        stopIdle();
        List<Stripper> stop = new ArrayList<>();
        Stripper s;
        synchronized (this) {
            if (closed) return null;
            long now = System.nanoTime();
            s = strippers.get(tenant);
            if (s == null && lastFailure != 0 && now - lastFailure < RETRY_AFTER_FAILURE.toNanos()) {
                // a start failed a moment ago: not one per run
            } else if (s == null) {
                // room for a new tenant: the least recently used idle one goes (none idle: this run strips itself)
                Stripper lru = strippers.size() < MAX_STRIPPERS ? null
                        : strippers.values().stream().filter(o -> !o.busy()).findFirst().orElse(null);
                if (lru != null) {
                    strippers.values().remove(lru);
                    stop.add(lru);
                }
                if (strippers.size() < MAX_STRIPPERS) {
                    Stripper fresh = new Stripper(tenant);
                    strippers.put(tenant, fresh);
                    Thread.ofVirtual().name("ts-strip-start").start(fresh::start);
                }
            } else if (!s.ready()) {
                s = null;
            }
        }
        stop.forEach(Stripper::stop);
        return s;
    }

    private synchronized void forget(Stripper s) {
        strippers.values().remove(s);
    }

    @Override
    public void close() {
        List<Stripper> all;
        synchronized (this) {
            closed = true;
            all = new ArrayList<>(strippers.values());
            strippers.clear();
        }
        all.forEach(Stripper::stop);
    }

    /** One tenant's stripper: its sandbox, its control channel, one request at a time. */
    private final class Stripper {
        private final String tenant;
        private final ReentrantLock turn = new ReentrantLock();
        private final LinkedBlockingQueue<Object> answers = new LinkedBlockingQueue<>();
        private volatile SandboxProcess process;
        private volatile ControlChannel control;
        private volatile boolean ready;
        private volatile boolean dead;
        private volatile long lastUsed = System.nanoTime();
        private final java.util.concurrent.atomic.AtomicBoolean stopped = new java.util.concurrent.atomic.AtomicBoolean();

        Stripper(String tenant) {
            this.tenant = tenant;
        }

        boolean ready() {
            return ready && !dead;
        }

        boolean dead() {
            return dead;
        }

        boolean busy() {
            return turn.isLocked();
        }

        long idleSince(long now) {
            return now - lastUsed;
        }

        void start() {
            String runId = "tsstrip-" + Ids.hex(6);
            try {
                SandboxSpec spec = SandboxSpec.builder(runId, command, Placeholders.WORK_DIR, limits).readOnlyDirs(readOnlyDirs)
                        .env(env).control(true).build();
                SandboxProcess p = sandbox.start(spec);
                process = p;
                if (stopped.get()) {
                    // stopped while it started (the server closing): nothing else will kill it
                    p.kill();
                    p.close();
                    return;
                }
                control = p.control().orElseThrow(() -> new SandboxException("no control channel"));
                drain(p.stdout());
                drain(p.stderr());
                READERS.newThread(this::readAnswers).start();
                Object first = answers.poll(READY_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
                if (!(first instanceof JsonNode n) || !n.path("ready").asBoolean(false))
                    throw new SandboxException(first == null ? "not ready within " + READY_TIMEOUT.toSeconds() + " s"
                            : "it ended at start");
                if (dead) return;
                ready = true;
                log.info("TypeScript stripper for tenant {} ready ({})", tenant, runId);
            } catch (SandboxException | RuntimeException e) {
                log.warn("TypeScript stripper for tenant {} did not start: {}; runs strip their own code for {} s", tenant,
                        e.getMessage(), RETRY_AFTER_FAILURE.toSeconds());
                lastFailure = System.nanoTime();
                stop();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                stop();
            }
        }

        /** Reads the stripper's answers into {@link #answers} until its channel ends; then it is dead. */
        private void readAnswers() {
            try {
                String line;
                while ((line = control.receive()) != null) {
                    try {
                        answers.add(JSON.readTree(line));
                    } catch (JacksonException e) {
                        answers.add(JSON.createObjectNode()); // not an answer: the request gets none
                    }
                }
            } catch (IOException e) {
                // closed by stop(), or a line over the maximum: unusable either way
            }
            answers.add(Boolean.FALSE);
            stop();
        }

        /** What the stripper writes to stdout and stderr (warnings at most) is read and dropped. */
        private void drain(InputStream in) {
            READERS.newThread(() -> {
                byte[] buf = new byte[8192];
                try (in) {
                    while (in.read(buf) >= 0) {
                        // dropped
                    }
                } catch (IOException e) {
                    // the stripper is gone
                }
            }).start();
        }

        Optional<String> strip(String file, String code) {
            try {
                if (!turn.tryLock(WAIT_FOR_TURN.toMillis(), TimeUnit.MILLISECONDS)) return Optional.empty();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return Optional.empty();
            }
            try {
                if (!ready()) return Optional.empty();
                lastUsed = System.nanoTime();
                answers.clear();
                Map<String, String> request = new LinkedHashMap<>();
                request.put("file", file);
                request.put("code", code);
                control.send(JSON.writeValueAsString(request));
                Object a = answers.poll(ANSWER_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
                if (!(a instanceof JsonNode n)) {
                    if (a == null) log.warn("TypeScript stripper for tenant {} did not answer within {} s: stopped", tenant,
                            ANSWER_TIMEOUT.toSeconds());
                    stop();
                    return Optional.empty();
                }
                JsonNode js = n.path("js");
                return js.isString() ? Optional.of(js.asString()) : Optional.empty();
            } catch (IOException e) {
                stop();
                return Optional.empty();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return Optional.empty();
            } finally {
                lastUsed = System.nanoTime();
                turn.unlock();
            }
        }

        void stop() {
            if (stopped.getAndSet(true)) return;
            dead = true;
            forget(this);
            ControlChannel c = control;
            if (c != null) c.close();
            SandboxProcess p = process;
            if (p != null) {
                p.kill();
                p.close();
            }
        }
    }
}
