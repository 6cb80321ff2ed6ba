package dev.codeexec.engine;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Makes the V8 code cache of the {@code typescript} package that the TypeScript loader reads
 * ({@code <runtimeDir>/typescript.v8cache}): about 100 ms less per TypeScript run on this machine. Made at each
 * executor start, in the background, by running the loader once outside the sandbox on a fixed program of ours
 * with {@code CODE_EXEC_WRITE_TS_CACHE=1}; inside the sandbox the file is read-only. Without it (still being
 * made, or typescript upgraded since) TypeScript runs work, only slower.
 */
final class TypeScriptCache {

    private static final Logger log = LoggerFactory.getLogger(TypeScriptCache.class);
    static final String FILE = "typescript.v8cache";

    private TypeScriptCache() {
    }

    static void build(Language ts, Map<String, String> placeholders, Path runtimeDir) {
        Path work = null;
        try {
            work = Files.createTempDirectory("ts-cache");
            Path program = work.resolve("warm.ts");
            Files.writeString(program, "const greeting: string = 'warm';\nconsole.log(greeting);\n");
            Map<String, String> ph = new java.util.HashMap<>(placeholders);
            ph.put("file", program.toString());
            ph.put("dir", work.toString());
            ProcessBuilder pb = new ProcessBuilder(Placeholders.fill(ts.run(), ph)).directory(work.toFile())
                    .redirectErrorStream(true);
            pb.environment().clear();
            pb.environment().putAll(LocalExecutor.baseEnvironment(work.toString()));
            ts.env().forEach((k, v) -> pb.environment().put(k, Placeholders.fill(v, ph)));
            pb.environment().put("CODE_EXEC_WRITE_TS_CACHE", "1");
            Process p = pb.start();
            String out = new String(p.getInputStream().readAllBytes());
            if (!p.waitFor(60, TimeUnit.SECONDS)) p.destroyForcibly();
            Path cache = runtimeDir.resolve(FILE);
            if (p.exitValue() == 0 && Files.exists(cache)) {
                Files.setPosixFilePermissions(cache, PosixFilePermissions.fromString("rw-r--r--"));
                log.info("TypeScript code cache ready ({} KB)", Files.size(cache) / 1024);
            } else {
                log.info("TypeScript code cache not made (exit {}): {}", p.exitValue(), out.strip());
            }
        } catch (IOException e) {
            log.info("TypeScript code cache not made: {}", e.toString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            if (work != null) GoCacheWarmer.deleteTree(work);
        }
    }
}
