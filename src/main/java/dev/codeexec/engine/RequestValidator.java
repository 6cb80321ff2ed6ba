package dev.codeexec.engine;

import dev.codeexec.lang.Language;
import dev.codeexec.lang.Languages;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.config.Config;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * Turns the raw arguments of a surface (MCP tool call, REST body) into an {@link ExecutionRequest} with limits
 * resolved from the configuration. Every rejection is an {@link ExecutionException.InvalidRequest} whose message
 * names the argument and the accepted range, so a client (or an AI agent) can fix its call.
 */
public final class RequestValidator {

    static final int MAX_CODE_BYTES = 1024 * 1024;
    static final int MAX_STDIN_BYTES = 1024 * 1024;
    static final int MAX_ARGS = 256;
    static final int MAX_ARG_CHARS = 4096;
    static final int MAX_ENV = 64;
    static final int MAX_ENV_VALUE_CHARS = 8192;
    private static final Pattern ENV_NAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,127}");

    private final Config config;
    private final Languages languages;

    public RequestValidator(Config config, Languages languages) {
        this.config = config;
        this.languages = languages;
    }

    /**
     * Validates arguments as they come from JSON: {@code language} and {@code code} strings (required),
     * {@code stdin} string, {@code timeout_ms} integer, {@code args} array of strings, {@code env} object of
     * strings. Unknown keys are ignored (surfaces declare their schema).
     */
    public ExecutionRequest fromArguments(Map<String, ?> arguments, ExecutionRequest.AuditInfo audit) {
        Map<String, ?> a = arguments == null ? Map.of() : arguments;
        String language = string(a.get("language"), "language");
        String code = string(a.get("code"), "code");
        String stdin = string(a.get("stdin"), "stdin");
        Long timeout = integer(a.get("timeout_ms"));
        List<String> args = stringList(a.get("args"));
        Map<String, String> env = stringMap(a.get("env"));
        return validate(language, code, stdin, timeout, args, env, audit);
    }

    /** Validates typed arguments; null means "not given". */
    public ExecutionRequest validate(String language, String code, String stdin, Long timeoutMs, List<String> args,
            Map<String, String> env, ExecutionRequest.AuditInfo audit) {
        if (language == null || language.isBlank()) throw invalid("'language' is required; supported: " + supported());
        Language lang = languages.find(language).orElseThrow(() ->
                invalid("unknown language '" + shorten(language) + "'; supported: " + supported()));
        if (code == null) throw invalid("'code' is required");
        checkSize("code", code, MAX_CODE_BYTES);
        if (stdin != null) checkSize("stdin", stdin, MAX_STDIN_BYTES);

        long maxMs = config.get(Config.MAX_TIMEOUT_MS);
        long ms = timeoutMs == null ? config.get(Config.DEFAULT_TIMEOUT_MS) : timeoutMs;
        if (ms < 1 || ms > maxMs)
            throw invalid("'timeout_ms' must be between 1 and " + maxMs + ", got " + ms);

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
        return ExecutionRequest.builder(lang.id(), code, limits(Duration.ofMillis(ms))).stdin(stdin).args(argv)
                .env(checked).audit(audit).build();
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

    private String supported() {
        return String.join(", ", languages.ids());
    }

    private static void checkSize(String what, String s, int maxBytes) {
        // Cheap bound first: a UTF-8 char is at most 3 bytes per UTF-16 unit.
        if (s.length() * 3L > maxBytes && s.getBytes(StandardCharsets.UTF_8).length > maxBytes)
            throw invalid("'" + what + "' is larger than " + (maxBytes / 1024) + " KB");
    }

    private static String string(Object v, String name) {
        if (v == null || v instanceof String) return (String) v;
        throw invalid("'" + name + "' must be a string");
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

    private static String shorten(String s) {
        return s.length() <= 40 ? s : s.substring(0, 40) + "...";
    }

    private static ExecutionException.InvalidRequest invalid(String message) {
        return new ExecutionException.InvalidRequest(message);
    }
}
