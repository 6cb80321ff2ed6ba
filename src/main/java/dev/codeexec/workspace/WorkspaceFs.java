package dev.codeexec.workspace;

import dev.codeexec.config.Ids;
import dev.codeexec.linux.DeepWalk;
import dev.codeexec.linux.Posix;
import dev.codeexec.workspace.WorkspaceException.Kind;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileTime;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.function.Consumer;

/**
 * The one safe way into a workspace directory, for every surface (tools, resources, REST, archive, artifacts).
 * After the lexical checks of {@link RelPath}, every path is opened component by component with
 * {@code openat(..., O_NOFOLLOW | O_DIRECTORY)} from a descriptor of the workspace root, so a symbolic link planted
 * by user code — as the last component, a middle one, or swapped in while a request is in flight — is refused
 * (ELOOP/ENOTDIR), never followed. The final operation is a {@code *at} call on that descriptor (or runs on
 * {@code /proc/self/fd/N}): the kernel resolves the name through descriptor N, not through a path walk. Names are
 * raw bytes on the way to the kernel ({@link Names}), so a name that is not UTF-8 is neither lost nor confused with
 * another. Files are opened with O_NONBLOCK and checked through the descriptor, so a FIFO planted by user code
 * cannot hang a request: anything that is not a regular file or directory is refused.
 *
 * <p>Walks: {@link #walkTree} (listings, diffs, archives) is iterative and bounded in entries and depth
 * ({@link #MAX_WALK_DEPTH}: no deeper path could be named through the API); {@link #tally} and deletion go down any
 * depth with a bounded number of descriptors ({@link DeepWalk}). None of them recurses, so no tree a program makes
 * can overflow the server's stack.
 *
 * <p>What the server creates belongs to SANDBOX_UID and SANDBOX_GID: files 0664, directories 0775 (the workspace
 * itself 0770). Before a program runs in the workspace, {@link #handOver} gives the whole tree to the host uid its
 * sandbox runs as; the group is every sandbox's, so a second run in the workspace at the same time (another uid)
 * still writes what the group may.
 */
public final class WorkspaceFs {

    /** Deepest level a listing walk descends to (the workspace root's entries are level 1). */
    public static final int MAX_WALK_DEPTH = RelPath.MAX_DEPTH;
    static final int FILE_MODE = 0664;
    static final int DIR_MODE = 0775;
    /** The workspace directory: no access for others. */
    static final int ROOT_MODE = 0770;

    private final Path root;
    private final int uid;
    private final int gid;
    private final Staging staging;

    /**
     * Where a file the server writes waits until it is complete, when not next to its target: under kernel project
     * quotas, outside the workspace's project, so that replacing a file needs room for the difference only.
     */
    interface Staging {
        /** A directory descriptor on the same file system as the workspace. */
        int dirFd();

        /** Charges the complete file (an open descriptor) to the workspace before it moves in. */
        void adopt(int fileFd) throws Posix.Errno;
    }

    /**
     * @param root the workspace directory on the host (itself created by the server; not user-controlled)
     * @param uid  owner given to created files and directories
     * @param gid  their group, which every run of the tenant is in
     */
    public WorkspaceFs(Path root, int uid, int gid) {
        this(root, uid, gid, null);
    }

    WorkspaceFs(Path root, int uid, int gid, Staging staging) {
        this.root = root;
        this.uid = uid;
        this.gid = gid;
        this.staging = staging;
    }

    public Path root() {
        return root;
    }

    /**
     * Type and size of one entry.
     *
     * @param name as shown to clients ({@link Names#display}); {@code path} holds the name itself
     */
    public record Entry(String name, RelPath path, String type, long size, FileTime modified) {
        public boolean isDirectory() {
            return type.equals("directory");
        }
    }

    /** How a bounded walk ended: how many entries it visited, and whether a bound cut it short. */
    public record Walked(int entries, boolean limitReached, boolean tooDeep) {
        /** Every entry below the directory was visited. */
        public boolean complete() {
            return !limitReached && !tooDeep;
        }
    }

