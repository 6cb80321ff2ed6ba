package dev.codeexec.warm;

import dev.codeexec.lang.Language;
import dev.codeexec.config.DataDir;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Prepares what lets every Python runner start as {@code python3 -S} (docs/interpreter-protocol.md, "Python
 * start-up"): once, at executor start and outside the sandbox (our own fixed program, run as the server), it runs
 * the interpreter's real {@code site.main()} and writes the directories it added to {@code sys.path} to
 * {@code runtime/python-site}, which {@code codeexec_site.py} reads in every run; and it compiles the runner
 * modules to {@code runtime/__pycache__} (checked-hash pycs: a changed source is never run from a stale pyc), which
 * the sandbox uid could not write itself.
 *
 * <p>Servers sharing DATA_DIR start together: the step runs under a lock (the pycs' own temporary names are
 * not guaranteed unique across processes), and the measure is written to a name of this server's own and renamed
 * into place, so a run reads the old file or the new one.
 *
 * <p>The measure is taken with {@code -I} (no PYTHONPATH, no user site): the user site is looked up per run, and
 * PYTHONPATH is the run's own. When it fails the file is removed, and the runners fall back to the real site
 * (correct, only slower); the reason is logged.
 */
public final class PythonSite {

    private static final Logger log = LoggerFactory.getLogger(PythonSite.class);

    /** Modules the runners import from the runtime directory: compiled once here. */
    static final List<String> MODULES = List.of("codeexec_site.py", "codeexec_run.py", "codeexec_main.py",
            "codeexec_mpl.py");

    private static final String PROGRAM = String.join("\n",
            "import sys, os, py_compile",
            "runtime, out = sys.argv[1], sys.argv[2]",
            "for name in sys.argv[3:]:",
            "    py_compile.compile(os.path.join(runtime, name), doraise=True,",
            "                       invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)",
            "before = list(sys.path)",
            "import site",
            "site.main()",
            "added = [p for p in sys.path if p not in before and '\\n' not in p]",
            "with open(out, 'w', encoding='utf-8', errors='surrogateescape') as f:",
            "    f.write(''.join(p + '\\n' for p in added))",
            "");

    private PythonSite() {
    }

    /** Returns true when {@code runtime/python-site} is in place; false (and no file) otherwise. */
    public static boolean prepare(String python, DataDir data) {
        try {
            return data.locked("python-site", () -> measure(python, data.runtime(), data.pythonSite()));
        } catch (IOException e) {
            log.warn("python start-up not prepared: {}; Python runs use the full site module", e.toString());
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    private static boolean measure(String python, Path runtimeDir, Path site) throws IOException, InterruptedException {
        Path measured = DataDir.tempFor(site);
        List<String> cmd = new ArrayList<>(List.of(python, "-I", "-S", "-c", PROGRAM, runtimeDir.toString(),
                measured.toString()));
        cmd.addAll(MODULES);
        try {
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true)
                    .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null"))).directory(runtimeDir.toFile());
            pb.environment().clear();
            pb.environment().putAll(Map.of("PATH", Language.BASE_PATH, "LANG", "C.UTF-8"));
            Process p = pb.start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
            if (!p.waitFor(60, TimeUnit.SECONDS)) p.destroyForcibly();
            p.waitFor();
            if (p.exitValue() != 0 || !Files.isRegularFile(measured)) {
                log.warn("python start-up not prepared (exit {}): {}; Python runs use the full site module",
                        p.exitValue(), out);
                Files.deleteIfExists(site);
                return false;
            }
            DataDir.publish(measured, site, "rw-r--r--");
            return true;
        } finally {
            Files.deleteIfExists(measured);
        }
    }
}
