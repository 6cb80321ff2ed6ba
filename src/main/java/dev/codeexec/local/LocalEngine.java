package dev.codeexec.local;

import dev.codeexec.lang.Languages;
import dev.codeexec.codemode.CodeTools;
import dev.codeexec.config.Config;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.Sandboxes;
import dev.codeexec.workspace.Workspaces;

import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * The engine that runs code on this machine, assembled the same way for the server and for a worker: the
 * configured sandbox, the local executor (warm pool, sessions), the workspaces under WORKSPACE_ROOT and code mode's
 * upstreams (UPSTREAM_MCP_FILE).
 */
public record LocalEngine(Sandbox sandbox, LocalExecutor executor, Workspaces workspaces, Optional<CodeTools> codeTools) {

    /** A bad UPSTREAM_MCP_FILE stops the start (ConfigException), as any bad setting. */
    public static LocalEngine create(Config config) {
        CompletableFuture<Sandbox> sandbox = startSandbox(config);
        return create(config, sandbox, Languages.load());
    }

    /**
     * Starts setting up the configured sandbox ({@link Sandboxes#create}) on a thread of its own, so that the
     * start reads the languages table (and whatever else needs no sandbox) meanwhile: the two are independent, and
     * the sandbox's set-up is mostly waiting (the /etc snapshot's file system writes, bwrap's version, mounts).
     */
    public static CompletableFuture<Sandbox> startSandbox(Config config) {
        CompletableFuture<Sandbox> sandbox = new CompletableFuture<>();
        Thread.ofPlatform().daemon().name("sandbox-setup").start(() -> {
            try {
                sandbox.complete(Sandboxes.create(config));
            } catch (Throwable t) {
                sandbox.completeExceptionally(t);
            }
        });
        return sandbox;
    }

    /** The engine on a sandbox from {@link #startSandbox} and the languages table the caller has read. */
    public static LocalEngine create(Config config, CompletableFuture<Sandbox> sandboxSetUp, Languages languages) {
        Sandbox sandbox;
        try {
            sandbox = sandboxSetUp.join();
        } catch (CompletionException e) {
            // the set-up's own failure (a ConfigException, say), as if it had been made on this thread
            if (e.getCause() instanceof RuntimeException r) throw r;
            if (e.getCause() instanceof Error err) throw err;
            throw e;
        }
        Optional<CodeTools> codeTools = CodeTools.of(config);
        LocalExecutor executor = LocalExecutor.create(config, sandbox, languages, codeTools);
        return new LocalEngine(sandbox, executor, Workspaces.configured(config), codeTools);
    }
}
