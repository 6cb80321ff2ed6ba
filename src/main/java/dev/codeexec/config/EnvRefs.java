package dev.codeexec.config;

import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * {@code ${VAR}} in the operator's files (UPSTREAM_MCP_FILE, EGRESS_SECRETS_FILE), taken from the server's environment
 * when the file is read, so that secrets stay out of the file.
 */
public final class EnvRefs {

    private static final Pattern VAR = Pattern.compile("\\$\\{([A-Za-z_][A-Za-z0-9_]*)}");

    private EnvRefs() {
    }

    /**
     * {@code value} with every {@code ${VAR}} replaced by {@code env}'s value; an unset variable stops the start with
     * a message naming {@code where} and the variable, never a value.
     */
    public static String expand(String value, String where, Function<String, String> env) {
        Matcher m = VAR.matcher(value);
        StringBuilder out = new StringBuilder();
        while (m.find()) {
            String v = env.apply(m.group(1));
            if (v == null) throw new ConfigException(where + ": ${" + m.group(1) + "} is not set in the server's environment");
            m.appendReplacement(out, Matcher.quoteReplacement(v));
        }
        m.appendTail(out);
        return out.toString();
    }
}
