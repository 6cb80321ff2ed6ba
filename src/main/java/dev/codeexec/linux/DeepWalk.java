package dev.codeexec.linux;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;

/**
 * A walk of a whole directory tree, however deep, with three descriptors open at most: for measuring a workspace,
 * fixing up its permissions, and deleting any tree a program may have written ({@link #deleteTree}, the server's one
 * way to delete a tree). A program can make a chain of 25,000 directories in a few seconds;
 * a recursive walk overflows the stack on it, a walk that keeps one descriptor per level runs out of descriptors,
 * and a path to its bottom is longer than PATH_MAX. So this walk holds only the directory it is in: it goes down
 * with {@code openat(name, O_NOFOLLOW)} and up with {@code openat("..")}, and checks that ".." is the very
 * directory (device and inode) it came down from — a program that moves directories around meanwhile makes the
 * walk fail with a clear error rather than continue somewhere else, and the walk never goes above where it started.
 * It stays on the file system it started on (a mount point is visited as a name, not entered).
 * Per level it keeps the names still to visit, read in batches of {@link #BATCH} (the next batch continues at
 * the directory position where the last one ended), so memory is bounded by the batch size times the depth.
 */
public final class DeepWalk {

    /** Names read from a directory at a time. */
    public static final int BATCH = 4096;

    private DeepWalk() {
    }

    /**
     * A walk that could not go on: a directory could not be read ({@code changed} false), or the tree changed under
     * it so that it cannot tell where it is ({@code changed} true). The message says which, without a host path.
     */
    public static final class Failed extends RuntimeException {
        private final boolean changed;

        Failed(boolean changed, String message) {
            super(message, null, false, false);
            this.changed = changed;
        }

        /** Whether the tree was changed meanwhile (moved around, refilled while emptied). */
        public boolean changed() {
            return changed;
        }
    }

    /** What the walk does with each name. Each method may throw an unchecked exception to end the walk. */
    public interface Visitor {
        /**
         * A name in the directory {@code dirFd} (O_RDONLY) with its type from {@code getdents64} (DT_UNKNOWN
         * resolved with statx). Returns whether to descend, which only a directory can.
         */
        boolean entry(int dirFd, byte[] name, int type) throws Posix.Errno;

        /** A directory just entered, through its own descriptor. */
        default void entered(int fd) throws Posix.Errno {
        }

        /** A directory whose names were all visited, from its parent. */
        default void left(int parentFd, byte[] name) throws Posix.Errno {
        }

        /** Whether to stop now (e.g. a limit was reached). */
        default boolean done() {
            return false;
        }

        /** Whether a directory whose names were all visited is read again until it is empty (for deleting). */
        default boolean untilEmpty() {
            return false;
        }
    }

    private static final class Level {
        final byte[] name;
        final long ino;
        final long dev;
        Posix.DirBatch batch;
        int next;
        int rereads;

        Level(byte[] name, Posix.Stat st, Posix.DirBatch batch) {
            this.name = name;
            this.ino = st.ino();
            this.dev = st.dev();
            this.batch = batch;
        }
    }

    private static final byte[] DOT = {'.'};
    private static final byte[] DOTDOT = {'.', '.'};
    private static final byte[] EMPTY = {};
    private static final int DIR_FLAGS = Posix.O_RDONLY | Posix.O_DIRECTORY | Posix.O_NOFOLLOW;
    /** How often a directory that keeps getting new entries while it is emptied is read again. */
    private static final int MAX_REREADS = 3;

