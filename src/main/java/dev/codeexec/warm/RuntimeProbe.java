package dev.codeexec.warm;

import dev.codeexec.lang.Language;
import dev.codeexec.lang.Languages;
import dev.codeexec.lang.Placeholders;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;

/**
 * Finds out once, at start and in the background, which languages and tools exist here and their versions, so
 * runtime_info never spawns a process and no run waits for it. Version commands run outside the sandbox: they
 * are our own fixed commands, not user code.
 */
public final class RuntimeProbe {

    /** What one probe found. */
    public record Found(boolean available, String version) {
        public Map<String, Object> toMap() {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("available", available);
            if (version != null) m.put("version", version);
            return m;
        }
    }

    private final CompletableFuture<Map<String, Found>> languages;
    private final CompletableFuture<Map<String, Found>> tools;

    public RuntimeProbe(Languages table, Map<String, String> placeholders, Map<String, String> baseEnv,
            ThreadFactory threads) {
        var pool = Executors.newThreadPerTaskExecutor(threads);
        Map<String, CompletableFuture<Found>> langs = new LinkedHashMap<>();
        for (Language l : table.all()) {
            langs.put(l.id(), CompletableFuture.supplyAsync(() -> probeLanguage(l, placeholders, baseEnv), pool));
        }
        Map<String, CompletableFuture<Found>> tls = new LinkedHashMap<>();
        table.tools().forEach((name, argv) ->
                tls.put(name, CompletableFuture.supplyAsync(() -> probeTool(argv, baseEnv), pool)));
        languages = collect(langs);
        tools = collect(tls);
        CompletableFuture.allOf(languages, tools).whenComplete((v, e) -> pool.shutdown());
    }

    private static CompletableFuture<Map<String, Found>> collect(Map<String, CompletableFuture<Found>> parts) {
        return CompletableFuture.allOf(parts.values().toArray(CompletableFuture[]::new)).thenApply(v -> {
            Map<String, Found> m = new LinkedHashMap<>();
            parts.forEach((k, f) -> m.put(k, f.join()));
            return m;
        });
    }

    public CompletableFuture<Map<String, Found>> languagesFuture() {
        return languages;
    }

    public CompletableFuture<Map<String, Found>> toolsFuture() {
        return tools;
    }

    private static Found probeLanguage(Language l, Map<String, String> placeholders, Map<String, String> baseEnv) {
        List<String> run = Placeholders.fill(l.run(), placeholders);
        Optional<List<String>> compile = l.compile().map(c -> Placeholders.fill(c, placeholders));
        // A compiled language's run binary is produced by its compile step: only the compiler must exist.
        String binary = compile.map(List::getFirst).orElse(run.getFirst());
        if (!Files.isExecutable(Path.of(binary))) return new Found(false, null);
        if (l.version().isEmpty()) return new Found(true, null);
        Map<String, String> env = new LinkedHashMap<>(baseEnv);
        l.env().forEach((k, v) -> env.put(k, Placeholders.fill(v, placeholders)));
        Optional<String> v = firstLine(Placeholders.fill(l.version(), placeholders), env);
        return new Found(v.isPresent(), v.orElse(null));
    }

    private static Found probeTool(List<String> argv, Map<String, String> baseEnv) {
        Optional<Path> exe = which(argv.getFirst());
        if (exe.isEmpty()) return new Found(false, null);
        return new Found(true, firstLine(argv, baseEnv).orElse(null));
    }

    static Optional<Path> which(String name) {
        if (name.startsWith("/")) return Files.isExecutable(Path.of(name)) ? Optional.of(Path.of(name)) : Optional.empty();
        for (String dir : Language.BASE_PATH.split(":")) {
            Path p = Path.of(dir, name);
            if (Files.isExecutable(p)) return Optional.of(p);
        }
        return Optional.empty();
    }

    /** First meaningful output line of a command that exits 0 within 15 s (copyright banners skipped). */
    static Optional<String> firstLine(List<String> argv, Map<String, String> env) {
        try {
            ProcessBuilder pb = new ProcessBuilder(argv).redirectErrorStream(true)
                    .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                    .directory(new java.io.File("/tmp"));
            pb.environment().clear();
            pb.environment().putAll(env);
            Process p = pb.start();
            byte[] out = p.getInputStream().readNBytes(64 * 1024);
            if (!p.waitFor(15, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return Optional.empty();
            }
            if (p.exitValue() != 0) return Optional.empty();
            return new String(out, StandardCharsets.UTF_8).lines().map(String::strip)
                    .filter(s -> !s.isEmpty() && !s.startsWith("Copyright"))
                    .findFirst();
        } catch (IOException e) {
            return Optional.empty();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Optional.empty();
        }
    }
}
