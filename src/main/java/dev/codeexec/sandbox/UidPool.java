package dev.codeexec.sandbox;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.BitSet;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The host uids sandboxes run as, one per sandbox at a time (SANDBOX_UID_RANGE), the way isolate gives each box
 * its own uid. The kernel counts some resources per host uid across every namespace — epoll watches, inotify
 * instances, pipe buffer pages, processes for RLIMIT_NPROC, user namespaces — so sandboxes that share a uid
 * share those limits: one tenant's run could use them up and break every other tenant's Node, asyncio or
 * {@code fs.watch} for as long as it held them. With a uid of its own, a run can only exhaust its own.
 *
 * <p>A uid is handed out again only once nothing of its previous holder is left: the sandbox was closed, and its
 * whole process tree is proven gone — its cgroup is empty, or its pid namespace died with its pid 1 (processes
 * cannot leave either: seccomp refuses setns and unshare). Where that is not proven (a tree that did not die), no
 * process on the host may still run as the uid: checked in /proc, off the run's path. Returned uids are reused
 * least recently returned first, so a uid rests as long as the range allows. Inside the sandbox every run sees the same ids
 * (SANDBOX_UID/SANDBOX_GID, through bwrap's user namespace mapping); on the host all share SANDBOX_GID, the group
 * through which a tenant's later runs can use the files an earlier run left in a workspace.
 */
final class UidPool {

    private static final Logger log = LoggerFactory.getLogger(UidPool.class);

    private final int first;
    private final int count;
    /** How many uids of the range have been handed out at least once (they are taken in order first). */
    private int next;
    private final Deque<Integer> free = new ArrayDeque<>();
    private final BitSet inUse;
    private final Deque<Integer> suspect = new ArrayDeque<>();

    /** Uids {@code first} to {@code first + count - 1}. */
    UidPool(int first, int count) {
        if (first <= 0 || count <= 0 || (long) first + count - 1 > 0xFFFFFFFEL)
            throw new IllegalArgumentException("bad uid range " + first + "+" + count);
        this.first = first;
        this.count = count;
        this.inUse = new BitSet(count);
    }

    /** A uid for one sandbox; give it back with {@link Lease#giveBack} once the sandbox is closed. */
    synchronized Lease take() throws SandboxException {
        // never-used uids first, then the least recently returned: a uid rests as long as the range allows
        Integer uid = next < count ? Integer.valueOf(first + next++) : free.pollFirst();
        if (uid == null) retrySuspects();
        if (uid == null) uid = free.pollFirst();
        if (uid == null)
            throw new SandboxException("no sandbox uid is free: all " + count + " of SANDBOX_UID_RANGE are in use "
                    + "by running sandboxes (warm sandboxes and sessions hold theirs); try again later");
        inUse.set(uid - first);
        return new Lease(uid);
    }

    /** In use now (running, warm and session sandboxes). */
    synchronized int inUse() {
        return inUse.cardinality();
    }

    int first() {
        return first;
    }

    int last() {
        return first + count - 1;
    }

    private synchronized void giveBack(int uid, boolean provenEmpty) {
        inUse.clear(uid - first);
        if (!provenEmpty && hasProcesses(uid)) {
            log.warn("sandbox uid {} still has processes after its sandbox closed; not reused until they are gone", uid);
            suspect.addLast(uid);
        } else {
            free.addLast(uid);
        }
    }

    private void retrySuspects() {
        for (int n = suspect.size(); n > 0; n--) {
            int uid = suspect.pollFirst();
            if (hasProcesses(uid)) suspect.addLast(uid);
            else free.addLast(uid);
        }
    }

    /** Whether any process on the host has {@code uid} as its real, effective, saved or filesystem uid. */
    static boolean hasProcesses(int uid) {
        String id = Integer.toString(uid);
        try (Stream<Path> procs = Files.list(Path.of("/proc"))) {
            for (Path p : (Iterable<Path>) procs::iterator) {
                String name = p.getFileName().toString();
                if (name.isEmpty() || !Character.isDigit(name.charAt(0))) continue;
                try {
                    for (String line : Files.readAllLines(p.resolve("status"))) {
                        if (!line.startsWith("Uid:")) continue;
                        for (String f : line.substring(4).trim().split("\\s+")) if (f.equals(id)) return true;
                        break;
                    }
                } catch (IOException gone) {
                    // ended while we looked
                }
            }
        } catch (IOException e) {
            return false;
        }
        return false;
    }

    /** What runtime_info shows. */
    synchronized Map<String, Object> info() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("range", first + "-" + last());
        m.put("inUse", inUse.cardinality());
        m.put("size", count);
        return m;
    }

    /** One sandbox's uid, returned (once) when the sandbox is closed. */
    final class Lease {
        private final int uid;
        private boolean returned;

        private Lease(int uid) {
            this.uid = uid;
        }

        int uid() {
            return uid;
        }

        /**
         * Returns the uid. {@code provenEmpty}: nothing of the sandbox can be left (see the class comment); else
         * /proc is searched first, so call it off the run's path.
         */
        void giveBack(boolean provenEmpty) {
            synchronized (this) {
                if (returned) return;
                returned = true;
            }
            UidPool.this.giveBack(uid, provenEmpty);
        }
    }
}
