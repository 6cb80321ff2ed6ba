package dev.codeexec.workspace;

import dev.codeexec.linux.Posix;

import dev.codeexec.workspace.WorkspaceException.Kind;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.UserPrincipalLookupService;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Consumer;

/**
 * The one safe way into a workspace directory, for every surface (tools, resources, REST, archive, artifacts).
 * After the lexical checks of {@link RelPath}, every path is opened component by component with
 * {@code openat(..., O_NOFOLLOW | O_DIRECTORY)} from a descriptor of the workspace root, so a symbolic link planted
 * by user code — as the last component, a middle one, or swapped in while a request is in flight — is refused
 * (ELOOP/ENOTDIR), never followed. The final operation runs on {@code /proc/self/fd/N/name} with
 * {@code NOFOLLOW_LINKS}: the kernel resolves the directory through descriptor N, not through a path walk.
 * Files are opened with O_NONBLOCK semantics checked up front, so a FIFO planted by user code cannot hang a
 * request: anything that is not a regular file or directory is refused.
 */
public final class WorkspaceFs {

    private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;

    private final Path root;
    private final int uid;
    private final int gid;

    /**
     * @param root the workspace directory on the host (itself created by the server; not user-controlled)
     * @param uid  owner given to created files and directories, so sandboxed code can change them
     */
    public WorkspaceFs(Path root, int uid, int gid) {
        this.root = root;
        this.uid = uid;
        this.gid = gid;
    }

    public Path root() {
        return root;
    }

