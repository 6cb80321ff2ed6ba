package dev.codeexec.mcp;

import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A tool call's arguments, read with the checks the input schema declares (the SDK's own schema validation is off
 * for our tools, so the messages are ours). Unknown names are refused: a misspelt {@code recursive} must not
 * silently mean "not recursive".
 */
final class ToolArgs {

    /** An argument that does not fit its schema; the message names the argument. */
    static final class Invalid extends RuntimeException {
        Invalid(String message) {
            super(message, null, false, false);
        }
    }

    private final Map<String, Object> args;

    ToolArgs(Map<String, Object> args, Set<String> known) {
        this.args = args == null ? Map.of() : args;
        for (String name : this.args.keySet()) {
            if (!known.contains(name)) throw new Invalid("unknown argument '" + name + "'; expected " + known.stream().sorted().toList());
        }
    }

    String string(String name, String fallback) {
        Object v = args.get(name);
        if (v == null) {
            if (fallback == null) throw new Invalid("'" + name + "' is required");
            return fallback;
        }
        if (!(v instanceof String s)) throw new Invalid("'" + name + "' must be a string");
        return s;
    }

    /** The argument as the JSON decoder gave it, or null when absent. */
    Object raw(String name) {
        return args.get(name);
    }

    String required(String name) {
        return string(name, null);
    }

    boolean has(String name) {
        return args.get(name) != null;
    }

    boolean bool(String name, boolean fallback) {
        Object v = args.get(name);
        if (v == null) return fallback;
        if (!(v instanceof Boolean b)) throw new Invalid("'" + name + "' must be true or false");
        return b;
    }

    int integer(String name, int fallback, int min, int max) {
        Object v = args.get(name);
        if (v == null) return fallback;
        long n;
        if (v instanceof Integer || v instanceof Long || v instanceof Short) n = ((Number) v).longValue();
        else if (v instanceof Number d && d.doubleValue() == Math.rint(d.doubleValue())) n = (long) d.doubleValue();
        else throw new Invalid("'" + name + "' must be an integer between " + min + " and " + max);
        if (n < min || n > max) throw new Invalid("'" + name + "' must be an integer between " + min + " and " + max + ", got " + n);
        return (int) n;
    }

    String oneOf(String name, String fallback, List<String> allowed) {
        String v = string(name, fallback);
        if (!allowed.contains(v)) throw new Invalid("'" + name + "' must be one of " + allowed + ", got '" + v + "'");
        return v;
    }
}
