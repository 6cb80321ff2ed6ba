package dev.codeexec.engine;

import dev.codeexec.config.Config;
import dev.codeexec.lang.Language;
import dev.codeexec.lang.Languages;
import dev.codeexec.packages.PackageSet;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.workspace.Workspaces;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * The arguments of {@code execute_code}, defined once for every surface: each argument's name, JSON type, bounds and
 * error text. {@link #inputSchema} is what clients are shown (the MCP tool's input schema); {@link #parse} reads the
 * arguments of a call as JSON decodes them (an MCP tool call, a REST body) into the request; {@link #validate} checks
 * the typed ones a worker gets over gRPC. Limits are resolved from the configuration (the server's, with the call's
 * timeout). Every rejection is an {@link ExecutionException.InvalidRequest} whose message names the argument and the
 * accepted range, so a client (or an AI agent) can fix its call; a {@code workspace} or {@code session} name that
 * is not valid is a {@link dev.codeexec.workspace.WorkspaceException} ({@code bad_name}).
 */
public final class RequestValidator {

    static final int MAX_CODE_BYTES = 1024 * 1024;
    static final int MAX_STDIN_BYTES = 1024 * 1024;
    static final int MAX_ARGS = 256;
    static final int MAX_ARG_CHARS = 4096;
    static final int MAX_ENV = 64;
    static final int MAX_ENV_VALUE_CHARS = 8192;
    private static final String ENV_NAME_PATTERN = "[A-Za-z_][A-Za-z0-9_]{0,127}";
    private static final Pattern ENV_NAME = Pattern.compile(ENV_NAME_PATTERN);
    /** A workspace's or session's name, as {@link Workspaces#checkName} accepts it. */
    private static final String NAME_PATTERN = "^[A-Za-z0-9_-]{1,64}$";

    private final Config config;
    private final Languages languages;

    public RequestValidator(Config config, Languages languages) {
        this.config = config;
        this.languages = languages;
    }

    /**
     * A call's arguments, checked: the request they ask for (without the caller's context), and what only that
     * context resolves: the workspace's and the session's names (valid, the workspace not opened yet) and the network
     * asked for, which must lie inside the caller's allow-list ({@code EgressSettings.forCall}).
     *
     * @param network null when not given, else {@link Boolean} or a list of host pattern strings
     */
    public record Arguments(ExecutionRequest request, Optional<String> workspace, Optional<String> session,
            Object network) {
    }

    /**
     * The arguments as JSON gives them: {@code language} and {@code code} strings (required), {@code stdin} string,
     * {@code timeout_ms} integer, {@code args} array of strings, {@code env} object of strings, {@code packages}
     * array of strings, {@code workspace} and {@code session} names, {@code network} false or an array of host
     * patterns, {@code background} boolean (not with a session). Unknown keys are ignored (the schema says what
     * there is).
     */
    public Arguments parse(Map<String, ?> arguments, ExecutionRequest.AuditInfo audit) {
        Map<String, ?> a = arguments == null ? Map.of() : arguments;
        String language = string(a.get("language"), "language");
        String code = string(a.get("code"), "code");
        String stdin = string(a.get("stdin"), "stdin");
        Long timeout = integer(a.get("timeout_ms"));
        List<String> args = stringList(a.get("args"));
        Map<String, String> env = stringMap(a.get("env"));
        boolean background = bool(a.get("background"), "background");
        Optional<String> session = name(a.get("session"), "session");
        if (background && session.isPresent())
            throw invalid("'background' cannot be used with 'session': a session is already a long-lived process; "
                    + "to leave work running in one, start it in the background from the session's code (python: "
                    + "subprocess.Popen or a thread; bash: `cmd &`), or run it as a job without 'session'");
        ExecutionRequest request = validate(language, code, stdin, timeout, args, env, audit, background);
        request = request.withPackages(packages(request.language(), a.get("packages")));
        Optional<String> workspace = name(a.get("workspace"), "workspace");
        return new Arguments(request, workspace, session, network(a.get("network")));
    }

    /** Validates typed arguments of a foreground run; null means "not given". */
    public ExecutionRequest validate(String language, String code, String stdin, Long timeoutMs, List<String> args,
            Map<String, String> env, ExecutionRequest.AuditInfo audit) {
        return validate(language, code, stdin, timeoutMs, args, env, audit, false);
    }

    /**
     * Validates typed arguments; null means "not given". A background job's timeout may go up to JOB_MAX_TIMEOUT_MS
     * (its default too), and its CPU time per process is JOB_CPU_LIMIT_SECONDS (else the timeout's).
     */
    public ExecutionRequest validate(String language, String code, String stdin, Long timeoutMs, List<String> args,
            Map<String, String> env, ExecutionRequest.AuditInfo audit, boolean background) {
        if (language == null || language.isBlank()) throw invalid("'language' is required; supported: " + supported());
        Language lang = languages.find(language).orElseThrow(() ->
                invalid("unknown language '" + shorten(language) + "'; supported: " + supported()));
        if (code == null) throw invalid("'code' is required");
        checkSize("code", code, MAX_CODE_BYTES);
        if (stdin != null) checkSize("stdin", stdin, MAX_STDIN_BYTES);

        long maxMs = config.get(background ? Config.JOB_MAX_TIMEOUT_MS : Config.MAX_TIMEOUT_MS);
        long ms = timeoutMs == null ? (background ? maxMs : config.get(Config.DEFAULT_TIMEOUT_MS)) : timeoutMs;
        if (ms < 1 || ms > maxMs)
            throw invalid("'timeout_ms' must be between 1 and " + maxMs + (background ? " for a background job" : "")
                    + ", got " + ms + (!background && ms > maxMs && ms <= config.get(Config.JOB_MAX_TIMEOUT_MS)
                    ? " (a longer run can go on as a background job: `background: true`)" : ""));

        List<String> argv = args == null ? List.of() : args;
        if (argv.size() > MAX_ARGS) throw invalid("'args' may have at most " + MAX_ARGS + " entries, got " + argv.size());
        for (int i = 0; i < argv.size(); i++) {
            String s = argv.get(i);
            if (s == null) throw invalid("'args[" + i + "]' must be a string");
            if (s.length() > MAX_ARG_CHARS) throw invalid("'args[" + i + "]' is longer than " + MAX_ARG_CHARS + " characters");
            if (s.indexOf('\0') >= 0) throw invalid("'args[" + i + "]' contains a NUL character");
        }

        Map<String, String> vars = env == null ? Map.of() : env;
        if (vars.size() > MAX_ENV) throw invalid("'env' may have at most " + MAX_ENV + " variables, got " + vars.size());
        Map<String, String> checked = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : vars.entrySet()) {
            String name = e.getKey();
            if (name == null || !ENV_NAME.matcher(name).matches())
                throw invalid("'env' name '" + shorten(String.valueOf(name))
                        + "' is not valid: use letters, digits and '_', not starting with a digit, at most 128 characters");
            String value = e.getValue();
            if (value == null) throw invalid("'env." + name + "' must be a string");
            if (value.length() > MAX_ENV_VALUE_CHARS)
                throw invalid("'env." + name + "' is longer than " + MAX_ENV_VALUE_CHARS + " characters");
            if (value.indexOf('\0') >= 0) throw invalid("'env." + name + "' contains a NUL character");
            checked.put(name, value);
        }
        Limits limits = background ? jobLimits(config, Duration.ofMillis(ms)) : limits(Duration.ofMillis(ms));
        return ExecutionRequest.builder(lang.id(), code, limits).stdin(stdin).args(argv)
                .env(checked).audit(audit).background(background).build();
    }

    /**
     * A background job's limits: the server's, with the job's timeout, JOB_CPU_LIMIT_SECONDS (else the timeout's),
     * and an output flood counted per MAX_TIMEOUT_MS of the timeout: MAX_OUTPUT_DRAIN_MB for each (an hour-long job
     * that logs steadily is not a flood; its log keeps JOB_LOG_MB of it).
     */
    public static Limits jobLimits(Config config, Duration timeout) {
        int cpu = config.get(Config.JOB_CPU_LIMIT_SECONDS);
        Limits l = defaultLimits(config, timeout);
        long periods = Math.max(1, (timeout.toMillis() + config.get(Config.MAX_TIMEOUT_MS) - 1) / config.get(Config.MAX_TIMEOUT_MS));
        return new Limits(timeout, cpu > 0 ? cpu : (int) Math.max(1, (timeout.toMillis() + 999) / 1000), l.memoryBytes(),
                l.maxProcesses(), l.outputBytes(), l.diskBytes(), Math.multiplyHigh(l.drainBytes(), periods) != 0
                ? Long.MAX_VALUE : l.drainBytes() * periods);
    }

    /**
     * Declared packages ({@code packages} of execute_code, of session_reset), checked and normalised for the
     * language; empty when absent or an empty list.
     *
     * @throws ExecutionException.InvalidRequest not a list of strings, or a requirement that is refused
     */
    public static Optional<PackageSet> packages(String language, Object value) {
        if (value == null) return Optional.empty();
        if (!(value instanceof List<?> list)) throw invalid("'packages' must be an array of strings");
        if (list.isEmpty()) return Optional.empty();
        List<String> specs = new ArrayList<>();
        for (Object o : list) {
            if (!(o instanceof String s)) throw invalid("'packages' must be an array of strings");
            specs.add(s);
        }
        try {
            return Optional.of(PackageSet.parse(language, specs));
        } catch (IllegalArgumentException e) {
            throw invalid(e.getMessage());
        }
    }

    /** The server's limits with the given timeout. */
    public Limits limits(Duration timeout) {
        return defaultLimits(config, timeout);
    }

    /** The server's limits (CPU_LIMIT_SECONDS, MEMORY_LIMIT_MB, ...) with the given timeout. */
    public static Limits defaultLimits(Config config, Duration timeout) {
        long mb = 1024L * 1024L;
        return new Limits(timeout, config.get(Config.CPU_LIMIT_SECONDS), config.get(Config.MEMORY_LIMIT_MB) * mb,
                config.get(Config.MAX_PROCESSES), config.get(Config.MAX_OUTPUT_KB) * 1024L,
                config.get(Config.MAX_DISK_MB) * mb, config.get(Config.MAX_OUTPUT_DRAIN_MB) * mb);
    }

    /** The language ids and aliases a call may name. */
    public List<String> languageNames() {
        return languages.names();
    }

    /** The JSON schema of the arguments, as clients are shown it: each argument's type, bounds and meaning. */
    public Map<String, Object> inputSchema() {
        Map<String, Object> props = new LinkedHashMap<>();
        props.put("language", Map.of("type", "string", "enum", languageNames(),
                "description", "Language of the code."));
        props.put("code", Map.of("type", "string", "description", "The program text."));
        props.put("stdin", Map.of("type", "string", "description", "Standard input for the program."));
        props.put("timeout_ms", Map.of("type", "integer", "minimum", 1,
                "maximum", Math.max(config.get(Config.MAX_TIMEOUT_MS), config.get(Config.JOB_MAX_TIMEOUT_MS)),
                "default", config.get(Config.DEFAULT_TIMEOUT_MS),
                "description", "Wall-clock timeout in milliseconds: at most " + config.get(Config.MAX_TIMEOUT_MS)
                        + "; with `background: true` at most " + config.get(Config.JOB_MAX_TIMEOUT_MS)
                        + " (the default of a job)."));
        props.put("args", Map.of("type", "array", "items", Map.of("type", "string", "maxLength", MAX_ARG_CHARS),
                "maxItems", MAX_ARGS, "description", "Program arguments."));
        props.put("env", Map.of("type", "object", "maxProperties", MAX_ENV,
                "propertyNames", Map.of("pattern", "^" + ENV_NAME_PATTERN + "$"),
                "additionalProperties", Map.of("type", "string", "maxLength", MAX_ENV_VALUE_CHARS),
                "description", "Extra environment variables (names like [A-Za-z_][A-Za-z0-9_]*)."));
        props.put("workspace", Map.of("type", "string", "pattern", NAME_PATTERN,
                "description", "Persistent workspace to run in (its files are the working directory); "
                        + "created if it does not exist. Without it the run gets a fresh empty directory."));
        props.put("session", Map.of("type", "string", "pattern", NAME_PATTERN,
                "description", "Stateful session to run in (python; nodejs and typescript: a REPL, declarations persist and static imports work; bash: a persistent shell whose variables and working directory stay); created by the first call with "
                        + "a new name. State persists between calls; 'args' cannot be used with it, and 'env' only on the call that creates the session (it is the interpreter's environment)."));
        props.put("network", Map.of("type", List.of("boolean", "array"), "items", Map.of("type", "string"),
                "description", "Network access of this run: false for none, or a list of host patterns (`host`, "
                        + "`*.suffix`, optionally `:port`) that must each lie inside your allow-list. Omitted: your "
                        + "whole allow-list (none unless the server enables egress). A session keeps the access it "
                        + "was created with."));
        props.put("packages", Map.of("type", "array", "items", Map.of("type", "string"), "maxItems", PackageSet.MAX_SPECS,
                "description", "Libraries the code needs that are not preinstalled: pip requirements for python "
                        + "(`requests==2.32.3`, `pandas>=2`, extras allowed), npm packages for nodejs and typescript "
                        + "(`left-pad@1.3.0`, `lodash`). Names and versions only, no URLs or options. Installed once "
                        + "per set (the first call waits for it), then instant; the result lists what was resolved. "
                        + "A session keeps the set it was created with (session_reset can change it)."));
        props.put("background", Map.of("type", "boolean", "default", false,
                "description", "Run as a background job: the call returns at once with the job's id, the program goes "
                        + "on without the call (or the MCP session) for up to its timeout. Watch and collect it with "
                        + "job_status, job_wait, job_cancel and job_list. Not with `session`."));
        return Map.of("type", "object", "properties", props, "required", List.of("language", "code"),
                "additionalProperties", false);
    }

    private String supported() {
        return String.join(", ", languages.ids());
    }

    private static void checkSize(String what, String s, int maxBytes) {
        // Cheap bound first: a UTF-8 char is at most 3 bytes per UTF-16 unit.
        if (s.length() * 3L > maxBytes && s.getBytes(StandardCharsets.UTF_8).length > maxBytes)
            throw invalid("'" + what + "' is larger than " + (maxBytes / 1024) + " KB");
    }

    private static boolean bool(Object v, String name) {
        if (v == null) return false;
        if (v instanceof Boolean b) return b;
        throw invalid("'" + name + "' must be true or false");
    }

    private static String string(Object v, String name) {
        if (v == null || v instanceof String) return (String) v;
        throw invalid("'" + name + "' must be a string");
    }

    /** A workspace's or session's name: a string, and a valid name ({@code bad_name} otherwise). */
    private static Optional<String> name(Object v, String kind) {
        String s = string(v, kind);
        return s == null ? Optional.empty() : Optional.of(Workspaces.checkName(kind, s));
    }

    private static Long integer(Object v) {
        return switch (v) {
            case null -> null;
            case Integer i -> i.longValue();
            case Long l -> l;
            case Short s -> s.longValue();
            case java.math.BigInteger b -> b.bitLength() < 63 ? b.longValue() : Long.MAX_VALUE;
            case Number n when n.doubleValue() == Math.rint(n.doubleValue()) && !Double.isInfinite(n.doubleValue()) ->
                    (long) n.doubleValue();
            default -> throw invalid("'timeout_ms' must be a whole number of milliseconds");
        };
    }

    private static List<String> stringList(Object v) {
        if (v == null) return null;
        if (!(v instanceof List<?> list)) throw invalid("'args' must be an array of strings");
        List<String> out = new ArrayList<>(list.size());
        for (int i = 0; i < list.size(); i++) {
            if (!(list.get(i) instanceof String s)) throw invalid("'args[" + i + "]' must be a string");
            out.add(s);
        }
        return out;
    }

    private static Map<String, String> stringMap(Object v) {
        if (v == null) return null;
        if (!(v instanceof Map<?, ?> map)) throw invalid("'env' must be an object of string values");
        Map<String, String> out = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : map.entrySet()) {
            if (!(e.getValue() instanceof String s)) throw invalid("'env." + e.getKey() + "' must be a string");
            out.put(String.valueOf(e.getKey()), s);
        }
        return out;
    }

    /** {@code network}: absent, a boolean, or a list of strings (whether each is a pattern the caller may use is the caller's policy's to say). */
    private static Object network(Object v) {
        if (v == null || v instanceof Boolean) return v;
        if (v instanceof List<?> list && list.stream().allMatch(String.class::isInstance)) return List.copyOf(list);
        throw invalid("'network' must be false or a list of host patterns");
    }

    private static String shorten(String s) {
        return s.length() <= 40 ? s : s.substring(0, 40) + "...";
    }

    private static ExecutionException.InvalidRequest invalid(String message) {
        return new ExecutionException.InvalidRequest(message);
    }
}
