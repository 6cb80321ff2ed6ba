package dev.codeexec.codemode;

import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;
import dev.codeexec.config.ConfigException;
import dev.codeexec.config.EnvRefs;

import java.io.IOException;
import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;
import java.util.regex.Pattern;

/**
 * The upstream MCP servers an operator lets sandboxed code call (UPSTREAM_MCP_FILE), in the format desktop clients
 * already use:
 *
 * <pre>{@code
 * {"mcpServers": {
 *    "github": {"url": "https://api.example/mcp", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"},
 *               "tenants": ["team-a"], "tools": ["search_issues", "get_issue"]},
 *    "files":  {"command": "node", "args": ["server.js"], "env": {"ROOT": "/srv/data"}}}}
 * }</pre>
 *
 * <p>Decisions: {@code ${VAR}} in any string value (url, header values, command, args, env values, cwd) is taken
 * from the server's environment when the file is read, so secrets stay out of the file; a variable that is not set
 * stops the start with a message naming the server and the variable (never a value). {@code "type"} is optional
 * ({@code "http"}, {@code "streamable-http"} or {@code "stdio"}, as some clients write it) and must agree with
 * {@code url}/{@code command}; SSE-only servers are not supported (the SDK's Streamable HTTP client is used).
 * {@code "tenants"} absent: every tenant may call the server; {@code "tools"} absent: every tool it lists. A server's
 * name is what code imports: it must be an identifier in Python and JavaScript after {@code -} becomes {@code _}
 * ({@link Upstream#module}); two names that give the same module are refused. {@code "disabled": true} (a common
 * client field) skips the entry. Unknown fields are refused, so that a typo in {@code "tenants"} cannot open a
 * server to everyone. The file's credentials ({@link Secrets}: every {@code ${VAR}} value, header values, a URL's
 * user info and query values) are collected while it is read, so that nothing an upstream says can show them to code.
 *
 * <p>Next to {@code mcpServers} (either may be absent, not both), {@code httpApis} names plain HTTP APIs that runs reach
 * through a credentialed route ({@link HttpApi}, served by {@link ApiRoutes}):
 *
 * <pre>{@code
 * "httpApis": {"github": {"url": "https://api.github.com", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"},
 *              "tenants": ["team-a"], "methods": ["GET", "POST"], "paths": ["/repos/**", "/user"],
 *              "description": "GitHub's REST API"}}
 * }</pre>
 *
 * <p>Its {@code ${VAR}}, names, {@code tenants}, {@code disabled} and unknown fields are read as a server's; its
 * header values, {@code ${VAR}} values and URL query values are secrets too. {@code url} may be http:// (an internal
 * API, a test fixture) or https://; user info in it is refused (credentials go in {@code headers}).
 *
 * <p>A gateway reads the file with {@link #readForGateway}: the servers in full (it connects to them to list their
 * tools), the APIs for what it lists only (it never makes their calls, the workers do), so it needs no variable of
 * an API's headers or of its URL's query.
 *
 * @param secrets the values no text from an upstream may carry on to code or callers
 */
public record UpstreamConfig(List<Upstream> servers, List<HttpApi> apis, Secrets secrets) {

    private static final Pattern NAME = Pattern.compile("[A-Za-z][A-Za-z0-9_-]{0,63}");
    private static final Set<String> RESERVED = Set.of("call", "servers", "tools", "describe", "McpToolError", "http", "base", "Any",
            "default", "class", "import", "from", "def", "function", "return", "async", "await", "None", "True", "False",
            "null", "true", "false", "new", "delete", "in", "is", "not", "and", "or", "if", "else", "for", "while");
    private static final Set<String> HTTP_FIELDS = Set.of("type", "url", "headers", "tenants", "tools", "disabled", "description");
    private static final Set<String> STDIO_FIELDS = Set.of("type", "command", "args", "env", "cwd", "tenants", "tools", "disabled",
            "description");

    private static final Set<String> API_FIELDS = Set.of("url", "headers", "tenants", "methods", "paths", "description", "disabled");
    private static final Pattern METHOD = Pattern.compile("[A-Z]{1,20}");

    public static final UpstreamConfig NONE = new UpstreamConfig(List.of(), List.of(), Secrets.NONE);

    public UpstreamConfig {
        servers = List.copyOf(servers);
        apis = List.copyOf(apis);
    }