    /** Type and size of one entry. */
    public record Entry(String name, RelPath path, String type, long size, FileTime modified) {
        public boolean isDirectory() {
            return type.equals("directory");
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

        Path proc(String name) {
            return Path.of("/proc/self/fd/" + fd + "/" + name);
        }

        Dir open(String name, boolean create) {
            RelPath child = path.child(name);
            for (int attempt = 0; ; attempt++) {
                try {
                    return new Dir(Posix.openat(fd, name, Posix.O_PATH | Posix.O_DIRECTORY | Posix.O_NOFOLLOW), child);
                } catch (Posix.Errno e) {
                    if (e.errno == Posix.ENOENT && create && attempt == 0) {
                        mkdir(name, child);
                        continue;
                    }
                    // O_DIRECTORY|O_NOFOLLOW on a link answers ENOTDIR: name the real reason
                    if (e.errno == Posix.ENOTDIR && Files.isSymbolicLink(proc(name))) {
                        throw new WorkspaceException(Kind.BAD_PATH, "refused: '" + child + "' is a symbolic link");
                    }
                    throw translate(e, child);
                }
            }
        }

        private void mkdir(String name, RelPath child) {
            try {
                Posix.mkdirat(fd, name, 0755);
                chown(proc(name));
            } catch (Posix.Errno e) {
                if (e.errno != Posix.EEXIST) throw translate(e, child);
            }
        }

        @Override
        public void close() {
            Posix.close(fd);
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

    private static WorkspaceException translate(Posix.Errno e, RelPath where) {
        return switch (e.errno) {
            case Posix.ENOENT -> new WorkspaceException(Kind.NOT_FOUND, "not found: " + where);
            case Posix.ELOOP -> new WorkspaceException(Kind.BAD_PATH, "refused: '" + where + "' is a symbolic link");
            case Posix.ENOTDIR -> new WorkspaceException(Kind.BAD_PATH, "not a directory: " + where);
            default -> new WorkspaceException(Kind.IO, "cannot open " + where + " (errno " + e.errno + ")");
        };
    }

    private static WorkspaceException translate(IOException e, RelPath where) {
        return switch (e) {
            case NoSuchFileException x -> new WorkspaceException(Kind.NOT_FOUND, "not found: " + where);
            case FileAlreadyExistsException x -> new WorkspaceException(Kind.CONFLICT, "already exists: " + where);
            case DirectoryNotEmptyException x ->
                    new WorkspaceException(Kind.CONFLICT, "directory not empty: " + where + " (delete recursively)");
            case AccessDeniedException x -> new WorkspaceException(Kind.IO, "permission denied: " + where);
            case FileSystemException x when x.getReason() != null && x.getReason().contains("symbolic link") ->
                    new WorkspaceException(Kind.BAD_PATH, "refused: '" + where + "' is a symbolic link");
            case FileSystemException x when x.getReason() != null && x.getReason().contains("No space") ->
                    new WorkspaceException(Kind.QUOTA_EXCEEDED, "no space left on the workspace volume");
            default -> new WorkspaceException(Kind.IO, "I/O error on " + where);
        };
    }

    private void chown(Path p) {
        try {
            PosixFileAttributeView v = Files.getFileAttributeView(p, PosixFileAttributeView.class, NOFOLLOW);
            UserPrincipalLookupService lookup = p.getFileSystem().getUserPrincipalLookupService();
            v.setOwner(lookup.lookupPrincipalByName(Integer.toString(uid)));
            v.setGroup(lookup.lookupPrincipalByGroupName(Integer.toString(gid)));
        } catch (IOException | UnsupportedOperationException e) {
            // Not root (tests, SANDBOX=none as a normal user): files stay ours, which is then also the runner's uid.
        }
    }

    /** Attributes of one entry without following a link; the root is a directory. */
    public Entry stat(RelPath path) {
        if (path.isRoot()) {
            try (Dir d = openRoot()) {
                // "/proc/self/fd/N" itself is a magic link (NOFOLLOW would describe the link): "N/." is the directory.
                return entry(d.proc().resolve("."), "", path);
            }
        }
        try (Dir parent = walk(path.parent(), false)) {
            return entry(parent.proc(path.name()), path.name(), path);
        }
    }

    private Entry entry(Path p, String name, RelPath rel) {
        try {
            BasicFileAttributes a = Files.readAttributes(p, BasicFileAttributes.class, NOFOLLOW);
            String type = a.isRegularFile() ? "file" : a.isDirectory() ? "directory" : a.isSymbolicLink() ? "symlink" : "other";
            return new Entry(name, rel, type, a.isRegularFile() ? a.size() : 0, a.lastModifiedTime());
        } catch (IOException e) {
            throw translate(e, rel);
        }
    }

    /** One level of a directory, sorted by name; {@code limit} bounds the entries read. */
    public List<Entry> list(RelPath dir, int limit) {
        List<Entry> out = new ArrayList<>();
        try (Dir d = walk(dir, false); DirectoryStream<Path> ds = Files.newDirectoryStream(d.proc())) {
            for (Path p : ds) {
                if (out.size() >= limit) break;
                String name = p.getFileName().toString();
                try {
                    out.add(entry(d.proc(name), name, dir.child(name)));
                } catch (WorkspaceException gone) {
                    // removed between readdir and stat (a run deletes its code file, a program its temp files): the
                    // listing is of what exists, not a failure of the directory
                }
            }
        } catch (IOException e) {
            throw translate(e, dir);
        }
        out.sort((a, b) -> a.name().compareTo(b.name()));
        return out;
    }

    /**
     * Visits every entry below {@code dir} depth first (directories before their content), never following
     * links, stopping after {@code limit} entries. Returns false when the limit cut the walk short.
     */
    public boolean walkTree(RelPath dir, int limit, Consumer<Entry> visitor) {
        int[] left = {limit};
        try (Dir d = walk(dir, false)) {
            return visit(d, visitor, left);
        }
    }

    private boolean visit(Dir d, Consumer<Entry> visitor, int[] left) {
        List<String> names = new ArrayList<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(d.proc())) {
            for (Path p : ds) names.add(p.getFileName().toString());
        } catch (IOException e) {
            throw translate(e, d.path);
        }
        names.sort(null);
        for (String name : names) {
            if (left[0]-- <= 0) return false;
            Entry e;
            try {
                e = entry(d.proc(name), name, d.path.child(name));
            } catch (WorkspaceException gone) {
                continue; // removed while we walked: a running program may change the tree
            }
            visitor.accept(e);
            if (e.isDirectory()) {
                Dir child;
                try {
                    child = d.open(name, false);
                } catch (WorkspaceException swapped) {
                    continue; // replaced by a link or removed meanwhile: not followed
                }
                try (child) {
                    if (!visit(child, visitor, left)) return false;
                }
            }
        }
        return true;
    }

    /** Total size of regular files below the root (no link followed), for quota accounting. */
    public long usage() {
        long[] sum = {0};
        walkTree(RelPath.ROOT, Integer.MAX_VALUE, e -> sum[0] += e.size());
        return sum[0];
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
                fd = Posix.openat(parent.fd, path.name(), Posix.O_RDONLY | Posix.O_NOFOLLOW | Posix.O_NONBLOCK);
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

    /** Creates the directory and its missing parents. */
    public void mkdirs(RelPath dir) {
        walk(dir, true).close();
    }

    /**
     * Writes a file from a stream, atomically: the data goes to a temporary sibling that replaces the target only
     * when complete, so a failed or refused write (quota, client gone) leaves the old file as it was. Missing
     * parent directories are created. {@code maxBytes} bounds what is accepted; more fails with TOO_LARGE or
     * QUOTA_EXCEEDED ({@code overKind}) and nothing is changed.
     *
     * @return bytes written
     */
    public long write(RelPath path, InputStream data, long maxBytes, Kind overKind, String overMessage) {
        try (Dir parent = walk(path.parent(), true)) {
            String name = path.name();
            Path target = parent.proc(name);
            if (Files.isDirectory(target, NOFOLLOW)) throw new WorkspaceException(Kind.CONFLICT, "is a directory: " + path);
            String tmpName = ".upload-" + Long.toHexString(ThreadLocalRandom.current().nextLong()) + ".part";
            Path tmp = parent.proc(tmpName);
            long written = 0;
            try {
                try (OutputStream out = Files.newOutputStream(tmp, StandardOpenOption.CREATE_NEW,
                        StandardOpenOption.WRITE, NOFOLLOW)) {
                    byte[] buf = new byte[64 * 1024];
                    int n;
                    while ((n = data.read(buf)) > 0) {
                        written += n;
                        if (written > maxBytes) throw new WorkspaceException(overKind, overMessage);
                        out.write(buf, 0, n);
                    }
                }
                chown(tmp);
                Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                return written;
            } catch (IOException e) {
                throw translate(e, path);
            } finally {
                try {
                    Files.deleteIfExists(tmp);
                } catch (IOException ignored) {
                    // already moved into place, or the directory went away
                }
            }
        }
    }

    /** Deletes a file, a link, or a directory (empty unless {@code recursive}); links are removed, not followed. */
    public void delete(RelPath path, boolean recursive) {
        if (path.isRoot()) throw new WorkspaceException(Kind.BAD_PATH, "the workspace root cannot be deleted this way");
        try (Dir parent = walk(path.parent(), false)) {
            Path target = parent.proc(path.name());
            if (recursive && Files.isDirectory(target, NOFOLLOW)) {
                try (Dir d = parent.open(path.name(), false)) {
                    clear(d);
                }
            }
            Files.delete(target);
        } catch (IOException e) {
            throw translate(e, path);
        }
    }

    private void clear(Dir d) throws IOException {
        List<String> names = new ArrayList<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(d.proc())) {
            for (Path p : ds) names.add(p.getFileName().toString());
        }
        for (String name : names) {
            Path p = d.proc(name);
            if (Files.isDirectory(p, NOFOLLOW)) {
                Dir child;
                try {
                    child = d.open(name, false);
                } catch (WorkspaceException e) {
                    continue;
                }
                try (child) {
                    clear(child);
                }
            }
            Files.deleteIfExists(p);
        }
    }

    /** Moves an entry; the target's parents are created; an existing target is a conflict. */
    public void rename(RelPath from, RelPath to) {
        if (from.isRoot() || to.isRoot()) throw new WorkspaceException(Kind.BAD_PATH, "the workspace root cannot be moved");
        if (to.parts().size() > from.parts().size() && to.parts().subList(0, from.parts().size()).equals(from.parts()))
            throw new WorkspaceException(Kind.BAD_PATH, "cannot move '" + from + "' into itself");
        try (Dir a = walk(from.parent(), false); Dir b = walk(to.parent(), true)) {
            Path src = a.proc(from.name());
            if (!Files.exists(src, NOFOLLOW)) throw new WorkspaceException(Kind.NOT_FOUND, "not found: " + from);
            // Not ATOMIC_MOVE: on Linux that is a plain rename(2), which would silently replace an existing target.
            Files.move(src, b.proc(to.name()));
        } catch (FileAlreadyExistsException e) {
            throw new WorkspaceException(Kind.CONFLICT, "already exists: " + to);
        } catch (IOException e) {
            throw translate(e, from);
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
