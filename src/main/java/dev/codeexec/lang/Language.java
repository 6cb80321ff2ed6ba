package dev.codeexec.lang;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * One row of the languages table ({@code languages.json}). Argument vectors hold placeholders that are filled
 * per run ({@link Placeholders}); a language with a compile step is "compiled" and both steps run in one sandbox.
 *
 * @param id            the canonical id clients send and see
 * @param aliases       other accepted names
 * @param fileExtension extension of the code file, without the dot
 * @param compile       argv run before {@code run}; empty for interpreted languages
 * @param run           argv that runs the program; request args are appended
 * @param version       argv whose first output line is the version shown in runtime_info
 * @param env           variables added to the base sandbox environment (before the request's own)
 * @param binds         host directories bound read-only at the same path inside the sandbox
 * @param warmup        what to run once at server start to make later runs faster (see {@code warm.LanguageWarmup})
 * @param warm          the interpreter a warm sandbox keeps waiting for its code ({@code warm.WarmPool}); empty: the
 *                      language cannot be kept warm
 * @param session       the interpreter of a stateful session ({@code session.Session}); empty: no sessions in it
 */
public record Language(String id, List<String> aliases, String fileExtension, Optional<List<String>> compile,
        List<String> run, List<String> version, Map<String, String> env, List<String> binds,
        Optional<Warmup> warmup, Optional<Interpreter> warm, Optional<Interpreter> session) {

    /** A language without interpreters started ahead of their code. */
    public Language(String id, List<String> aliases, String fileExtension, Optional<List<String>> compile,
            List<String> run, List<String> version, Map<String, String> env, List<String> binds,
            Optional<Warmup> warmup) {
        this(id, aliases, fileExtension, compile, run, version, env, binds, warmup, Optional.empty(), Optional.empty());
    }

    /**
     * An interpreter started ahead of its code, spoken to over the control channel (docs/interpreter-protocol.md).
     *
     * @param argv    its command (placeholders as in {@code run})
     * @param env     variables on top of the language's environment
     * @param message warm sandboxes: the form of the run message, {@code lengths} or {@code json}
     * @param preload warm sandboxes: the variable that names the modules to import before the code arrives, or ""
     * @param stdin   sessions: whether a call may give its code a stdin
     * @param stdio   warm sandboxes: the arguments that make it speak its protocol over stdin and stdout instead of
     *                fds 8 and 9, for a sandbox that cannot pass them ({@code Sandbox#controlOverStdio}, gVisor); empty
     *                when it cannot. Over stdio the run message is always {@code lengths}: the user's input follows
     *                it on the same pipe, and only a length-prefixed message lets the runner take exactly its own
     *                bytes
     */
    public record Interpreter(List<String> argv, Map<String, String> env, String message, String preload,
            boolean stdin, List<String> stdio) {
        public Interpreter {
            if (argv.isEmpty()) throw new IllegalArgumentException("empty interpreter command");
            argv = List.copyOf(argv);
            env = Map.copyOf(env);
            stdio = List.copyOf(stdio);
        }
    }

    /**
     * A start-time step, outside the sandbox, on our own fixed program.
     *
     * @param program  the source it runs
     * @param argv     the command; {@code {output}} is a temporary file it must write
     * @param env      variables on top of the language's environment
     * @param produces where the output is moved when the step succeeded
     */
    public record Warmup(String program, List<String> argv, Map<String, String> env, String produces) {
        public Warmup {
            argv = List.copyOf(argv);
            env = Map.copyOf(env);
        }
    }

    public Language {
        Objects.requireNonNull(id, "id");
        aliases = List.copyOf(aliases);
        if (!fileExtension.matches("[a-z0-9]{1,8}")) throw new IllegalArgumentException(id + ": bad extension " + fileExtension);
        compile = compile.map(List::copyOf);
        if (run.isEmpty()) throw new IllegalArgumentException(id + ": empty run command");
        run = List.copyOf(run);
        version = List.copyOf(version);
        env = Map.copyOf(env);
        binds = List.copyOf(binds);
        Objects.requireNonNull(warmup, "warmup");
        Objects.requireNonNull(warm, "warm");
        Objects.requireNonNull(session, "session");
    }

    /** The search path of every program the server starts, sandboxed or not: system directories only. */
    public static final String BASE_PATH = "/usr/local/bin:/usr/bin:/bin";

    public boolean compiled() {
        return compile.isPresent();
    }

    /**
     * The environment a program of this language starts with: the whitelist, then the language's own variables,
     * then the request's (which win). Nothing comes from the server's own environment. HOME is the run's /tmp, not
     * the working directory: tools' caches (fontconfig, matplotlib, pip, npm) must not litter a persistent
     * workspace or count against its quota.
     */
    public Map<String, String> environment(Map<String, String> requestEnv, Map<String, String> placeholders) {
        Map<String, String> env = baseEnvironment("/tmp");
        this.env.forEach((k, v) -> env.put(k, Placeholders.fill(v, placeholders)));
        env.putAll(requestEnv);
        return env;
    }

    /** The whitelist every program starts from, whatever its language; a fresh map the caller may change. */
    public static Map<String, String> baseEnvironment(String home) {
        Map<String, String> env = new LinkedHashMap<>();
        env.put("PATH", BASE_PATH);
        env.put("HOME", home);
        env.put("LANG", "C.UTF-8");
        env.put("TMPDIR", "/tmp");
        env.put("PYTHONUNBUFFERED", "1");
        env.put("MPLBACKEND", "Agg");
        return env;
    }
}
