package dev.codeexec.engine;

import dev.codeexec.codemode.CodeTools;
import dev.codeexec.config.Config;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.Sandboxes;
import dev.codeexec.workspace.Workspaces;

import java.util.Optional;

/**
 * The engine that runs code on this machine, assembled the same way for the server and for a worker: the
 * configured sandbox, the local executor (warm pool, sessions), the workspaces under WORKSPACE_ROOT and code mode's
 * upstreams (UPSTREAM_MCP_FILE).
 */
public record LocalEngine(Sandbox sandbox, LocalExecutor executor, Workspaces workspaces, Optional<CodeTools> codeTools) {

    /** A bad UPSTREAM_MCP_FILE stops the start (ConfigException), as any bad setting. */
    public static LocalEngine create(Config config) {
        return create(config, Languages.load());
    }

    /** The same with the languages table the caller has already read. */
    public static LocalEngine create(Config config, Languages languages) {
        Sandbox sandbox = Sandboxes.create(config);
        Optional<CodeTools> codeTools = CodeTools.of(config);
        LocalExecutor executor = LocalExecutor.create(config, sandbox, languages, codeTools);
        return new LocalEngine(sandbox, executor, Workspaces.configured(config), codeTools);
    }
}
