package dev.codeexec.sandbox;

/**
 * How a sandboxed program ended: it exited with a code, or a signal killed it. Taken from the program's real wait
 * status where the sandbox can see it (bubblewrap with codeexec-helper's init reports it; a program started
 * directly is the server's own child); where it cannot (the shell fallback init, gVisor's runsc), from the exit
 * status by the shell's convention, 128+N for signal N, which cannot tell {@code exit 130} from death by SIGINT:
 * {@link #exact()} says which.
 */
public sealed interface Termination {

    /** The exit status as a shell reports it: the code, or 128+N for signal N. */
    int exitCode();

    /** True when this comes from the wait status, false when it was read from an exit status. */
    boolean exact();

    /** The program called exit(code) (or returned from main). */
    record Exited(int code, boolean exact) implements Termination {
        @Override
        public int exitCode() {
            return code;
        }
    }

    /** A signal killed the program. */
    record Signaled(int signal, boolean exact) implements Termination {
        @Override
        public int exitCode() {
            return 128 + signal;
        }

        /** "SIGKILL", or "signal 40" for one without a usual name. */
        public String signalName() {
            return Signals.name(signal);
        }
    }

    /** From an exit status only (128+N read as signal N): for sandboxes that cannot see the wait status. */
    static Termination fromExitStatus(int status) {
        return status > 128 && status <= 128 + 64 ? new Signaled(status - 128, false) : new Exited(status, false);
    }

    /** From codeexec-helper's report ("exit N" or "signal N"), or null when it is not one. */
    static Termination fromReport(String report) {
        String r = report.strip();
        try {
            if (r.startsWith("exit ")) return new Exited(Integer.parseInt(r.substring(5)), true);
            if (r.startsWith("signal ")) return new Signaled(Integer.parseInt(r.substring(7)), true);
        } catch (NumberFormatException e) {
            return null;
        }
        return null;
    }

    /** Names of the signals a program commonly dies from (x86-64 and arm64 numbering). */
    final class Signals {
        private static final String[] NAMES = {null, "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT",
                "SIGBUS", "SIGFPE", "SIGKILL", "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM",
                "SIGSTKFLT", "SIGCHLD", "SIGCONT", "SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGXCPU",
                "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGWINCH", "SIGIO", "SIGPWR", "SIGSYS"};

        private Signals() {
        }

        static String name(int signal) {
            return signal > 0 && signal < NAMES.length ? NAMES[signal] : "signal " + signal;
        }
    }
}
