package dev.codeexec.run;

import dev.codeexec.config.Config;
import dev.codeexec.config.DataDir;
import dev.codeexec.config.Ids;
import dev.codeexec.egress.ConnectionRecord;
import dev.codeexec.egress.EgressChannels;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.egress.NetworkReport;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.packages.InstallCommand;
import dev.codeexec.packages.PackageSet;
import dev.codeexec.packages.PackageStore;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.SandboxException;
import dev.codeexec.sandbox.SandboxProcess;
import dev.codeexec.sandbox.SandboxSpec;
import dev.codeexec.sandbox.Termination;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.WorkspaceFs;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * Declared packages ({@code execute_code}'s {@code packages}, PACKAGES=on): the {@link PackageStore}, the install of a
 * set that is not in it, and what a run's sandbox gets of an entry.
 *
 * <p>An install is a sandbox like a run's (its own host uid, the run's memory and process limits, seccomp, a
 * read-only system, nothing of the host's files), started with the installer's command ({@link InstallCommand}) in
 * a fresh directory of the store bound read-write as its working directory, on an egress channel whose policy
 * allows only the index's hosts (PACKAGE_INDEX_PYTHON / PACKAGE_REGISTRY_NPM, PACKAGE_INDEX_HOSTS), whatever EGRESS
 * says for runs. It is bounded by INSTALL_TIMEOUT_MS and INSTALL_DISK_MB (each file by RLIMIT_FSIZE, the whole tree
 * by a watcher that stops the install when it grows past the cap). npm's install scripts run: they meet the same
 * walls as user code, and a script that needs what the walls refuse fails the install. pip installs wheels only,
 * so no package's build script runs. Afterwards the tree is the server's (root, every write bit off), and only then
 * does the store publish it.
 *
 * <p>A run with packages gets the entry read-only at {@link #MOUNT}: Python finds {@code MOUNT/site} first on
 * {@code PYTHONPATH} (ahead of the preinstalled libraries); Node and TypeScript find {@code /node_modules}, which
 * both {@code require} and {@code import} search from any directory (ahead of NODE_PATH's global modules, after a
 * workspace's own {@code node_modules}). pip's {@code .pth} files in the set are not processed (the site directory
 * is a path entry, not a site directory).
 */
public final class PackageInstalls {

    private static final Logger LOG = LoggerFactory.getLogger(PackageInstalls.class);
    /** Where a run finds its set's entry. */
    static final String MOUNT = "/opt/codeexec-packages";
    private static final String WORK = "/work";
    private static final String INSTALL_PATH = "/usr/local/bin:/usr/bin:/bin";
    /** The install's home and temporary directory, inside its working directory; removed before sealing. */
    private static final String SCRATCH = ".tmp";
    /** The most of the installer's stderr a failed run shows. */
    private static final int ERROR_CHARS = 3000;

    private final PackageStore store;
    private final Sandbox sandbox;
    private final EgressChannels channels;
    private final Map<String, String> indexes = new LinkedHashMap<>();
    private final Map<String, EgressPolicy> policies = new LinkedHashMap<>();
    private final Duration timeout;
    private final long diskBytes;
    /** What the server asked its interpreters once: their versions, npm's global configuration file. */
    private final Map<String, String> probes = new ConcurrentHashMap<>();

    private PackageInstalls(PackageStore store, Sandbox sandbox, EgressChannels channels, Config config) {
        this.store = store;
        this.sandbox = sandbox;
        this.channels = channels;
        this.timeout = Duration.ofMillis(config.get(Config.INSTALL_TIMEOUT_MS));
        this.diskBytes = (long) config.get(Config.INSTALL_DISK_MB) << 20;
        List<String> extra = config.get(Config.PACKAGE_INDEX_HOSTS).isBlank() ? List.of()
                : List.of(config.get(Config.PACKAGE_INDEX_HOSTS).split(","));
        indexes.put("pip", config.get(Config.PACKAGE_INDEX_PYTHON));
        indexes.put("npm", config.get(Config.PACKAGE_REGISTRY_NPM));
        indexes.forEach((eco, url) -> policies.put(eco, policyFor(url, extra)));
    }

    /**
     * The installs of a server, or empty with PACKAGES=off; a sandbox that cannot mount entries or give an install
     * its channel gets none either ({@link #unavailable} says why).
     *
     * @throws dev.codeexec.config.ConfigException a package index that is not an http(s) URL, a bad PACKAGE_INDEX_HOSTS
     */
    public static Optional<PackageInstalls> create(Config config, Sandbox sandbox, DataDir data, Optional<EgressChannels> channels) {
        if (unavailable(config, sandbox, channels).isPresent()) {
            // still check the settings, so that a typo is found before someone turns the sandbox on
            for (var k : List.of(Config.PACKAGE_INDEX_PYTHON, Config.PACKAGE_REGISTRY_NPM))
                policyFor(config.get(k), List.of());
            return Optional.empty();
        }
        try {
            PackageStore store = new PackageStore(data.packages(), (long) config.get(Config.PACKAGE_STORE_MB) << 20,
                    Clock.systemUTC());
            return Optional.of(new PackageInstalls(store, sandbox, channels.get(), config));
        } catch (IOException e) {
            throw new dev.codeexec.config.ConfigException("the package store cannot be prepared in " + data.packages()
                    + ": " + e.getMessage());
        }
    }

    /** Why runs cannot declare packages on this server, or empty when they can. */
    public static Optional<String> unavailable(Config config, Sandbox sandbox, Optional<EgressChannels> channels) {
        if (config.get(Config.PACKAGES).equals("off")) return Optional.of("PACKAGES=off on this server");
        if (!sandbox.name().equals("bwrap"))
            return Optional.of("declared packages need SANDBOX=bwrap (this server uses '" + sandbox.name() + "')");
        if (sandbox.unavailableReason().isPresent()) return Optional.of("the sandbox is unavailable");
        if (channels.isEmpty()) return Optional.of("the install's egress channel cannot be prepared here");
        return Optional.empty();
    }

    /** Only the index's host (and PACKAGE_INDEX_HOSTS; the default PyPI index serves its files from another host). */
    static EgressPolicy policyFor(String index, List<String> extraHosts) {
        URI uri;
        try {
            uri = URI.create(index.strip());
        } catch (IllegalArgumentException e) {
            throw new dev.codeexec.config.ConfigException("package index '" + index + "' is not a URL");
        }
        if (!("https".equals(uri.getScheme()) || "http".equals(uri.getScheme())) || uri.getHost() == null)
            throw new dev.codeexec.config.ConfigException("package index '" + index + "' must be an http(s) URL with a host");
        int port = uri.getPort() > 0 ? uri.getPort() : uri.getScheme().equals("https") ? 443 : 80;
        List<String> hosts = new ArrayList<>();
        String host = uri.getHost().toLowerCase(Locale.ROOT);
        hosts.add(host + ":" + port);
        if (host.equals("pypi.org")) hosts.add("files.pythonhosted.org:443");
        for (String h : extraHosts) if (!h.isBlank()) hosts.add(h.strip());
        try {
            return EgressPolicy.of(hosts);
        } catch (IllegalArgumentException e) {
            throw new dev.codeexec.config.ConfigException("PACKAGE_INDEX_HOSTS: " + e.getMessage());
        }
    }

    public PackageStore store() {
        return store;
    }

    /**
     * The entry of {@code set}, installed first when the store does not have it (an install of the same set already
     * under way is waited for), held until the lease is closed.
     *
     * @param runLimits the asking run's limits: the install gets its memory and process limits
     * @throws PackageStore.InstallFailed the installer's own error, shortened, for the run's stderr
     * @throws InterruptedException       the caller's thread was interrupted while it waited (its run was cancelled)
     */
    public PackageStore.Lease acquire(PackageSet set, Limits runLimits, String tenant)
            throws PackageStore.InstallFailed, InterruptedException {
        return store.acquire(set, version(set.ecosystem()), (s, into) -> install(s, into, runLimits, tenant));
    }

    /** {@code spec} with the entry of {@code lease} mounted and its search paths set. */
    public static SandboxSpec mount(SandboxSpec spec, String ecosystem, PackageStore.Lease lease) {
        Map<String, Path> mounts = new LinkedHashMap<>();
        Map<String, String> env = new LinkedHashMap<>();
        mounts.put(MOUNT, lease.dir());
        if (ecosystem.equals("pip")) {
            env.put("PYTHONPATH", MOUNT + "/site");
        } else {
            // the root's node_modules is the last directory both require and import search from anywhere
            Path modules = lease.dir().resolve("node_modules");
            if (Files.isDirectory(modules, LinkOption.NOFOLLOW_LINKS)) mounts.put("/node_modules", modules);
        }
        return spec.withMounts(mounts, env);
    }

    /**
     * Where a warm sandbox of {@code language} gets a run's packages mounted at hand-out, or empty when its warm
     * sandboxes cannot serve runs with packages: python's at {@link #MOUNT} (the runner puts {@code MOUNT/site} on
     * sys.path where PYTHONPATH would have it) unless WARM_PRELOAD_PYTHON imported modules ahead of the code (a
     * set could bring another version of one); node's at {@code /node_modules}.
     */
    public static Optional<String> warmMount(String language, boolean pythonPreload) {
        return switch (language) {
            case "python" -> pythonPreload ? Optional.empty() : Optional.of(MOUNT);
            case "nodejs" -> Optional.of("/node_modules");
            default -> Optional.empty();
        };
    }

    /** What a warm sandbox gets mounted at its {@link #warmMount} for {@code lease}; empty: nothing to mount. */
    public static Optional<Path> warmSource(String ecosystem, PackageStore.Lease lease) {
        if (ecosystem.equals("pip")) return Optional.of(lease.dir());
        Path modules = lease.dir().resolve("node_modules");
        return Files.isDirectory(modules, LinkOption.NOFOLLOW_LINKS) ? Optional.of(modules) : Optional.empty();
    }

    /** The interpreter the entries of an ecosystem are built for: part of the store key. */
    private String version(String ecosystem) throws PackageStore.InstallFailed {
        Optional<String> v = probed(ecosystem, ecosystem.equals("pip")
                ? List.of("/usr/bin/python3", "-c", "import sys; print(sys.version.split()[0])")
                : List.of("/usr/bin/node", "--version"), x -> !x.isEmpty());
        return v.orElseThrow(() -> new PackageStore.InstallFailed("the server cannot tell its "
                + (ecosystem.equals("pip") ? "python" : "node") + " version, so it cannot install packages for it"));
    }

    /**
     * Where npm finds the machine's global configuration when no {@code --prefix} moves it (a run's npm reads it
     * there; an install's npm gets it named, since its {@code --prefix} would move it); empty when npm cannot say.
     */
    private Optional<String> npmGlobalConfig() {
        return probed("npm-globalconfig", List.of("npm", "config", "get", "globalconfig"), g -> g.startsWith("/"));
    }

    /** What {@code argv} prints, asked once and kept when {@code valid}; a failed answer is asked again next time. */
    private Optional<String> probed(String key, List<String> argv, java.util.function.Predicate<String> valid) {
        String known = probes.get(key);
        if (known != null) return Optional.of(known);
        String out = probe(argv);
        if (!valid.test(out)) return Optional.empty();
        probes.put(key, out);
        return Optional.of(out);
    }

    /** The first line a program prints (its stdout and stderr), within 30 s; empty when it fails or says nothing. */
    private static String probe(List<String> argv) {
        Process p = null;
        try {
            ProcessBuilder b = new ProcessBuilder(argv).redirectErrorStream(true);
            b.environment().put("PATH", INSTALL_PATH); // the programs the install's sandbox finds
            b.environment().put("NPM_CONFIG_USERCONFIG", "/dev/null"); // the machine's settings, not root's own
            b.environment().put("NPM_CONFIG_UPDATE_NOTIFIER", "false");
            p = b.start();
            p.getOutputStream().close();
            // what these print is a line, far less than a pipe holds: it is there once the program has ended
            if (!p.waitFor(30, java.util.concurrent.TimeUnit.SECONDS) || p.exitValue() != 0) return "";
            String out = new String(p.getInputStream().readNBytes(4096), StandardCharsets.UTF_8).strip();
            int nl = out.indexOf('\n');
            return nl < 0 ? out : out.substring(0, nl).strip();
        } catch (IOException e) {
            return "";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "";
        } finally {
            if (p != null) p.destroyForcibly();
        }
    }

    /**
     * Runs the installer for {@code set} in a sandbox whose working directory is {@code into}; once the sandbox is
     * gone, removes the caches and reads what was installed, all through {@link WorkspaceFs} (no link followed, no
     * special file opened, every read bounded). Runs on the store's install thread: an interrupt (no request waits
     * any more) stops the install.
     */
    private Map<String, String> install(PackageSet set, Path into, Limits runLimits, String tenant)
            throws PackageStore.InstallFailed {
        String eco = set.ecosystem();
        String runId = "install-" + Ids.hex(6);
        try {
            Files.createDirectory(into.resolve(SCRATCH));
        } catch (IOException e) {
            throw new PackageStore.InstallFailed("the server could not prepare the install: " + e.getMessage());
        }
        WorkspaceFs tree = new WorkspaceFs(into, -1, -1);
        Ran ran = run(spec(set, into, runLimits, runId), eco, tree, tenant);
        // from here on nothing of the install runs: its sandbox was closed, the whole tree killed
        if (ran.why() != null) {
            String refused = refusedHosts(ran.network());
            LOG.info("install {} of {} {} failed after {} ms: {}", runId, eco, set.specs(), ran.ms(), ran.why());
            // pip and npm say most on stderr; pip's warnings about the index (an ignored host, retries) go to stdout;
            // npm's log of each fetch (--loglevel http) is left out
            String warnings = ran.stdout().lines().filter(l -> l.startsWith("WARNING") || l.startsWith("ERROR"))
                    .collect(Collectors.joining("\n"));
            String errors = ran.stderr().lines().filter(l -> !l.startsWith("npm http ")).collect(Collectors.joining("\n"));
            throw new PackageStore.InstallFailed(ran.why() + refused + "\n"
                    + shorten((warnings.isEmpty() ? "" : warnings + "\n") + errors));
        }
        try {
            for (String scratch : List.of(SCRATCH, ".npm-cache", ".npm")) deleteIfPresent(tree, RelPath.parse(scratch));
            InstallCommand.checkLayout(eco, tree);
            Map<String, String> resolved = InstallCommand.resolved(eco, tree);
            LOG.info("install {} of {} {}: {} in {} ms", runId, eco, set.specs(), resolved, ran.ms());
            return resolved;
        } catch (WorkspaceException e) {
            throw new PackageStore.InstallFailed("the server could not take over the installed files: " + e.getMessage());
        }
    }

    /** The install's sandbox: the installer's command in {@code into}, with a run's limits and the install's own. */
    private SandboxSpec spec(PackageSet set, Path into, Limits runLimits, String runId) {
        String eco = set.ecosystem();
        InstallCommand cmd = InstallCommand.of(set, WORK, indexes.get(eco), eco.equals("npm") ? npmGlobalConfig() : Optional.empty());
        Map<String, String> env = new LinkedHashMap<>();
        env.put("PATH", INSTALL_PATH);
        // what tools keep in a home directory (caches, logs) goes where the install's scratch space is, removed
        // before the entry is sealed: only the installer's own output stays
        env.put("HOME", WORK + "/" + SCRATCH);
        env.put("LANG", "C.UTF-8");
        env.put("TMPDIR", WORK + "/" + SCRATCH);
        // the proxy variables come from the channel; the index may be on a name the proxy pins to a loopback address
        env.put("NO_PROXY", "");
        env.put("no_proxy", "");
        env.putAll(cmd.env());
        int cpu = (int) Math.max(runLimits.cpuSeconds(), timeout.toSeconds() + 1);
        Limits limits = new Limits(timeout, cpu, runLimits.memoryBytes(), runLimits.maxProcesses(), 1L << 20, diskBytes,
                runLimits.drainBytes());
        return SandboxSpec.builder(runId, cmd.argv(), WORK, limits).env(env).workDirSource(Optional.of(into)).build()
                .withWorkDirOwner(uid -> giveTo(into, uid));
    }

    /**
     * How an install ran.
     *
     * @param why     why it failed; null: it succeeded
     * @param network what its channel saw (null: it had none)
     */
    private record Ran(String why, String stdout, String stderr, NetworkReport network, long ms) {
    }

    /** Runs the installer in its scope, on a channel that reaches only the index, within the install's bounds. */
    private Ran run(SandboxSpec spec, String eco, WorkspaceFs tree, String tenant) throws PackageStore.InstallFailed {
        long t0 = System.nanoTime();
        Limits limits = spec.limits();
        AtomicReference<String> stop = new AtomicReference<>();
        try (RunScope s = new RunScope(spec.runId())) {
            EgressStart.Started started;
            try {
                started = EgressStart.start(sandbox, spec, channels, policies.get(eco), tenant, null, null);
            } catch (SandboxException e) {
                throw new PackageStore.InstallFailed("the install could not start: " + e.getMessage());
            }
            s.channel(started.channel(), started.library(), null, true);
            SandboxProcess p = s.program(started.process(), true);
            // a certificate the installer does not trust fails at once, not after its retries (npm: about 70 s)
            OutputListener lines = new LineWatch(line -> {
                if (CERTIFICATE_ERROR.matcher(line).find() && stop.compareAndSet(null, certificateMessage(eco))) p.kill();
            });
            OutputCollector.Drain drain = new OutputCollector.Drain(limits.drainBytes(), () -> {
                stop.compareAndSet(null, "the install wrote more than " + (limits.drainBytes() >> 20)
                        + " MiB of output and was stopped");
                p.kill();
            });
            OutputCollector err = new OutputCollector(p.stderr(), limits.outputBytes(), OutputListener.Stream.STDERR,
                    lines, drain);
            OutputCollector out = new OutputCollector(p.stdout(), limits.outputBytes(), OutputListener.Stream.STDOUT,
                    lines, drain);
            s.readOutput(out, err, new byte[0], Thread.ofVirtual().name(spec.runId() + "-out", 0).factory());
            DiskWatch disk = new DiskWatch(tree, p, stop);
            s.beforeFiles(disk);
            String why = null;
            boolean exited;
            try {
                exited = p.waitFor(timeout);
            } finally {
                disk.close();
            }
            if (!exited) {
                why = "the install took longer than INSTALL_TIMEOUT_MS (" + timeout.toMillis() + " ms) and was stopped";
                s.stopProgram();
            }
            s.joinOutput();
            NetworkReport network = s.endNetwork().orElse(null);
            String stderr = err.captured().text();
            if (stop.get() == null && (stderr.contains("[Errno 27]") || stderr.contains("EFBIG")))
                stop.set(diskCapMessage()); // one file over the cap: RLIMIT_FSIZE stopped it before the watcher
            if (stop.get() != null) why = stop.get();
            else if (why == null && p.memoryLimitHit()) why = "the install ran out of memory (the run's MEMORY_LIMIT_MB)";
            else if (why == null) {
                Termination t = p.termination();
                if (t == null || t.exitCode() != 0)
                    why = "the installer failed (exit " + (t == null ? "unknown" : t.exitCode()) + ")";
            }
            return new Ran(why, out.captured().text(), stderr, network, (System.nanoTime() - t0) / 1_000_000);
        } catch (InterruptedException e) {
            throw new PackageStore.InstallFailed("the install was stopped: no request waits for it any more");
        }
    }

    private static void deleteIfPresent(WorkspaceFs tree, RelPath p) {
        try {
            tree.delete(p, true);
        } catch (WorkspaceException e) {
            if (e.kind() != WorkspaceException.Kind.NOT_FOUND) throw e;
        }
    }

    /** npm's "attempt N failed with CODE" for a certificate code; pip's and OpenSSL's wording. */
    static final Pattern CERTIFICATE_ERROR = Pattern.compile("failed with (?:[A-Z_]*CERT[A-Z_]*|UNABLE_TO_[A-Z_]+)\\b"
            + "|CERTIFICATE_VERIFY_FAILED|certificate verify failed");

    static String certificateMessage(String ecosystem) {
        return "the install was stopped: the package " + (ecosystem.equals("pip") ? "index" : "registry")
                + "'s TLS certificate is not trusted (a TLS-inspecting proxy on the way?); set EGRESS_CA_FILE to the "
                + "PEM certificates to trust, which installs and runs with network access then use";
    }

    /** Connections the install tried that its policy refused, for the message (what a hostile script wanted). */
    private static String refusedHosts(NetworkReport n) {
        if (n == null) return "";
        List<String> refused = n.connections().stream().filter(c -> c.decision().equals(ConnectionRecord.REFUSED))
                .map(c -> c.host() + ":" + c.port()).distinct().limit(5).toList();
        return refused.isEmpty() ? "" : "; it tried to reach " + String.join(", ", refused)
                + ", which an install may not (only the package index)";
    }

    /** Stops the install when its tree grows past INSTALL_DISK_MB or MAX_ENTRIES; closing it ends the watch. */
    private final class DiskWatch implements AutoCloseable {
        private final Thread thread;

        DiskWatch(WorkspaceFs tree, SandboxProcess p, AtomicReference<String> stop) {
            thread = Thread.ofVirtual().start(() -> watch(tree, p, stop));
        }

        private void watch(WorkspaceFs tree, SandboxProcess p, AtomicReference<String> stop) {
            try {
                while (!Thread.currentThread().isInterrupted()) {
                    Thread.sleep(200);
                    WorkspaceFs.Tally use;
                    try {
                        use = tree.tally(PackageStore.MAX_ENTRIES);
                    } catch (WorkspaceException e) {
                        continue; // a tree that changes under the walk: measured again next time
                    }
                    if (use.bytes() > diskBytes || !use.complete()) {
                        stop.compareAndSet(null, use.bytes() > diskBytes ? diskCapMessage() : "the install created more than "
                                + PackageStore.MAX_ENTRIES + " files and was stopped");
                        p.kill();
                        return;
                    }
                }
            } catch (InterruptedException e) {
                // the install ended
            }
        }

        @Override
        public void close() {
            thread.interrupt();
        }
    }

    private String diskCapMessage() {
        return "the install needs more than INSTALL_DISK_MB (" + (diskBytes >> 20) + " MiB) and was stopped";
    }

    /** Gives the empty build directory (and its scratch directory) to the install's uid before it starts. */
    private static void giveTo(Path into, int uid) {
        try (Stream<Path> s = Files.list(into)) {
            Files.setAttribute(into, "unix:uid", uid, LinkOption.NOFOLLOW_LINKS);
            for (Path p : s.toList()) Files.setAttribute(p, "unix:uid", uid, LinkOption.NOFOLLOW_LINKS);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private static String shorten(String s) {
        String t = s.strip();
        return t.length() <= ERROR_CHARS ? t : "..." + t.substring(t.length() - ERROR_CHARS);
    }

    /** Shows each line of the installer's output (its first 4 KiB) to a watcher, as the output is read. */
    private static final class LineWatch implements OutputListener {
        private static final int LINE = 4096;
        private final java.util.function.Consumer<String> lines;
        private final Map<OutputListener.Stream, StringBuilder> partial =
                new java.util.EnumMap<>(OutputListener.Stream.class);

        LineWatch(java.util.function.Consumer<String> lines) {
            this.lines = lines;
        }

        @Override
        public synchronized void onOutput(OutputListener.Stream stream, String text) {
            StringBuilder line = partial.computeIfAbsent(stream, k -> new StringBuilder());
            for (int i = 0; i < text.length(); i++) {
                char c = text.charAt(i);
                if (c == '\n') {
                    lines.accept(line.toString());
                    line.setLength(0);
                } else if (line.length() < LINE) {
                    line.append(c);
                }
            }
        }
    }
}