    /** How the server reaches an upstream. */
    public sealed interface Transport {
        /** Streamable HTTP at {@code url}, each request carrying {@code headers}. */
        record Http(URI url, Map<String, String> headers) implements Transport {
            public Http {
                headers = Collections.unmodifiableMap(new LinkedHashMap<>(headers));
            }

            @Override
            public String toString() {
                return "Http[" + url.getScheme() + "://" + url.getHost() + (url.getPort() < 0 ? "" : ":" + url.getPort()) + url.getPath()
                        + ", headers " + headers.keySet() + "]"; // no user info, no query: they may hold credentials
            }
        }

        /** A process the server starts and talks to over its stdin/stdout. */
        record Stdio(String command, List<String> args, Map<String, String> env, Optional<Path> cwd) implements Transport {
            public Stdio {
                args = List.copyOf(args);
                env = Collections.unmodifiableMap(new LinkedHashMap<>(env));
            }

            @Override
            public String toString() {
                return "Stdio[" + command + " " + args + ", env " + env.keySet() + "]";
            }
        }
    }

    /**
     * One upstream server.
     *
     * @param name        as the file names it
     * @param module      what code imports: {@code name} with {@code -} as {@code _}
     * @param tenants     who may call it; empty: everyone
     * @param tools       which of its tools may be called; empty: all it lists
     * @param description the operator's words about it, shown by list_code_tools ("" when none)
     */
    public record Upstream(String name, String module, Transport transport, Optional<Set<String>> tenants,
            Optional<Set<String>> tools, String description) {

        public Upstream {
            tenants = tenants.map(Set::copyOf);
            tools = tools.map(t -> Collections.unmodifiableSet(new LinkedHashSet<>(t)));
        }

        /** Whether {@code tenant} may call this server at all. */
        public boolean allowsTenant(String tenant) {
            return tenants.isEmpty() || tenants.get().contains(tenant);
        }

        /** Whether the operator lets code call {@code tool} of this server. */
        public boolean allowsTool(String tool) {
            return tools.isEmpty() || tools.get().contains(tool);
        }
    }

    /**
     * One credentialed HTTP API: runs reach {@code url} at {@code http://127.0.0.1:3128/apis/{name}/...} and the
     * server adds {@code headers}.
     *
     * @param url         where calls go: a path under the route is appended to its path; its query (if any) comes first
     * @param headers     added to every call (the caller's own of the same names are dropped); as written, with
     *                    {@code ${VAR}} not expanded, when a gateway read the file ({@link #readForGateway})
     * @param tenants     who may call it; empty: everyone
     * @param methods     the HTTP methods allowed (upper case); empty: all
     * @param paths       the paths allowed under {@code url}, {@code *} one segment and {@code **} any number
     *                    (zero too); empty: all
     * @param description the operator's words about it ("" when none)
     */
    public record HttpApi(String name, URI url, Map<String, String> headers, Optional<Set<String>> tenants,
            Optional<Set<String>> methods, Optional<List<String>> paths, String description) {

        public HttpApi {
            headers = Collections.unmodifiableMap(new LinkedHashMap<>(headers));
            tenants = tenants.map(Set::copyOf);
            methods = methods.map(m -> Collections.unmodifiableSet(new LinkedHashSet<>(m)));
            paths = paths.map(List::copyOf);
        }

        public boolean allowsTenant(String tenant) {
            return tenants.isEmpty() || tenants.get().contains(tenant);
        }

        public boolean allowsMethod(String method) {
            return methods.isEmpty() || methods.get().contains(method);
        }

        /** Whether {@code path} (decoded, starting with {@code /}) matches one of {@link #paths}. */
        public boolean allowsPath(String path) {
            return paths.isEmpty() || paths.get().stream().anyMatch(p -> glob(p).matcher(path).matches());
        }

        /** The base URL as callers may see it: scheme, host, port and path, never user info or query. */
        public String shownUrl() {
            return url.getScheme() + "://" + url.getHost() + (url.getPort() < 0 ? "" : ":" + url.getPort())
                    + (url.getRawPath() == null ? "" : url.getRawPath());
        }

        @Override
        public String toString() {
            return "HttpApi[" + name + " " + shownUrl() + ", headers " + headers.keySet() + "]";
        }

        /** {@code **} any characters ({@code /**} at the end: also none), {@code *} any but {@code /}. */
        static Pattern glob(String pattern) {
            StringBuilder re = new StringBuilder();
            String p = pattern;
            String tail = "";
            if (p.endsWith("/**")) {
                p = p.substring(0, p.length() - 3);
                tail = "(/.*)?";
            }
            for (int i = 0; i < p.length(); i++) {
                char c = p.charAt(i);
                if (c == '*' && i + 1 < p.length() && p.charAt(i + 1) == '*') {
                    re.append(".*");
                    i++;
                } else if (c == '*') {
                    re.append("[^/]*");
                } else {
                    re.append(Pattern.quote(String.valueOf(c)));
                }
            }
            return Pattern.compile(re + tail);
        }
    }

