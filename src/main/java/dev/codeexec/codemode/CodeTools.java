package dev.codeexec.codemode;

import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigException;
import dev.codeexec.config.DataDir;
import dev.codeexec.config.Ids;
import dev.codeexec.linux.DeepWalk;
import io.modelcontextprotocol.spec.McpSchema;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.BiFunction;
import java.util.function.Function;
import java.util.stream.Stream;

/**
 * Code mode, server-wide: the upstreams of UPSTREAM_MCP_FILE, what each tenant may call of them, the per-run caps,
 * and the library each sandbox gets. A sandbox that may call tools has its own small directory of generated files
 * ({@link LibraryFiles}) bound read-only into it; they are rewritten for each run it serves (a warm sandbox learns
 * its tenant only when the job arrives), and the bind shows the current text.
 */
public final class CodeTools implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(CodeTools.class);
    static final String PYTHON_FILE = "python/mcp_tools/__init__.py";
    static final String NODE_FILE = "node/mcp-tools/index.js";
    static final String TYPES_FILE = "node/mcp-tools/index.d.ts";
    static final String PACKAGE_FILE = "node/mcp-tools/package.json";
    private static final List<String> FILES = List.of(PYTHON_FILE, NODE_FILE, TYPES_FILE, PACKAGE_FILE);

    private final Upstreams upstreams;
    private final Path dir;
    private final int maxCalls;
    private final long maxBytes;
    private final Duration callTimeout;
    private final ApiRoutes routes;

    CodeTools(Upstreams upstreams, Path dir, int maxCalls, long maxBytes, Duration callTimeout) {
        this.upstreams = upstreams;
        this.routes = new ApiRoutes(upstreams.config(), callTimeout);
        this.dir = dir;
        this.maxCalls = maxCalls;
        this.maxBytes = maxBytes;
        this.callTimeout = callTimeout;
    }

    /**
     * Code mode as configured: empty without UPSTREAM_MCP_FILE. Starts connecting to the upstreams. A bad file, a
     * missing variable or a sandbox that cannot carry the calls stops the start.
     */
    public static Optional<CodeTools> of(Config config) {
        return of(config, UpstreamConfig::read);
    }

    /**
     * Code mode as a gateway needs it, to list the tools and APIs (the workers make the calls): the file read with
     * {@link UpstreamConfig#readForGateway}, so the gateway needs no variable of the APIs' credentials.
     */
    public static Optional<CodeTools> forGateway(Config config) {
        return of(config, UpstreamConfig::readForGateway);
    }

    private static Optional<CodeTools> of(Config config, BiFunction<Path, Function<String, String>, UpstreamConfig> reader) {
        String file = config.get(Config.UPSTREAM_MCP_FILE);
        if (file.isBlank()) return Optional.empty();
        String sandbox = config.get(Config.SANDBOX);
        if (!sandbox.equals("bwrap"))
            throw new ConfigException("UPSTREAM_MCP_FILE needs SANDBOX=bwrap: code mode's calls travel over the sandbox's "
                    + "channel, which " + (sandbox.equals("gvisor") ? "cannot be passed into gVisor" : "SANDBOX=none does not have"));
        UpstreamConfig upstreams = reader.apply(Path.of(file), System::getenv);
        Path dir = DataDir.of(config).codeTools();
        try {
            Files.createDirectories(dir);
            Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx--x--x"));
            try (Stream<Path> old = Files.list(dir)) {
                for (Path p : old.toList()) DeepWalk.deleteTree(p); // left by a server that did not stop cleanly
            }
        } catch (IOException e) {
            throw new ConfigException("UPSTREAM_MCP_FILE is set, but " + dir + " cannot be prepared: " + e.getMessage());
        }
        LOG.info("code mode: {} upstream server(s): {}; {} HTTP API route(s): {}", upstreams.servers().size(),
                upstreams.servers().stream().map(UpstreamConfig.Upstream::name).toList(), upstreams.apis().size(),
                upstreams.apis().stream().map(UpstreamConfig.HttpApi::toString).toList());
        return Optional.of(new CodeTools(new Upstreams(upstreams).start(), dir, config.get(Config.CODE_TOOLS_MAX_CALLS),
                (long) config.get(Config.CODE_TOOLS_MAX_MB) << 20, Duration.ofMillis(config.get(Config.CODE_TOOLS_CALL_TIMEOUT_MS))));
    }

    public Upstreams upstreams() {
        return upstreams;
    }

    /** The credentialed HTTP API routes ({@code httpApis}). */
    public ApiRoutes routes() {
        return routes;
    }

    int maxCalls() {
        return maxCalls;
    }

    long maxBytes() {
        return maxBytes;
    }

    Duration callTimeout() {
        return callTimeout;
    }

    /**
     * The servers {@code tenant} may call, each with the tools the operator lets code call, as known now: a server
     * that is not connected with its tools as last listed and why (never waits for an upstream).
     */
    public List<Library.ServerView> visible(String tenant) {
        List<Library.ServerView> out = new ArrayList<>();
        for (UpstreamConfig.Upstream u : upstreams.config().servers()) {
            if (!u.allowsTenant(tenant)) continue;
            List<McpSchema.Tool> tools = upstreams.tools(u.name()).stream().filter(t -> u.allowsTool(t.name())).toList();
            out.add(new Library.ServerView(u.name(), u.module(), u.description(), tools, upstreams.problem(u.name())));
        }
        return out;
    }

    /** The library's files for what a caller sees; the same view gives the same (cached) text. */
    private record Generated(List<Library.ServerView> view, Map<String, String> files) {
    }

    private final Map<String, Generated> generated = new java.util.concurrent.ConcurrentHashMap<>();

    /** File (relative to a library directory) → text, for what {@code tenant} sees now. */
    Map<String, String> generated(String tenant) {
        List<Library.ServerView> view = visible(tenant);
        Generated g = generated.get(tenant);
        if (g != null && g.view().equals(view)) return g.files();
        Map<String, String> files = new LinkedHashMap<>();
        files.put(PYTHON_FILE, Library.python(view));
        files.put(NODE_FILE, Library.javascript(view));
        files.put(TYPES_FILE, Library.typescript(view));
        files.put(PACKAGE_FILE, "{\"name\": \"mcp-tools\", \"main\": \"index.js\", \"types\": \"index.d.ts\"}\n");
        if (generated.size() > 1000) generated.clear(); // tenants come from the key file: a bound, kept loose
        generated.put(tenant, new Generated(view, Map.copyOf(files)));
        return files;
    }

    /** What GET /servers answers: the visible servers and their tools with their input schemas. */
    List<Map<String, Object>> describe(String tenant) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Library.ServerView s : visible(tenant)) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("name", s.name());
            m.put("module", s.module());
            m.put("description", s.description());
            s.unavailable().ifPresent(p -> m.put("unavailable", p));
            List<Map<String, Object>> tools = new ArrayList<>();
            for (McpSchema.Tool t : s.tools()) {
                Map<String, Object> tm = new LinkedHashMap<>();
                tm.put("name", t.name());
                tm.put("description", t.description() == null ? "" : t.description());
                tm.put("inputSchema", t.inputSchema() == null ? Map.of() : t.inputSchema());
                if (t.outputSchema() != null) tm.put("outputSchema", t.outputSchema());
                tools.add(tm);
            }
            m.put("tools", tools);
            out.add(m);
        }
        return out;
    }

    /**
     * Why {@code tenant} may not call {@code tool} of {@code server} (by name or module name), or empty when it may.
     * A server the tenant may not use and one that does not exist get the same answer.
     */
    public Optional<String> refusal(String tenant, String server, String tool) {
        Optional<UpstreamConfig.Upstream> u = upstreams.config().server(server).filter(x -> x.allowsTenant(tenant));
        if (u.isEmpty()) {
            List<String> mine = visible(tenant).stream().map(Library.ServerView::name).toList();
            return Optional.of("no server '" + server + "' for this caller" + (mine.isEmpty() ? " (it may call none)"
                    : " (it may call: " + String.join(", ", mine) + ")"));
        }
        if (!u.get().allowsTool(tool))
            return Optional.of("the tool '" + tool + "' of " + u.get().name() + " is not open to code on this server (its "
                    + "\"tools\" list in UPSTREAM_MCP_FILE)");
        return Optional.empty();
    }

    /**
     * list_code_tools, progressively: no server → the servers {@code tenant} may call (name, module, description,
     * how many tools) and, when the file has {@code httpApis}, the APIs it may call ({@link ApiRoutes#describe}); a server → its tools (name, description); a server and a tool → the tool's description, input
     * schema and its Python and TypeScript signatures.
     *
     * @throws IllegalArgumentException a server or tool the caller cannot see, naming it
     */
    public Map<String, Object> listing(String tenant, Optional<String> server, Optional<String> tool) {
        List<Library.ServerView> visible = visible(tenant);
        Map<String, Object> out = new LinkedHashMap<>();
        if (server.isEmpty()) {
            if (tool.isPresent()) throw new IllegalArgumentException("'tool' needs 'server'");
            List<Map<String, Object>> servers = new ArrayList<>();
            for (Library.ServerView s : visible) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("name", s.name());
                m.put("module", s.module());
                m.put("description", s.description());
                m.put("tools", s.tools().size());
                s.unavailable().ifPresent(p -> m.put("unavailable", p));
                servers.add(m);
            }
            out.put("servers", servers);
            if (!upstreams.config().apis().isEmpty()) out.put("apis", routes.describe(tenant));
            return out;
        }
        Library.ServerView s = visible.stream().filter(v -> v.name().equals(server.get()) || v.module().equals(server.get()))
                .findFirst().orElseThrow(() -> new IllegalArgumentException(refusal(tenant, server.get(), "").orElse(
                        "no server '" + server.get() + "'")));
        out.put("server", s.name());
        out.put("module", s.module());
        if (tool.isEmpty()) {
            List<Map<String, Object>> tools = new ArrayList<>();
            for (McpSchema.Tool t : s.tools()) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("name", t.name());
                m.put("description", firstSentence(t.description()));
                tools.add(m);
            }
            out.put("tools", tools);
            s.unavailable().ifPresent(p -> out.put("unavailable", p));
            return out;
        }
        McpSchema.Tool t = s.tools().stream().filter(x -> x.name().equals(tool.get())).findFirst()
                .orElseThrow(() -> new IllegalArgumentException("no tool '" + tool.get() + "' of " + s.name() + " for this caller"
                        + " (its tools: " + String.join(", ", s.tools().stream().map(McpSchema.Tool::name).toList()) + ")"));
        out.put("tool", t.name());
        out.put("description", t.description() == null ? "" : t.description());
        out.put("inputSchema", t.inputSchema() == null ? Map.of() : t.inputSchema());
        if (t.outputSchema() != null) out.put("outputSchema", t.outputSchema());
        out.put("python", Library.pythonSignature(s, t));
        out.put("typescript", Library.typescriptSignature(s, t));
        return out;
    }

    private static String firstSentence(String d) {
        if (d == null) return "";
        String s = d.strip();
        int nl = s.indexOf('\n');
        if (nl > 0) s = s.substring(0, nl);
        return s.length() > 200 ? s.substring(0, 200) + "…" : s;
    }

    /** A run's endpoint: {@code tenant}'s calls, counted and capped for run {@code runId}. */
    public CodeToolsRun open(String tenant, String runId) {
        return new CodeToolsRun(this, tenant, runId);
    }

    /**
     * The variables every run with code tools gets (its library's search paths come with {@link LibraryFiles}):
     * CODE_TOOLS_URL, and CODE_APIS_URL when the file has {@code httpApis}.
     */
    public Map<String, String> environment() {
        if (upstreams.config().apis().isEmpty()) return Map.of("CODE_TOOLS_URL", CodeToolsRun.URL);
        return Map.of("CODE_TOOLS_URL", CodeToolsRun.URL, "CODE_APIS_URL", ApiRoutes.URL);
    }

    /** A new library directory for one sandbox; it is empty until {@link LibraryFiles#write}. */
    public LibraryFiles files() throws IOException {
        Path d = dir.resolve(Ids.hex(8));
        Files.createDirectory(d);
        for (String f : FILES) Files.createDirectories(d.resolve(f).getParent());
        try (Stream<Path> all = Files.walk(d)) {
            for (Path p : all.toList()) Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
        }
        return new LibraryFiles(this, d);
    }

    @Override
    public void close() {
        upstreams.close();
        routes.close();
    }

    /**
     * One sandbox's library: a host directory bound read-only at the same path into it (a bind, not a copy: what
     * {@link #write} puts there later is what the sandbox's next import reads), rewritten for each run it serves.
     */
    public static final class LibraryFiles implements AutoCloseable {
        private final CodeTools owner;
        private final Path dir;

        private LibraryFiles(CodeTools owner, Path dir) {
            this.owner = owner;
            this.dir = dir;
        }

        /** The directory, bound read-only at the same path. */
        public Path dir() {
            return dir;
        }

        /** PYTHONPATH and NODE_PATH that find it (joined with a language's own). */
        public Map<String, String> environment() {
            return Map.of("PYTHONPATH", dir.resolve("python").toString(), "NODE_PATH", dir.resolve("node").toString());
        }

        /** Writes the library {@code tenant} sees now, each file replaced whole (a reader sees the old or the new). */
        public void write(String tenant) throws IOException {
            for (Map.Entry<String, String> f : owner.generated(tenant).entrySet()) replace(f.getKey(), f.getValue());
        }

        private void replace(String file, String text) throws IOException {
            Path target = dir.resolve(file);
            Path tmp = target.resolveSibling("." + target.getFileName() + ".new");
            Files.writeString(tmp, text, StandardCharsets.UTF_8);
            Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rw-r--r--"));
            Files.move(tmp, target, java.nio.file.StandardCopyOption.REPLACE_EXISTING, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        }

        @Override
        public void close() {
            try {
                DeepWalk.deleteTree(dir);
            } catch (IOException e) {
                LOG.warn("code mode: {}", e.getMessage());
            }
        }
    }

}
