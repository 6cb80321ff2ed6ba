package dev.codeexec.packages;

import dev.codeexec.workspace.WorkspaceFs;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class InstallCommandTest {

    @Test
    void pipInstallsWheelsOnlyFromTheIndexIntoTheEntry() {
        InstallCommand c = InstallCommand.of(PackageSet.parse("python", List.of("requests==2.32.3", "tiny")), "/out",
                "http://127.0.0.1:8765/simple/", java.util.Optional.empty());
        assertThat(c.argv()).startsWith("/usr/bin/python3", "-m", "pip", "install", "--target", "/out/site", "--index-url",
                "http://127.0.0.1:8765/simple/", "--only-binary", ":all:").endsWith("--", "requests==2.32.3", "tiny");
        assertThat(c.env()).containsEntry("PIP_CONFIG_FILE", "/dev/null");
        assertThat(c.host()).isEqualTo("127.0.0.1:8765");
    }

    @Test
    void npmSavesNothingAndUsesOnlyTheRegistry() {
        InstallCommand c = InstallCommand.of(PackageSet.parse("nodejs", List.of("left-pad@1.3.0")), "/out",
                "https://registry.npmjs.org/", java.util.Optional.empty());
        assertThat(c.argv()).contains("--prefix", "/out", "--registry", "https://registry.npmjs.org/",
                "--no-package-lock").endsWith("--", "left-pad@1.3.0");
        assertThat(c.host()).isEqualTo("registry.npmjs.org");
        assertThatThrownBy(() -> InstallCommand.of(PackageSet.parse("nodejs", List.of("x")), "/out", "file:///srv/npm", java.util.Optional.empty()))
                .hasMessageContaining("http(s) URL");
    }

    @Test
    void whatWasInstalledIsReadFromTheFilesTheInstallerLeft(@TempDir Path dir) throws Exception {
        Path info = Files.createDirectories(dir.resolve("site/Foo_Bar-1.2.3.dist-info"));
        Files.writeString(info.resolve("METADATA"), "Metadata-Version: 2.1\nName: Foo_Bar\nVersion: 1.2.3\n\nName: not a header\n");
        Files.createDirectories(dir.resolve("site/broken.dist-info"));
        assertThat(InstallCommand.resolved("pip", fs(dir))).containsExactly(java.util.Map.entry("foo-bar", "1.2.3"));

        Path nm = dir.resolve("node_modules");
        Files.createDirectories(nm.resolve("left-pad"));
        Files.writeString(nm.resolve("left-pad/package.json"), "{\"name\": \"left-pad\", \"version\": \"1.3.0\"}");
        Files.createDirectories(nm.resolve("@types/node"));
        Files.writeString(nm.resolve("@types/node/package.json"), "{\"name\": \"@types/node\", \"version\": \"20.1.0\"}");
        Files.createDirectories(nm.resolve("left-pad/node_modules/left-pad"));
        Files.writeString(nm.resolve("left-pad/node_modules/left-pad/package.json"), "{\"name\": \"left-pad\", \"version\": \"0.1.0\"}");
        assertThat(InstallCommand.resolved("npm", fs(dir))).containsExactly(java.util.Map.entry("@types/node", "20.1.0"),
                java.util.Map.entry("left-pad", "1.3.0"));
    }

    private static WorkspaceFs fs(Path dir) {
        return new WorkspaceFs(dir, -1, -1);
    }

    /** An npm tree as npm leaves it: one package, its bin link, npm's own lock file. */
    private static Path npmTree(Path dir) throws Exception {
        Path nm = Files.createDirectories(dir.resolve("node_modules"));
        Files.createDirectories(nm.resolve("left-pad"));
        Files.writeString(nm.resolve("left-pad/package.json"), "{\"name\": \"left-pad\", \"version\": \"1.3.0\"}");
        Files.createDirectories(nm.resolve(".bin"));
        Files.createSymbolicLink(nm.resolve(".bin/left-pad"), Path.of("../left-pad/index.js"));
        Files.writeString(nm.resolve(".package-lock.json"), "{}");
        return nm;
    }

    @Test
    void aManifestThatIsALinkIsNeverFollowed(@TempDir Path dir, @TempDir Path host) throws Exception {
        // an install script replaced its package.json with a link to a file of the host's (finding 2)
        Path secret = Files.writeString(host.resolve("secret.json"), "{\"name\": \"root-only\", \"version\": \"6.6.6\"}");
        Path nm = npmTree(dir);
        Files.delete(nm.resolve("left-pad/package.json"));
        Files.createSymbolicLink(nm.resolve("left-pad/package.json"), secret);
        assertThatThrownBy(() -> InstallCommand.resolved("npm", fs(dir))).isInstanceOf(PackageStore.InstallFailed.class)
                .hasMessageContaining("node_modules/left-pad/package.json").hasMessageContaining("symbolic link")
                .hasMessageNotContaining("root-only").hasMessageNotContaining("6.6.6");
        // a package directory that is a link to a host directory is not read through either
        Files.delete(nm.resolve("left-pad/package.json"));
        Files.delete(nm.resolve("left-pad"));
        Files.createSymbolicLink(nm.resolve("left-pad"), host);
        Files.move(secret, host.resolve("package.json"));
        assertThat(InstallCommand.resolved("npm", fs(dir))).isEmpty();
        // and pip's METADATA likewise
        Path info = Files.createDirectories(dir.resolve("site/x-1.dist-info"));
        Files.createSymbolicLink(info.resolve("METADATA"), host.resolve("package.json"));
        assertThatThrownBy(() -> InstallCommand.resolved("pip", fs(dir))).isInstanceOf(PackageStore.InstallFailed.class)
                .hasMessageContaining("symbolic link");
    }

    @Test
    void aManifestThatIsAFifoOrADeviceIsRefusedWithoutBlockingOrReadingIt(@TempDir Path dir) throws Exception {
        // a FIFO would block a plain read forever (finding 5); /dev/zero would fill the heap (finding 6)
        Path nm = npmTree(dir);
        Files.delete(nm.resolve("left-pad/package.json"));
        dev.codeexec.linux.Posix.mkfifo(nm.resolve("left-pad/package.json").toString(), 0644);
        assertThatThrownBy(() -> InstallCommand.resolved("npm", fs(dir))).isInstanceOf(PackageStore.InstallFailed.class)
                .hasMessageContaining("not a regular file");
        Files.delete(nm.resolve("left-pad/package.json"));
        Files.createSymbolicLink(nm.resolve("left-pad/package.json"), Path.of("/dev/zero"));
        assertThatThrownBy(() -> InstallCommand.resolved("npm", fs(dir))).isInstanceOf(PackageStore.InstallFailed.class)
                .hasMessageContaining("symbolic link");
    }

    @Test
    void aManifestOverItsSizeBoundIsRefusedUnread(@TempDir Path dir) throws Exception {
        Path nm = npmTree(dir);
        try (var out = Files.newOutputStream(nm.resolve("left-pad/package.json"))) {
            out.write(new byte[InstallCommand.MAX_MANIFEST_BYTES + 1]);
        }
        assertThatThrownBy(() -> InstallCommand.resolved("npm", fs(dir))).isInstanceOf(PackageStore.InstallFailed.class)
                .hasMessageContaining("a manifest may have");
    }

    @Test
    void whatNpmLeavesPassesTheLayoutCheckAndAnythingAnInstallScriptAddsBesideItDoesNot(@TempDir Path base) throws Exception {
        Path ok = Files.createDirectories(base.resolve("ok"));
        npmTree(ok);
        Files.createDirectories(ok.resolve("node_modules/@types/node"));
        InstallCommand.checkLayout("npm", fs(ok));
        // finding 15: what a postinstall wrote outside its package stays out of the entry: the install fails
        java.util.Map<String, java.util.function.Consumer<Path>> strays = java.util.Map.of(
                "outside-1.txt", d -> write(d.resolve("outside-1.txt")),
                "node_modules/.sibling", d -> write(d.resolve("node_modules/.sibling")),
                "node_modules/loose.js", d -> write(d.resolve("node_modules/loose.js")),
                "node_modules/@types/.hidden", d -> write(d.resolve("node_modules/@types/.hidden")),
                "node_modules/linked", d -> link(d.resolve("node_modules/linked"), Path.of("/etc")),
                ".entry.json", d -> link(d.resolve(".entry.json"), Path.of("/etc/passwd")));
        for (var stray : strays.entrySet()) {
            Path d = Files.createDirectories(base.resolve("t" + Math.abs(stray.getKey().hashCode())));
            npmTree(d);
            Files.createDirectories(d.resolve("node_modules/@types/node"));
            stray.getValue().accept(d);
            assertThatThrownBy(() -> InstallCommand.checkLayout("npm", fs(d))).as(stray.getKey())
                    .isInstanceOf(PackageStore.InstallFailed.class).hasMessageContaining("'" + stray.getKey() + "'");
        }
        Path pip = Files.createDirectories(base.resolve("pip"));
        Files.createDirectories(pip.resolve("site/x"));
        InstallCommand.checkLayout("pip", fs(pip));
        write(pip.resolve("bin"));
        assertThatThrownBy(() -> InstallCommand.checkLayout("pip", fs(pip))).hasMessageContaining("'bin'");
    }

    private static void write(Path p) {
        try {
            Files.writeString(p, "x");
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private static void link(Path p, Path to) {
        try {
            Files.createSymbolicLink(p, to);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Test
    void npmReadsTheMachinesGlobalConfigAsRunsDoAndLogsEachFetch() {
        // finding 18: the global npmrc (a cafile for a TLS-inspecting proxy) is read by runs' npm; installs read it too
        InstallCommand c = InstallCommand.of(PackageSet.parse("nodejs", List.of("left-pad@1.3.0")), "/out",
                "https://registry.npmjs.org/", java.util.Optional.of("/usr/etc/npmrc"));
        assertThat(c.env()).containsEntry("NPM_CONFIG_GLOBALCONFIG", "/usr/etc/npmrc").containsEntry("NPM_CONFIG_USERCONFIG", "/dev/null");
        assertThat(c.argv()).containsSubsequence("--loglevel", "http");
    }
}