    public boolean isEmpty() {
        return servers.isEmpty() && apis.isEmpty();
    }

    public Optional<HttpApi> api(String name) {
        return apis.stream().filter(a -> a.name().equals(name)).findFirst();
    }

    public Optional<Upstream> server(String nameOrModule) {
        return servers.stream().filter(s -> s.name().equals(nameOrModule) || s.module().equals(nameOrModule)).findFirst();
    }

    /** Reads {@code file} (UPSTREAM_MCP_FILE); {@code env} resolves {@code ${VAR}}. Any problem: a ConfigException. */
    public static UpstreamConfig read(Path file, Function<String, String> env) {
        return parse(text(file), env);
    }

    /**
     * Reads {@code file} as a gateway needs it: as {@link #read} does, except that an API's headers are kept as
     * written ({@code ${VAR}} neither expanded nor needed) and its URL is read without its query, so the gateway
     * needs none of the APIs' credentials (a variable in a URL before its {@code ?} it does need, to show the URL).
     * Checked as strictly as {@link #read} checks it.
     */
    public static UpstreamConfig readForGateway(Path file, Function<String, String> env) {
        return parseForGateway(text(file), env);
    }

    private static String text(Path file) {
        try {
            return Files.readString(file);
        } catch (IOException e) {
            throw new ConfigException("UPSTREAM_MCP_FILE " + file + " cannot be read: " + e.getMessage());
        }
    }

    /** Parses the file's text; see the class comment for the format. */
    public static UpstreamConfig parse(String text, Function<String, String> env) {
        return parse(text, env, true);
    }

    /** Parses the file's text as a gateway reads it ({@link #readForGateway}). */
    public static UpstreamConfig parseForGateway(String text, Function<String, String> env) {
        return parse(text, env, false);
    }

    /** @param apiCredentials whether the APIs' header values and URL queries are expanded (false: a gateway's read) */
    private static UpstreamConfig parse(String text, Function<String, String> env, boolean apiCredentials) {
        JsonNode root;
        try {
            root = JsonMapper.shared().readTree(text);
        } catch (JacksonException e) {
            throw new ConfigException("UPSTREAM_MCP_FILE is not valid JSON: " + firstLine(e.getMessage()));
        }
        if (root == null || !root.isObject() || !(root.path("mcpServers").isObject() || root.path("httpApis").isObject())
                || !(root.path("mcpServers").isMissingNode() || root.path("mcpServers").isObject())
                || !(root.path("httpApis").isMissingNode() || root.path("httpApis").isObject()))
            throw new ConfigException("UPSTREAM_MCP_FILE must be an object with \"mcpServers\": {\"NAME\": {...}, ...} "
                    + "and/or \"httpApis\": {\"NAME\": {\"url\": ...}, ...}");
        List<Upstream> out = new ArrayList<>();
        Set<String> secrets = new LinkedHashSet<>();
        Map<String, String> modules = new HashMap<>();
        for (Map.Entry<String, JsonNode> e : root.path("mcpServers").properties()) {
            String name = e.getKey();
            JsonNode s = e.getValue();
            String where = "UPSTREAM_MCP_FILE server \"" + name + "\"";
            if (!s.isObject()) throw new ConfigException(where + ": must be an object");
            if (s.path("disabled").asBoolean(false)) continue;
            if (!NAME.matcher(name).matches())
                throw new ConfigException(where + ": a name must start with a letter and hold only letters, digits, _ and - "
                        + "(code imports it as a module)");
            String module = name.replace('-', '_');
            if (RESERVED.contains(module)) throw new ConfigException(where + ": the name " + module + " is reserved");
            String clash = modules.putIfAbsent(module, name);
            if (clash != null) throw new ConfigException(where + ": imports as " + module + ", as \"" + clash + "\" does");
            out.add(new Upstream(name, module, transport(s, where, env, secrets), stringSet(s, "tenants", where),
                    stringSet(s, "tools", where), s.path("description").asString("")));
        }
        List<HttpApi> apis = new ArrayList<>();
        for (Map.Entry<String, JsonNode> e : root.path("httpApis").properties()) {
            String where = "UPSTREAM_MCP_FILE API \"" + e.getKey() + "\"";
            if (!e.getValue().isObject()) throw new ConfigException(where + ": must be an object");
            if (e.getValue().path("disabled").asBoolean(false)) continue;
            apis.add(api(e.getKey(), e.getValue(), where, env, secrets, apiCredentials));
        }
        return new UpstreamConfig(out, apis, Secrets.of(secrets));
    }