    /** An open directory: an O_PATH descriptor plus the relative path it stands for. */
    private final class Dir implements AutoCloseable {
        final int fd;
        final RelPath path;

        Dir(int fd, RelPath path) {
            this.fd = fd;
            this.path = path;
        }

        Path proc() {
            return Path.of("/proc/self/fd/" + fd);
        }

        Dir open(String name, boolean create) {
            RelPath child = path.child(name);
            byte[] raw = Names.encode(name);
            for (int attempt = 0; ; attempt++) {
                try {
                    return new Dir(Posix.openat(fd, raw, Posix.O_PATH | Posix.O_DIRECTORY | Posix.O_NOFOLLOW, 0), child);
                } catch (Posix.Errno e) {
                    if (e.errno == Posix.ENOENT && create && attempt == 0) {
                        mkdir(raw, child);
                        continue;
                    }
                    // O_DIRECTORY|O_NOFOLLOW on a link answers ENOTDIR: name the real reason
                    if (e.errno == Posix.ENOTDIR && isLink(fd, raw))
                        throw new WorkspaceException(Kind.BAD_PATH, "refused: '" + child + "' is a symbolic link");
                    throw translate(e, child);
                }
            }
        }

        private void mkdir(byte[] raw, RelPath child) {
            try {
                Posix.mkdirat(fd, raw, DIR_MODE);
                own(fd, raw, DIR_MODE);
            } catch (Posix.Errno e) {
                if (e.errno != Posix.EEXIST) throw translate(e, child);
            }
        }

        /** A descriptor to read the directory's names with (O_PATH cannot). Caller closes. */
        int reader() throws Posix.Errno {
            return Posix.openat(fd, new byte[]{'.'}, Posix.O_RDONLY | Posix.O_DIRECTORY, 0);
        }

        @Override
        public void close() {
            Posix.close(fd);
        }
    }

    private static boolean isLink(int dirFd, byte[] name) {
        try {
            return Posix.statx(dirFd, name, 0).type() == Posix.S_IFLNK;
        } catch (Posix.Errno e) {
            return false;
        }
    }

    private Dir openRoot() {
        try {
            return new Dir(Posix.openat(Posix.AT_FDCWD, root.toString(),
                    Posix.O_PATH | Posix.O_DIRECTORY | Posix.O_NOFOLLOW), RelPath.ROOT);
        } catch (Posix.Errno e) {
            if (e.errno == Posix.ENOENT) throw new WorkspaceException(Kind.NOT_FOUND, "workspace not found");
            throw new WorkspaceException(Kind.IO, "workspace cannot be opened");
        }
    }

    /** Opens the directory at {@code dir}, creating missing components when asked. Caller closes. */
    private Dir walk(RelPath dir, boolean create) {
        Dir current = openRoot();
        try {
            for (String part : dir.parts()) {
                Dir next = current.open(part, create);
                current.close();
                current = next;
            }
            return current;
        } catch (RuntimeException e) {
            current.close();
            throw e;
        }
    }

    static WorkspaceException translate(Posix.Errno e, RelPath where) {
        return switch (e.errno) {
            case Posix.ENOENT -> new WorkspaceException(Kind.NOT_FOUND, "not found: " + where);
            case Posix.ELOOP -> new WorkspaceException(Kind.BAD_PATH, "refused: '" + where + "' is a symbolic link");
            case Posix.ENOTDIR -> new WorkspaceException(Kind.BAD_PATH, "not a directory: " + where);
            case Posix.EISDIR -> new WorkspaceException(Kind.CONFLICT, "is a directory: " + where);
            case Posix.EEXIST -> new WorkspaceException(Kind.CONFLICT, "already exists: " + where);
            case Posix.ENOTEMPTY ->
                    new WorkspaceException(Kind.CONFLICT, "directory not empty: " + where + " (delete recursively)");
            case Posix.ENAMETOOLONG -> new WorkspaceException(Kind.BAD_PATH, "name too long: " + where);
            case Posix.EACCES, Posix.EPERM -> new WorkspaceException(Kind.IO, "permission denied: " + where);
            case Posix.ENOSPC -> new WorkspaceException(Kind.QUOTA_EXCEEDED, "no space left on the workspace volume");
            case Posix.EDQUOT -> new WorkspaceException(Kind.QUOTA_EXCEEDED, "workspace quota exceeded");
            default -> new WorkspaceException(Kind.IO, "I/O error on " + where + " (errno " + e.errno + ")");
        };
    }

