package dev.codeexec.engine;

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

    private final Set<Process> live = new HashSet<>();

    /**
     * {@code argv} at the a low CPU priority (nice 10) when {@code nice} is there: start-time work must not take
     * the cores from the server's own start (measured: a fresh server with the TypeScript, Java and Go warm-ups at
     * normal priority was healthy after ~9 s on 2 cores), nor from the runs that come while it lasts.
     */
    static List<String> background(List<String> argv) {
        if (!Files.isExecutable(NICE)) return argv;
        List<String> niced = new ArrayList<>(List.of(NICE.toString(), "-n", "10"));
        niced.addAll(argv);
        return niced;
    }
    private boolean stopped;

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
