package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import dev.codeexec.auth.Principal;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.WorkspaceFs;
import dev.codeexec.workspace.Workspaces;
import io.modelcontextprotocol.server.McpServerFeatures.SyncCompletionSpecification;
import io.modelcontextprotocol.spec.McpSchema.CompleteRequest;
import io.modelcontextprotocol.spec.McpSchema.CompleteResult;
import io.modelcontextprotocol.spec.McpSchema.CompleteResult.CompleteCompletion;
import io.modelcontextprotocol.spec.McpSchema.PromptReference;
import io.modelcontextprotocol.spec.McpSchema.ResourceReference;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * completion/complete for the prompts' arguments and the file template's variables: workspace names of the
 * caller's tenant, and paths inside the workspace named in the request's context (SDK 2.1.0 and 2.2.0 pass the
 * arguments already resolved as {@code context.arguments}). Paths are listed through {@link WorkspaceFs}, one
 * directory at a time, so a link is never followed; links and special files are not offered. A completion never
 * fails: anything it cannot resolve (no such workspace, a bad path) completes to nothing.
 */
final class Completions {

    static final int MAX_VALUES = 100;
    /** How many entries of one directory are read to filter by the typed prefix. */
    private static final int SCAN_LIMIT = 10_000;

    private final Workspaces workspaces;
    private final List<String> languages;

    Completions(ServerSetup setup) {
        this.workspaces = setup.workspaces();
        this.languages = setup.languages();
    }

    List<SyncCompletionSpecification> specifications() {
        return List.of(
                new SyncCompletionSpecification(new PromptReference(CodePrompts.REVIEW), (ex, req) -> complete(req)),
                new SyncCompletionSpecification(new PromptReference(CodePrompts.TESTS), (ex, req) -> complete(req)),
                new SyncCompletionSpecification(new ResourceReference(WorkspaceResources.FILE_TEMPLATE), (ex, req) -> complete(req)));
    }

    CompleteResult complete(CompleteRequest request) {
        Principal who = MessageInterceptor.principalOf(request.meta());
        if (request.argument() == null || request.argument().name() == null)
            return new CompleteResult(new CompleteCompletion(List.of(), 0, false));
        String typed = request.argument().value() == null ? "" : request.argument().value();
        Map<String, String> context = request.context() == null || request.context().arguments() == null
                ? Map.of() : request.context().arguments();
        List<String> all = switch (request.argument().name()) {
            case "workspace" -> workspaceNames(who, typed);
            case "path" -> paths(who, context.get("workspace"), typed);
            case "language" -> languages.stream().filter(l -> l.startsWith(typed)).toList();
            default -> List.of();
        };
        List<String> values = all.size() > MAX_VALUES ? all.subList(0, MAX_VALUES) : all;
        return new CompleteResult(new CompleteCompletion(List.copyOf(values), all.size(), all.size() > values.size()));
    }

    private List<String> workspaceNames(Principal who, String prefix) {
        try {
            return workspaces.names(who.tenant()).stream().filter(n -> n.startsWith(prefix)).toList();
        } catch (WorkspaceException e) {
            return List.of();
        }
    }

    /** "src/ma" → the entries of "src" starting with "ma": "src/main.py", "src/math/". */
    private List<String> paths(Principal who, String workspace, String typed) {
        if (workspace == null || workspace.isEmpty()) return List.of();
        int slash = typed.lastIndexOf('/');
        String dirPart = slash < 0 ? "" : typed.substring(0, slash + 1);
        String prefix = typed.substring(slash + 1);
        try {
            RelPath dir = RelPath.parse(dirPart);
            var ws = workspaces.find(who.tenant(), workspace);
            if (ws.isEmpty()) return List.of();
            List<String> out = new ArrayList<>();
            for (WorkspaceFs.Entry e : ws.get().fs().list(dir, SCAN_LIMIT)) {
                if (!e.name().startsWith(prefix)) continue;
                if (e.isDirectory()) out.add(dirPart + e.name() + "/");
                else if (e.type().equals("file")) out.add(dirPart + e.name());
            }
            return out;
        } catch (WorkspaceException e) {
            return List.of();
        }
    }
}