    /**
     * Walks the tree below {@code startFd} (any descriptor of the directory, O_PATH too).
     *
     * @throws Failed the walk could not go on
     */
    public static void walk(int startFd, Visitor v) {
        int cur;
        try {
            cur = Posix.openat(startFd, DOT, DIR_FLAGS, 0);
        } catch (Posix.Errno e) {
            throw new Failed(false, "the directory cannot be read (errno " + e.errno + ")");
        }
        Deque<Level> stack = new ArrayDeque<>();
        try {
            stack.push(new Level(EMPTY, self(cur), read(cur, 0)));
            v.entered(cur);
            while (!stack.isEmpty() && !v.done()) {
                Level top = stack.peek();
                List<Posix.DirEntry> names = top.batch.entries();
                if (top.next < names.size()) {
                    Posix.DirEntry e = names.get(top.next++);
                    int type = e.type() != Posix.DT_UNKNOWN ? e.type() : typeOf(cur, e.name());
                    if (type < 0 || !v.entry(cur, e.name(), type) || type != Posix.DT_DIR) continue;
                    Opened child;
                    try {
                        child = open(cur, e.name());
                    } catch (Posix.Errno gone) {
                        continue; // removed or replaced by a link since it was read: nothing to descend into
                    }
                    if (child.st().dev() != stack.getLast().dev) {
                        Posix.close(child.fd()); // a mount point: another file system is not the workspace's to walk
                        continue;
                    }
                    Posix.close(cur);
                    cur = child.fd();
                    stack.push(new Level(e.name(), child.st(), read(cur, 0)));
                    v.entered(cur);
                    continue;
                }
                if (!top.batch.end() || v.untilEmpty()) {
                    // more names after this batch; or, emptying, names that appeared meanwhile (a fresh read from
                    // the start: what was visited is gone)
                    boolean more = !top.batch.end();
                    Posix.DirBatch again = read(cur, v.untilEmpty() ? 0 : top.batch.next());
                    // emptying, what is left after a whole pass either appeared meanwhile (visit it) or could not be
                    // removed (a mount point): then stop, and removing the directory says why
                    if (!again.entries().isEmpty() && (more || !sameNames(again, top.batch))) {
                        if (!more && ++top.rereads > MAX_REREADS)
                            throw new Failed(true, "a directory kept changing while it was emptied");
                        top.batch = again;
                        top.next = 0;
                        continue;
                    }
                }
                stack.pop();
                if (stack.isEmpty()) break;
                Opened parent = open(cur, DOTDOT);
                Level up = stack.peek();
                if (parent.st().ino() != up.ino || parent.st().dev() != up.dev) {
                    Posix.close(parent.fd());
                    throw new Failed(true, "the tree was moved around while it was walked");
                }
                Posix.close(cur);
                cur = parent.fd();
                v.left(cur, top.name);
            }
        } catch (Posix.Errno e) {
            throw new Failed(false, "the tree cannot be walked (errno " + e.errno + ")");
        } finally {
            Posix.close(cur);
        }
    }

    /** Whether every name of {@code again} was in {@code last}. */
    private static boolean sameNames(Posix.DirBatch again, Posix.DirBatch last) {
        java.util.Set<java.nio.ByteBuffer> seen = new java.util.HashSet<>();
        for (Posix.DirEntry e : last.entries()) seen.add(java.nio.ByteBuffer.wrap(e.name()));
        for (Posix.DirEntry e : again.entries()) if (!seen.contains(java.nio.ByteBuffer.wrap(e.name()))) return false;
        return true;
    }

    /** A batch of names from {@code from} on, through a fresh descriptor (so the walk holds no more than two). */
    private static Posix.DirBatch read(int dirFd, long from) throws Posix.Errno {
        int fd = Posix.openat(dirFd, DOT, DIR_FLAGS, 0);
        try {
            return Posix.readDir(fd, from, BATCH);
        } finally {
            Posix.close(fd);
        }
    }

    /** A directory opened for reading, and what it is. */
    private record Opened(int fd, Posix.Stat st) {
    }

    /** Opens a directory below {@code dirFd} (no link followed) and stats it; nothing stays open on failure. */
    private static Opened open(int dirFd, byte[] name) throws Posix.Errno {
        int fd = Posix.openat(dirFd, name, DIR_FLAGS, 0);
        try {
            return new Opened(fd, self(fd));
        } catch (Posix.Errno e) {
            Posix.close(fd);
            throw e;
        }
    }

