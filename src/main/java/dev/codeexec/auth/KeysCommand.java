package dev.codeexec.auth;

import dev.codeexec.config.Ids;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.Workspaces;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Base64;
import java.util.List;
import java.util.Map;

/**
 * {@code java -jar code-exec-mcp.jar keys add TENANT [--admin] [--egress=PATTERN,...|off]}: makes a random key,
 * appends its hash line (with {@code admin} and the tenant's own network allow-list, when given) to
 * API_KEYS_FILE (created 0600 when missing) and prints the key once on stdout. The key itself is stored nowhere,
 * so it cannot be shown again: a lost key is replaced by adding a new one and deleting the old line.
 * Exit codes: 0 done, 2 usage or file error (message on stderr).
 */
public final class KeysCommand {

    /** Marks a key as ours in logs, configs and secret scanners. */
    static final String PREFIX = "cem_";
    private static final String USAGE = "usage: code-exec-mcp keys add TENANT [--admin] [--egress=PATTERN,...|off]   (needs API_KEYS_FILE)";

    private KeysCommand() {
    }

    public static int run(List<String> args, Map<String, String> env, PrintStream out, PrintStream err) {
        if (args.size() < 3 || args.size() > 5 || !args.get(0).equals("keys") || !args.get(1).equals("add")) {
            err.println(USAGE);
            return 2;
        }
        String tenant = args.get(2);
        boolean admin = false;
        String egress = null;
        for (String a : args.subList(3, args.size())) {
            if (a.equals("--admin") && !admin) {
                admin = true;
            } else if (a.startsWith("--egress=") && egress == null) {
                try {
                    egress = EgressPolicy.parse(a.substring("--egress=".length())).toString();
                } catch (IllegalArgumentException e) {
                    err.println("code-exec-mcp: --egress: " + e.getMessage());
                    return 2;
                }
            } else {
                err.println(USAGE);
                return 2;
            }
        }
        try {
            Workspaces.checkName("tenant", tenant);
        } catch (WorkspaceException e) {
            err.println("code-exec-mcp: " + e.getMessage());
            return 2;
        }
        String file = env.getOrDefault("API_KEYS_FILE", "");
        if (file.isBlank()) {
            err.println("code-exec-mcp: set API_KEYS_FILE to the key file to append to");
            err.println(USAGE);
            return 2;
        }
        String key = newKey();
        String line = tenant + " " + ApiKeys.hashHex(key) + (admin ? " admin" : "") + (egress == null ? "" : " egress=" + egress) + "\n";
        try {
            append(Path.of(file), line);
        } catch (IOException e) {
            err.println("code-exec-mcp: cannot write API_KEYS_FILE " + file + ": " + e.getMessage());
            return 2;
        }
        out.println(key);
        out.flush();
        err.println("added a key for tenant '" + tenant + "'" + (admin ? " (admin)" : "")
                + (egress == null ? "" : " (network: " + egress + ")") + " to " + file
                + "; the key above is shown only once");
        return 0;
    }

    static String newKey() {
        return PREFIX + Base64.getUrlEncoder().withoutPadding().encodeToString(Ids.bytes(32));
    }

    /** Appends under an exclusive lock, on a line of its own even when the file does not end with a newline. */
    private static void append(Path file, String line) throws IOException {
        try {
            Files.createFile(file, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        } catch (FileAlreadyExistsException exists) {
            // append to it
        }
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            ch.lock(); // released when the channel closes
            long size = ch.size();
            String text = line;
            if (size > 0) {
                ByteBuffer last = ByteBuffer.allocate(1);
                ch.read(last, size - 1);
                if (last.get(0) != '\n') text = "\n" + line;
            }
            ByteBuffer buf = ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8));
            long pos = size;
            while (buf.hasRemaining()) pos += ch.write(buf, pos);
            ch.force(true);
        }
    }
}
