package dev.codeexec.packages;

import dev.codeexec.config.Ids;
import dev.codeexec.linux.DeepWalk;
import dev.codeexec.linux.OwnIds;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.WorkspaceFs;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;

/**
 * The store of installed package sets: one sealed, read-only directory per {@link PackageSet#key key}, built once
 * and shared by every run that declares the same set on the same interpreter.
 *
 * <ul>
 *   <li>Layout: an entry {@code KEY/} holds {@code tree/}, what the installer left (the directory runs mount), and
 *   {@code entry.json}, the manifest (the set, what was resolved, size, when). The installer only ever sees
 *   {@code tree/}: everything the server writes itself lies outside what sandboxed install scripts could touch, so
 *   no link or special file they leave can redirect a write or a read of the server's.</li>
 *   <li>Building: the first request for a key starts the {@link Installer} on a thread of its own, in a fresh
 *   directory beside the store entries; every request for the key (the first included) waits for that one build
 *   (one install, not eight). A request that stops waiting (its run was cancelled: the waiting thread is
 *   interrupted) frees its slot at once; when no request waits any more, the build is interrupted and the install
 *   stopped. A failed install, whatever way it failed, leaves nothing behind, wakes every waiter and is not
 *   remembered: the next request tries again.</li>
 *   <li>Sealing: once the installer returned (nothing of the install runs any more), the tree is taken over
 *   ({@code WorkspaceFs.seal}: walked without following links, anything but directories, regular files and links
 *   refuses it, everything given to the server, every write bit off), the manifest is written beside it, and the
 *   entry appears under its key by one rename; runs get it read-only, so no run (and no later install) changes
 *   what another run imports.</li>
 *   <li>Bounds: past {@code maxBytes} the least recently used entries go first, never one a run holds
 *   ({@link Lease}) and never the one just built.</li>
 * </ul>
 */
public final class PackageStore {

    private static final Logger LOG = LoggerFactory.getLogger(PackageStore.class);
    private static final JsonMapper JSON = JsonMapper.shared();
    /** The manifest, beside the tree in an entry's directory. */
    static final String MANIFEST = "entry.json";
    /** What the installer left, in an entry's directory: what runs mount. */
    static final String TREE = "tree";
    private static final String BUILDING = ".building-";
    /** The most entries one installed tree may have (inodes are not under the disk cap). */
    public static final int MAX_ENTRIES = 200_000;

    /** Installs a set into an empty directory; returns name → version of what it installed. */
    @FunctionalInterface
    public interface Installer {
        /**
         * Runs on a thread of the store's own, which is interrupted when no request waits for the install any
         * more: the installer then stops what it started and throws. When it returns or throws, nothing it started
         * may still be able to change {@code into}.
         *
         * @throws InstallFailed with the installer's own message (shortened), for the run's result
         */
        Map<String, String> install(PackageSet set, Path into) throws InstallFailed;
    }

    /** An install that failed: the message is the installer's own error, meant for the run's stderr. */
    public static final class InstallFailed extends Exception {
        public InstallFailed(String message) {
            super(message, null, false, false);
        }
    }

    /** What an entry holds. */
    public record Entry(String key, String ecosystem, List<String> specs, Map<String, String> resolved, long bytes,
            Instant created, Instant lastUsed, int inUse) {
    }

    /** A run's hold on an entry: it is not evicted until closed. */
    public final class Lease implements AutoCloseable {
        private final String key;
        private final Path dir;
        private final Map<String, String> resolved;
        private final long installMs;
        private boolean closed;

        private Lease(String key, Path dir, Map<String, String> resolved, long installMs) {
            this.key = key;
            this.dir = dir;
            this.resolved = Map.copyOf(resolved);
            this.installMs = installMs;
        }

        /** The sealed entry, to be bound read-only into the run. */
        public Path dir() {
            return dir;
        }

        /** Name → version as installed. */
        public Map<String, String> resolved() {
            return resolved;
        }

        /** How long the install took when this request made it; 0 when the entry came from the store. */
        public long installMs() {
            return installMs;
        }

        @Override
        public synchronized void close() {
            if (closed) return;
            closed = true;
            inUse.computeIfPresent(key, (k, n) -> n <= 1 ? null : n - 1);
        }
    }

