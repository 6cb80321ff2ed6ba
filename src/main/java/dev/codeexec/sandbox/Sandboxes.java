package dev.codeexec.sandbox;

import dev.codeexec.config.Config;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

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
            case "bwrap" -> new BwrapSandbox(uid, gid, data, Cgroups.detect(), true,
                    uidPool(config.get(Config.SANDBOX_UID_RANGE), readUidMap()));
            case "gvisor" -> new GvisorSandbox(uid, gid, data);
            case "none" -> new NoSandbox(uid, gid);
            default -> throw new IllegalArgumentException("unknown sandbox " + config.get(Config.SANDBOX));
        };
    }

    /** The uids of the "auto" range where this server sees every uid (the initial user namespace). */
    static final int AUTO_FIRST = 2_000_000_000;
    static final int AUTO_SIZE = 65536;
    /** In a user namespace that maps only some uids (a container, a user-namespaced pod): this many below 65534. */
    static final int AUTO_SMALL_SIZE = 4096;

    /**
     * SANDBOX_UID_RANGE as a pool: its own range, or for {@code auto} the range this server can use (see
     * {@link Config#SANDBOX_UID_RANGE}); null for {@code off} or when no range fits.
     *
     * @param uidMap the lines of /proc/self/uid_map ("inside outside count"); uids inside that a line covers exist
     */
    static UidPool uidPool(String range, List<String> uidMap) {
        if (range.equals("off")) return null;
        if (!range.equals("auto")) {
            String[] p = range.split("-");
            long first = Long.parseLong(p[0]), last = Long.parseLong(p[1]);
            return new UidPool((int) first, (int) (last - first + 1));
        }
        if (mapped(uidMap, AUTO_FIRST, AUTO_SIZE)) return new UidPool(AUTO_FIRST, AUTO_SIZE);
        int first = 65534 - AUTO_SMALL_SIZE;
        return mapped(uidMap, first, AUTO_SMALL_SIZE) ? new UidPool(first, AUTO_SMALL_SIZE) : null;
    }

    private static boolean mapped(List<String> uidMap, long first, long count) {
        for (String line : uidMap) {
            String[] f = line.trim().split("\\s+");
            if (f.length != 3) continue;
            try {
                long inside = Long.parseLong(f[0]), n = Long.parseLong(f[2]);
                if (first >= inside && first + count <= inside + n) return true;
            } catch (NumberFormatException e) {
                // not a mapping line
            }
        }
        return false;
    }

    static List<String> readUidMap() {
        try {
            return Files.readAllLines(Path.of("/proc/self/uid_map"));
        } catch (IOException e) {
            return List.of();
        }
    }
}