    private static WorkspaceException translate(IOException e, RelPath where) {
        String reason = e.getMessage() == null ? "" : e.getMessage();
        if (reason.contains("No space")) return new WorkspaceException(Kind.QUOTA_EXCEEDED, "no space left on the workspace volume");
        if (reason.contains("quota")) return new WorkspaceException(Kind.QUOTA_EXCEEDED, "workspace quota exceeded");
        return new WorkspaceException(Kind.IO, "I/O error on " + where);
    }

    /** Owner SANDBOX_UID, group SANDBOX_GID and {@code mode} for a name the server just created. */
    private void own(int dirFd, byte[] name, int mode) throws Posix.Errno {
        try {
            Posix.fchownat(dirFd, name, uid, gid);
        } catch (Posix.Errno e) {
            // Not root (tests, SANDBOX=none as a normal user): files stay ours, which is then also the runner's uid.
            if (e.errno != Posix.EPERM) throw e;
        }
        Posix.fchmodat(dirFd, name, mode);
    }

    /** Attributes of one entry without following a link; the root is a directory. */
    public Entry stat(RelPath path) {
        if (path.isRoot()) {
            try (Dir d = openRoot()) {
                return entry(d.fd, new byte[0], Posix.AT_EMPTY_PATH, "", path);
            }
        }
        try (Dir parent = walk(path.parent(), false)) {
            return entry(parent.fd, Names.encode(path.name()), 0, Names.display(path.name()), path);
        }
    }

    private static Entry entry(int dirFd, byte[] raw, int flags, String shown, RelPath rel) {
        try (Posix.Stats stats = new Posix.Stats()) {
            return entry(stats, dirFd, raw, flags, shown, rel);
        }
    }

    private static Entry entry(Posix.Stats stats, int dirFd, byte[] raw, int flags, String shown, RelPath rel) {
        Posix.Stat st;
        try {
            st = stats.statx(dirFd, raw, flags);
        } catch (Posix.Errno e) {
            throw translate(e, rel);
        }
        String type = switch (st.type()) {
            case Posix.S_IFREG -> "file";
            case Posix.S_IFDIR -> "directory";
            case Posix.S_IFLNK -> "symlink";
            default -> "other";
        };
        FileTime modified = FileTime.from(Instant.ofEpochSecond(st.mtimeSeconds(), st.mtimeNanos()));
        return new Entry(shown, rel, type, st.isRegularFile() ? st.size() : 0, modified);
    }

    /** Up to {@code max} names of a directory, as held ({@link Names}); {@code more[0]} says whether it has more. */
    private static List<String> names(Dir d, int max, boolean[] more) {
        try {
            int fd = d.reader();
            try {
                List<String> out = new ArrayList<>();
                long from = 0;
                while (out.size() < max) {
                    Posix.DirBatch b = Posix.readDir(fd, from, Math.min(DeepWalk.BATCH, max - out.size()));
                    for (Posix.DirEntry e : b.entries()) out.add(Names.decode(e.name()));
                    if (b.end()) {
                        more[0] = false;
                        return trim(out, max, more);
                    }
                    from = b.next();
                }
                more[0] = true;
                return trim(out, max, more);
            } finally {
                Posix.close(fd);
            }
        } catch (Posix.Errno e) {
            throw translate(e, d.path);
        }
    }

