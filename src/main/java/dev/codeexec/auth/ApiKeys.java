package dev.codeexec.auth;

import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigException;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.Workspaces;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.function.LongSupplier;

/**
 * The keys the server accepts and whom each one authenticates: the single {@code API_KEY} (tenant "default",
 * admin) and the lines of {@code API_KEYS_FILE}, {@code TENANT SHA256HEX_OF_KEY [admin] [egress=PATTERN,...]}, so
 * the file holds hashes, never keys. {@code egress=} gives the tenant its own network allow-list in place of the
 * server's EGRESS_ALLOW ({@code egress=off}: none); it matters only with EGRESS=on.
 *
 * <p>The file is re-read when it changes, without a restart: a request looks at its modification time, size and
 * inode at most once per {@link #CHECK_INTERVAL_NANOS} and re-parses it when any differs. A broken file at start
 * stops the start with file:line; a broken file later is logged and the last good set stays in force, so a
 * half-saved edit never locks everyone out (or lets anyone in). Readers see one immutable snapshot.
 *
 * <p>Lookup compares the SHA-256 of the presented key against every entry with {@link MessageDigest#isEqual},
 * without stopping at a match, so timing tells neither whether nor where a key matched.
 */
public final class ApiKeys {

    private static final Logger LOG = LoggerFactory.getLogger(ApiKeys.class);
    static final long CHECK_INTERVAL_NANOS = 1_000_000_000L;
    private static final HexFormat HEX = HexFormat.of();

    private record Entry(byte[] hash, Principal principal) {
    }

    /** What was read, and the file state it was read from (null for no file). */
    private record Snapshot(List<Entry> entries, Object fileState) {
    }

    private final Entry single;
    private final Path file;
    private final LongSupplier clock;
    private volatile Snapshot snapshot;
    private volatile long nextCheck;

    private ApiKeys(String apiKey, Path file, LongSupplier clock) {
        this.single = apiKey.isEmpty() ? null : new Entry(sha256(apiKey), new Principal(Principal.DEFAULT.tenant(), true));
        this.file = file;
        this.clock = clock;
        if (file != null) {
            Object state = state(file);
            if (state == null) throw new ConfigException("API_KEYS_FILE " + file + " cannot be read (missing?)");
            this.snapshot = new Snapshot(parse(file), state);
        } else {
            this.snapshot = new Snapshot(List.of(), null);
        }
        this.nextCheck = clock.getAsLong() + CHECK_INTERVAL_NANOS;
    }

    /** The keys of API_KEY and API_KEYS_FILE; a bad file throws ConfigException naming file:line. */
    public static ApiKeys load(Config config) {
        String f = config.get(Config.API_KEYS_FILE);
        return new ApiKeys(config.apiKey(), f.isEmpty() ? null : Path.of(f), System::nanoTime);
    }

    static ApiKeys of(String apiKey, Path file, LongSupplier clock) {
        return new ApiKeys(apiKey, file, clock);
    }

    /** Whether requests must present a key (API_KEY or API_KEYS_FILE is set, even if the file has no line yet). */
    public boolean required() {
        return single != null || file != null;
    }

    /** Whom the key authenticates; empty for an unknown key. */
    public Optional<Principal> authenticate(String presentedKey) {
        Objects.requireNonNull(presentedKey);
        byte[] hash = sha256(presentedKey);
        Principal found = null;
        if (single != null && MessageDigest.isEqual(single.hash, hash)) found = single.principal;
        for (Entry e : current().entries) {
            boolean match = MessageDigest.isEqual(e.hash, hash);
            if (match && found == null) found = e.principal;
        }
        return Optional.ofNullable(found);
    }

    private Snapshot current() {
        if (file != null && clock.getAsLong() - nextCheck >= 0) reloadIfChanged();
        return snapshot;
    }

    /** One thread re-reads; the others keep using the current snapshot meanwhile. */
    private synchronized void reloadIfChanged() {
        long now = clock.getAsLong();
        if (now - nextCheck < 0) return;
        nextCheck = now + CHECK_INTERVAL_NANOS;
        Object state = state(file);
        Snapshot old = snapshot;
        if (state == null) {
            if (old.fileState != null) LOG.error("API_KEYS_FILE {} cannot be read: keeping the {} keys read before",
                    file, old.entries.size());
            snapshot = new Snapshot(old.entries, null);
            return;
        }
        if (state.equals(old.fileState)) return;
        try {
            List<Entry> entries = parse(file);
            snapshot = new Snapshot(entries, state);
            LOG.info("API_KEYS_FILE {} re-read: {} keys", file, entries.size());
        } catch (ConfigException e) {
            // Remember the state so the same broken content is reported once, not on every check.
            snapshot = new Snapshot(old.entries, state);
            LOG.error("API_KEYS_FILE not re-read, keeping the {} keys read before: {}", old.entries.size(), e.getMessage());
        }
    }

    /** Modification time, size and inode: an edit in place or an atomic replace changes at least one. */
    private static Object state(Path file) {
        try {
            BasicFileAttributes a = Files.readAttributes(file, BasicFileAttributes.class);
            return List.of(a.lastModifiedTime(), a.size(), String.valueOf(a.fileKey()));
        } catch (IOException e) {
            return null;
        }
    }

    private static List<Entry> parse(Path file) {
        List<String> lines;
        try {
            lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new ConfigException("API_KEYS_FILE " + file + " cannot be read: " + e.getMessage());
        }
        List<Entry> out = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            String where = file + ":" + (i + 1);
            String line = lines.get(i);
            int hashMark = line.indexOf('#');
            if (hashMark >= 0) line = line.substring(0, hashMark);
            line = line.strip();
            if (line.isEmpty()) continue;
            String[] f = line.split("\\s+");
            if (f.length < 2 || f.length > 4)
                throw new ConfigException(where + ": expected 'TENANT SHA256HEX_OF_KEY [admin] [egress=PATTERN,...]'");
            try {
                Workspaces.checkName("tenant", f[0]);
            } catch (WorkspaceException e) {
                throw new ConfigException(where + ": " + e.getMessage());
            }
            if (!f[1].matches("[0-9a-fA-F]{64}"))
                throw new ConfigException(where + ": the key hash must be 64 hex digits (SHA-256 of the key)");
            boolean admin = false;
            Optional<EgressPolicy> egress = Optional.empty();
            for (int k = 2; k < f.length; k++) {
                if (f[k].equals("admin") && !admin) {
                    admin = true;
                } else if (f[k].startsWith("egress=") && egress.isEmpty()) {
                    try {
                        egress = Optional.of(EgressPolicy.parse(f[k].substring("egress=".length())));
                    } catch (IllegalArgumentException e) {
                        throw new ConfigException(where + ": egress: " + e.getMessage());
                    }
                } else {
                    throw new ConfigException(where + ": after the hash only 'admin' and 'egress=PATTERN,...' may follow, once each");
                }
            }
            byte[] hash = HEX.parseHex(f[1].toLowerCase());
            for (Entry e : out) {
                if (MessageDigest.isEqual(e.hash, hash))
                    throw new ConfigException(where + ": the same key hash is listed twice");
            }
            out.add(new Entry(hash, new Principal(f[0], admin, egress)));
        }
        return List.copyOf(out);
    }

    static byte[] sha256(String s) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The hex SHA-256 of a key, as written in API_KEYS_FILE. */
    public static String hashHex(String key) {
        return HEX.formatHex(sha256(key));
    }
}
