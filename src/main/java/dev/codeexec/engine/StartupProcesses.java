package dev.codeexec.engine;

import java.util.HashSet;
import java.util.Set;

/**
 * The processes of start-time work (Go cache warm-up, language warm-ups), so that closing the executor stops
 * them with their children. One registered after {@link #stopAll()} is stopped at once: no warm-up outlives
 * the server by starting late.
 */
final class StartupProcesses {

    private final Set<Process> live = new HashSet<>();
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
