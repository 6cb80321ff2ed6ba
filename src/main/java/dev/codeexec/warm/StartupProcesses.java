package dev.codeexec.warm;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The processes of start-time work (Go cache warm-up, language warm-ups), so that closing the executor stops
 * them with their children. One registered after {@link #stopAll()} is stopped at once: no warm-up outlives
 * the server by starting late.
 */
final class StartupProcesses {

    private static final Path NICE = Path.of("/usr/bin/nice");
    private static final Path SETSID = Path.of("/usr/bin/setsid");
    private static final Path SH = Path.of("/bin/sh");
    /** Sets the new session's scheduler group to nice 19 (best effort: some kernels refuse), then runs the command. */
    static final String LOWEST_GROUP = "echo 19 > /proc/self/autogroup 2>/dev/null; exec \"$@\"";

    private final Set<Process> live = new HashSet<>();

    /**
     * {@code argv} at a low CPU priority: start-time work must not take the cores from the server's own start
     * (measured: a fresh server with the TypeScript, Java and Go warm-ups at normal priority was healthy after ~9 s
     * on 2 cores), nor from the runs that come while it lasts. Nice alone is not enough where the kernel groups
     * tasks by session (CONFIG_SCHED_AUTOGROUP, on in Debian's and most distributions' kernels): nice then only
     * orders tasks within one session, and every sandbox is a session of its own (bwrap --new-session), so a
     * warm-up in the server's session took as large a share of the cores as a whole run. So it runs in a session
     * of its own ({@code setsid -w}, which waits and passes the exit status on) whose group is set to nice 19
     * (/proc/self/autogroup; where that write is refused the warm-up keeps the group's default), and at nice 10
     * inside it.
     */
    static List<String> background(List<String> argv) {
        return background(argv, true);
    }

    /**
     * @param lowest whether its group starts at nice 19; false for work a run already waits for (see
     *               {@link #raise}), which keeps the group's default
     */
    static List<String> background(List<String> argv, boolean lowest) {
        List<String> out = new ArrayList<>();
        if (Files.isExecutable(SETSID) && Files.isExecutable(SH)) {
            out.addAll(List.of(SETSID.toString(), "-w", SH.toString(), "-c", lowest ? LOWEST_GROUP : "exec \"$@\"",
                    "codeexec-warmup"));
        }
        if (Files.isExecutable(NICE)) out.addAll(List.of(NICE.toString(), "-n", "10"));
        out.addAll(argv);
        return out;
    }
    private boolean stopped;

    /**
     * Gives the scheduler group of a process started by {@link #background} (its whole session: the process and
     * its children) the default weight again, for work a run is waiting for: a Go run that arrives during the Go
     * cache warm-up waits for it, and at nice 19 beside busy runs the warm-up could take minutes longer. Best
     * effort: false when the kernel has no autogroups or refuses the write (it needs the same user, and
     * CAP_SYS_NICE to raise a group's priority).
     */
    static boolean raise(Process p) {
        try {
            Files.writeString(Path.of("/proc", Long.toString(p.pid()), "autogroup"), "0");
            return true;
        } catch (java.io.IOException | RuntimeException e) {
            return false;
        }
    }

    /** Registers a started process; returns false (and kills it) when the executor is already closing. */
    synchronized boolean add(Process p) {
        if (stopped) {
            kill(p);
            return false;
        }
        live.add(p);
        return true;
    }

    synchronized void remove(Process p) {
        live.remove(p);
    }

    synchronized void stopAll() {
        stopped = true;
        live.forEach(StartupProcesses::kill);
    }

    synchronized boolean stopped() {
        return stopped;
    }

    private static void kill(Process p) {
        p.descendants().forEach(ProcessHandle::destroyForcibly);
        p.destroyForcibly();
    }
}
