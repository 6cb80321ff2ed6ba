package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import dev.codeexec.auth.Principal;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.WorkspaceException.Kind;
import dev.codeexec.workspace.Workspaces;
import io.modelcontextprotocol.server.McpServerFeatures.SyncPromptSpecification;
import io.modelcontextprotocol.spec.McpError;
import io.modelcontextprotocol.spec.McpSchema.GetPromptRequest;
import io.modelcontextprotocol.spec.McpSchema.GetPromptResult;
import io.modelcontextprotocol.spec.McpSchema.Prompt;
import io.modelcontextprotocol.spec.McpSchema.PromptArgument;
import io.modelcontextprotocol.spec.McpSchema.PromptMessage;
import io.modelcontextprotocol.spec.McpSchema.Role;
import io.modelcontextprotocol.spec.McpSchema.TextContent;

import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * The prompts {@code review-code} and {@code write-and-run-tests}: both read the file from the caller's workspace
 * (through {@link WorkspaceFiles}, so links are refused and the size is capped) and put it into the prompt in a
 * fenced block, so the model starts with the code in front of it.
 */
final class CodePrompts {

    static final String REVIEW = "review-code";
    static final String TESTS = "write-and-run-tests";
    /** Larger sources would crowd out the model's context; such files are better reviewed in parts. */
    static final int PROMPT_FILE_LIMIT = 256 * 1024;

    /** What the file's extension says: the fence language, execute_code's language, how tests are named and run. */
    record Lang(String fence, String executeLanguage, String testFile, String runCommand) {
    }

    private static final Map<String, Lang> BY_EXTENSION = Map.ofEntries(
            Map.entry("py", new Lang("python", "python", "test_{stem}.py", "/usr/bin/python3 -m unittest -v test_{stem}")),
            Map.entry("js", new Lang("javascript", "nodejs", "{stem}.test.js", "node --test {stem}.test.js")),
            Map.entry("mjs", new Lang("javascript", "nodejs", "{stem}.test.mjs", "node --test {stem}.test.mjs")),
            Map.entry("ts", new Lang("typescript", "typescript", "{stem}.test.ts", null)),
            Map.entry("go", new Lang("go", "go", "{stem}_test.go", "go test -v ./...")),
            Map.entry("java", new Lang("java", "java", "{stem}Test.java", null)),
            Map.entry("sh", new Lang("bash", "bash", "test_{stem}.sh", "bash test_{stem}.sh")),
            Map.entry("bash", new Lang("bash", "bash", "test_{stem}.sh", "bash test_{stem}.sh")),
            Map.entry("c", new Lang("c", null, null, null)), Map.entry("h", new Lang("c", null, null, null)),
            Map.entry("cpp", new Lang("cpp", null, null, null)), Map.entry("rs", new Lang("rust", null, null, null)),
            Map.entry("rb", new Lang("ruby", null, null, null)), Map.entry("sql", new Lang("sql", null, null, null)),
            Map.entry("json", new Lang("json", null, null, null)), Map.entry("yaml", new Lang("yaml", null, null, null)),
            Map.entry("yml", new Lang("yaml", null, null, null)), Map.entry("toml", new Lang("toml", null, null, null)),
            Map.entry("html", new Lang("html", null, null, null)), Map.entry("css", new Lang("css", null, null, null)),
            Map.entry("md", new Lang("markdown", null, null, null)));
    private static final Map<String, String> EXECUTE_TO_EXTENSION = Map.of("python", "py", "nodejs", "js",
            "javascript", "js", "node", "js", "typescript", "ts", "ts", "ts", "go", "go", "java", "java", "bash", "sh",
            "shell", "sh");

    private final Workspaces workspaces;

    CodePrompts(ServerSetup setup) {
        this.workspaces = setup.workspaces();
    }

    List<SyncPromptSpecification> specifications() {
        PromptArgument ws = new PromptArgument("workspace", "Workspace", "Name of your workspace holding the file.", true);
        PromptArgument path = new PromptArgument("path", "Path", "The file, relative to the workspace root.", true);
        PromptArgument language = new PromptArgument("language", "Language",
                "Language of the code (python, nodejs, typescript, go, java, bash); guessed from the extension when absent.", false);
        return List.of(
                new SyncPromptSpecification(new Prompt(REVIEW, "Review code",
                        "Review a file of a workspace for correctness, readability, robustness and security.",
                        List.of(ws, path)), (exchange, request) -> render(request, false)),
                new SyncPromptSpecification(new Prompt(TESTS, "Write and run tests",
                        "Write tests for a file of a workspace and run them there with execute_code.",
                        List.of(ws, path, language)), (exchange, request) -> render(request, true)));
    }

    private GetPromptResult render(GetPromptRequest request, boolean tests) {
        Principal who = MessageInterceptor.principalOf(request.meta());
        Map<String, Object> args = request.arguments() == null ? Map.of() : request.arguments();
        String wsName = argument(args, "workspace");
        String rawPath = argument(args, "path");
        try {
            RelPath path = RelPath.parse(rawPath);
            if (path.isRoot()) throw new WorkspaceException(Kind.BAD_PATH, "a file path is required");
            Workspace ws = workspaces.open(who.tenant(), wsName, false);
            WorkspaceFiles.Loaded file = WorkspaceFiles.read(ws, path, PROMPT_FILE_LIMIT);
            String code = WorkspaceFiles.utf8(file.bytes()).orElseThrow(() ->
                    new WorkspaceException(Kind.BAD_PATH, "'" + path + "' is not a UTF-8 text file"));
            Optional<String> language = args.get("language") instanceof String l && !l.isBlank()
                    ? Optional.of(l.trim().toLowerCase(Locale.ROOT)) : Optional.empty();
            String text = tests ? testsPrompt(wsName, path, code, language) : reviewPrompt(wsName, path, code);
            String description = (tests ? "Write and run tests for " : "Review of ") + wsName + "/" + path;
            return new GetPromptResult(description, List.of(new PromptMessage(Role.USER, new TextContent(text))));
        } catch (WorkspaceException e) {
            throw WorkspaceResources.error(e);
        }
    }

