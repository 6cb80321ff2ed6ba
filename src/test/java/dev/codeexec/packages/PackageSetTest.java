package dev.codeexec.packages;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class PackageSetTest {

    @Test
    void pipRequirementsAreNormalisedSoTheSameNeedsShareAKey() {
        PackageSet a = PackageSet.parse("python", List.of("Requests == 2.32.3", "pandas>=2,<3", "Foo_Bar.baz[Socks, cli]"));
        assertThat(a.ecosystem()).isEqualTo("pip");
        assertThat(a.specs()).containsExactly("foo-bar-baz[cli,socks]", "pandas<3,>=2", "requests==2.32.3");
        PackageSet b = PackageSet.parse("python", List.of("foo-bar-baz[socks,cli]", "requests==2.32.3", "pandas <3, >=2"));
        assertThat(b).isEqualTo(a);
        assertThat(b.key("3.11.2")).isEqualTo(a.key("3.11.2")).startsWith("pip-");
        assertThat(a.key("3.12.0")).isNotEqualTo(a.key("3.11.2"));
        assertThat(PackageSet.parse("python", List.of("requests==2.32.4")).key("3.11.2")).isNotEqualTo(a.key("3.11.2"));
        assertThat(PackageSet.parse("python", List.of("numpy", "numpy-financial~=1.0")).specs())
                .containsExactly("numpy", "numpy-financial~=1.0");
    }

    @Test
    void npmSpecsKeepNameAndRange() {
        PackageSet a = PackageSet.parse("typescript", List.of("left-pad@1.3.0", "lodash", "@types/node@^20", "chalk@latest",
                "semver@>=7 <8"));
        assertThat(a.ecosystem()).isEqualTo("npm");
        assertThat(a.specs()).containsExactly("@types/node@^20", "chalk@latest", "left-pad@1.3.0", "lodash", "semver@>=7 <8");
        assertThat(PackageSet.parse("nodejs", List.of("lodash", "left-pad@1.3.0", "semver@>=7  <8", "chalk@latest",
                "@types/node@^20")).key("v20.19.2")).isEqualTo(a.key("v20.19.2"));
    }

    @Test
    void urlsPathsVcsOptionsAndOtherLanguagesAreRefusedWithTheReason() {
        Map<List<String>, String> python = Map.ofEntries(
                Map.entry(List.of("requests @ https://evil.test/r.whl"), "URLs, VCS references"),
                Map.entry(List.of("requests @ mirror/r"), "direct reference"),
                Map.entry(List.of("git+https://github.com/x/y"), "URLs, VCS references and paths"),
                Map.entry(List.of("--index-url=https://evil.test/simple"), "installer options"),
                Map.entry(List.of("-e ."), "installer options"),
                Map.entry(List.of("./local/project"), "paths and archives"),
                Map.entry(List.of("/tmp/pkg.whl"), "paths and archives"),
                Map.entry(List.of("pkg; python_version < '3.8'"), "environment markers"),
                Map.entry(List.of("foo bar"), "not a version clause"),
                Map.entry(List.of("requests", "Requests==2"), "named twice"),
                Map.entry(List.of(""), "empty"));
        python.forEach((specs, why) -> assertThatThrownBy(() -> PackageSet.parse("python", specs)).as(specs.toString())
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(why));
        Map<String, String> npm = Map.ofEntries(
                Map.entry("left-pad@npm:evil", "aliases"),
                Map.entry("user/repo", "shorthands"),
                Map.entry("github:user/repo", "URLs, VCS references and paths"),
                Map.entry("file:../x", "URLs, VCS references and paths"),
                Map.entry("https://evil.test/x.tgz", "URLs, VCS references and paths"),
                Map.entry("Left-Pad", "not an npm package name"),
                Map.entry("left-pad@", "is not a version"),
                Map.entry("left-pad@$(id)", "is not a version"),
                Map.entry("left-pad@x.tar", "paths and archives"),
                Map.entry("x.tgz@1", "local tarball"),
                Map.entry("left-pad@1.2.3.TAR", "paths and archives"));
        npm.forEach((spec, why) -> assertThatThrownBy(() -> PackageSet.parse("nodejs", List.of(spec))).as(spec)
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(why));
        assertThatThrownBy(() -> PackageSet.parse("go", List.of("x"))).hasMessageContaining("go takes none");
        assertThatThrownBy(() -> PackageSet.parse("python", java.util.Collections.nCopies(65, "x")))
                .hasMessageContaining("at most 64");
    }

    @Test
    void rangesThatABacktrackingMatcherWouldTakeExponentialTimeOnAreJudgedAtOnce() {
        // each piece could be read two ways ('=' an operator or a version's prefix; two spaces split either way):
        // one regular expression over the whole range took 2^n steps on a spec a tenant may send
        String eqs = "a@" + "=1 ".repeat(64) + "!";
        String spaces = "a@" + "1  ".repeat(64) + "!";
        String ors = "a@" + "1 || ".repeat(39) + "!";
        org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(java.time.Duration.ofSeconds(20), () -> {
            for (String spec : List.of(eqs, spaces, ors))
                assertThatThrownBy(() -> PackageSet.parse("nodejs", List.of(spec))).hasMessageContaining("is not a version");
        });
        assertThat(PackageSet.parse("nodejs", List.of("a@" + "=1 ".repeat(60).strip())).specs()).hasSize(1);
        assertThat(PackageSet.isRange(">= 1.2 < 2 || ^3.0.0-beta.1+b7 || 1 - 2 || ")).isTrue();
        assertThat(PackageSet.isRange("1 - ^2")).isFalse();
    }

}
