package dev.codeexec.codemode;

import io.modelcontextprotocol.spec.McpSchema;
import tools.jackson.databind.json.JsonMapper;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The library sandboxed code imports to call its tools, generated from the upstreams' tool lists as one caller may
 * see them: Python {@code mcp_tools} (a keyword-only function per tool, its docstring from the description and the
 * schema), Node {@code mcp-tools} (a function per tool taking one object, returning a promise) and its TypeScript
 * declarations (argument and result types from the input and output schemas). Every function calls the run's
 * endpoint ({@link CodeToolsRun}); nothing in it is secret.
 *
 * <p>Names: a server is its module name; a tool or argument whose name is not an identifier in Python and
 * JavaScript is reached by a cleaned name ({@code -} and {@code .} become {@code _}, a keyword gets a trailing
 * {@code _}, a clash a number), while the call carries the original name.
 *
 * <p>A server that is not connected when the library is written (down, or still connecting) is in it all the same,
 * with the tools it last listed and a note saying why it is unavailable; any other tool of it can be called by name
 * ({@code SERVER.TOOL(...)}, the call saying whether the server can be reached then), so that code written for it
 * works once it is back, and the library never waits for it.
 */
public final class Library {

    private static final JsonMapper JSON = JsonMapper.shared();
    private static final Set<String> KEYWORDS = Set.of("False", "None", "True", "and", "as", "assert", "async", "await",
            "break", "class", "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if",
            "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with",
            "yield", "case", "catch", "const", "debugger", "default", "delete", "do", "enum", "export", "extends", "false",
            "function", "implements", "instanceof", "interface", "let", "new", "null", "package", "private", "protected",
            "public", "static", "super", "switch", "this", "throw", "true", "typeof", "var", "void", "arguments", "eval",
            "call", "servers", "McpToolError", "constructor", "prototype", "__proto__", "Any", "http", "base");

    /**
     * One server as a caller sees it: its tools after the operator's "tools" list (as last listed when it is not
     * connected), and why it is unavailable, when it is.
     */
    public record ServerView(String name, String module, String description, List<McpSchema.Tool> tools,
            Optional<String> unavailable) {
        public ServerView {
            tools = List.copyOf(tools);
        }

        /** The description, with why the server is unavailable when it is. */
        String describedNow() {
            return unavailable.map(u -> (description.isEmpty() ? "" : description + "\n\n") + "Unavailable when this "
                    + "library was written (" + u + "): the tools listed are those it listed last, and any tool of it can "
                    + "be called by name.").orElse(description);
        }
    }

    private Library() {
    }

    /** {@code name} as an identifier in both languages. */
    static String ident(String name) {
        String s = name.replaceAll("[^A-Za-z0-9_]", "_");
        if (s.isEmpty() || Character.isDigit(s.charAt(0))) s = "_" + s;
        return KEYWORDS.contains(s) ? s + "_" : s;
    }

    /** Tool name → identifier, clashes numbered. */
    static Map<String, String> names(List<String> originals) {
        Map<String, String> out = new LinkedHashMap<>();
        Set<String> used = new HashSet<>();
        for (String o : originals) {
            String id = ident(o);
            for (int i = 2; !used.add(id); i++) id = ident(o) + "_" + i;
            out.put(o, id);
        }
        return out;
    }

