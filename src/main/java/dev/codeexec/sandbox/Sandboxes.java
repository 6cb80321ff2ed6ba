package dev.codeexec.sandbox;

import dev.codeexec.config.Config;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
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
     * Creates DATA_DIR as mode 0711, or adds the search bits to an existing one: the sandbox uid must traverse
     * it to reach what bwrap binds from it (bwrap opens bind sources as that uid: the /etc snapshot, a read-only
     * Go build cache), but can neither list it nor read root-only files in it (the seccomp program is 0600 and
     * opened by the root-side launcher). Its parent directories must be searchable by that uid too.
     */
    static Path prepareDataDir(Path dataDir) throws IOException {
        if (!Files.isDirectory(dataDir)) {
            Files.createDirectories(dataDir);
            Files.setPosixFilePermissions(dataDir, PosixFilePermissions.fromString("rwx--x--x"));
        }
        var perms = Files.getPosixFilePermissions(dataDir);
        if (perms.add(PosixFilePermission.GROUP_EXECUTE) | perms.add(PosixFilePermission.OTHERS_EXECUTE))
            Files.setPosixFilePermissions(dataDir, perms);
        return dataDir;
    }
}
