package dev.codeexec.packages;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermission;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;

/**
 * The store of installed package sets: one sealed, read-only directory per {@link PackageSet#key key}, built once
 * and shared by every run that declares the same set on the same interpreter.
 *
 * <ul>
 *   <li>Building: the first request for a key runs the {@link Installer} into a fresh directory beside the store
 *   entries; requests for the same key that arrive meanwhile wait for that one install (one install, not eight).
 *   A failed install leaves nothing behind and is not remembered: the next request tries again.</li>
 *   <li>Sealing: a finished entry gets its manifest ({@code .entry.json}: the set, what was resolved, size, when),
 *   loses every write bit, and appears under its key by one rename; runs get it read-only, so no run (and no later
 *   install) changes what another run imports.</li>
 *   <li>Bounds: past {@code maxBytes} the least recently used entries go first, never one a run holds
 *   ({@link Lease}) and never the one just built.</li>
 * </ul>
 */
public final class PackageStore {

    private static final Logger LOG = LoggerFactory.getLogger(PackageStore.class);
    private static final JsonMapper JSON = JsonMapper.shared();
    static final String MANIFEST = ".entry.json";
    private static final String BUILDING = ".building-";

    /** Installs a set into an empty directory; returns name → version of what it installed. */
    @FunctionalInterface
    public interface Installer {
        /**
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
    private final Map<String, CompletableFuture<Long>> building = new ConcurrentHashMap<>();
    private final Map<String, Integer> inUse = new ConcurrentHashMap<>();
    private final Map<String, Instant> lastUsed = new ConcurrentHashMap<>();
    private final AtomicLong installs = new AtomicLong();
    private final AtomicLong failures = new AtomicLong();
    private final AtomicLong hits = new AtomicLong();
    private final AtomicLong misses = new AtomicLong();
    private final AtomicLong evictions = new AtomicLong();

    /** A store in {@code root} (created; half-built entries of an earlier server removed), bounded by {@code maxBytes}. */
    public PackageStore(Path root, long maxBytes, Clock clock) throws IOException {
        this.root = root;
        this.maxBytes = maxBytes;
        this.clock = clock;
        Files.createDirectories(root);
        try (Stream<Path> s = Files.list(root)) {
            for (Path p : s.toList()) {
                if (p.getFileName().toString().startsWith(BUILDING)) deleteTree(p);
                else if (Files.isRegularFile(p.resolve(MANIFEST))) lastUsed.put(p.getFileName().toString(), created(p));
            }
        }
    }

    /**
     * The entry of {@code set} on {@code interpreterVersion}, installed now when it is not in the store (waiting for
     * an install of the same key already under way), held for the caller until the lease is closed.
     *
     * @throws InstallFailed the install failed (nothing was stored)
     */
    public Lease acquire(PackageSet set, String interpreterVersion, Installer installer) throws InstallFailed {
        String key = set.key(interpreterVersion);
        while (true) {
            Optional<Lease> ready = hold(key, 0);
            if (ready.isPresent()) {
                hits.incrementAndGet();
                return ready.get();
            }
            CompletableFuture<Long> mine = new CompletableFuture<>();
            CompletableFuture<Long> theirs = building.putIfAbsent(key, mine);
            if (theirs != null) {
                try {
                    theirs.join();
                } catch (CompletionException e) {
                    if (e.getCause() instanceof InstallFailed f) throw f;
                    throw e;
                }
                continue; // built by the other request: take it from the store (a hit for this one)
            }
            misses.incrementAndGet();
            try {
                long ms = build(set, key, installer);
                mine.complete(ms);
                Optional<Lease> built = hold(key, ms);
                if (built.isPresent()) return built.get();
            } catch (InstallFailed | RuntimeException e) {
                mine.completeExceptionally(e);
                throw e;
            } finally {
                building.remove(key, mine);
            }
        }
    }

    private synchronized Optional<Lease> hold(String key, long installMs) {
        Path dir = root.resolve(key);
        if (!Files.isRegularFile(dir.resolve(MANIFEST))) return Optional.empty();
        inUse.merge(key, 1, Integer::sum);
        lastUsed.put(key, clock.instant());
        return Optional.of(new Lease(key, dir, manifest(dir).resolved(), installMs));
    }