    private static HttpApi api(String name, JsonNode s, String where, Function<String, String> lookup, Set<String> secrets,
            boolean credentials) {
        if (!NAME.matcher(name).matches())
            throw new ConfigException(where + ": a name must start with a letter and hold only letters, digits, _ and - "
                    + "(at most 64)");
        for (String field : s.propertyNames()) {
            if (!API_FIELDS.contains(field))
                throw new ConfigException(where + ": unknown field \"" + field + "\" (known: " + API_FIELDS + ")");
        }
        Function<String, String> env = v -> {
            String value = lookup.apply(v);
            if (value != null) secrets.add(value);
            return value;
        };
        String url = text(s, "url", where);
        // a gateway shows the URL without its query, where an API's key may be: it reads no further
        if (!credentials && url.indexOf('?') >= 0) url = url.substring(0, url.indexOf('?'));
        URI uri;
        try {
            uri = URI.create(expand(url, where + " url", env));
        } catch (IllegalArgumentException e) {
            throw new ConfigException(where + ": \"url\" is not a URL");
        }
        if (!("http".equals(uri.getScheme()) || "https".equals(uri.getScheme())) || uri.getHost() == null)
            throw new ConfigException(where + ": \"url\" must be an http:// or https:// URL with a host");
        if (uri.getRawUserInfo() != null)
            throw new ConfigException(where + ": \"url\" must not hold user info; give credentials in \"headers\"");
        if (uri.getRawFragment() != null) throw new ConfigException(where + ": \"url\" must not have a #fragment");
        urlSecrets(uri, secrets);
        // a gateway keeps the values as written: "${VAR}" stands for itself
        Map<String, String> headers = stringMap(s, "headers", where, credentials ? env : v -> "${" + v + "}");
        for (Map.Entry<String, String> h : headers.entrySet()) {
            if (!h.getKey().matches("[A-Za-z0-9!#$%&'*+.^_`|~-]+") || h.getValue().indexOf('\r') >= 0 || h.getValue().indexOf('\n') >= 0)
                throw new ConfigException(where + ": \"headers\" has a field name or value that is not valid HTTP");
            if (credentials) secrets.addAll(Secrets.headerValue(h.getValue()));
        }
        Optional<Set<String>> methods = stringSet(s, "methods", where);
        if (methods.isPresent()) {
            Set<String> upper = new LinkedHashSet<>();
            for (String m : methods.get()) {
                String u = m.toUpperCase(java.util.Locale.ROOT);
                if (!METHOD.matcher(u).matches()) throw new ConfigException(where + ": \"methods\": \"" + m + "\" is not an HTTP method");
                upper.add(u);
            }
            methods = Optional.of(upper);
        }
        Optional<List<String>> paths = stringSet(s, "paths", where).map(List::copyOf);
        if (paths.isPresent()) for (String p : paths.get()) {
            if (!p.startsWith("/")) throw new ConfigException(where + ": \"paths\": \"" + p + "\" must start with /");
        }
        return new HttpApi(name, uri, headers, stringSet(s, "tenants", where), methods, paths, s.path("description").asString(""));
    }

