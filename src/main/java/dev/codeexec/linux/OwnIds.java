package dev.codeexec.linux;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The ids this process runs with, from /proc/self/status: real uid and gid, and whether the effective uid is root.
 * Unreadable: uid and gid -1 and not root, so nothing is started under a guessed identity.
 */
public record OwnIds(int uid, int gid, boolean root) {

    public static OwnIds read() {
        int uid = -1, gid = -1;
        boolean root = false;
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                String[] f = line.split("\\s+");
                if (line.startsWith("Uid:")) {
                    uid = Integer.parseInt(f[1]);
                    root = f[2].equals("0");
                }
                if (line.startsWith("Gid:")) gid = Integer.parseInt(f[1]);
            }
        } catch (IOException | RuntimeException e) {
            return new OwnIds(-1, -1, false);
        }
        return new OwnIds(uid, gid, root);
    }
}
