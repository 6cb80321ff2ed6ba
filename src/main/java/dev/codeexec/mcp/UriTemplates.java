package dev.codeexec.mcp;

import io.modelcontextprotocol.util.McpUriTemplateManager;
import io.modelcontextprotocol.util.McpUriTemplateManagerFactory;

import java.io.ByteArrayOutputStream;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * URI templates with the two RFC 6570 forms our resources use: simple {@code {var}}, whose value holds no '/', and
 * reserved {@code {+var}}, whose value may span several segments ({@code ws://{workspace}/{+path}} must match
 * {@code ws://proj/a/b/c.txt}). The SDK's default manager knows only the first, and would name the second
 * variable "+path". Values are percent-decoded (UTF-8); any other operator ({@code {#x}}, {@code {?x}}, lists) is
 * refused when the template is created, so a template never silently means something else.
 */
final class UriTemplates implements McpUriTemplateManagerFactory {

    private static final Pattern EXPRESSION = Pattern.compile("\\{([^{}]*)}");
    private static final Pattern VARIABLE = Pattern.compile("(\\+?)([A-Za-z0-9_]+)");

    @Override
    public McpUriTemplateManager create(String template) {
        return new Template(template);
    }

    /** One parsed template: its variable names and the regex that matches (and captures) them. */
    static final class Template implements McpUriTemplateManager {
        private final String template;
        private final List<String> names = new ArrayList<>();
        private final Pattern pattern;

        Template(String template) {
            if (template == null || template.isEmpty()) throw new IllegalArgumentException("empty URI template");
            this.template = template;
            StringBuilder regex = new StringBuilder("^");
            Matcher m = EXPRESSION.matcher(template);
            int last = 0;
            while (m.find()) {
                Matcher v = VARIABLE.matcher(m.group(1));
                if (!v.matches())
                    throw new IllegalArgumentException("unsupported URI template expression {" + m.group(1) + "}");
                if (names.contains(v.group(2)))
                    throw new IllegalArgumentException("duplicate URI template variable " + v.group(2));
                names.add(v.group(2));
                regex.append(Pattern.quote(template.substring(last, m.start())));
                regex.append(v.group(1).isEmpty() ? "([^/]+)" : "(.+)");
                last = m.end();
            }
            regex.append(Pattern.quote(template.substring(last))).append('$');
            this.pattern = Pattern.compile(regex.toString(), Pattern.DOTALL);
        }

        @Override
        public List<String> getVariableNames() {
            return List.copyOf(names);
        }

        /**
         * The decoded values, or an empty map when the URI does not match.
         *
         * @throws IllegalArgumentException when a value holds a malformed percent-escape or invalid UTF-8
         */
        @Override
        public Map<String, String> extractVariableValues(String uri) {
            Map<String, String> values = new LinkedHashMap<>();
            if (uri == null) return values;
            Matcher m = pattern.matcher(uri);
            if (!m.matches()) return values;
            for (int i = 0; i < names.size(); i++) values.put(names.get(i), decode(m.group(i + 1)));
            return values;
        }

        /** The template itself matches too: the SDK looks a completion's template reference up this way. */
        @Override
        public boolean matches(String uri) {
            return uri != null && (uri.equals(template) || pattern.matcher(uri).matches());
        }

        @Override
        public boolean isUriTemplate(String uri) {
            return uri != null && EXPRESSION.matcher(uri).find();
        }
    }

    /** Percent-decodes a value (no '+' to space: that is form encoding, not URIs). */
    static String decode(String s) {
        if (s.indexOf('%') < 0) return s;
        ByteArrayOutputStream out = new ByteArrayOutputStream(s.length());
        int i = 0;
        while (i < s.length()) {
            int pct = s.indexOf('%', i);
            int end = pct < 0 ? s.length() : pct;
            out.writeBytes(s.substring(i, end).getBytes(StandardCharsets.UTF_8));
            if (pct < 0) break;
            if (pct + 2 >= s.length()) throw new IllegalArgumentException("malformed percent-escape in URI");
            int hi = Character.digit(s.charAt(pct + 1), 16);
            int lo = Character.digit(s.charAt(pct + 2), 16);
            if (hi < 0 || lo < 0) throw new IllegalArgumentException("malformed percent-escape in URI");
            out.write(hi << 4 | lo);
            i = pct + 3;
        }
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(out.toByteArray())).toString();
        } catch (CharacterCodingException e) {
            throw new IllegalArgumentException("percent-escapes in URI are not valid UTF-8");
        }
    }

    /**
     * Encodes a workspace path for {@code {+path}}: unreserved and reserved characters stay (so '/' separates
     * segments), everything else — space, '%', non-ASCII — is percent-encoded as UTF-8. '?' and '#' are encoded
     * too, so a file name holding them still reads back as the same path.
     */
    static String encodePath(String path) {
        StringBuilder b = new StringBuilder(path.length() + 8);
        for (byte x : path.getBytes(StandardCharsets.UTF_8)) {
            int c = x & 0xff;
            boolean keep = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
                    || "-._~/!$&'()*+,;=:@".indexOf(c) >= 0;
            if (keep) b.append((char) c);
            else b.append('%').append(Character.toUpperCase(Character.forDigit(c >> 4, 16)))
                    .append(Character.toUpperCase(Character.forDigit(c & 15, 16)));
        }
        return b.toString();
    }
}
