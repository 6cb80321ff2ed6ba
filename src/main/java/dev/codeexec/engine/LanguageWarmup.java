package dev.codeexec.engine;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Runs a language's {@link Language.Warmup} once at executor start, in the background and outside the sandbox
 * (our own fixed program, not user code), and installs what it made where runs read it read-only:
 * the V8 code cache of the {@code typescript} package (a TypeScript hello world 250 → 105 ms here) and the JVM
 * AOT cache of the Java source launcher (about 350 → 260 ms). The output is written to a temporary file and moved
 * into place atomically, so a run never maps a half-written cache. Runs that start before it is in place, or
 * after the runtime was upgraded (both caches are validated by their runtime and rejected when stale), work
 * unchanged, only slower.
 */
final class LanguageWarmup {

    private static final Logger log = LoggerFactory.getLogger(LanguageWarmup.class);

    private LanguageWarmup() {
    }

    /**
     * Returns true when the warm-up's output is in place. It works in a temporary directory under
     * {@code scratchDir}; {@code live} holds its process while it runs, so that a server shutdown can stop it.
     */
    static boolean run(Language lang, Map<String, String> placeholders, Path scratchDir, StartupProcesses live) {
        Language.Warmup w = lang.warmup().orElseThrow();
        Path work = null;
        try {
            Path produces = Path.of(Placeholders.fill(w.produces(), placeholders));
            Files.createDirectories(scratchDir);
            work = Files.createTempDirectory(scratchDir, "warmup-" + lang.id());
            Path program = work.resolve("Main." + lang.fileExtension());
            Files.writeString(program, w.program());
            Path output = produces.resolveSibling("." + produces.getFileName() + ".tmp");
            Files.deleteIfExists(output);
            Map<String, String> ph = new HashMap<>(placeholders);
            ph.put("file", program.toString());
            ph.put("dir", work.toString());
            ph.put("name", "Main");
            ph.put("output", output.toString());

            Map<String, String> env = new LinkedHashMap<>(Language.baseEnvironment(work.toString()));
            lang.env().forEach((k, v) -> env.put(k, Placeholders.fill(v, ph)));
            w.env().forEach((k, v) -> env.put(k, Placeholders.fill(v, ph)));
            ProcessBuilder pb = new ProcessBuilder(Placeholders.fill(w.argv(), ph)).directory(work.toFile())
                    .redirectErrorStream(true).redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
            pb.environment().clear();
            pb.environment().putAll(env);
            long t0 = System.nanoTime();
            Process p = pb.start();
            live.add(p);
            String out;
            try {
                out = new String(p.getInputStream().readAllBytes());
                if (!p.waitFor(2, TimeUnit.MINUTES)) p.destroyForcibly();
                p.waitFor();
            } finally {
                live.remove(p);
            }
            if (p.exitValue() != 0 || !Files.isRegularFile(output)) {
                log.info("{} warm-up made nothing (exit {}): {}", lang.id(), p.exitValue(), out.strip());
                Files.deleteIfExists(output);
                return false;
            }
            Files.setPosixFilePermissions(output, PosixFilePermissions.fromString("rw-r--r--"));
            Files.move(output, produces, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            log.info("{} warm-up done in {} ms: {} ({} KB)", lang.id(), (System.nanoTime() - t0) / 1_000_000,
                    produces, Files.size(produces) / 1024);
            return true;
        } catch (IOException e) {
            log.info("{} warm-up failed: {}", lang.id(), e.toString());
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        } finally {
            if (work != null) GoCacheWarmer.deleteTree(work);
        }
    }
}
