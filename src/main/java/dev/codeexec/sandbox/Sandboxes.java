package dev.codeexec.sandbox;

import dev.codeexec.config.Config;

import java.nio.file.Path;

/** Creates the configured {@link Sandbox}. */
public final class Sandboxes {

    private Sandboxes() {
    }

    /**
     * The sandbox named by {@link Config#SANDBOX}. Construction runs a trivial program in it; check
     * {@link Sandbox#unavailableReason()} before serving and refuse to execute code when it is present.
     */
    public static Sandbox create(Config config) {
        int uid = config.get(Config.SANDBOX_UID);
        int gid = config.get(Config.SANDBOX_GID);
        Path data = config.dataDir();
        return switch (config.get(Config.SANDBOX)) {
            case "bwrap" -> new BwrapSandbox(uid, gid, data);
            case "gvisor" -> new GvisorSandbox(uid, gid, data);
            case "none" -> new NoSandbox(uid, gid);
            default -> throw new IllegalArgumentException("unknown sandbox " + config.get(Config.SANDBOX));
        };
    }
}
