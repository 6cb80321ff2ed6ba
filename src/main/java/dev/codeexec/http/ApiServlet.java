package dev.codeexec.http;

import dev.codeexec.auth.Principal;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.WorkspaceException.Kind;
import dev.codeexec.workspace.WorkspaceFs;
import dev.codeexec.workspace.Workspaces;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The REST file API under /api, a plain servlet on the server's Jetty. The edge filter has authenticated the
 * caller; every route works only in the caller's tenant, taken from the {@link Principal} request attribute and
 * never from the URL or body, except that an admin key may name another tenant with {@code ?tenant=}
 * ({@link AdminApi#actingTenant}). The admin console's routes ({@code /api/admin/...}, {@code /api/execute}) are
 * {@link AdminApi}'s; downloads are {@link Downloads}', uploads {@link Uploads}', archives {@link Archives}'.
 * Every path goes through {@link RelPath} and {@link WorkspaceFs}. Errors are {@code {"error", "message"}} with
 * the status of their cause ({@link #fail}), never a stack trace.
 *
 * <p>Routes: {@code GET /api/auth/verify}; {@code GET /api/workspaces}; {@code GET|DELETE /api/workspaces/{ws}};
 * {@code GET|POST|DELETE /api/workspaces/{ws}/files/{path}}; {@code GET /api/workspaces/{ws}/tree?path=};
 * {@code GET /api/workspaces/{ws}/archive?path=}; {@code POST /api/workspaces/{ws}/rename}.
 */
final class ApiServlet extends HttpServlet {

    private static final Logger LOG = LoggerFactory.getLogger(ApiServlet.class);
    /** Entries of one tree listing: bounds the work a single request can cause. */
    static final int TREE_LIMIT = 10_000;
    private static final int JSON_BODY_LIMIT = 64 * 1024;

    private final Workspaces workspaces;
    private final Uploads uploads;
    private final AdminApi admin;
    private final JobsApi jobs;
    private final ChatApi chat;
    private final Bodies bodies;

    ApiServlet(Workspaces workspaces, Uploads uploads, AdminApi admin, JobsApi jobs, ChatApi chat, Bodies bodies) {
        this.chat = chat;
        this.jobs = jobs;
        this.workspaces = workspaces;
        this.uploads = uploads;
        this.admin = admin;
        this.bodies = bodies;
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        handle("GET", req, resp);
    }

    @Override
    protected void doPost(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        handle("POST", req, resp);
    }

    @Override
    protected void doDelete(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        handle("DELETE", req, resp);
    }

    @Override
    protected void doPut(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        fail(resp, 405, "method_not_allowed", "use POST to upload");
    }

    /** The HTTP status of each cause of a refused workspace operation: an exhaustive switch, so none is forgotten. */
    static int status(Kind kind) {
        return switch (kind) {
            case BAD_PATH, BAD_NAME -> 400;
            case NOT_FOUND -> 404;
            case CONFLICT -> 409;
            case TOO_LARGE -> 413;
            case QUOTA_EXCEEDED -> 507;
            case IO -> 500;
        };
    }

    /** The one place where causes become statuses. */
    private void handle(String method, HttpServletRequest req, HttpServletResponse resp) throws IOException {
        try {
            if (!(req.getAttribute(Principal.ATTRIBUTE) instanceof Principal who)) {
                fail(resp, 401, "unauthorized", "not authenticated");
                return;
            }
            if (AdminApi.handles(req.getRequestURI())) {
                admin.handle(method, who, req, resp);
                return;
            }
            if (JobsApi.handles(req.getRequestURI())) {
                jobs.handle(method, who, req, resp);
                return;
            }
            if (ChatApi.handles(req.getRequestURI())) {
                chat.handle(method, who, req, resp);
                return;
            }
            ApiRoute r = ApiRoute.parse(req.getRequestURI(), req.getQueryString());
            route(method, r, AdminApi.actingTenant(who, r.query().get("tenant")), who, req, resp);
        } catch (WorkspaceException e) {
            if (e.kind() == Kind.IO) LOG.warn("REST {} {}: {}", method, req.getRequestURI(), e.getMessage());
            fail(resp, status(e.kind()), e.code(), e.getMessage());
        } catch (ApiException e) {
            fail(resp, e.status, e.code, e.getMessage());
        } catch (UncheckedIOException e) {
            throw e.getCause();
        } catch (RuntimeException e) {
            LOG.error("REST {} {} failed", method, req.getRequestURI(), e);
            fail(resp, 500, "internal", "internal error");
        }
    }

    /**
     * Before anything is sent: a clean JSON error. After the response is committed (a download or archive broke
     * off mid-stream) the status cannot change: the connection is aborted, so the client sees a truncated
     * transfer rather than a complete-looking one.
     */
    private static void fail(HttpServletResponse resp, int status, String code, String message) throws IOException {
        if (resp.isCommitted()) throw new IOException("response aborted after commit: " + code);
        resp.resetBuffer();
        resp.setHeader("Content-Disposition", null);
        resp.setHeader("ETag", null);
        resp.setHeader("Content-Range", null);
        resp.setHeader("Last-Modified", null);
        // A refused upload leaves part of the body unread: that connection cannot carry another request.
        if (status == 413 || status == 507) resp.setHeader("Connection", "close");
        JsonErrors.writeApi(resp, status, code, message);
    }

    private void route(String method, ApiRoute r, String tenant, Principal who, HttpServletRequest req,
            HttpServletResponse resp) throws IOException {
        switch (r.resource() + " " + method) {
            case "auth/verify GET" -> json(resp, 200, Map.of("tenant", who.tenant(), "admin", who.admin()));
            case "workspaces GET" -> listWorkspaces(tenant, resp);
            case "workspace GET" -> json(resp, 200, infoMap(workspaces.open(tenant, r.workspace(), false).info()));
            case "workspace DELETE" -> {
                workspaces.delete(tenant, r.workspace());
                resp.setStatus(204);
            }
            case "files GET" -> withWorkspace(tenant, r, false, ws -> {
                Downloads.send(ws, r.path(), r.flag("preview"), req, resp);
                touch(ws);
            });
            case "files POST" -> uploads.handle(tenant, r, req, resp);
            case "files DELETE" -> withWorkspace(tenant, r, false, ws -> {
                ws.fs().delete(r.path(), r.flag("recursive"));
                ws.fs().touch();
                resp.setStatus(204);
            });
            case "tree GET" -> withWorkspace(tenant, r, false, ws -> tree(ws, r.path(), resp));
            case "archive GET" -> withWorkspace(tenant, r, false, ws -> {
                Archives.send(ws, r.path(), resp);
                touch(ws);
            });
            case "rename POST" -> withWorkspace(tenant, r, false, ws -> rename(ws, req, resp));
            default -> fail(resp, 405, "method_not_allowed", method + " is not allowed on this route");
        }
    }

    private interface WorkspaceAction {
        void run(Workspace ws) throws IOException;
    }

    /** Opens the caller's workspace and marks it in use (expiry skips it) for the length of the request. */
    private void withWorkspace(String tenant, ApiRoute r, boolean create, WorkspaceAction action) throws IOException {
        Workspace ws = workspaces.open(tenant, r.workspace(), create);
        Workspaces.Hold hold = ws.hold();
        try {
            action.run(ws);
        } finally {
            hold.close();
        }
    }

    private static void touch(Workspace ws) {
        try {
            ws.fs().touch();
        } catch (WorkspaceException e) {
            // deleted meanwhile: nothing to mark
        }
    }

    private void listWorkspaces(String tenant, HttpServletResponse resp) throws IOException {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Workspace.Info info : workspaces.infos(tenant)) out.add(infoMap(info));
        json(resp, 200, out);
    }

    /**
     * A workspace's info; one that could not be examined has only its name and {@code error}. {@code complete} is
     * false when the count stopped at {@code maxEntries}: there is more than shown.
     */
    static Map<String, Object> infoMap(Workspace.Info info) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", info.name());
        if (info.error().isPresent()) {
            m.put("error", info.error().get());
            return m;
        }
        m.put("size", info.sizeBytes());
        m.put("quota", info.quotaBytes());
        m.put("entries", info.entries());
        m.put("maxEntries", info.maxEntries());
        m.put("files", info.files());
        m.put("directories", info.directories());
        m.put("complete", info.complete());
        m.put("lastUsed", info.lastUsed().toInstant().toString());
        m.put("enforcement", info.enforcement());
        return m;
    }

    private static void tree(Workspace ws, RelPath dir, HttpServletResponse resp) throws IOException {
        List<Map<String, Object>> out = new ArrayList<>();
        for (WorkspaceFs.Entry e : ws.fs().list(dir, TREE_LIMIT)) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("name", e.name());
            m.put("type", e.type());
            m.put("size", e.size());
            m.put("modified", e.modified().toInstant().toString());
            out.add(m);
        }
        touch(ws);
        json(resp, 200, out);
    }

    private void rename(Workspace ws, HttpServletRequest req, HttpServletResponse resp) throws IOException {
        JsonNode body = readJson(req, resp);
        String from = body.path("from").asString(null);
        String to = body.path("to").asString(null);
        if (from == null || to == null || !body.get("from").isString() || !body.get("to").isString())
            throw ApiException.badRequest("expected {\"from\": \"old/path\", \"to\": \"new/path\"}");
        RelPath a = RelPath.parse(from);
        RelPath b = RelPath.parse(to);
        ws.fs().rename(a, b);
        ws.fs().touch();
        json(resp, 200, Map.of("from", a.toString(), "to", b.toString()));
    }

    private JsonNode readJson(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        try (Bodies.Body body = bodies.read(req, JSON_BODY_LIMIT, "the JSON body limit of 64 KB")) {
            JsonNode node = JsonErrors.JSON.readTree(body.bytes());
            if (node == null || !node.isObject()) throw ApiException.badRequest("the body must be a JSON object");
            return node;
        } catch (JacksonException e) {
            throw ApiException.badRequest("the body is not valid JSON");
        } catch (Bodies.Refused e) {
            throw e.api(resp);
        }
    }

    static void json(HttpServletResponse resp, int status, Object body) throws IOException {
        byte[] bytes = JsonErrors.JSON.writeValueAsBytes(body);
        resp.setStatus(status);
        resp.setContentType("application/json");
        resp.setCharacterEncoding(StandardCharsets.UTF_8.name());
        resp.setHeader("Cache-Control", "no-store");
        resp.setContentLength(bytes.length);
        resp.getOutputStream().write(bytes);
    }
}