    private static List<String> trim(List<String> names, int max, boolean[] more) {
        if (names.size() <= max) return names;
        more[0] = true;
        return new ArrayList<>(names.subList(0, max));
    }

    /** One level of a directory, sorted by name; {@code limit} bounds the entries read. */
    public List<Entry> list(RelPath dir, int limit) {
        List<Entry> out = new ArrayList<>();
        try (Dir d = walk(dir, false); Posix.Stats stats = new Posix.Stats()) {
            for (String name : names(d, limit, new boolean[1])) {
                try {
                    out.add(entry(stats, d.fd, Names.encode(name), 0, Names.display(name), dir.child(name)));
                } catch (WorkspaceException gone) {
                    // removed between readdir and stat (a run deletes its code file, a program its temp files): the
                    // listing is of what exists, not a failure of the directory
                }
            }
        }
        out.sort((a, b) -> a.name().compareTo(b.name()));
        return out;
    }

    /** Whether a name in the workspace root starts with {@code prefix} (names only: nothing is stat'ed). */
    public boolean hasNameStartingWith(String prefix) {
        byte[] p = Names.encode(prefix);
        try (Dir d = openRoot()) {
            int fd = d.reader();
            try {
                long from = 0;
                while (true) {
                    Posix.DirBatch b = Posix.readDir(fd, from, DeepWalk.BATCH);
                    for (Posix.DirEntry e : b.entries())
                        if (java.util.Arrays.equals(e.name(), 0, Math.min(p.length, e.name().length), p, 0, p.length))
                            return true;
                    if (b.end()) return false;
                    from = b.next();
                }
            } finally {
                Posix.close(fd);
            }
        } catch (Posix.Errno e) {
            throw translate(e, RelPath.ROOT);
        }
    }

    /** A directory being walked: its descriptor, the names still to visit, and whether it had more than were read. */
    private record Frame(Dir dir, List<String> names, int[] next, boolean more) {
    }

    /**
     * Visits the entries below {@code dir} depth first (directories before their content, names sorted within a
     * directory), never following links, without recursion: at most {@code limit} entries, and directories at
     * level {@link #MAX_WALK_DEPTH} are listed but not entered. One descriptor is open per level.
     */
    public Walked walkTree(RelPath dir, int limit, Consumer<Entry> visitor) {
        int seen = 0;
        boolean limitReached = false;
        boolean tooDeep = false;
        Deque<Frame> stack = new ArrayDeque<>();
        try (Posix.Stats stats = new Posix.Stats()) {
            Dir start = walk(dir, false);
            stack.push(frame(start, limit));
            while (!stack.isEmpty()) {
                Frame f = stack.peek();
                if (f.next()[0] >= f.names().size()) {
                    stack.pop().dir().close();
                    if (f.more()) limitReached = true;
                    continue;
                }
                String name = f.names().get(f.next()[0]++);
                if (seen >= limit) {
                    limitReached = true;
                    break;
                }
                Entry e;
                try {
                    e = entry(stats, f.dir().fd, Names.encode(name), 0, Names.display(name), f.dir().path.child(name));
                } catch (WorkspaceException gone) {
                    continue; // removed while we walked: a running program may change the tree
                }
                seen++;
                visitor.accept(e);
                if (!e.isDirectory()) continue;
                if (e.path().parts().size() >= MAX_WALK_DEPTH) {
                    tooDeep = true;
                    continue;
                }
                Dir child;
                try {
                    child = f.dir().open(name, false);
                } catch (WorkspaceException swapped) {
                    continue; // replaced by a link or removed meanwhile: not followed
                }
                try {
                    stack.push(frame(child, limit - seen + 1));
                } catch (WorkspaceException unreadable) {
                    child.close();
                }
            }
        } finally {
            while (!stack.isEmpty()) stack.pop().dir().close();
        }
        return new Walked(seen, limitReached, tooDeep);
    }