    /** How to reach the server; {@code lookup} resolves {@code ${VAR}}, and each value it gives goes into {@code secrets}. */
    private static Transport transport(JsonNode s, String where, Function<String, String> lookup, Set<String> secrets) {
        Function<String, String> env = name -> {
            String v = lookup.apply(name);
            if (v != null) secrets.add(v);
            return v;
        };
        String type = s.path("type").asString("");
        boolean http = s.has("url"), stdio = s.has("command");
        if (http == stdio) throw new ConfigException(where + ": needs either \"url\" (Streamable HTTP) or \"command\" (stdio)");
        if (!type.isEmpty() && !(http ? Set.of("http", "streamable-http", "streamableHttp") : Set.of("stdio")).contains(type))
            throw new ConfigException(where + ": \"type\": \"" + type + "\" does not fit "
                    + (http ? "\"url\" (this server speaks Streamable HTTP to upstreams; SSE-only servers are not supported)" : "\"command\""));
        for (String field : s.propertyNames()) {
            if (!(http ? HTTP_FIELDS : STDIO_FIELDS).contains(field))
                throw new ConfigException(where + ": unknown field \"" + field + "\" (known: " + (http ? HTTP_FIELDS : STDIO_FIELDS) + ")");
        }
        if (http) {
            String url = expand(text(s, "url", where), where + " url", env);
            URI uri;
            try {
                uri = URI.create(url);
            } catch (IllegalArgumentException e) {
                throw new ConfigException(where + ": \"url\" is not a URL");
            }
            if (!("http".equals(uri.getScheme()) || "https".equals(uri.getScheme())) || uri.getHost() == null)
                throw new ConfigException(where + ": \"url\" must be an http:// or https:// URL with a host");
            Map<String, String> headers = stringMap(s, "headers", where, env);
            for (String v : headers.values()) secrets.addAll(Secrets.headerValue(v));
            urlSecrets(uri, secrets);
            return new Transport.Http(uri, headers);
        }
        List<String> args = new ArrayList<>();
        JsonNode a = s.path("args");
        if (!a.isMissingNode()) {
            if (!a.isArray()) throw new ConfigException(where + ": \"args\" must be a list of strings");
            for (JsonNode x : a) {
                if (!x.isString()) throw new ConfigException(where + ": \"args\" must be a list of strings");
                args.add(expand(x.asString(), where + " args", env));
            }
        }
        Optional<Path> cwd = s.has("cwd") ? Optional.of(Path.of(expand(text(s, "cwd", where), where + " cwd", env))) : Optional.empty();
        return new Transport.Stdio(expand(text(s, "command", where), where + " command", env), args,
                stringMap(s, "env", where, env), cwd);
    }

    /** A URL's user info (and its password alone) and its query values, raw and decoded. */
    private static void urlSecrets(URI uri, Set<String> secrets) {
        if (uri.getUserInfo() != null) {
            secrets.add(uri.getRawUserInfo());
            secrets.add(uri.getUserInfo());
            secrets.add(uri.getUserInfo().substring(uri.getUserInfo().indexOf(':') + 1));
        }
        if (uri.getRawQuery() == null) return;
        for (String param : uri.getRawQuery().split("&")) {
            String value = param.substring(param.indexOf('=') + 1);
            secrets.add(value);
            try {
                secrets.add(URLDecoder.decode(value, StandardCharsets.UTF_8));
            } catch (IllegalArgumentException e) {
                // not %-encoded properly: the raw value is the one a request carries
            }
        }
    }

    private static String text(JsonNode s, String field, String where) {
        JsonNode v = s.get(field);
        if (v == null || !v.isString() || v.asString().isBlank()) throw new ConfigException(where + ": \"" + field + "\" must be a non-empty string");
        return v.asString();
    }

    private static Map<String, String> stringMap(JsonNode s, String field, String where, Function<String, String> env) {
        Map<String, String> m = new LinkedHashMap<>();
        JsonNode v = s.path(field);
        if (v.isMissingNode()) return m;
        if (!v.isObject()) throw new ConfigException(where + ": \"" + field + "\" must be an object of strings");
        for (Map.Entry<String, JsonNode> e : v.properties()) {
            if (!e.getValue().isString()) throw new ConfigException(where + ": \"" + field + "\"." + e.getKey() + " must be a string");
            m.put(e.getKey(), expand(e.getValue().asString(), where + " " + field + "." + e.getKey(), env));
        }
        return m;
    }

    private static Optional<Set<String>> stringSet(JsonNode s, String field, String where) {
        JsonNode v = s.path(field);
        if (v.isMissingNode()) return Optional.empty();
        if (!v.isArray()) throw new ConfigException(where + ": \"" + field + "\" must be a list of strings");
        Set<String> out = new LinkedHashSet<>();
        for (JsonNode x : v) {
            if (!x.isString() || x.asString().isBlank()) throw new ConfigException(where + ": \"" + field + "\" must be a list of non-empty strings");
            out.add(x.asString());
        }
        return Optional.of(out);
    }

    /** {@code ${VAR}} from the server's environment ({@link EnvRefs}). */
    static String expand(String value, String where, Function<String, String> env) {
        return EnvRefs.expand(value, where, env);
    }

    private static String firstLine(String s) {
        if (s == null) return "";
        int nl = s.indexOf('\n');
        return nl < 0 ? s : s.substring(0, nl);
    }
}