    private static String argument(Map<String, Object> args, String name) {
        if (args.get(name) instanceof String s && !s.isEmpty()) return s;
        throw McpError.builder(-32602).message("invalid_arguments: the prompt argument '" + name + "' is required")
                .data(Map.of("error", "invalid_arguments")).build();
    }

    static String reviewPrompt(String ws, RelPath path, String code) {
        Lang lang = langOf(path.name());
        return "Please review the file `" + path + "` from workspace `" + ws + "`.\n\n"
                + fenced(code, lang.fence())
                + "\nReview it for:\n"
                + "1. **Correctness**: bugs, wrong results, unhandled edge cases (empty input, boundaries, errors).\n"
                + "2. **Readability**: naming, structure, comments that explain why, dead or duplicated code.\n"
                + "3. **Robustness**: error handling, resource cleanup, behaviour under bad or unexpected input.\n"
                + "4. **Security**: injection, unsafe deserialization, path traversal, secrets in code, unchecked input.\n\n"
                + "For each finding give the line(s), why it matters and a concrete fix (a short code snippet when it "
                + "helps). Order findings by severity and end with a short overall assessment. If something is "
                + "unclear, say what you would need to know rather than guessing.";
    }

    static String testsPrompt(String ws, RelPath path, String code, Optional<String> requested) {
        String name = path.name();
        String stem = name.contains(".") ? name.substring(0, name.lastIndexOf('.')) : name;
        String dir = path.parent().isRoot() ? "" : path.parent().toString();
        // A language the table knows (by id or alias) decides the conventions; an unknown one is passed through
        // to execute_code as given, with the conventions of the file's extension.
        Optional<Lang> known = requested.map(l -> BY_EXTENSION.get(EXECUTE_TO_EXTENSION.getOrDefault(l, "")));
        Lang lang = known.orElse(langOf(name));
        String executeLanguage = known.map(Lang::executeLanguage)
                .or(() -> requested)
                .orElse(lang.executeLanguage() == null ? "bash" : lang.executeLanguage());
        String testFile = lang.testFile() == null ? "test_" + stem : lang.testFile().replace("{stem}", stem);
        String testPath = dir.isEmpty() ? testFile : dir + "/" + testFile;
        StringBuilder b = new StringBuilder();
        b.append("Write tests for the file `").append(path).append("` in workspace `").append(ws)
                .append("` and run them in that workspace.\n\n").append(fenced(code, lang.fence()));
        b.append("\nWork in these steps:\n\n");
        b.append("1. Read the code above and list the behaviours worth testing: normal cases, edge cases (empty, "
                + "boundaries, large input) and error handling.\n");
        b.append("2. Write the tests (").append(executeLanguage).append(") and save them with the `write_file` tool, "
                + "arguments: `{\"workspace\": \"").append(ws).append("\", \"path\": \"").append(testPath)
                .append("\", \"content\": \"<the test code>\"}`.\n");
        if (lang.runCommand() != null) {
            String cmd = (dir.isEmpty() ? "" : "cd " + shellQuote(dir) + " && ") + lang.runCommand().replace("{stem}", stem);
            b.append("3. Run them with the `execute_code` tool, arguments: `{\"language\": \"bash\", \"workspace\": \"")
                    .append(ws).append("\", \"code\": \"").append(cmd.replace("\"", "\\\"")).append("\"}`. ")
                    .append("The run's working directory is the workspace, so the code and the tests are both there.\n");
        } else {
            b.append("3. Run them with the `execute_code` tool, arguments: `{\"language\": \"").append(executeLanguage)
                    .append("\", \"workspace\": \"").append(ws).append("\", \"code\": \"<a program that runs the tests>\"}`. ")
                    .append("The run's working directory is the workspace, so it can load `").append(path)
                    .append("` and `").append(testPath).append("`; make it print each test's result and exit "
                            + "non-zero when one fails.\n");
        }
        b.append("4. Read the exit code and output. When a test fails, decide whether the test or the code is wrong: "
                + "fix a wrong test and run again (at most three rounds); do not change the code under test.\n");
        b.append("5. Report: the tests written, the final results, and every bug the tests revealed in `")
                .append(path).append("`, with the failing input and expected vs actual result.");
        return b.toString();
    }

    static Lang langOf(String fileName) {
        int dot = fileName.lastIndexOf('.');
        String ext = dot < 0 ? "" : fileName.substring(dot + 1).toLowerCase(Locale.ROOT);
        return BY_EXTENSION.getOrDefault(ext, new Lang("", null, null, null));
    }

    /** A fence longer than any run of backticks in the code, so the code cannot close it early. */
    static String fenced(String code, String language) {
        int longest = 0;
        int run = 0;
        for (int i = 0; i < code.length(); i++) {
            run = code.charAt(i) == '`' ? run + 1 : 0;
            longest = Math.max(longest, run);
        }
        String fence = "`".repeat(Math.max(3, longest + 1));
        return fence + language + "\n" + code + (code.endsWith("\n") ? "" : "\n") + fence + "\n";
    }

    private static String shellQuote(String s) {
        return s.matches("[A-Za-z0-9_./-]+") ? s : "'" + s.replace("'", "'\\''") + "'";
    }
}