    private static Frame frame(Dir d, int max) {
        boolean[] more = new boolean[1];
        List<String> names;
        try {
            names = names(d, max, more);
        } catch (WorkspaceException e) {
            d.close();
            throw e;
        }
        names.sort(null);
        return new Frame(d, names, new int[1], more[0]);
    }

    /**
     * What is below the root, any depth, no link followed: bytes of regular files (their sizes), entries, and of
     * them files (anything not a directory) and directories.
     *
     * @param complete false when the count stopped after {@code maxEntries} + 1 entries (the rest is unknown)
     */
    public record Tally(long bytes, long entries, int files, int directories, boolean complete) {
    }

    /**
     * Gives the whole tree (the root too, any depth, no link followed, no mount point entered) to the host uid a
     * sandbox runs as, group SANDBOX_GID, before its program can touch it: each sandbox has a host uid of its own
     * (SANDBOX_UID_RANGE), so what an earlier run, a session or the API left belongs to another uid, and the program
     * could neither write a 0644 file nor chmod anything. Root clears set-user-id and set-group-id bits as it
     * changes an owner. Stops after {@code maxEntries} + 1 entries (a workspace over its entry limit runs nothing).
     * Without the right to change owners (a server that is not root) it changes nothing: files are then the server's,
     * which is also the sandbox's uid.
     */
    public void handOver(int hostUid, long maxEntries) {
        long[] n = {0};
        boolean[] refused = {false};
        try (Dir d = openRoot()) {
            walkTree(d.fd, new DeepWalk.Visitor() {
                @Override
                public boolean entry(int dirFd, byte[] name, int type) throws Posix.Errno {
                    n[0]++;
                    if (type == Posix.DT_DIR) return true; // given when entered, through its own descriptor
                    try {
                        Posix.fchownat(dirFd, name, hostUid, gid);
                    } catch (Posix.Errno e) {
                        if (e.errno != Posix.ENOENT) throw e; // removed since it was read
                    }
                    return false;
                }

                boolean atRoot = true;

                @Override
                public void entered(int fd) throws Posix.Errno {
                    try {
                        Posix.fchown(fd, hostUid, gid);
                        // the workspace itself stays reachable by the group, whatever a program did to its mode
                        if (atRoot) Posix.fchmod(fd, ROOT_MODE);
                        atRoot = false;
                    } catch (Posix.Errno e) {
                        if (e.errno != Posix.EPERM) throw e;
                        refused[0] = true;
                    }
                }

                @Override
                public boolean done() {
                    return refused[0] || n[0] > maxEntries;
                }
            });
        }
    }

