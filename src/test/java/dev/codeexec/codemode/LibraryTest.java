package dev.codeexec.codemode;

import io.modelcontextprotocol.spec.McpSchema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

class LibraryTest {

    private static McpSchema.Tool tool(String name, String description, Map<String, Object> input, Map<String, Object> output) {
        return new McpSchema.Tool(name, null, description, input, output, null, null);
    }

    static final Library.ServerView SERVER = new Library.ServerView("git-hub", "git_hub", "Issues */ and \"quotes\"", List.of(
            tool("add", "Adds.\nTwo numbers.", Map.of("type", "object", "properties", ordered(
                            "a", Map.of("type", "number", "description", "first"), "b", Map.of("type", "number")),
                    "required", List.of("a", "b")),
                    Map.of("type", "object", "properties", Map.of("sum", Map.of("type", "number")), "required", List.of("sum"))),
            tool("search-issues", "Finds */ issues", Map.of("type", "object", "properties", ordered(
                    "query", Map.of("type", "string"), "class", Map.of("type", "string", "enum", List.of("bug", "feature")),
                    "labels", Map.of("type", "array", "items", Map.of("type", "string")),
                    "limit", Map.of("type", List.of("integer", "null"))), "required", List.of("query")), null),
            tool("search.issues", "the same name once cleaned", Map.of("type", "object"), null),
            tool("import", null, Map.of("type", "object"), null)), Optional.empty());

    /** Properties in the order given, as a schema read from JSON has them. */
    private static Map<String, Object> ordered(Object... kv) {
        Map<String, Object> m = new java.util.LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }

    @Test
    void namesAreIdentifiersInBothLanguagesAndClashesAreNumbered() {
        assertThat(Library.ident("search-issues")).isEqualTo("search_issues");
        assertThat(Library.ident("9lives")).isEqualTo("_9lives");
        assertThat(Library.ident("class")).isEqualTo("class_");
        assertThat(Library.ident("function")).isEqualTo("function_");
        assertThat(Library.names(List.of("search-issues", "search.issues", "search_issues")))
                .containsExactly(Map.entry("search-issues", "search_issues"), Map.entry("search.issues", "search_issues_2"),
                        Map.entry("search_issues", "search_issues_3"));
    }

    @Test
    void signaturesShowTypesRequiredAndOptionalArguments() {
        McpSchema.Tool add = SERVER.tools().get(0);
        McpSchema.Tool search = SERVER.tools().get(1);
        assertThat(Library.pythonSignature(SERVER, add)).isEqualTo("git_hub.add(*, a: float, b: float) -> dict");
        assertThat(Library.pythonSignature(SERVER, search))
                .startsWith("git_hub.search_issues(*, query: str, ").contains("class_: str = ...", "labels: list = ...")
                .endsWith(") -> str");
        assertThat(Library.typescriptSignature(SERVER, add))
                .isEqualTo("git_hub.add(args: { /** first */ a: number; b: number; }): Promise<{ sum: number; [key: string]: unknown; }>");
        assertThat(Library.typescriptSignature(SERVER, search))
                .contains("query: string;", "class?: \"bug\" | \"feature\";", "labels?: Array<string>;", "limit?: (number | null);")
                .endsWith("): Promise<string>");
        assertThat(Library.typescriptSignature(SERVER, SERVER.tools().get(3))).isEqualTo("git_hub.import_(args?: Record<string, unknown>): Promise<string>");
    }

    @Test
    void thePythonModuleCompilesAndCarriesTheOriginalNames(@TempDir Path dir) throws Exception {
        String py = Library.python(List.of(SERVER));
        assertThat(py).contains("call(\"git-hub\", \"search-issues\", {\"query\": query, \"class\": class_, ");
        Path f = dir.resolve("mcp_tools.py");
        Files.writeString(f, py);
        // imported for real, without a network: the module builds its functions, help() shows the docstring
        String out = run(dir, "/usr/bin/python3", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import mcp_tools as m; "
                + "import inspect; print(m.servers()); print(inspect.signature(m.git_hub.search_issues)); "
                + "print(m.git_hub.add.__doc__.splitlines()[0]); print(sorted(dir(m.git_hub)))", dir.toString());
        assertThat(out).contains("['git_hub']", "(*, query: 'str', class_: 'str' = <object object", "Adds.",
                "['add', 'import_', 'search_issues', 'search_issues_2']");
    }

    @Test
    void theNodeModuleParsesAndTheDeclarationsEscapeComments(@TempDir Path dir) throws Exception {
        Path js = dir.resolve("index.js");
        Files.writeString(js, Library.javascript(List.of(SERVER)));
        String out = run(dir, "/usr/bin/node", "-e", "const m = require(process.argv[1]); console.log(Object.keys(m).join(','), "
                + "Object.keys(m.git_hub).join(','), m.servers().join(','))", js.toString());
        assertThat(out.strip()).isEqualTo("apis,ApiError,McpToolError,call,git_hub,servers add,search_issues,search_issues_2,import_ git_hub");
        String ts = Library.typescript(List.of(SERVER));
        assertThat(ts).contains("/** Issues *\\/ and \"quotes\" */", "Finds *\\/ issues", "export declare const git_hub: {");
    }

    @Test
    void aServerThatWasUnavailableIsListedWithWhyAndTakesAnyToolByName(@TempDir Path dir) throws Exception {
        Library.ServerView down = new Library.ServerView("down-one", "down_one", "Down */ here", List.of(SERVER.tools().getFirst()),
                Optional.of("Connection refused"));
        Files.writeString(dir.resolve("mcp_tools.py"), Library.python(List.of(down, SERVER)));
        // the tool it listed last is there; any other name calls that tool by name; a server that is up has no such fallback
        String out = run(dir, "/usr/bin/python3", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import mcp_tools as m; "
                + "m.call = lambda s, t, a: [s, t, a]; print(repr(m.down_one)); print(m.down_one.add(a=1, b=2)); "
                + "print(m.down_one.other(q='x')); print(m.down_one.__doc__.splitlines()[2])\n"
                + "try:\n    m.git_hub.other\nexcept AttributeError as e:\n    print(e)", dir.toString());
        assertThat(out.lines().toList()).containsExactly("<MCP server down_one (unavailable: Connection refused): add>",
                "['down-one', 'add', {'a': 1, 'b': 2}]", "['down-one', 'other', {'q': 'x'}]",
                "Unavailable when this library was written (Connection refused): the tools listed are those it listed last, "
                        + "and any tool of it can be called by name.",
                "git_hub has no tool 'other' (its tools: add, search_issues, search_issues_2, import_)");

        Path js = dir.resolve("index.js");
        Files.writeString(js, Library.javascript(List.of(down, SERVER)));
        String node = run(dir, "/usr/bin/node", "-e", "const m = require(process.argv[1]); console.log(Object.keys(m.down_one).join(','), "
                + "typeof m.down_one.add, typeof m.down_one.other, m.down_one.then, JSON.stringify(m.down_one), typeof m.git_hub.other)",
                js.toString());
        assertThat(node.strip()).isEqualTo("add function function undefined {} undefined");
        assertThat(Library.typescript(List.of(down))).contains("Down *\\/ here", "Unavailable when this library was written",
                "export declare const down_one: {\n  /** Any tool, by its name (the server was unavailable). */\n"
                        + "  readonly [tool: string]: (args?: any) => Promise<any>;\n");
    }

    private static String run(Path dir, String... argv) throws Exception {
        Process p = new ProcessBuilder(argv).directory(dir.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        return out;
    }
}
