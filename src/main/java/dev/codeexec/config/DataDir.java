package dev.codeexec.config;

import dev.codeexec.linux.DeepWalk;

import java.io.IOException;
import java.io.InputStream;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantLock;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * DATA_DIR, the server's state on the host: every path in it is named here, every directory is made here with its
 * mode, and every file the server replaces in it is written through here. (A run's staged code file has a name of
 * its own and is written once; Go writes its build cache itself, under {@link #locked}.)
 *
 * <p>Several servers may share one DATA_DIR and start at the same moment (three workers on one host, as
 * e2e/test/cluster.test.js starts them). So no file is written in place or under a fixed temporary name: it is
 * written under a name no other writer uses and renamed over its target ({@link #write}, {@link #publish}), and a
 * reader (a sandbox, another server) sees the old file or the new one, never half of one. Where two writers must
 * not both do the work (filling the Go build cache, swapping the /etc snapshot) they take {@link #locked} first.
 *
 * <p>The sandbox uid reaches what bwrap binds from here (runtime/, go-cache/, etc/) by path, so DATA_DIR and the
 * directories on the way must be searchable by it; it can list nothing it does not need to.
 */
public final class DataDir {

    private static final String PUBLIC_DIR = "rwxr-xr-x";
    private static final String SEARCH_ONLY_DIR = "rwx--x--x";
    private static final String PRIVATE_DIR = "rwx------";

    /** What {@link #tempFor} names look like, with the writer's pid; a tool may add its own suffix (the JVM's .config). */
    private static final Pattern TEMP_NAME = Pattern.compile("\\..+\\.(\\d+)-[0-9a-f]{8}\\.tmp(\\..*)?");

    /** Control FIFOs this old belong to no starting run: a run's launcher opens its FIFOs within milliseconds. */
    private static final long STALE_CONTROL_MS = 60_000;

    /** One holder per lock file in this JVM: file locks are per process, and a second one in it would throw. */
    private static final Map<Path, ReentrantLock> HELD_HERE = new ConcurrentHashMap<>();

    private final Path root;

    private DataDir(Path root) {
        this.root = root.toAbsolutePath().normalize();
    }

    public static DataDir of(Config config) {
        return at(config.dataDir());
    }

    public static DataDir at(Path root) {
        return new DataDir(root);
    }

    public Path root() {
        return root;
    }

    /**
     * Bound read-only into sandboxes: the engine's helper files (the TypeScript loader, the interpreters of warm
     * sandboxes and sessions), {@link #pythonSite()}, the runners' {@code __pycache__}, and what the languages'
     * warm-ups produce (their {@code produces} in languages.json: the TypeScript code cache
     * {@code typescript.v8cache}, the Java AOT cache {@code java-source.aot}).
     */
    public Path runtime() {
        return root.resolve("runtime");
    }

    /** The directories Python's real site module adds to sys.path, measured once per start (warm.PythonSite). */
    public Path pythonSite() {
        return runtime().resolve("python-site");
    }

    /** The shared Go build cache, bound read-only into sandboxes (warm.GoCacheWarmer fills it). */
    public Path goCache() {
        return root.resolve("go-cache");
    }

    /** The code files of runs until the sandbox has read them. */
    public Path staging() {
        return root.resolve("staging");
    }

    /**
     * Port previews: one directory per session or job sandbox ({@code sandbox.SandboxSpec#previewDir}), holding the
     * unix socket its init listens on; made and removed with the sandbox.
     */
    public Path previews() {
        return root.resolve("previews");
    }

    /** This server's start-time work (warm-ups' temporary directories); removed when it closes. */
    public Path scratch() {
        return root.resolve("tmp").resolve(Long.toString(ProcessHandle.current().pid()));
    }

    /**
     * codeexec-helper, installed from the jar at each start under a name made of its content's checksum and length
     * ({@code contentHash}), so that servers of different versions sharing a DATA_DIR never run each other's helper
     * (a newer init takes options an older one does not know).
     */
    public Path helper(String contentHash) {
        return root.resolve("helper").resolve("codeexec-helper-" + contentHash);
    }

    /** The FIFOs of control channels, one directory per run, until both ends are open. */
    public Path control() {
        return root.resolve("control");
    }

    /** The egress proxy's unix sockets, one per sandbox with network access (egress.EgressChannels). */
    public Path egress() {
        return root.resolve("egress");
    }

    /**
     * The egress proxy's own CA for placeholder secrets (egress.InterceptCa): its key never leaves this directory,
     * which is the server's alone (0700); only the certificate is copied where sandboxes read it.
     */
    public Path secretsCa() {
        return root.resolve("secrets-ca");
    }

    /** Code mode: each sandbox's generated tool library (a directory per sandbox, readable by its uid). */
    public Path codeTools() {
        return root.resolve("code-tools");
    }

    /** The package store: one sealed directory per installed set (PACKAGE_STORE_MB). */
    public Path packages() {
        return root.resolve("packages");
    }

    /** Mount points of working directories mounted into warm sandboxes after they started (sandbox.WorkDirMounts). */
    public Path late() {
        return root.resolve("late");
    }

    /**
     * One sandbox's directory in {@link #late()} ({@code token}: random, not the pid, because a warm sandbox's mount
     * table shows the path of the directory bound at its working directory; the pid is in {@link #LATE_OWNER}).
     */
    public Path lateFor(String token) {
        return late().resolve(token);
    }

    /** The file in a {@link #lateFor} directory that holds its server's pid, for reaping what a dead server left. */
    public static final String LATE_OWNER = ".pid";
    /** The seccomp program bwrap installs; opened by the root-side launcher, so it stays root-only (0600). */
    public Path seccompFilter() {
        return root.resolve("seccomp.bpf");
    }

    /** The sandbox's /etc (sandbox.EtcSnapshot); {@code etc.new-*} and {@code etc.old-*} beside it while it changes. */
    public Path etc() {
        return root.resolve("etc");
    }

    /** Where Jetty spools the parts of multipart uploads that are too large to hold in memory. */
    public Path uploadSpool() {
        return root.resolve("upload-tmp");
    }

    /** Lock files live apart from everything bound into sandboxes: a sandboxed program must not hold one. */
    private Path lockFile(String name) {
        return root.resolve("locks").resolve(name + ".lock");
    }

    /**
     * Creates DATA_DIR as mode 0711, or adds the search bits to an existing one: the sandbox uid must traverse it
     * to reach what bwrap binds from it (bwrap opens bind sources as that uid: the /etc snapshot, a read-only Go
     * build cache), but can neither list it nor read root-only files in it (the seccomp program is 0600 and opened
     * by the root-side launcher). Its parent directories must be searchable by that uid too.
     */
    public Path prepareRoot() throws IOException {
        if (!Files.isDirectory(root)) {
            Files.createDirectories(root);
            Files.setPosixFilePermissions(root, PosixFilePermissions.fromString(SEARCH_ONLY_DIR));
        }
        Set<PosixFilePermission> perms = Files.getPosixFilePermissions(root);
        if (perms.add(PosixFilePermission.GROUP_EXECUTE) | perms.add(PosixFilePermission.OTHERS_EXECUTE))
            Files.setPosixFilePermissions(root, perms);
        return root;
    }

    /**
     * runtime/ is 0755: bwrap binds it as the sandbox uid, and sandboxed programs read the files in it. Temporary
     * files of servers killed mid-write (a Java AOT cache is 25 MB) are removed.
     */
    public Path prepareRuntime() throws IOException {
        return removeStaleTemps(directory(runtime(), PUBLIC_DIR));
    }

    /** go-cache/ is 0755: sandboxed Go builds read it (read-only) as the sandbox uid. */
    public Path prepareGoCache() throws IOException {
        return removeStaleTemps(directory(goCache(), PUBLIC_DIR));
    }

    /** staging/ is 0711: the launcher opens a staged file by its name, and no one else can list the staged code. */
    public Path prepareStaging() throws IOException {
        return directory(staging(), SEARCH_ONLY_DIR);
    }

    /**
     * tmp/ is 0700 (only the server works there); this server's directory in it is created, and those of servers
     * that are no longer running (killed, say) are removed.
     */
    public Path prepareScratch() throws IOException {
        Path all = directory(scratch().getParent(), PRIVATE_DIR);
        try (var servers = Files.list(all)) {
            servers.filter(d -> !isLiveProcess(d.getFileName().toString())).forEach(DataDir::deleteTree);
        }
        return Files.createDirectories(scratch());
    }

    /** helper/ is 0755: the launcher runs the helper as root, and bwrap executes it as the sandbox's init. */
    public Path prepareHelperDir() throws IOException {
        return directory(root.resolve("helper"), PUBLIC_DIR);
    }

    /**
     * control/ is root-only (0700): a FIFO in it is the channel into a sandbox. Leftovers of a crashed server are
     * removed; recent entries may belong to another server sharing DATA_DIR, mid-start, and stay.
     */
    public Path prepareControl() throws IOException {
        Path dir = Files.createDirectories(control());
        long stale = System.currentTimeMillis() - STALE_CONTROL_MS;
        try (var entries = Files.list(dir)) {
            for (Path e : entries.toList())
                if (Files.getLastModifiedTime(e, LinkOption.NOFOLLOW_LINKS).toMillis() < stale) deleteTree(e);
        }
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString(PRIVATE_DIR));
        return dir;
    }

    /** late/ is 0711: bwrap binds a run's directory in it as the sandbox uid, which must not list the others. */
    public Path prepareLate() throws IOException {
        return directory(late(), SEARCH_ONLY_DIR);
    }

    /** This server's directory in late/ (one per run in it), with late/'s mode for the same reason. */
    public Path prepareLateFor(String token) throws IOException {
        return directory(lateFor(token), SEARCH_ONLY_DIR);
    }

    /** secrets-ca/ is 0700: it holds the CA's private key (0600). */
    public Path prepareSecretsCa() throws IOException {
        return directory(secretsCa(), PRIVATE_DIR);
    }

    /** upload-tmp/ is 0700: the spooled parts are a tenant's files, for the server's eyes only. */
    public Path prepareUploadSpool() throws IOException {
        return directory(uploadSpool(), PRIVATE_DIR);
    }

    private static Path directory(Path dir, String mode) throws IOException {
        Files.createDirectories(dir);
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString(mode));
        return dir;
    }

    /** Removes the {@link #tempFor} files in {@code dir} whose writer no longer runs. */
    private static Path removeStaleTemps(Path dir) throws IOException {
        try (var files = Files.list(dir)) {
            for (Path f : files.toList()) {
                Matcher m = TEMP_NAME.matcher(f.getFileName().toString());
                if (m.matches() && !isLiveProcess(m.group(1))) Files.deleteIfExists(f);
            }
        }
        return dir;
    }

    /**
     * A name beside {@code target} that no other writer uses (this process and a random part): in the same
     * directory, hence on the same filesystem, so {@link #publish} can rename it atomically. Not created: a program
     * that is told to write there (a warm-up) may insist on creating it, and its absence says it wrote nothing.
     */
    public static Path tempFor(Path target) {
        return target.resolveSibling("." + target.getFileName() + "." + ProcessHandle.current().pid() + "-"
                + Ids.hex(4) + ".tmp");
    }

    /** Gives {@code written} its final mode and renames it over {@code target} in one step. */
    public static void publish(Path written, Path target, String mode) throws IOException {
        Files.setPosixFilePermissions(written, PosixFilePermissions.fromString(mode));
        Files.move(written, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    /** Replaces {@code target} with {@code content} and {@code mode} ("rw-r--r--"), atomically. */
    public static void write(Path target, byte[] content, String mode) throws IOException {
        write(target, mode, tmp -> Files.write(tmp, content));
    }

    /** Replaces {@code target} with what {@code in} holds, atomically. */
    public static void write(Path target, InputStream in, String mode) throws IOException {
        write(target, mode, tmp -> Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING));
    }

    private interface Filler {
        void fill(Path tmp) throws IOException;
    }

    private static void write(Path target, String mode, Filler filler) throws IOException {
        // owner-only until published: the bytes of a root-only file (the seccomp program) are never readable
        Path tmp = Files.createFile(tempFor(target),
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        try {
            filler.fill(tmp);
            publish(tmp, target, mode);
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    /** Work done under a lock. */
    public interface LockedWork<T> {
        T run() throws IOException, InterruptedException;
    }

    /**
     * Runs {@code work} while holding the lock {@code name}: one holder at a time among the servers sharing this
     * DATA_DIR and the threads of this one. For work two servers must not both do; the second to come waits, then
     * usually finds it done.
     */
    public <T> T locked(String name, LockedWork<T> work) throws IOException, InterruptedException {
        Path file = lockFile(name);
        directory(file.getParent(), PRIVATE_DIR);
        ReentrantLock here = HELD_HERE.computeIfAbsent(file, f -> new ReentrantLock());
        here.lockInterruptibly();
        try (FileChannel ch = FileChannel.open(file, Set.of(StandardOpenOption.CREATE, StandardOpenOption.WRITE),
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
             FileLock ignored = ch.lock()) {
            return work.run();
        } finally {
            here.unlock();
        }
    }

    private static boolean isLiveProcess(String pidName) {
        try {
            return ProcessHandle.of(Long.parseLong(pidName)).map(ProcessHandle::isAlive).orElse(false);
        } catch (NumberFormatException e) {
            return false;
        }
    }

    /**
     * Deletes a tree (or a file) that a sandboxed program may have written, never following a link
     * ({@link DeepWalk#deleteTree}); null or nothing there, nothing done. What cannot be deleted is logged, not thrown.
     */
    public static void deleteTree(Path root) {
        if (root == null) return;
        try {
            DeepWalk.deleteTree(root);
        } catch (IOException e) {
            org.slf4j.LoggerFactory.getLogger(DataDir.class).warn("{}", e.getMessage());
        }
    }
}
