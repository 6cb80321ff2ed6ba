package dev.codeexec.workspace;

import dev.codeexec.config.Config;
import dev.codeexec.linux.Posix;
import dev.codeexec.workspace.WorkspaceException.Kind;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Pattern;

/**
 * Persistent workspaces: {@code WORKSPACE_ROOT/<tenant>/<name>/}, one directory each, owned by the sandbox uid so
 * runs can write in it. Tenants never see each other's directories because every lookup is keyed by the caller's
 * tenant, which comes from its API key, never from the request. Every file access goes through the workspace's
 * {@link WorkspaceFs}.
 *
 * <p>Limits: bytes and entries, as {@link Quota} decides for WORKSPACE_ROOT at start. One workspace that cannot be
 * read (a tree a program broke, a permission it took away) fails only its own operations: listings of many
 * workspaces show it with its error, expiry logs it and goes on.
 */
public final class Workspaces {

    private static final Logger LOG = LoggerFactory.getLogger(Workspaces.class);
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9_-]{1,64}");
    private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;

    private final Path root;
    private final long quotaBytes;
    private final long maxEntries;
    private final Duration maxAge;
    private final int uid;
    private final int gid;
    private final Quota quota;
    /** WORKSPACE_ROOT, held open for its file system's counters ({@link #watch}). */
    private final int rootFd;
    /** Workspaces with a run or a request in flight: expiry skips them. */
    private final Map<Path, AtomicInteger> inUse = new ConcurrentHashMap<>();
    private volatile ScheduledExecutorService watchdog;

    /**
     * The workspaces the configuration names: WORKSPACE_ROOT, WORKSPACE_QUOTA_MB, WORKSPACE_MAX_ENTRIES,
     * WORKSPACE_MAX_AGE_HOURS, SANDBOX_UID/GID.
     */
    public static Workspaces configured(Config config) {
        return new Workspaces(Path.of(config.get(Config.WORKSPACE_ROOT)),
                config.get(Config.WORKSPACE_QUOTA_MB) * 1024L * 1024L, config.get(Config.WORKSPACE_MAX_ENTRIES),
                Duration.ofHours(config.get(Config.WORKSPACE_MAX_AGE_HOURS)),
                config.get(Config.SANDBOX_UID), config.get(Config.SANDBOX_GID));
    }

    /** With the default WORKSPACE_MAX_ENTRIES. */
    public Workspaces(Path root, long quotaBytes, Duration maxAge, int uid, int gid) {
        this(root, quotaBytes, Integer.parseInt(Config.WORKSPACE_MAX_ENTRIES.defaultValue()), maxAge, uid, gid);
    }

    /**
     * @param maxEntries files and directories one workspace may hold
     * @param maxAge     idle time after which a workspace is removed; zero keeps workspaces forever
     */
    public Workspaces(Path root, long quotaBytes, long maxEntries, Duration maxAge, int uid, int gid) {
        this.root = root;
        this.quotaBytes = quotaBytes;
        this.maxEntries = maxEntries;
        this.maxAge = maxAge;
        this.uid = uid;
        this.gid = gid;
        try {
            Files.createDirectories(root);
            // 0711: the sandbox uid may pass through to its own workspace (bwrap opens bind sources as that uid)
            // but cannot list which tenants and workspaces exist.
            Files.setPosixFilePermissions(root, PosixFilePermissions.fromString("rwx--x--x"));
        } catch (IOException e) {
            throw new IllegalStateException("WORKSPACE_ROOT " + root + " cannot be created: " + e.getMessage(), e);
        }
        for (Path p = root.toAbsolutePath().getParent(); p != null; p = p.getParent()) {
            try {
                if (!Files.getPosixFilePermissions(p).contains(java.nio.file.attribute.PosixFilePermission.OTHERS_EXECUTE))
                    throw new IllegalStateException("WORKSPACE_ROOT " + root + " is unreachable for the sandbox uid: "
                            + p + " is not searchable by others (chmod o+x " + p + ", or choose another WORKSPACE_ROOT)");
            } catch (IOException e) {
                throw new IllegalStateException("WORKSPACE_ROOT " + root + ": cannot check " + p + ": " + e.getMessage(), e);
            }
        }
        this.quota = Quota.detect(root, quotaBytes, maxEntries);
        try {
            this.rootFd = Posix.openat(Posix.AT_FDCWD, root.toString(), Posix.O_PATH | Posix.O_DIRECTORY);
        } catch (Posix.Errno e) {
            throw new IllegalStateException("WORKSPACE_ROOT " + root + " cannot be opened (errno " + e.errno + ")");
        }
    }

    public long quotaBytes() {
        return quotaBytes;
    }

    public long maxEntries() {
        return maxEntries;
    }

    public Path root() {
        return root;
    }

    Quota quota() {
        return quota;
    }

    /** How workspaces' limits are enforced: {@code xfs-project-quota} or {@code measured}. */
    public String enforcement() {
        return quota.name();
    }

    /** For runtime_info: limits, how they are enforced and why. */
    public Map<String, Object> describe() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("quotaBytes", quotaBytes);
        m.put("maxEntries", maxEntries);
        m.put("enforcement", quota.name());
        m.put("enforcementNote", quota.note());
        return m;
    }

    /** Checks a workspace or tenant name: {@code [A-Za-z0-9_-]{1,64}}. */
    public static String checkName(String kind, String name) {
        if (name == null || !NAME.matcher(name).matches())
            throw new WorkspaceException(Kind.BAD_NAME, "bad " + kind + " name '" + (name == null ? "" :
                    name.length() > 80 ? name.substring(0, 80) + "..." : name) + "': use 1-64 of A-Z a-z 0-9 _ -");
        return name;
    }

    private Path dir(String tenant, String name) {
        return root.resolve(checkName("tenant", tenant)).resolve(checkName("workspace", name));
    }

    /** The tenant's workspace, created when {@code create} (else NOT_FOUND when missing). */
    public Workspace open(String tenant, String name, boolean create) {
        Path dir = dir(tenant, name);
        if (!Files.isDirectory(dir, NOFOLLOW)) {
            if (!create) throw new WorkspaceException(Kind.NOT_FOUND, "workspace '" + name + "' not found");
            try {
                Path tenantDir = dir.getParent();
                if (!Files.isDirectory(tenantDir, NOFOLLOW)) {
                    Files.createDirectories(tenantDir);
                    Files.setPosixFilePermissions(tenantDir, PosixFilePermissions.fromString("rwx--x--x"));
                }
                // 0770, group SANDBOX_GID: a run owns it while it runs (WorkspaceFs.handOver); a second run in it at
                // the same time, another host uid of the same group, can still reach it
                Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
                Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxrwx---"));
                chown(dir);
            } catch (java.nio.file.FileAlreadyExistsException raced) {
                // created by a concurrent request: fine
            } catch (IOException e) {
                throw new WorkspaceException(Kind.IO, "workspace '" + name + "' cannot be created");
            }
        }
        return new Workspace(tenant, name, new WorkspaceFs(dir, uid, gid, quota.attach(dir)), this);
    }

    /** The tenant's workspace if it exists. */
    public Optional<Workspace> find(String tenant, String name) {
        return Files.isDirectory(dir(tenant, name), NOFOLLOW) ? Optional.of(open(tenant, name, false)) : Optional.empty();
    }

    /** Names of the tenant's workspaces, sorted. */
    public List<String> names(String tenant) {
        Path t = root.resolve(checkName("tenant", tenant));
        if (!Files.isDirectory(t, NOFOLLOW)) return new ArrayList<>();
        return subdirectories(t, "workspaces");
    }

    /**
     * Size, limits and counts of each of the tenant's workspaces, by name; one removed (expired, deleted) between the
     * listing and its turn is left out, and one that cannot be examined is listed with its error. The one listing
     * behind the REST API, the MCP tool and the admin view.
     */
    public List<Workspace.Info> infos(String tenant) {
        List<Workspace.Info> out = new ArrayList<>();
        for (String name : names(tenant)) {
            Workspace ws;
            try {
                ws = open(tenant, name, false);
            } catch (WorkspaceException e) {
                if (e.kind() != Kind.NOT_FOUND) out.add(new Workspace(tenant, name, null, this).unreadable(e.getMessage()));
                continue;
            } catch (RuntimeException e) {
                LOG.warn("workspace {}/{} cannot be opened", tenant, name, e);
                out.add(new Workspace(tenant, name, null, this).unreadable("it cannot be opened"));
                continue;
            }
            try {
                out.add(ws.info());
            } catch (WorkspaceException e) {
                if (e.kind() != Kind.NOT_FOUND) out.add(ws.unreadable(e.getMessage()));
            } catch (RuntimeException e) {
                LOG.warn("workspace {}/{} cannot be examined", tenant, name, e);
                out.add(ws.unreadable("it cannot be examined (details are in the server log)"));
            }
        }
        return out;
    }

    /** Tenants that have a directory under the root (an admin's view of every tenant's workspaces), sorted. */
    public List<String> tenants() {
        return subdirectories(root, "tenants");
    }

    /** Directories (not links) with valid names in {@code dir}, sorted. */
    private static List<String> subdirectories(Path dir, String what) {
        List<String> out = new ArrayList<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir)) {
            for (Path p : ds) {
                String n = p.getFileName().toString();
                if (NAME.matcher(n).matches() && Files.isDirectory(p, NOFOLLOW)) out.add(n);
            }
        } catch (IOException e) {
            throw new WorkspaceException(Kind.IO, what + " cannot be listed");
        }
        out.sort(null);
        return out;
    }

    /** Deletes a whole workspace, however deep its tree. */
    public void delete(String tenant, String name) {
        Workspace ws = open(tenant, name, false);
        try {
            ws.fs().deleteAll();
        } catch (WorkspaceException e) {
            if (e.kind() == Kind.NOT_FOUND) throw e;
            throw new WorkspaceException(e.kind(), "workspace '" + name + "' cannot be deleted: " + e.getMessage());
        }
    }

    /**
     * Removes workspaces idle for longer than the maximum age (by their directory's modification time, which
     * every use refreshes), skipping those in use. Returns how many were removed. Whatever one workspace holds,
     * it fails only itself: the failure is logged and the sweep goes on with the next.
     */
    public int expire(Instant now) {
        if (maxAge.isZero()) return 0;
        int removed = 0;
        List<String> tenants;
        try {
            tenants = tenants();
        } catch (WorkspaceException e) {
            LOG.warn("workspace expiry: {}", e.getMessage());
            return 0;
        }
        for (String tenant : tenants) {
            List<String> names;
            try {
                names = names(tenant);
            } catch (WorkspaceException e) {
                LOG.warn("workspace expiry: tenant {}: {}", tenant, e.getMessage());
                continue;
            }
            for (String name : names) {
                Path dir = root.resolve(tenant).resolve(name);
                if (inUse.containsKey(dir)) continue;
                try {
                    FileTime mtime = Files.getLastModifiedTime(dir, NOFOLLOW);
                    if (mtime.toInstant().plus(maxAge).isBefore(now)) {
                        delete(tenant, name);
                        removed++;
                    }
                } catch (Throwable e) { // a sweep that dies here would never run again: contain it to this workspace
                    if (e instanceof java.nio.file.NoSuchFileException
                            || e instanceof WorkspaceException w && w.kind() == Kind.NOT_FOUND) continue;
                    LOG.warn("workspace expiry: {}/{} could not be removed: {}", tenant, name, e.toString());
                }
            }
        }
        return removed;
    }

    /** Marks a workspace busy until the returned handle is closed (expiry leaves it alone meanwhile). */
    Hold hold(Path dir) {
        inUse.computeIfAbsent(dir, d -> new AtomicInteger()).incrementAndGet();
        return () -> inUse.computeIfPresent(dir, (d, n) -> n.decrementAndGet() <= 0 ? null : n);
    }

    /** A mark that a workspace is in use; closing it ends the mark. */
    @FunctionalInterface
    public interface Hold extends AutoCloseable {
        @Override
        void close();
    }

    /**
     * Measures a workspace while a run writes to it ({@link Watchdog}), on one daemon thread shared by every watch
     * (so watching costs at most one core however many runs there are), until closed or past a limit, then calls
     * {@code stop} once.
     */
    Workspace.Watch watch(Workspace ws, Workspace.Usage before, long bytesAllowed, Runnable stop) {
        Watchdog w = new Watchdog(ws, before, maxEntries, bytesAllowed, stop, this::fsStat, watchdog());
        w.start();
        return w::close;
    }

    /** The counters of WORKSPACE_ROOT's file system, or null when they cannot be read. */
    Posix.FsStat fsStat() {
        try {
            return Posix.fstatfs(rootFd);
        } catch (Posix.Errno e) {
            return null;
        }
    }

    private ScheduledExecutorService watchdog() {
        ScheduledExecutorService s = watchdog;
        if (s != null) return s;
        synchronized (this) {
            if (watchdog == null) {
                watchdog = Executors.newSingleThreadScheduledExecutor(
                        Thread.ofPlatform().name("workspace-watchdog").daemon(true).factory());
            }
            return watchdog;
        }
    }

    private void chown(Path p) throws IOException {
        try {
            var lookup = p.getFileSystem().getUserPrincipalLookupService();
            Files.setOwner(p, lookup.lookupPrincipalByName(Integer.toString(uid)));
            Files.getFileAttributeView(p, java.nio.file.attribute.PosixFileAttributeView.class, NOFOLLOW)
                    .setGroup(lookup.lookupPrincipalByGroupName(Integer.toString(gid)));
        } catch (java.nio.file.FileSystemException e) {
            // not root (tests): the directory stays ours
        }
    }
}
