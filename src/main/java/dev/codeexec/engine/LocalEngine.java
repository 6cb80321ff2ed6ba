package dev.codeexec.engine;

import dev.codeexec.config.Config;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.Sandboxes;
import dev.codeexec.workspace.Workspaces;

/**
 * The engine that runs code on this machine, assembled the same way for the server and for a worker: the
 * configured sandbox, the local executor (warm pool, sessions) and the workspaces under WORKSPACE_ROOT.
 */
public record LocalEngine(Sandbox sandbox, LocalExecutor executor, Workspaces workspaces) {

    public static LocalEngine create(Config config) {
        Sandbox sandbox = Sandboxes.create(config);
        LocalExecutor executor = LocalExecutor.create(config, sandbox);
        return new LocalEngine(sandbox, executor, Workspaces.configured(config));
    }
}
