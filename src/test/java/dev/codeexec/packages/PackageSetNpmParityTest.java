package dev.codeexec.packages;

import dev.codeexec.testing.Requires;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * npm specs that {@link PackageSet} accepts are exactly what npm itself reads as a package from the registry: each
 * spec of a corpus (tarball names, paths, URLs, git forms, ranges and tags) is classified by npm's own parser,
 * {@code npm-package-arg} from the npm on this machine, and an accepted spec must come out as a {@code version},
 * {@code range} or {@code tag} of the same name. The common forms of a registry spec must be accepted.
 */
@Tag("slow")
class PackageSetNpmParityTest {

    private static final JsonMapper JSON = JsonMapper.shared();

    static final List<String> CORPUS = List.of(
            // registry forms
            "left-pad", "left-pad@1.3.0", "left-pad@^1.3", "left-pad@~1.2.0", "left-pad@1.x", "left-pad@*", "left-pad@latest",
            "left-pad@next", "left-pad@>=1 <2", "left-pad@1 - 2", "left-pad@1 || 2", "left-pad@v1.2.3", "left-pad@=1.2.3",
            "left-pad@1.2.3-beta.1+build.5", "@types/node@^20", "@scope/pkg", "@scope/pkg@2", "a@>= 1.2", "a@~>1.2",
            // what npm reads as a file, a directory, a URL or git
            "name@x.tar", "x.tar", "x.tgz", "x.tar.gz", "name@x.tgz", "name@X.TAR.GZ", "name@foo.TAR", "x.tgz@1", "a.tar@latest",
            "name@./x", "name@../x", "name@~/x", "name@/abs", "name@x/y", "name@file:x", "name@link:x", "user/repo",
            "user/repo#main", "name@user/repo", "name@github:user/repo", "github:user/repo", "name@git+https://h/x.git",
            "name@https://h/x.tgz", "git@github.com:user/repo.git", "name@npm:other", "name@npm:other@1",
            "name@workspace:*", "a@1.2.3.tar", "a@latest.tgz", "@s/p@x.tar", "a@1.0.0-x.tgz", "a@http:x", "a@c:x");

    @Test
    void everyAcceptedSpecIsARegistrySpecToNpmItself() throws Exception {
        Path npa = npmPackageArg();
        List<String> accepted = new ArrayList<>();
        for (String spec : CORPUS) {
            try {
                PackageSet.npm(spec);
                accepted.add(spec);
            } catch (IllegalArgumentException refused) {
                // refused before anything is installed: always safe
            }
        }
        JsonNode npm = classify(npa, accepted);
        for (int i = 0; i < accepted.size(); i++) {
            JsonNode r = npm.get(i);
            String spec = accepted.get(i);
            assertThat(r.path("type").asString()).as("npm's reading of accepted '%s': %s", spec, r)
                    .isIn("version", "range", "tag");
            assertThat(r.path("name").asString()).as(spec).isEqualTo(PackageSet.npm(spec)[0]);
        }
        assertThat(accepted).as("the common registry forms are accepted").contains("left-pad", "left-pad@1.3.0",
                "left-pad@^1.3", "left-pad@~1.2.0", "left-pad@1.x", "left-pad@*", "left-pad@latest", "left-pad@>=1 <2",
                "left-pad@1 - 2", "left-pad@1 || 2", "left-pad@v1.2.3", "left-pad@1.2.3-beta.1+build.5", "@types/node@^20",
                "@scope/pkg@2", "a@>= 1.2");
        assertThat(accepted).as("npm reads these as files").doesNotContain("name@x.tar", "x.tar", "x.tgz@1", "name@foo.TAR",
                "a@1.2.3.tar", "a@latest.tgz", "@s/p@x.tar");
    }

    /** npm-package-arg of the npm that runs and installs use. */
    private static Path npmPackageArg() throws Exception {
        Requires.that(new File("/usr/bin/node").canExecute() && new File("/usr/bin/npm").canExecute(), "node and npm (/usr/bin)");
        Process p = new ProcessBuilder("npm", "root", "-g").redirectErrorStream(true).start();
        String root = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        Path npa = Path.of(root, "npm", "node_modules", "npm-package-arg");
        assertThat(npa.resolve("package.json")).as("npm's own npm-package-arg").exists();
        return npa;
    }

    private static JsonNode classify(Path npa, List<String> specs) throws Exception {
        String script = "const npa = require(" + JSON.writeValueAsString(npa.toString()) + ");"
                + "const specs = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
                + "console.log(JSON.stringify(specs.map(s => { try { const r = npa(s, '/work');"
                + " return { type: r.type, name: r.name }; } catch (e) { return { type: 'error', code: e.code }; } })));";
        Process p = new ProcessBuilder("/usr/bin/node", "-e", script).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        p.getOutputStream().write(JSON.writeValueAsBytes(specs));
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).isZero();
        JsonNode n = JSON.readTree(out);
        assertThat(n.size()).isEqualTo(specs.size());
        return n;
    }
}