    private final Path root;
    private final long maxBytes;
    private final Clock clock;
    private final OwnIds owner;
    /** Installs under way by key; also the lock of their waiter counts. */
    private final Map<String, Build> building = new HashMap<>();
    private final Map<String, Integer> inUse = new ConcurrentHashMap<>();
    private final Map<String, Instant> lastUsed = new ConcurrentHashMap<>();
    private final AtomicLong installs = new AtomicLong();
    private final AtomicLong failures = new AtomicLong();
    private final AtomicLong hits = new AtomicLong();
    private final AtomicLong misses = new AtomicLong();
    private final AtomicLong evictions = new AtomicLong();

    /**
     * A store in {@code root} (created; half-built entries of an earlier server removed, and entries of the layout
     * before {@code tree/} and {@code entry.json}, whose manifest lay inside the installed tree), bounded by
     * {@code maxBytes}. Entries belong to the server's own uid and gid.
     */
    public PackageStore(Path root, long maxBytes, Clock clock) throws IOException {
        this.root = root;
        this.maxBytes = maxBytes;
        this.clock = clock;
        this.owner = OwnIds.read();
        Files.createDirectories(root);
        try (Stream<Path> s = Files.list(root)) {
            for (Path p : s.toList()) {
                if (Files.isRegularFile(p.resolve(MANIFEST), LinkOption.NOFOLLOW_LINKS)) {
                    lastUsed.put(p.getFileName().toString(), created(p));
                } else if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
                    LOG.info("package store: removing {} (half built, or of an older layout)", p.getFileName());
                    deleteQuietly(p);
                }
            }
        }
    }

    /**
     * The entry of {@code set} on {@code interpreterVersion}, installed now when it is not in the store (waiting for
     * an install of the same key already under way), held for the caller until the lease is closed.
     *
     * @throws InstallFailed        the install failed (nothing was stored)
     * @throws InterruptedException the caller's thread was interrupted while it waited (its run was cancelled); the
     *                              install goes on as long as another request waits for it
     */
    public Lease acquire(PackageSet set, String interpreterVersion, Installer installer)
            throws InstallFailed, InterruptedException {
        String key = set.key(interpreterVersion);
        while (true) {
            Optional<Lease> ready = hold(key, 0);
            if (ready.isPresent()) {
                hits.incrementAndGet();
                return ready.get();
            }
            Build b;
            boolean started = false;
            synchronized (building) {
                b = building.get(key);
                if (b == null) {
                    b = new Build(key);
                    building.put(key, b);
                    started = true;
                }
                b.waiters++;
            }
            if (started) {
                misses.incrementAndGet();
                Build mine = b;
                try {
                    b.thread = Thread.ofVirtual().name("install-" + key).start(() -> mine.run(set, installer));
                } catch (Throwable t) { // no thread: nobody may wait for it
                    synchronized (building) {
                        building.remove(key, b);
                    }
                    b.done.completeExceptionally(t);
                }
            }
            long ms;
            try {
                ms = b.done.get();
            } catch (InterruptedException e) {
                b.leave();
                throw e;
            } catch (ExecutionException e) {
                b.leave();
                if (e.getCause() instanceof InstallFailed f) throw f;
                LOG.warn("package store: the install of {} failed inside the server: {}", key, e.getCause().toString());
                throw new InstallFailed("the install failed inside the server");
            }
            b.leave();
            Optional<Lease> built = hold(key, started ? ms : 0);
            if (built.isPresent()) {
                if (!started) hits.incrementAndGet(); // built by another request: from the store for this one
                return built.get();
            }
            // evicted or removed between the build and this hold (an admin's clear): install again
        }
    }

    /** Requests waiting now for the install of {@code set} on {@code interpreterVersion} (0: none under way). */
    int waiting(PackageSet set, String interpreterVersion) {
        synchronized (building) {
            Build b = building.get(set.key(interpreterVersion));
            return b == null ? 0 : b.waiters;
        }
    }

    /** One install under way, shared by every request for its key. */
    private final class Build {
        final String key;
        final CompletableFuture<Long> done = new CompletableFuture<>();
        /** Requests waiting for it; guarded by {@link #building}. */
        int waiters;
        volatile Thread thread;

        Build(String key) {
            this.key = key;
        }

        /**
         * Builds, then leaves {@link #building} before it wakes the waiters: a request that comes after a failed
         * install (its waiter already woken) must start a new one, never join this finished build.
         */
        void run(PackageSet set, Installer installer) {
            long ms = 0;
            Throwable failure = null;
            try {
                ms = build(set, key, installer);
            } catch (Throwable t) { // an Error too (the heap, the stack): every waiter is woken, nothing is left
                failure = t;
            }
            synchronized (building) {
                building.remove(key, this);
            }
            if (failure == null) done.complete(ms);
            else done.completeExceptionally(failure);
        }

        /** A request stopped waiting; the last one to go stops the install. */
        void leave() {
            boolean last;
            synchronized (building) {
                last = --waiters == 0 && !done.isDone();
                if (last) building.remove(key, this); // a new request starts a new install
            }
            Thread t = thread;
            if (last && t != null) t.interrupt();
        }
    }

    private synchronized Optional<Lease> hold(String key, long installMs) {
        Path dir = root.resolve(key);
        if (!Files.isRegularFile(dir.resolve(MANIFEST), LinkOption.NOFOLLOW_LINKS)) return Optional.empty();
        inUse.merge(key, 1, Integer::sum);
        lastUsed.put(key, clock.instant());
        return Optional.of(new Lease(key, dir.resolve(TREE), manifest(dir).resolved(), installMs));
    }

    private long build(PackageSet set, String key, Installer installer) throws InstallFailed {
        long t0 = System.nanoTime();
        Path tmp = root.resolve(BUILDING + key + "-" + Ids.hex(8));
        boolean published = false;
        try {
            Files.createDirectory(tmp);
            Path tree = Files.createDirectory(tmp.resolve(TREE));
            Map<String, String> resolved = installer.install(set, tree);
            WorkspaceFs.Tally size;
            try {
                size = new WorkspaceFs(tree, owner.uid(), owner.gid()).seal(MAX_ENTRIES);
            } catch (WorkspaceException e) {
                throw new InstallFailed("the install left what an entry may not hold: " + e.getMessage());
            }
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("key", key);
            m.put("ecosystem", set.ecosystem());
            m.put("specs", set.specs());
            m.put("resolved", new TreeMap<>(resolved));
            m.put("bytes", size.bytes());
            m.put("created", clock.instant().toString());
            // beside the tree, in a directory no sandbox ever saw; CREATE_NEW: never through anything already there
            Files.write(tmp.resolve(MANIFEST), JSON.writeValueAsBytes(m), StandardOpenOption.CREATE_NEW,
                    StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS);
            Files.setPosixFilePermissions(tmp.resolve(MANIFEST), PosixFilePermissions.fromString("r--r--r--"));
            Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("r-xr-xr-x"));
            boolean already;
            synchronized (this) {
                // an install that lost its last waiter may still have finished and published the same key meanwhile
                // (a new request then started this one): theirs stays, this copy goes (after the lock)
                already = Files.isRegularFile(root.resolve(key).resolve(MANIFEST), LinkOption.NOFOLLOW_LINKS);
                if (!already) Files.move(tmp, root.resolve(key), StandardCopyOption.ATOMIC_MOVE);
                lastUsed.put(key, clock.instant());
            }
            if (already) deleteQuietly(tmp);
            published = true;
            installs.incrementAndGet();
            evictOver(key);
            return Math.max(1, (System.nanoTime() - t0) / 1_000_000);
        } catch (IOException e) {
            LOG.warn("package store: cannot store {}: {}", key, e.toString());
            throw new InstallFailed("the server could not store the installed packages: " + e.getMessage());
        } finally {
            if (!published) {
                failures.incrementAndGet();
                deleteQuietly(tmp);
            }
        }
    }

    /** Evicts least recently used entries, not held and not {@code keep}, until the store fits. */
    private synchronized void evictOver(String keep) {
        List<Entry> all = new ArrayList<>(list());
        long total = all.stream().mapToLong(Entry::bytes).sum();
        all.sort(Comparator.comparing(Entry::lastUsed));
        for (Entry e : all) {
            if (total <= maxBytes) break;
            if (e.key().equals(keep) || e.inUse() > 0) continue;
            if (remove(e.key())) {
                total -= e.bytes();
                evictions.incrementAndGet();
                LOG.info("package store: evicted {} ({} bytes, last used {})", e.key(), e.bytes(), e.lastUsed());
            }
        }
    }

    /** The bound (PACKAGE_STORE_MB). */
    public long maxBytes() {
        return maxBytes;
    }

    /** Every entry, most recently used first. */
    public synchronized List<Entry> list() {
        List<Entry> out = new ArrayList<>();
        try (Stream<Path> s = Files.list(root)) {
            for (Path p : s.toList()) {
                String key = p.getFileName().toString();
                if (key.startsWith(BUILDING) || !Files.isRegularFile(p.resolve(MANIFEST), LinkOption.NOFOLLOW_LINKS)) continue;
                Entry m = manifest(p);
                out.add(new Entry(key, m.ecosystem(), m.specs(), m.resolved(), m.bytes(), m.created(),
                        lastUsed.getOrDefault(key, m.created()), inUse.getOrDefault(key, 0)));
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        out.sort(Comparator.comparing(Entry::lastUsed).reversed());
        return out;
    }

    /**
     * Removes {@code key}'s entry (an admin's clear); false when it is held by a run or absent. Runs that hold it
     * keep their bind; the next request installs again.
     */
    public synchronized boolean remove(String key) {
        if (inUse.getOrDefault(key, 0) > 0) return false;
        Path dir = root.resolve(key);
        if (!dir.normalize().getParent().equals(root.normalize())
                || !Files.isRegularFile(dir.resolve(MANIFEST), LinkOption.NOFOLLOW_LINKS)) return false;
        try {
            Path gone = root.resolve(BUILDING + "gone-" + key);
            Files.move(dir, gone, StandardCopyOption.ATOMIC_MOVE); // no request can find it from here on
            lastUsed.remove(key);
            deleteQuietly(gone);
            return true;
        } catch (IOException e) {
            LOG.warn("package store: cannot remove {}: {}", key, e.toString());
            return false;
        }
    }

    /** Counts for metrics: installs, failed installs, hits, misses, evictions, and the store's bytes now. */
    public Map<String, Long> counts() {
        Map<String, Long> m = new LinkedHashMap<>();
        for (String name : List.of("installs", "failures", "hits", "misses", "evictions")) m.put(name, counter(name));
        m.put("bytes", bytes());
        return m;
    }

    /** One of the counters of {@link #counts} (installs, failures, hits, misses, evictions), without reading the store. */
    public long counter(String name) {
        return switch (name) {
            case "installs" -> installs.get();
            case "failures" -> failures.get();
            case "hits" -> hits.get();
            case "misses" -> misses.get();
            case "evictions" -> evictions.get();
            default -> throw new IllegalArgumentException("no counter " + name);
        };
    }

    /** The bytes of the installed files of every entry (what maxBytes bounds); reads each entry's manifest. */
    public long bytes() {
        return list().stream().mapToLong(Entry::bytes).sum();
    }

    private Entry manifest(Path dir) {
        try {
            JsonNode n = JSON.readTree(Files.readString(dir.resolve(MANIFEST)));
            Map<String, String> resolved = new TreeMap<>();
            for (Map.Entry<String, JsonNode> e : n.path("resolved").properties()) resolved.put(e.getKey(), e.getValue().asString());
            List<String> specs = new ArrayList<>();
            for (JsonNode s : n.path("specs")) specs.add(s.asString());
            Instant created = Instant.parse(n.path("created").asString());
            return new Entry(dir.getFileName().toString(), n.path("ecosystem").asString(), specs, resolved,
                    n.path("bytes").asLong(), created, created, 0);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private Instant created(Path dir) {
        try {
            return manifest(dir).created();
        } catch (RuntimeException e) {
            return Instant.EPOCH;
        }
    }

    /** Deletes a tree an install left or the store sealed, however deep, never following a link. */
    private static void deleteQuietly(Path p) {
        try {
            DeepWalk.deleteTree(p);
        } catch (IOException e) {
            LOG.warn("package store: {}", e.getMessage());
        }
    }

}
