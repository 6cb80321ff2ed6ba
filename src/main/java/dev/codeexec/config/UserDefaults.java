package dev.codeexec.config;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

/**
 * The defaults of a server run by a normal user (a desktop client starting it over stdio): its state goes under the
 * user's data directory, {@code $XDG_DATA_HOME/code-exec-mcp}, else {@code ~/.local/share/code-exec-mcp}, and its
 * workspaces below that, instead of the root defaults under /var/lib, which a normal user cannot write. Values the
 * environment sets are kept as they are.
 */
final class UserDefaults {

    static final String APP = "code-exec-mcp";

    private UserDefaults() {
    }

    /** The environment with DATA_DIR and WORKSPACE_ROOT filled in where it leaves them unset or blank. */
    static Map<String, String> apply(Map<String, String> env) {
        Map<String, String> out = new HashMap<>(env);
        String data = blank(env.get("DATA_DIR")) ? userDataDir(env).toString() : env.get("DATA_DIR");
        out.put("DATA_DIR", data);
        if (blank(env.get("WORKSPACE_ROOT"))) out.put("WORKSPACE_ROOT", Path.of(data, "workspaces").toString());
        return out;
    }

    /** {@code $XDG_DATA_HOME/code-exec-mcp} when that is an absolute path (as the XDG spec asks), else under HOME. */
    static Path userDataDir(Map<String, String> env) {
        String xdg = env.get("XDG_DATA_HOME");
        if (!blank(xdg) && xdg.startsWith("/")) return Path.of(xdg, APP);
        String home = env.get("HOME");
        if (blank(home)) home = System.getProperty("user.home");
        return Path.of(home, ".local", "share", APP);
    }

    static boolean runningAsRoot() {
        return dev.codeexec.linux.OwnIds.read().root();
    }

    private static boolean blank(String s) {
        return s == null || s.isBlank();
    }
}