    private long build(PackageSet set, String key, Installer installer) throws InstallFailed {
        long t0 = System.nanoTime();
        Path tmp = root.resolve(BUILDING + key + "-" + Long.toHexString(System.nanoTime()));
        try {
            Files.createDirectory(tmp);
            Map<String, String> resolved = installer.install(set, tmp);
            long bytes = size(tmp);
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("key", key);
            m.put("ecosystem", set.ecosystem());
            m.put("specs", set.specs());
            m.put("resolved", new TreeMap<>(resolved));
            m.put("bytes", bytes);
            m.put("created", clock.instant().toString());
            Files.writeString(tmp.resolve(MANIFEST), JSON.writeValueAsString(m));
            seal(tmp);
            synchronized (this) {
                Files.move(tmp, root.resolve(key), StandardCopyOption.ATOMIC_MOVE);
                lastUsed.put(key, clock.instant());
            }
            installs.incrementAndGet();
            evictOver(key);
            return Math.max(1, (System.nanoTime() - t0) / 1_000_000);
        } catch (InstallFailed e) {
            failures.incrementAndGet();
            deleteQuietly(tmp);
            throw e;
        } catch (IOException e) {
            failures.incrementAndGet();
            deleteQuietly(tmp);
            LOG.warn("package store: cannot store {}: {}", key, e.toString());
            throw new InstallFailed("the server could not store the installed packages: " + e.getMessage());
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
                if (key.startsWith(BUILDING) || !Files.isRegularFile(p.resolve(MANIFEST))) continue;
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
        if (!dir.normalize().getParent().equals(root.normalize()) || !Files.isRegularFile(dir.resolve(MANIFEST))) return false;
        try {
            Path gone = root.resolve(BUILDING + "gone-" + key);
            Files.move(dir, gone, StandardCopyOption.ATOMIC_MOVE); // no request can find it from here on
            lastUsed.remove(key);
            deleteTree(gone);
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

    /** Every write bit off, files and directories alike: the entry is read-only for everyone, its owner included. */
    static void seal(Path dir) throws IOException {
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.toList()) {
                if (Files.isSymbolicLink(p)) continue;
                Set<PosixFilePermission> perms = EnumSet.copyOf(Files.getPosixFilePermissions(p));
                perms.removeAll(EnumSet.of(PosixFilePermission.OWNER_WRITE, PosixFilePermission.GROUP_WRITE,
                        PosixFilePermission.OTHERS_WRITE));
                perms.add(PosixFilePermission.OWNER_READ);
                perms.add(PosixFilePermission.GROUP_READ);
                perms.add(PosixFilePermission.OTHERS_READ);
                if (Files.isDirectory(p)) perms.addAll(EnumSet.of(PosixFilePermission.OWNER_EXECUTE,
                        PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.OTHERS_EXECUTE));
                Files.setPosixFilePermissions(p, perms);
            }
        }
    }

    private static long size(Path dir) throws IOException {
        try (Stream<Path> s = Files.walk(dir)) {
            long total = 0;
            for (Path p : s.toList()) if (Files.isRegularFile(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) total += Files.size(p);
            return total;
        }
    }

    private static void deleteQuietly(Path p) {
        try {
            deleteTree(p);
        } catch (IOException e) {
            LOG.warn("package store: cannot delete {}: {}", p, e.toString());
        }
    }

    /** Deletes a tree, giving directories their write bit back first (a sealed entry has none). */
    public static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) return;
        try (Stream<Path> s = Files.walk(p)) {
            for (Path d : s.filter(x -> Files.isDirectory(x, java.nio.file.LinkOption.NOFOLLOW_LINKS)).toList()) {
                Set<PosixFilePermission> perms = EnumSet.copyOf(Files.getPosixFilePermissions(d));
                perms.add(PosixFilePermission.OWNER_WRITE);
                perms.add(PosixFilePermission.OWNER_EXECUTE);
                Files.setPosixFilePermissions(d, perms);
            }
        }
        try (Stream<Path> s = Files.walk(p)) {
            for (Path x : s.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(x);
        }
    }
}