    /**
     * Takes over a tree that sandboxed code wrote and that nothing can change any more (a package install's build
     * directory once its sandbox and every process of it are gone: {@code packages/PackageStore}), to publish it
     * read-only. Every entry is visited without following a link ({@link DeepWalk}); a directory, a regular file or a
     * symbolic link is given to this file system's uid and gid (the kernel clears set-user-id and set-group-id bits
     * as root changes an owner), and files and directories lose every write, set-id and sticky bit and may be read
     * (directories searched) by everyone. Anything else (a FIFO, a socket, a device node) refuses the tree: no part of
     * the server may ever open such a file, and no run should find one in what it mounts. The caller discards a
     * refused tree, whatever the walk had changed by then.
     *
     * @return the tree's size: bytes of its regular files, its entries
     * @throws WorkspaceException BAD_PATH naming the first entry that is neither a directory, a file nor a link, or
     *                            saying that the tree has more than {@code maxEntries} entries
     */
    public Tally seal(long maxEntries) {
        long[] tally = new long[4]; // bytes, entries, files, directories
        Deque<String> at = new ArrayDeque<>(); // the directory being walked, as names from the root
        String[] entering = {""};
        try (Dir d = openRoot(); Posix.Stats stats = new Posix.Stats()) {
            walkTree(d.fd, new DeepWalk.Visitor() {
                @Override
                public boolean entry(int dirFd, byte[] name, int type) throws Posix.Errno {
                    if (++tally[1] > maxEntries)
                        throw new WorkspaceException(Kind.BAD_PATH, "the tree has more than " + maxEntries + " entries");
                    if (type == Posix.DT_DIR) {
                        tally[3]++;
                        entering[0] = Names.decode(name);
                        return true; // given and sealed when entered, through its own descriptor
                    }
                    Posix.Stat st = stats.statx(dirFd, name, 0);
                    if (!st.isRegularFile() && st.type() != Posix.S_IFLNK)
                        throw new WorkspaceException(Kind.BAD_PATH, kind(st.type()) + " at '" + where(at, Names.decode(name))
                                + "' (only directories, regular files and symbolic links are accepted)");
                    Posix.fchownat(dirFd, name, uid, gid);
                    tally[2]++;
                    if (st.isRegularFile()) {
                        tally[0] += st.size();
                        Posix.fchmodat(dirFd, name, (st.mode() & 0555) | 0444);
                    }
                    return false;
                }

                @Override
                public void entered(int fd) throws Posix.Errno {
                    at.addLast(entering[0]);
                    Posix.fchown(fd, uid, gid);
                    Posix.fchmod(fd, 0555);
                }

                @Override
                public void left(int parentFd, byte[] name) {
                    at.removeLast();
                }
            });
        }
        return new Tally(tally[0], tally[1], (int) tally[2], (int) tally[3], true);
    }

    /** A path from the walk's names, for a message (the root's own name is empty). */
    private static String where(Deque<String> dirs, String name) {
        StringBuilder s = new StringBuilder();
        for (String d : dirs) if (!d.isEmpty()) s.append(Names.display(d)).append('/');
        return s.append(Names.display(name)).toString();
    }

    private static String kind(int fileType) {
        return switch (fileType) {
            case Posix.S_IFIFO -> "a FIFO";
            case 0140000 -> "a socket";
            case 0020000, 0060000 -> "a device node";
            default -> "a special file";
        };
    }

    /** Counts the whole tree ({@link DeepWalk}), stopping after {@code maxEntries} + 1 entries. */
    public Tally tally(long maxEntries) {
        return tally(maxEntries, true);
    }

    /** {@link #tally}; without {@code sizes}, only names are read (several times faster) and bytes are 0. */
    Tally tally(long maxEntries, boolean sizes) {
        long[] tally = new long[4]; // bytes, entries, files, directories
        try (Dir d = openRoot(); Posix.Stats stats = new Posix.Stats()) {
            walkTree(d.fd, new DeepWalk.Visitor() {
                @Override
                public boolean entry(int dirFd, byte[] name, int type) {
                    tally[1]++;
                    if (type == Posix.DT_DIR) {
                        tally[3]++;
                        return true;
                    }
                    tally[2]++;
                    if (sizes && type == Posix.DT_REG) {
                        try {
                            tally[0] += stats.statx(dirFd, name, 0).size();
                        } catch (Posix.Errno gone) {
                            // removed since it was read
                        }
                    }
                    return false;
                }

                @Override
                public boolean done() {
                    return tally[1] > maxEntries;
                }
            });
        }
        return new Tally(tally[0], tally[1], (int) tally[2], (int) tally[3], tally[1] <= maxEntries);
    }

    /**
     * Opens a regular file for reading: opened O_NOFOLLOW|O_NONBLOCK (a link fails with ELOOP; a FIFO planted by
     * user code opens without blocking), checked through that descriptor to be a regular file, then re-opened
     * through it — what is read is exactly the inode that was checked.
     */
    public InputStream openRead(RelPath path) {
        return Channels.newInputStream(openFile(path).channel());
    }

