package dev.codeexec.sandbox;

import dev.codeexec.config.Config;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

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

    /**
     * Creates DATA_DIR as root-owned mode 0711: the sandbox uid may traverse it to reach a subdirectory it is
     * meant to see (e.g. a read-only Go build cache bound by bwrap, which opens binds as that uid), but cannot
     * list it or read root-only files in it (the seccomp program is 0600 and opened by the root-side launcher).
     */
    static Path prepareDataDir(Path dataDir) throws IOException {
        if (!Files.isDirectory(dataDir)) {
            Files.createDirectories(dataDir);
            Files.setPosixFilePermissions(dataDir, PosixFilePermissions.fromString("rwx--x--x"));
        }
        return dataDir;
    }
}