    private static String lit(String s) {
        return JSON.writeValueAsString(s == null ? "" : s);
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> properties(McpSchema.Tool t) {
        Object p = t.inputSchema() == null ? null : t.inputSchema().get("properties");
        return p instanceof Map<?, ?> m ? (Map<String, Object>) m : Map.of();
    }

    private static Set<String> required(Map<String, Object> schema) {
        Object r = schema == null ? null : schema.get("required");
        Set<String> out = new HashSet<>();
        if (r instanceof List<?> l) for (Object x : l) out.add(String.valueOf(x));
        return out;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> schemaOf(Object o) {
        return o instanceof Map<?, ?> m ? (Map<String, Object>) m : Map.of();
    }

    // ------------------------------------------------------------------ Python

    static String pyType(Map<String, Object> s) {
        Object t = s.get("type");
        if (t instanceof String type) return switch (type) {
            case "string" -> "str";
            case "integer" -> "int";
            case "number" -> "float";
            case "boolean" -> "bool";
            case "array" -> "list";
            case "object" -> "dict";
            case "null" -> "None";
            default -> "Any";
        };
        return "Any";
    }

    /** The Python signature of one tool, as list_code_tools shows it. */
    public static String pythonSignature(ServerView server, McpSchema.Tool tool) {
        return server.module() + "." + names(server.tools().stream().map(McpSchema.Tool::name).toList()).get(tool.name())
                + "(" + pyParams(tool, true) + ")" + (tool.outputSchema() != null ? " -> dict" : " -> str");
    }

    private static String pyParams(McpSchema.Tool tool, boolean display) {
        Map<String, Object> props = properties(tool);
        Set<String> req = required(tool.inputSchema());
        Map<String, String> ids = names(new ArrayList<>(props.keySet()));
        List<String> parts = new ArrayList<>();
        for (String p : props.keySet()) if (req.contains(p)) parts.add(ids.get(p) + ": " + pyType(schemaOf(props.get(p))));
        for (String p : props.keySet())
            if (!req.contains(p)) parts.add(ids.get(p) + ": " + pyType(schemaOf(props.get(p))) + (display ? " = ..." : " = _MISSING"));
        return parts.isEmpty() ? "" : "*, " + String.join(", ", parts);
    }

    private static String pyDoc(McpSchema.Tool tool) {
        StringBuilder d = new StringBuilder(tool.description() == null ? "" : tool.description().strip());
        Map<String, Object> props = properties(tool);
        if (!props.isEmpty()) {
            d.append("\n\nArgs:");
            Set<String> req = required(tool.inputSchema());
            for (Map.Entry<String, Object> p : props.entrySet()) {
                Map<String, Object> s = schemaOf(p.getValue());
                d.append("\n    ").append(p.getKey()).append(" (").append(pyType(s)).append(req.contains(p.getKey()) ? "" : ", optional")
                        .append(")");
                if (s.get("description") instanceof String desc) d.append(": ").append(desc.strip().replace("\n", " "));
            }
        }
        d.append(tool.outputSchema() != null ? "\n\nReturns: the tool's structured result (a dict)." : "\n\nReturns: the tool's text.");
        return d.toString();
    }

    /** mcp_tools/__init__.py for these servers. */
    public static String python(List<ServerView> servers) {
        StringBuilder py = new StringBuilder("""
                \"""The tools of the MCP servers this run may call (code mode), generated by code-exec-mcp.

                    import mcp_tools
                    mcp_tools.servers()                  # the servers' names
                    from mcp_tools import SERVER
                    SERVER.TOOL(arg=..., ...)            # the tool's structured result, else its text
                    help(SERVER.TOOL)                    # its description and arguments

                A failed call raises mcp_tools.McpToolError (.server, .tool, .reason). The calls go to the endpoint in
                CODE_TOOLS_URL; the server makes them with credentials this code never sees.

                Credentialed HTTP APIs (httpApis; plain HTTP to CODE_APIS_URL/NAME/PATH works as well):
                    mcp_tools.apis()                     # the APIs this run may call
                    mcp_tools.apis.github.get("/user")   # parsed JSON, else text; apis["my-api"] for other names
                    mcp_tools.apis.github.post("/repos/o/r/issues", json={"title": "..."})
                A 4xx/5xx answer raises mcp_tools.ApiError (.status, .body).
                \"""
                from __future__ import annotations

                import json as _json
                import os as _os
                import socket as _socket

                __all__ = ["McpToolError", "servers", "call", "apis", "ApiError"]
                _URL = _os.environ.get("CODE_TOOLS_URL", "@CODE_TOOLS_URL@")
                _APIS_URL = _os.environ.get("CODE_APIS_URL", "@CODE_APIS_URL@")
                _MISSING = object()


                class McpToolError(Exception):
                    \"""A tool call that gave no result: the upstream's error, a refusal, a limit, a timeout.\"""

                    def __init__(self, message, server=None, tool=None, reason=None):
                        super().__init__(message)
                        self.server, self.tool, self.reason = server, tool, reason


                def _where(url):
                    hostport, _, path = url.split("://", 1)[-1].partition("/")
                    host, _, port = hostport.partition(":")
                    return host, int(port or 80), "/" + path.rstrip("/")


                _HOST, _PORT, _PATH = _where(_URL)
                _conn = None  # one kept-alive connection to the endpoint: (socket, its reader)


                class _Stale(Exception):
                    pass


                def _exchange(body):
                    \"""POSTs one call on the kept connection (a new one when there is none); (status, body bytes).\"""
                    global _conn
                    for attempt in (0, 1):
                        fresh = _conn is None
                        if fresh:
                            s = _socket.create_connection((_HOST, _PORT))
                            s.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
                            _conn = (s, s.makefile("rb"))
                        s, f = _conn
                        try:
                            s.sendall(b"POST %s/call HTTP/1.1\\r\\nHost: %s:%d\\r\\nContent-Type: application/json\\r\\n"
                                      b"Content-Length: %d\\r\\n\\r\\n" % (_PATH.encode(), _HOST.encode(), _PORT, len(body)) + body)
                            status_line = f.readline()
                            if not status_line:
                                raise _Stale()
                            status = int(status_line.split()[1])
                            length, close = 0, False
                            while True:
                                line = f.readline()
                                if line in (b"\\r\\n", b"\\n", b""):
                                    break
                                name, _, value = line.decode("latin-1").partition(":")
                                name = name.strip().lower()
                                if name == "content-length":
                                    length = int(value)
                                elif name == "connection" and value.strip().lower() == "close":
                                    close = True
                            data = f.read(length)
                        except (_Stale, ConnectionError, BrokenPipeError):
                            _drop()
                            if fresh or attempt:
                                raise McpToolError("the code tools endpoint closed the connection", reason="unavailable")
                            continue  # the kept connection had been closed while idle: the request never arrived
                        if close:
                            _drop()
                        return status, data


                def _drop():
                    global _conn
                    if _conn is not None:
                        try:
                            _conn[1].close()
                            _conn[0].close()
                        except OSError:
                            pass
                    _conn = None


                def call(server, tool, arguments=None):
                    \"""Calls TOOL of SERVER by their original names with a dict of arguments.\"""
                    args = {k: v for k, v in (arguments or {}).items() if v is not _MISSING}
                    body = _json.dumps({"server": server, "tool": tool, "arguments": args}).encode()
                    try:
                        status, data = _exchange(body)
                    except McpToolError as e:
                        e.server, e.tool = server, tool
                        raise
                    except OSError as e:
                        _drop()
                        raise McpToolError("the code tools endpoint cannot be reached (%s)" % e, server, tool,
                                           "unavailable") from None
                    try:
                        answer = _json.loads(data)
                    except ValueError:
                        answer = {"error": "HTTP %d: %r" % (status, data[:200]), "reason": "bad_answer"}
                    if status == 200:
                        return answer["result"]
                    raise McpToolError(answer.get("error", ""), server, tool, answer.get("reason"))


                class _Server:
                    def __init__(self, name, description, tools, server, unavailable=None):
                        self.__name__, self.__doc__, self._tools = name, description, tools
                        self._server, self._unavailable = server, unavailable

                    def __repr__(self):
                        why = "" if self._unavailable is None else " (unavailable: %s)" % self._unavailable
                        return "<MCP server %s%s: %s>" % (self.__name__, why, ", ".join(self._tools))

                    def __dir__(self):
                        return list(self._tools)

                    def __getattr__(self, tool):
                        # only names the module does not define: a server that was unavailable when this library was
                        # written takes any tool by name (the call says whether it can be made)
                        if self.__dict__.get("_unavailable") is None or tool.startswith("_"):
                            raise AttributeError("%s has no tool %r (its tools: %s)"
                                                 % (self.__name__, tool, ", ".join(self.__dict__.get("_tools", ()))))

                        def by_name(**arguments):
                            return call(self._server, tool, arguments)

                        by_name.__name__ = by_name.__qualname__ = tool
                        return by_name


                class ApiError(Exception):
                    \"""An API route's answer with a 4xx or 5xx status (the API's own, or the route's refusal).\"""

                    def __init__(self, message, api=None, status=None, body=None):
                        super().__init__(message)
                        self.api, self.status, self.body = api, status, body


                def _api_request(name, method, path, json=None, data=None, headers=None, params=None):
                    import http.client
                    import urllib.parse
                    host, port, base = _where(_APIS_URL)
                    target = base + "/" + name + ("" if path.startswith("/") else "/") + path
                    if params:
                        target += ("&" if "?" in target else "?") + urllib.parse.urlencode(params)
                    fields = dict(headers or {})
                    body = data.encode() if isinstance(data, str) else data
                    if json is not None:
                        body = _json.dumps(json).encode()
                        fields.setdefault("Content-Type", "application/json")
                    conn = http.client.HTTPConnection(host, port)
                    try:
                        conn.request(method, target, body=body, headers=fields)
                        r = conn.getresponse()
                        raw, status, kind = r.read(), r.status, r.getheader("Content-Type", "")
                    finally:
                        conn.close()
                    text = raw.decode("utf-8", "replace")
                    value = text
                    if "json" in kind.lower() and text.strip():
                        try:
                            value = _json.loads(text)
                        except ValueError:
                            pass
                    if status >= 400:
                        message = value.get("error") if isinstance(value, dict) and isinstance(value.get("error"), str) else text[:500]
                        raise ApiError("%s %s %s: HTTP %d: %s" % (name, method, path, status, message), name, status, value)
                    return value


                class _Api:
                    def __init__(self, name):
                        self.__name__ = name

                    def __repr__(self):
                        return "<HTTP API %s>" % self.__name__

                    def request(self, method, path="/", **kw):
                        \"""METHOD PATH on this API; json=, data=, headers=, params= as in requests.\"""
                        return _api_request(self.__name__, method.upper(), path, **kw)

                    def get(self, path="/", **kw):
                        return self.request("GET", path, **kw)

                    def post(self, path="/", json=None, **kw):
                        return self.request("POST", path, json=json, **kw)

                    def put(self, path="/", json=None, **kw):
                        return self.request("PUT", path, json=json, **kw)

                    def patch(self, path="/", json=None, **kw):
                        return self.request("PATCH", path, json=json, **kw)

                    def delete(self, path="/", **kw):
                        return self.request("DELETE", path, **kw)


                class _Apis:
                    \"""The credentialed HTTP APIs: apis.NAME or apis["NAME"]; apis() lists those this run may call.\"""

                    def __getattr__(self, name):
                        if name.startswith("_"):
                            raise AttributeError(name)
                        return _Api(name)

                    def __getitem__(self, name):
                        return _Api(name)

                    def __call__(self):
                        return _list_apis()


                def _list_apis():
                    import http.client
                    host, port, base = _where(_APIS_URL)
                    conn = http.client.HTTPConnection(host, port)
                    try:
                        conn.request("GET", base)
                        return _json.loads(conn.getresponse().read())["apis"]
                    finally:
                        conn.close()


                apis = _Apis()

                """.replace("@CODE_TOOLS_URL@", CodeToolsRun.URL).replace("@CODE_APIS_URL@", ApiRoutes.URL));
        List<String> moduleNames = new ArrayList<>();
        for (ServerView s : servers) {
            Map<String, String> ids = names(s.tools().stream().map(McpSchema.Tool::name).toList());
            moduleNames.add(lit(s.module()));
            py.append("\n").append(s.module()).append(" = _Server(").append(lit(s.module())).append(", ")
                    .append(lit(s.describedNow())).append(", ").append(JSON.writeValueAsString(new ArrayList<>(ids.values())))
                    .append(", ").append(lit(s.name()))
                    .append(s.unavailable().isPresent() ? ", " + lit(s.unavailable().get()) : "")
                    .append(")\n__all__.append(").append(lit(s.module())).append(")\n");
            for (McpSchema.Tool t : s.tools()) {
                String fn = "_" + s.module() + "__" + ids.get(t.name());
                Map<String, String> argIds = names(new ArrayList<>(properties(t).keySet()));
                StringBuilder dict = new StringBuilder("{");
                for (Map.Entry<String, String> a : argIds.entrySet())
                    dict.append(lit(a.getKey())).append(": ").append(a.getValue()).append(", ");
                dict.append("}");
                py.append("\n\ndef ").append(fn).append("(").append(pyParams(t, false)).append("):\n")
                        .append("    return call(").append(lit(s.name())).append(", ").append(lit(t.name())).append(", ")
                        .append(dict).append(")\n\n\n")
                        .append(fn).append(".__name__ = ").append(fn).append(".__qualname__ = ").append(lit(ids.get(t.name()))).append("\n")
                        .append(fn).append(".__doc__ = ").append(lit(pyDoc(t))).append("\n")
                        .append(s.module()).append(".").append(ids.get(t.name())).append(" = ").append(fn).append("\n");
            }
        }
        py.append("\n\ndef servers():\n    \"\"\"The names of the servers this run may call.\"\"\"\n    return [")
                .append(String.join(", ", moduleNames)).append("]\n");
        return py.toString();
    }

    // ------------------------------------------------------------------ JavaScript and TypeScript

    static String tsType(Map<String, Object> s, int depth) {
        if (depth > 4) return "unknown";
        if (s.get("enum") instanceof List<?> values && !values.isEmpty()) {
            List<String> parts = new ArrayList<>();
            for (Object v : values) parts.add(JSON.writeValueAsString(v));
            return String.join(" | ", parts);
        }
        for (String k : new String[] {"anyOf", "oneOf"}) {
            if (s.get(k) instanceof List<?> alts && !alts.isEmpty()) {
                List<String> parts = new ArrayList<>();
                for (Object a : alts) parts.add(tsType(schemaOf(a), depth + 1));
                return "(" + String.join(" | ", parts) + ")";
            }
        }
        Object t = s.get("type");
        if (t instanceof List<?> types) {
            List<String> parts = new ArrayList<>();
            for (Object x : types) {
                Map<String, Object> one = new LinkedHashMap<>(s);
                one.put("type", x);
                parts.add(tsType(one, depth + 1));
            }
            return "(" + String.join(" | ", parts) + ")";
        }
        if (!(t instanceof String type)) return s.get("properties") != null ? objectType(s, depth) : "unknown";
        return switch (type) {
            case "string" -> "string";
            case "integer", "number" -> "number";
            case "boolean" -> "boolean";
            case "null" -> "null";
            case "array" -> "Array<" + (s.get("items") == null ? "unknown" : tsType(schemaOf(s.get("items")), depth + 1)) + ">";
            case "object" -> objectType(s, depth);
            default -> "unknown";
        };
    }

    private static String objectType(Map<String, Object> s, int depth) {
        Map<String, Object> props = schemaOf(s.get("properties"));
        if (props.isEmpty()) return "Record<string, unknown>";
        Set<String> req = required(s);
        StringBuilder sb = new StringBuilder("{ ");
        for (Map.Entry<String, Object> p : props.entrySet()) {
            Map<String, Object> ps = schemaOf(p.getValue());
            if (ps.get("description") instanceof String d) sb.append("/** ").append(jsdoc(d).replace("\n", " ")).append(" */ ");
            sb.append(p.getKey().matches("[A-Za-z_$][A-Za-z0-9_$]*") ? p.getKey() : lit(p.getKey()))
                    .append(req.contains(p.getKey()) ? ": " : "?: ").append(tsType(ps, depth + 1)).append("; ");
        }
        if (!Boolean.FALSE.equals(s.get("additionalProperties")) && depth > 0) sb.append("[key: string]: unknown; ");
        return sb.append("}").toString();
    }

    private static String jsdoc(String s) {
        return s == null ? "" : s.strip().replace("*/", "*\\/");
    }

    private static String argsType(McpSchema.Tool t) {
        Map<String, Object> schema = new LinkedHashMap<>(t.inputSchema() == null ? Map.of() : t.inputSchema());
        schema.put("additionalProperties", false);
        return objectType(schema, 0);
    }

    /** The TypeScript declaration of one tool's function, as list_code_tools shows it. */
    public static String typescriptSignature(ServerView server, McpSchema.Tool tool) {
        String id = names(server.tools().stream().map(McpSchema.Tool::name).toList()).get(tool.name());
        return server.module() + "." + id + "(args" + (required(tool.inputSchema()).isEmpty() ? "?" : "") + ": "
                + argsType(tool) + "): Promise<" + (tool.outputSchema() != null ? tsType(tool.outputSchema(), 1) : "string") + ">";
    }

    /** mcp-tools/index.js. */
    public static String javascript(List<ServerView> servers) {
        StringBuilder js = new StringBuilder("""
                'use strict';
                // The tools of the MCP servers this run may call (code mode), generated by code-exec-mcp.
                //   const { SERVER } = require('mcp-tools');  await SERVER.TOOL({ arg: ... })
                // resolves to the tool's structured result, else its text; a failed call rejects with McpToolError
                // (.server, .tool, .reason). Calls go to the endpoint in CODE_TOOLS_URL.
                const net = require('net');
                const base = new URL(process.env.CODE_TOOLS_URL || '@CODE_TOOLS_URL@');
                const HOST = base.hostname;
                const PORT = Number(base.port || 80);
                const PATH = base.pathname.replace(/\\/$/, '') + '/call';

                class McpToolError extends Error {
                  constructor(message, server, tool, reason) {
                    super(message);
                    this.name = 'McpToolError';
                    this.server = server;
                    this.tool = tool;
                    this.reason = reason;
                  }
                }

                // Connections to the endpoint kept alive between calls (one call at a time on each; idle ones do not
                // keep the process alive). HTTP/1.1 over a plain socket: less work per call than the http module.
                const idle = [];

                function exchange(body, retry) {
                  return new Promise((resolve, reject) => {
                    let sock = idle.pop();
                    while (sock && sock.destroyed) sock = idle.pop(); // closed while idle
                    const reused = sock !== undefined;
                    if (!sock) {
                      sock = net.connect(PORT, HOST);
                      sock.setNoDelay(true);
                      sock.on('error', () => {}); // an idle socket's reset must not crash the program
                    }
                    sock.ref();
                    let buf = Buffer.alloc(0);
                    let got = false;
                    const done = (err, value) => {
                      sock.removeListener('data', onData);
                      sock.removeListener('error', onEnd);
                      sock.removeListener('close', onEnd);
                      if (err) reject(err); else resolve(value);
                    };
                    const onEnd = (e) => {
                      sock.destroy();
                      // a kept connection closed while idle: the request never arrived, send it once more
                      if (reused && retry && !got) exchange(body, false).then(resolve, reject);
                      else done(new Error(e && e.message ? e.message : 'the connection closed'));
                    };
                    const onData = (chunk) => {
                      got = true;
                      buf = Buffer.concat([buf, chunk]);
                      const end = buf.indexOf('\\r\\n\\r\\n');
                      if (end < 0) return;
                      const head = buf.subarray(0, end).toString('latin1').split('\\r\\n');
                      const status = Number(head[0].split(' ')[1]);
                      let length = 0;
                      let close = false;
                      for (const line of head.slice(1)) {
                        const i = line.indexOf(':');
                        const name = line.slice(0, i).trim().toLowerCase();
                        const value = line.slice(i + 1).trim();
                        if (name === 'content-length') length = Number(value);
                        else if (name === 'connection' && value.toLowerCase() === 'close') close = true;
                      }
                      if (buf.length < end + 4 + length) return;
                      const data = buf.subarray(end + 4, end + 4 + length);
                      if (close) sock.destroy(); else { sock.unref(); idle.push(sock); }
                      done(null, { status, data });
                    };
                    sock.on('data', onData);
                    sock.on('error', onEnd);
                    sock.on('close', onEnd);
                    sock.write('POST ' + PATH + ' HTTP/1.1\\r\\nHost: ' + HOST + ':' + PORT + '\\r\\nContent-Type: application/json\\r\\n'
                      + 'Content-Length: ' + body.length + '\\r\\n\\r\\n');
                    sock.write(body);
                  });
                }

                // A server that was unavailable when this library was written: any tool by name (the call says whether
                // it can be made). Not for names every object has, `then` (await) or `toJSON`.
                function byName(server, known) {
                  return new Proxy(known, {
                    get(target, key) {
                      if (typeof key !== 'string' || key in target || key === 'then' || key === 'toJSON' || key.startsWith('_')) {
                        return target[key];
                      }
                      return (args) => call(server, key, args);
                    },
                  });
                }

                /** Calls `tool` of `server` by their original names with an object of arguments. */
                async function call(server, tool, args) {
                  const body = Buffer.from(JSON.stringify({ server, tool, arguments: args || {} }));
                  let answer;
                  try {
                    answer = await exchange(body, true);
                  } catch (e) {
                    throw new McpToolError('the code tools endpoint cannot be reached (' + e.message + ')', server, tool, 'unavailable');
                  }
                  let data;
                  try { data = JSON.parse(answer.data.toString('utf8')); } catch (e) {
                    data = { error: 'HTTP ' + answer.status, reason: 'bad_answer' };
                  }
                  if (answer.status === 200) return data.result;
                  throw new McpToolError(data.error || '', server, tool, data.reason);
                }

                // Credentialed HTTP APIs (httpApis): apis.NAME.get('/path') resolves to parsed JSON, else text; a 4xx/5xx
                // answer rejects with ApiError (.api, .status, .body). Plain fetch to CODE_APIS_URL/NAME/PATH works too.
                class ApiError extends Error {
                  constructor(message, api, status, body) {
                    super(message);
                    this.name = 'ApiError';
                    this.api = api;
                    this.status = status;
                    this.body = body;
                  }
                }
                const apisBase = (process.env.CODE_APIS_URL || '@CODE_APIS_URL@').replace(/\\/$/, '');
                async function apiRequest(name, method, path = '/', { json, body, headers = {}, params } = {}) {
                  let url = apisBase + '/' + name + (String(path).startsWith('/') ? '' : '/') + path;
                  if (params) url += (url.includes('?') ? '&' : '?') + new URLSearchParams(params).toString();
                  const fields = { ...headers };
                  if (json !== undefined) {
                    body = JSON.stringify(json);
                    if (!Object.keys(fields).some((k) => k.toLowerCase() === 'content-type')) fields['Content-Type'] = 'application/json';
                  }
                  const r = await fetch(url, { method, headers: fields, body, redirect: 'manual' });
                  const text = await r.text();
                  let value = text;
                  if ((r.headers.get('content-type') || '').toLowerCase().includes('json') && text.trim()) {
                    try { value = JSON.parse(text); } catch (e) { /* text */ }
                  }
                  if (r.status >= 400) {
                    const message = value && typeof value.error === 'string' ? value.error : text.slice(0, 500);
                    throw new ApiError(name + ' ' + method + ' ' + path + ': HTTP ' + r.status + ': ' + message, name, r.status, value);
                  }
                  return value;
                }
                function api(name) {
                  return Object.freeze({
                    request: (method, path, opts) => apiRequest(name, String(method).toUpperCase(), path, opts),
                    get: (path, opts) => apiRequest(name, 'GET', path, opts),
                    post: (path, json, opts) => apiRequest(name, 'POST', path, { ...opts, json }),
                    put: (path, json, opts) => apiRequest(name, 'PUT', path, { ...opts, json }),
                    patch: (path, json, opts) => apiRequest(name, 'PATCH', path, { ...opts, json }),
                    delete: (path, opts) => apiRequest(name, 'DELETE', path, opts),
                  });
                }
                async function listApis() {
                  return (await (await fetch(apisBase)).json()).apis;
                }
                const NOT_APIS = new Set(['then', 'constructor', 'prototype', 'toString', 'valueOf', 'toJSON', 'inspect']);
                const apiRoutes = new Proxy(listApis, {
                  get: (target, name) => (typeof name !== 'string' || NOT_APIS.has(name) ? target[name] : api(name)),
                });

                """.replace("@CODE_TOOLS_URL@", CodeToolsRun.URL).replace("@CODE_APIS_URL@", ApiRoutes.URL));
        List<String> exports = new ArrayList<>(List.of("McpToolError", "call"));
        List<String> moduleNames = new ArrayList<>();
        for (ServerView s : servers) {
            Map<String, String> ids = names(s.tools().stream().map(McpSchema.Tool::name).toList());
            js.append("/** ").append(jsdoc(s.describedNow()).replace("\n", "\n * ")).append(" */\nconst ").append(s.module())
                    .append(" = ").append(s.unavailable().isPresent() ? "byName(" + lit(s.name()) + ", " : "").append("Object.freeze({\n");
            for (McpSchema.Tool t : s.tools())
                js.append("  /** ").append(jsdoc(t.description()).replace("\n", "\n   * ")).append(" */\n  ")
                        .append(ids.get(t.name())).append(": (args) => call(").append(lit(s.name())).append(", ")
                        .append(lit(t.name())).append(", args),\n");
            js.append(s.unavailable().isPresent() ? "}));\n\n" : "});\n\n");
            exports.add(s.module());
            moduleNames.add(lit(s.module()));
        }
        js.append("/** The names of the servers this run may call. */\nfunction servers() { return [")
                .append(String.join(", ", moduleNames)).append("]; }\n\nmodule.exports = { apis: apiRoutes, ApiError, ")
                .append(String.join(", ", exports)).append(", servers };\n"); // a server named apis wins: it comes later
        return js.toString();
    }

    /** mcp-tools/index.d.ts. */
    public static String typescript(List<ServerView> servers) {
        StringBuilder ts = new StringBuilder("""
                // The tools of the MCP servers this run may call (code mode), generated by code-exec-mcp.
                export declare class McpToolError extends Error {
                  readonly server: string;
                  readonly tool: string;
                  /** not_allowed, unknown_tool, call_limit, byte_limit, timeout, upstream_unavailable, tool_error, ... */
                  readonly reason: string;
                }
                /** Calls `tool` of `server` by their original names. */
                export declare function call(server: string, tool: string, args?: Record<string, unknown>): Promise<unknown>;
                /** The names of the servers this run may call. */
                export declare function servers(): string[];
                /** An API route's answer with a 4xx or 5xx status. */
                export declare class ApiError extends Error {
                  readonly api: string;
                  readonly status: number;
                  readonly body: unknown;
                }
                export interface ApiOptions { json?: unknown; body?: string | Uint8Array; headers?: Record<string, string>; params?: Record<string, string>; }
                /** One credentialed HTTP API: each method resolves to parsed JSON, else text. */
                export interface HttpApi {
                  request(method: string, path?: string, opts?: ApiOptions): Promise<any>;
                  get(path?: string, opts?: ApiOptions): Promise<any>;
                  post(path?: string, json?: unknown, opts?: ApiOptions): Promise<any>;
                  put(path?: string, json?: unknown, opts?: ApiOptions): Promise<any>;
                  patch(path?: string, json?: unknown, opts?: ApiOptions): Promise<any>;
                  delete(path?: string, opts?: ApiOptions): Promise<any>;
                }
                """);
        if (servers.stream().noneMatch(x -> x.module().equals("apis")))
            ts.append("/** The credentialed HTTP APIs (httpApis): apis.NAME or apis['NAME']; apis() lists those this run may call. */\n"
                    + "export declare const apis: { (): Promise<Array<{ name: string; description: string; url: string; route: string; "
                    + "methods: string[]; paths: string[] }>>; readonly [name: string]: HttpApi };\n");
        for (ServerView s : servers) {
            Map<String, String> ids = names(s.tools().stream().map(McpSchema.Tool::name).toList());
            ts.append("/** ").append(jsdoc(s.describedNow()).replace("\n", "\n * ")).append(" */\nexport declare const ")
                    .append(s.module()).append(": {\n");
            if (s.unavailable().isPresent()) ts.append("  /** Any tool, by its name (the server was unavailable). */\n"
                    + "  readonly [tool: string]: (args?: any) => Promise<any>;\n");
            for (McpSchema.Tool t : s.tools()) {
                ts.append("  /** ").append(jsdoc(t.description()).replace("\n", "\n   * ")).append(" */\n  ")
                        .append(ids.get(t.name())).append("(args").append(required(t.inputSchema()).isEmpty() ? "?" : "")
                        .append(": ").append(argsType(t)).append("): Promise<")
                        .append(t.outputSchema() != null ? tsType(t.outputSchema(), 1) : "string").append(">;\n");
            }
            ts.append("};\n");
        }
        return ts.toString();
    }
}
