package dev.codeexec.config;

import org.junit.jupiter.api.Test;

import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

class UserDefaultsTest {

    @Test
    void aNormalUsersStateGoesUnderItsDataDirectory() {
        Config xdg = Config.load(Map.of("HOME", "/home/ann", "XDG_DATA_HOME", "/home/ann/.data"), false);
        assertThat(xdg.dataDir()).hasToString("/home/ann/.data/code-exec-mcp");
        assertThat(xdg.get(Config.WORKSPACE_ROOT)).isEqualTo("/home/ann/.data/code-exec-mcp/workspaces");
        Config home = Config.load(Map.of("HOME", "/home/ann"), false);
        assertThat(home.dataDir()).hasToString("/home/ann/.local/share/code-exec-mcp");
        assertThat(home.get(Config.WORKSPACE_ROOT)).isEqualTo("/home/ann/.local/share/code-exec-mcp/workspaces");
        // a relative XDG_DATA_HOME is invalid by the spec and ignored
        assertThat(Config.load(Map.of("HOME", "/home/ann", "XDG_DATA_HOME", "data"), false).dataDir())
                .hasToString("/home/ann/.local/share/code-exec-mcp");
    }

    @Test
    void whatTheEnvironmentSetsIsKeptAndRootKeepsItsDefaults() {
        Config set = Config.load(Map.of("HOME", "/home/ann", "DATA_DIR", "/srv/x"), false);
        assertThat(set.dataDir()).hasToString("/srv/x");
        assertThat(set.get(Config.WORKSPACE_ROOT)).isEqualTo("/srv/x/workspaces");
        Config both = Config.load(Map.of("HOME", "/home/ann", "DATA_DIR", "/srv/x", "WORKSPACE_ROOT", "/srv/w"), false);
        assertThat(both.get(Config.WORKSPACE_ROOT)).isEqualTo("/srv/w");
        Config root = Config.load(Map.of("HOME", "/root"), true);
        assertThat(root.dataDir()).hasToString("/var/lib/code-exec-mcp");
        assertThat(root.get(Config.WORKSPACE_ROOT)).isEqualTo("/var/lib/code-exec-mcp/workspaces");
    }
}
