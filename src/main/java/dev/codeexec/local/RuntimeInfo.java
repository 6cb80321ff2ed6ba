package dev.codeexec.local;

import dev.codeexec.lang.Language;
import dev.codeexec.lang.Languages;
import dev.codeexec.session.Sessions;
import dev.codeexec.warm.RuntimeProbe;
import dev.codeexec.warm.StartupWork;
import dev.codeexec.warm.WarmPool;
import dev.codeexec.config.Config;
import dev.codeexec.sandbox.Sandbox;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * What runtime_info tells about this engine: languages and tools with the versions probed at start, the sandbox,
 * limits, concurrency, the Go build cache, sessions and the warm pool. Probing starts when this is made and runs
 * in the background, so no runtime_info call spawns a process.
 */
final class RuntimeInfo {

    private final Config config;
    private final Sandbox sandbox;
    private final Languages languages;
    private final RuntimeProbe probe;
    private final StartupWork startup;
    private final Sessions sessions;
    private final Optional<WarmPool> warmPool;
    private final String warmPoolOff;
    private final boolean strippedAhead;

    /**
     * @param warmPoolOff     why there is no warm pool, when there is none
     * @param strippedAhead   whether TypeScript is made JavaScript ahead of its runs (TypeScriptStrippers)
     */
    RuntimeInfo(Config config, Sandbox sandbox, Languages languages, Map<String, String> placeholders,
            ThreadFactory probeThreads, StartupWork startup, Sessions sessions, Optional<WarmPool> warmPool,
            String warmPoolOff, boolean strippedAhead) {
        this.strippedAhead = strippedAhead;
        this.config = config;
        this.sandbox = sandbox;
        this.languages = languages;
        this.probe = new RuntimeProbe(languages, placeholders, Language.baseEnvironment("/tmp"), probeThreads);
        this.startup = startup;
        this.sessions = sessions;
        this.warmPool = warmPool;
        this.warmPoolOff = warmPoolOff;
    }

    /**
     * Everything, with the counters of this moment: they are read before waiting for a probe that is still
     * running (up to 10 s on a loaded host), in which sessions may expire and runs end.
     */
    Map<String, Object> snapshot(int running, int queued) {
        Map<String, Object> conc = new LinkedHashMap<>();
        conc.put("maxConcurrent", config.get(Config.MAX_CONCURRENT));
        conc.put("queueSize", config.get(Config.QUEUE_SIZE));
        conc.put("queueTimeoutMs", config.get(Config.QUEUE_TIMEOUT_MS));
        conc.put("running", running);
        conc.put("queued", queued);
        String goCache = startup.goCacheState();
        Map<String, Object> sessionsNow = Map.of("count", sessions.count(), "maxPerTenant", sessions.maxPerTenant(),
                "idleSeconds", sessions.idleTimeout().toSeconds(), "memoryMb", sessions.memoryBudget() >> 20,
                "languages", sessions.languages(), "available", sandbox.supportsControl() && sessions.maxPerTenant() > 0);
        Map<String, Object> pool = warmPool();

        Map<String, Object> info = new LinkedHashMap<>();
        info.put("languages", languages());
        Map<String, Object> tools = new LinkedHashMap<>();
        probed(probe.toolsFuture()).forEach((k, v) -> tools.put(k, v.toMap()));
        info.put("tools", tools);
        info.put("sandbox", sandbox());
        info.put("limits", limits());
        info.put("concurrency", conc);
        info.put("goCache", goCache);
        info.put("sessions", sessionsNow);
        info.put("warmPool", pool);
        return info;
    }

    private Map<String, Object> languages() {
        Map<String, RuntimeProbe.Found> versions = probed(probe.languagesFuture());
        Map<String, Object> langs = new LinkedHashMap<>();
        for (Language l : languages.all()) {
            RuntimeProbe.Found f = versions.get(l.id());
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("available", f != null && f.available());
            m.put("version", f == null ? "unknown (still probing)" : f.version() == null ? "unknown" : f.version());
            m.put("aliases", l.aliases());
            m.put("compiled", l.compiled());
            // which way TypeScript runs (docs/tools.md, "How TypeScript runs"); the version says whose stripping
            if (l.id().equals("typescript")) m.put("stripping", strippedAhead
                    ? "ahead of each run, by the caller's own stripper; the run loads no stripper or transpiler"
                    : "in each run, by its runner");
            langs.put(l.id(), m);
        }
        return langs;
    }

    private Map<String, Object> sandbox() {
        Map<String, Object> sb = new LinkedHashMap<>();
        sb.put("name", sandbox.name());
        sb.putAll(sandbox.info());
        Optional<String> reason = sandbox.unavailableReason();
        sb.put("available", reason.isEmpty());
        reason.ifPresent(r -> sb.put("unavailableReason", r));
        return sb;
    }

    private Map<String, Object> limits() {
        Map<String, Object> limits = new LinkedHashMap<>();
        limits.put("defaultTimeoutMs", config.get(Config.DEFAULT_TIMEOUT_MS));
        limits.put("maxTimeoutMs", config.get(Config.MAX_TIMEOUT_MS));
        limits.put("cpuSeconds", config.get(Config.CPU_LIMIT_SECONDS));
        limits.put("memoryMb", config.get(Config.MEMORY_LIMIT_MB));
        limits.put("maxProcesses", config.get(Config.MAX_PROCESSES));
        limits.put("maxOutputKb", config.get(Config.MAX_OUTPUT_KB));
        limits.put("maxDiskMb", config.get(Config.MAX_DISK_MB));
        return limits;
    }

    /** Per language: target, ready, starting, served, missed (ran cold), ...; or why there is no pool. */
    Map<String, Object> warmPool() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("enabled", warmPool.isPresent());
        warmPool.ifPresentOrElse(p -> {
            m.put("workspaces", p.lateWorkDir());
            m.put("preloadPython", config.get(Config.WARM_PRELOAD_PYTHON));
            m.put("languages", p.info());
        }, () -> m.put("reason", warmPoolOff));
        return m;
    }

    /**
     * Why {@code languageId} cannot run here, once the start-time probe has found its program missing (empty while
     * the probe runs, or when it is installed): a run of it would only fail at its first exec.
     */
    Optional<String> notInstalled(String languageId) {
        Map<String, RuntimeProbe.Found> found = probe.languagesFuture().getNow(Map.of());
        RuntimeProbe.Found f = found.get(languageId);
        if (f == null || f.available()) return Optional.empty();
        return Optional.of(languageId + " is not installed on this machine (runtime_info lists the languages "
                + "that are; an operator installs it with scripts/install-deps.sh)");
    }

    /** Logs, once the probe is done, which languages are missing: an operator reads it at start (stderr in stdio mode). */
    void warnAboutMissing(org.slf4j.Logger log) {
        probe.languagesFuture().thenAccept(found -> {
            List<String> missing = found.entrySet().stream().filter(e -> !e.getValue().available()).map(Map.Entry::getKey).toList();
            if (!missing.isEmpty())
                log.warn("not installed on this machine, calls for them get an error: {} (scripts/install-deps.sh installs them)",
                        String.join(", ", missing));
        });
    }

    /** A probe still running after 10 s shows as "unknown": runtime_info answers anyway. */
    private static Map<String, RuntimeProbe.Found> probed(CompletableFuture<Map<String, RuntimeProbe.Found>> f) {
        try {
            return f.get(10, TimeUnit.SECONDS);
        } catch (TimeoutException | java.util.concurrent.ExecutionException e) {
            return Map.of();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Map.of();
        }
    }
}
