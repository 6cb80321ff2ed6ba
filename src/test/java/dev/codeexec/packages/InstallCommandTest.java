package dev.codeexec.packages;

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
                "http://127.0.0.1:8765/simple/");
        assertThat(c.argv()).startsWith("/usr/bin/python3", "-m", "pip", "install", "--target", "/out/site", "--index-url",
                "http://127.0.0.1:8765/simple/", "--only-binary", ":all:").endsWith("--", "requests==2.32.3", "tiny");
        assertThat(c.env()).containsEntry("PIP_CONFIG_FILE", "/dev/null");
        assertThat(c.host()).isEqualTo("127.0.0.1:8765");
    }

    @Test
    void npmSavesNothingAndUsesOnlyTheRegistry() {
        InstallCommand c = InstallCommand.of(PackageSet.parse("nodejs", List.of("left-pad@1.3.0")), "/out",
                "https://registry.npmjs.org/");
        assertThat(c.argv()).contains("--prefix", "/out", "--registry", "https://registry.npmjs.org/",
                "--no-package-lock").endsWith("--", "left-pad@1.3.0");
        assertThat(c.host()).isEqualTo("registry.npmjs.org");
        assertThatThrownBy(() -> InstallCommand.of(PackageSet.parse("nodejs", List.of("x")), "/out", "file:///srv/npm"))
                .hasMessageContaining("http(s) URL");
    }

    @Test
    void whatWasInstalledIsReadFromTheFilesTheInstallerLeft(@TempDir Path dir) throws Exception {
        Path info = Files.createDirectories(dir.resolve("site/Foo_Bar-1.2.3.dist-info"));
        Files.writeString(info.resolve("METADATA"), "Metadata-Version: 2.1\nName: Foo_Bar\nVersion: 1.2.3\n\nName: not a header\n");
        Files.createDirectories(dir.resolve("site/broken.dist-info"));
        assertThat(InstallCommand.resolved("pip", dir)).containsExactly(java.util.Map.entry("foo-bar", "1.2.3"));

        Path nm = dir.resolve("node_modules");
        Files.createDirectories(nm.resolve("left-pad"));
        Files.writeString(nm.resolve("left-pad/package.json"), "{\"name\": \"left-pad\", \"version\": \"1.3.0\"}");
        Files.createDirectories(nm.resolve("@types/node"));
        Files.writeString(nm.resolve("@types/node/package.json"), "{\"name\": \"@types/node\", \"version\": \"20.1.0\"}");
        Files.createDirectories(nm.resolve("left-pad/node_modules/left-pad"));
        Files.writeString(nm.resolve("left-pad/node_modules/left-pad/package.json"), "{\"name\": \"left-pad\", \"version\": \"0.1.0\"}");
        assertThat(InstallCommand.resolved("npm", dir)).containsExactly(java.util.Map.entry("@types/node", "20.1.0"),
                java.util.Map.entry("left-pad", "1.3.0"));
    }
}