    /**
     * An open regular file with the attributes of exactly the inode that was opened, so an ETag or Content-Length
     * describes the bytes served; the channel can seek (Range requests). Caller closes.
     *
     * @param fileKey identity of the inode (device and inode number): a replaced file has another
     */
    public record OpenFile(FileChannel channel, long size, FileTime modified, Object fileKey) implements AutoCloseable {
        @Override
        public void close() throws IOException {
            channel.close();
        }
    }

    /** Like {@link #openRead}: O_NOFOLLOW|O_NONBLOCK, checked to be a regular file through the descriptor. */
    public OpenFile openFile(RelPath path) {
        try (Dir parent = walk(path.parent(), false)) {
            int fd;
            try {
                fd = Posix.openat(parent.fd, Names.encode(path.name()), Posix.O_RDONLY | Posix.O_NOFOLLOW | Posix.O_NONBLOCK, 0);
            } catch (Posix.Errno e) {
                throw translate(e, path);
            }
            try {
                Path self = Path.of("/proc/self/fd/" + fd);
                BasicFileAttributes a = Files.readAttributes(self, BasicFileAttributes.class);
                if (a.isDirectory()) throw new WorkspaceException(Kind.BAD_PATH, "is a directory: " + path);
                if (!a.isRegularFile()) throw new WorkspaceException(Kind.BAD_PATH, "not a regular file: " + path);
                FileChannel ch = FileChannel.open(self, StandardOpenOption.READ);
                return new OpenFile(ch, a.size(), a.lastModifiedTime(), a.fileKey());
            } catch (IOException e) {
                throw translate(e, path);
            } finally {
                Posix.close(fd);
            }
        }
    }

    /**
     * Writes a file from a stream, atomically: the data goes to a temporary file that replaces the target only
     * when complete, so a failed or refused write (quota, client gone) leaves the old file as it was. Missing
     * parent directories are created. {@code maxBytes} bounds what is accepted; more fails with TOO_LARGE or
     * QUOTA_EXCEEDED ({@code overKind}) and nothing is changed.
     *
     * @return bytes written
     */
    public long write(RelPath path, InputStream data, long maxBytes, Kind overKind, String overMessage) {
        try (Dir parent = walk(path.parent(), true)) {
            byte[] name = Names.encode(path.name());
            if (isDirectory(parent.fd, name)) throw new WorkspaceException(Kind.CONFLICT, "is a directory: " + path);
            int tmpDir = staging == null ? parent.fd : staging.dirFd();
            byte[] tmp = (".upload-" + Ids.hex(8) + ".part").getBytes();
            boolean moved = false;
            try {
                int fd = Posix.openat(tmpDir, tmp, Posix.O_WRONLY | Posix.O_CREAT | Posix.O_EXCL | Posix.O_NOFOLLOW, 0600);
                long written = 0;
                try (FileChannel ch = FileChannel.open(Path.of("/proc/self/fd/" + fd), StandardOpenOption.WRITE);
                     OutputStream out = Channels.newOutputStream(ch)) {
                    byte[] buf = new byte[64 * 1024];
                    int n;
                    while ((n = data.read(buf)) > 0) {
                        written += n;
                        if (written > maxBytes) throw new WorkspaceException(overKind, overMessage);
                        out.write(buf, 0, n);
                    }
                    own(tmpDir, tmp, FILE_MODE);
                    if (staging != null) staging.adopt(fd);
                } finally {
                    Posix.close(fd);
                }
                Posix.renameat2(tmpDir, tmp, parent.fd, name, 0);
                moved = true;
                return written;
            } catch (Posix.Errno e) {
                throw translate(e, path);
            } catch (IOException e) {
                throw translate(e, path);
            } finally {
                if (!moved) {
                    try {
                        Posix.unlinkat(tmpDir, tmp, 0);
                    } catch (Posix.Errno ignored) {
                        // never created, or the directory went away
                    }
                }
            }
        }
    }