    private static Posix.Stat self(int fd) throws Posix.Errno {
        return Posix.statx(fd, EMPTY, Posix.AT_EMPTY_PATH);
    }

    /** The d_type of a name from statx; -1 when it is gone. */
    private static int typeOf(int dirFd, byte[] name) {
        try {
            return switch (Posix.statx(dirFd, name, 0).type()) {
                case Posix.S_IFDIR -> Posix.DT_DIR;
                case Posix.S_IFREG -> Posix.DT_REG;
                case Posix.S_IFLNK -> 10;
                default -> 1;
            };
        } catch (Posix.Errno e) {
            return -1;
        }
    }

    /**
     * Deletes what is at {@code path}, never following a link (a sandboxed program may have planted some): a
     * directory with its whole tree however deep ({@link #clear}), or a file, a link (the link itself) or a special
     * file; nothing there, nothing done. Only the last component of {@code path} is not trusted: the directories
     * above it are the server's.
     *
     * @throws IOException what could not be deleted
     */
    public static void deleteTree(Path path) throws IOException {
        String where = path.toAbsolutePath().toString();
        int fd;
        try {
            fd = Posix.openat(Posix.AT_FDCWD, where, DIR_FLAGS);
        } catch (Posix.Errno e) {
            if (e.errno == Posix.ENOENT) return;
            if (e.errno != Posix.ENOTDIR && e.errno != Posix.ELOOP) throw failed(path, "errno " + e.errno);
            unlink(where, 0, path); // not a directory: a file, a link or a special file, removed itself
            return;
        }
        try {
            clear(fd);
        } catch (Failed e) {
            throw failed(path, e.getMessage());
        } finally {
            Posix.close(fd);
        }
        unlink(where, Posix.AT_REMOVEDIR, path);
    }

    private static void unlink(String where, int flags, Path path) throws IOException {
        try {
            Posix.unlinkat(Posix.AT_FDCWD, where.getBytes(java.nio.charset.StandardCharsets.UTF_8), flags);
        } catch (Posix.Errno e) {
            if (e.errno != Posix.ENOENT) throw failed(path, "errno " + e.errno);
        }
    }

    private static IOException failed(Path path, String why) {
        return new IOException("cannot delete " + path + ": " + why);
    }

    /**
     * Removes everything below an open directory, however deep. Each directory is made writable by its owner as it
     * is entered, so that a sealed tree, or one a program left without write permission, empties for a server that
     * is not root too.
     *
     * @throws Failed the tree could not be walked, or kept changing while it was emptied
     */
    public static void clear(int dirFd) {
        walk(dirFd, new Visitor() {
            @Override
            public void entered(int fd) throws Posix.Errno {
                try {
                    Posix.fchmod(fd, 0700);
                } catch (Posix.Errno e) {
                    if (e.errno != Posix.EPERM) throw e; // not ours (a server that is not root): as it is
                }
            }

            @Override
            public boolean entry(int fd, byte[] name, int type) throws Posix.Errno {
                if (type == Posix.DT_DIR) return true;
                try {
                    Posix.unlinkat(fd, name, 0);
                } catch (Posix.Errno e) {
                    if (e.errno == Posix.EISDIR) return true; // became a directory since it was read
                    if (e.errno != Posix.ENOENT) throw e;
                }
                return false;
            }

            @Override
            public void left(int parentFd, byte[] name) throws Posix.Errno {
                try {
                    Posix.unlinkat(parentFd, name, Posix.AT_REMOVEDIR);
                } catch (Posix.Errno e) {
                    if (e.errno != Posix.ENOENT) throw e;
                }
            }

            @Override
            public boolean untilEmpty() {
                return true;
            }
        });
    }
}