    private static boolean isDirectory(int dirFd, byte[] name) {
        try {
            return Posix.statx(dirFd, name, 0).isDirectory();
        } catch (Posix.Errno e) {
            return false;
        }
    }

    /**
     * Deletes a file, a link, or a directory (empty unless {@code recursive}, then with everything in it, however
     * deep); links are removed, not followed.
     */
    public void delete(RelPath path, boolean recursive) {
        if (path.isRoot()) throw new WorkspaceException(Kind.BAD_PATH, "the workspace root cannot be deleted this way");
        try (Dir parent = walk(path.parent(), false)) {
            byte[] name = Names.encode(path.name());
            Posix.Stat st;
            try {
                st = Posix.statx(parent.fd, name, 0);
            } catch (Posix.Errno e) {
                throw translate(e, path);
            }
            if (!st.isDirectory()) {
                unlink(parent.fd, name, 0, path);
                return;
            }
            if (recursive) {
                try (Dir d = parent.open(path.name(), false)) {
                    clear(d.fd);
                }
            }
            unlink(parent.fd, name, Posix.AT_REMOVEDIR, path);
        }
    }

    private static void unlink(int dirFd, byte[] name, int flags, RelPath path) {
        try {
            Posix.unlinkat(dirFd, name, flags);
        } catch (Posix.Errno e) {
            throw translate(e, path);
        }
    }

    /**
     * {@link DeepWalk#walk}, with a walk that could not go on as this package's exception: CONFLICT when the tree
     * changed under it, IO otherwise.
     */
    static void walkTree(int dirFd, DeepWalk.Visitor visitor) {
        try {
            DeepWalk.walk(dirFd, visitor);
        } catch (DeepWalk.Failed e) {
            throw failed(e);
        }
    }

    /** Removes everything below an open directory, however deep ({@link DeepWalk#clear}). */
    static void clear(int dirFd) {
        try {
            DeepWalk.clear(dirFd);
        } catch (DeepWalk.Failed e) {
            throw failed(e);
        }
    }

    private static WorkspaceException failed(DeepWalk.Failed e) {
        return new WorkspaceException(e.changed() ? Kind.CONFLICT : Kind.IO, e.getMessage());
    }

    /** Deletes the whole workspace directory, however deep its tree. */
    void deleteAll() {
        try (Dir d = openRoot()) {
            clear(d.fd);
        }
        try {
            Posix.unlinkat(Posix.AT_FDCWD, Names.encode(root.toString()), Posix.AT_REMOVEDIR);
        } catch (Posix.Errno e) {
            if (e.errno != Posix.ENOENT) throw translate(e, RelPath.ROOT);
        }
    }

    /** Moves an entry; the target's parents are created; an existing target is a conflict (checked atomically). */
    public void rename(RelPath from, RelPath to) {
        if (from.isRoot() || to.isRoot()) throw new WorkspaceException(Kind.BAD_PATH, "the workspace root cannot be moved");
        if (to.parts().size() > from.parts().size() && to.parts().subList(0, from.parts().size()).equals(from.parts()))
            throw new WorkspaceException(Kind.BAD_PATH, "cannot move '" + from + "' into itself");
        try (Dir a = walk(from.parent(), false); Dir b = walk(to.parent(), true)) {
            try {
                Posix.renameat2(a.fd, Names.encode(from.name()), b.fd, Names.encode(to.name()), Posix.RENAME_NOREPLACE);
            } catch (Posix.Errno e) {
                throw translate(e, e.errno == Posix.EEXIST ? to : from);
            }
        }
    }

    /** Marks the workspace as used now (its directory's modification time drives expiry). */
    public void touch() {
        try (Dir d = openRoot()) {
            Files.setLastModifiedTime(d.proc(), FileTime.fromMillis(System.currentTimeMillis()));
        } catch (IOException e) {
            throw translate(e, RelPath.ROOT);
        }
    }
}
