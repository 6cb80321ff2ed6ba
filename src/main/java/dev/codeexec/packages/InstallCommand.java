package dev.codeexec.packages;

import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * How a set is installed into a store entry, and what was installed: the installer's command line and environment
 * (run in a sandbox whose only way out is the index's host), and afterwards the resolved {@code name → version}
 * read from what the installer left, never from its output.
 *
 * <p>pip: {@code python3 -m pip install --target DIR/site --index-url INDEX --only-binary :all:} (wheels only: no
 * package's build script runs at install time), no cache, no user or site configuration, no version check. npm:
 * {@code npm install --prefix DIR --registry REGISTRY}, with the packages' install scripts (they run in the install's
 * sandbox, inside the same walls as user code: a script that needs what those walls refuse fails the install, and
 * packages that build or fetch what they need at install time work as far as the index allows), no audit, no fund
 * notice, no package-lock, a cache inside the entry's build directory that is removed before sealing.
 *
 * @param argv the command, as the sandbox runs it
 * @param env  its environment (besides the sandbox's proxy variables)
 * @param host the index's host, the only one the install may reach
 */
public record InstallCommand(List<String> argv, Map<String, String> env, String host) {

    private static final JsonMapper JSON = JsonMapper.shared();

    public InstallCommand {
        argv = List.copyOf(argv);
        env = Map.copyOf(env);
    }

    /**
     * The install of {@code set} into {@code dir} (the path as the installer's sandbox sees it).
     *
     * @param index PACKAGE_INDEX_PYTHON (a PEP 503 simple index URL) for pip, PACKAGE_REGISTRY_NPM for npm
     * @throws IllegalArgumentException an index that is not an http(s) URL with a host
     */
    public static InstallCommand of(PackageSet set, String dir, String index) {
        URI uri;
        try {
            uri = URI.create(index);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("not a URL: " + index);
        }
        if (!("https".equals(uri.getScheme()) || "http".equals(uri.getScheme())) || uri.getHost() == null)
            throw new IllegalArgumentException("the package index must be an http(s) URL with a host: " + index);
        String host = uri.getHost().toLowerCase(Locale.ROOT) + (uri.getPort() > 0 ? ":" + uri.getPort() : "");
        List<String> argv = new ArrayList<>();
        Map<String, String> env = new LinkedHashMap<>();
        if (set.ecosystem().equals("pip")) {
            argv.addAll(List.of("/usr/bin/python3", "-m", "pip", "install", "--target", dir + "/site", "--index-url", index,
                    "--only-binary", ":all:", "--no-cache-dir", "--disable-pip-version-check", "--no-input",
                    "--no-warn-script-location", "--progress-bar", "off"));
            // an http:// index is the operator's own choice (a mirror on their network): pip ignores one unless told
            if (uri.getScheme().equals("http")) argv.addAll(List.of("--trusted-host", host));
            argv.add("--");
            env.put("PIP_CONFIG_FILE", "/dev/null");
            env.put("PYTHONNOUSERSITE", "1");
        } else {
            argv.addAll(List.of("npm", "install", "--prefix", dir, "--registry", index, "--no-audit",
                    "--no-fund", "--no-package-lock", "--no-save", "--cache", dir + "/.npm-cache", "--loglevel", "error", "--"));
            env.put("NPM_CONFIG_USERCONFIG", "/dev/null");
            // not /dev/null as well: npm refuses to load one file as both its user and its global config
            env.put("NPM_CONFIG_GLOBALCONFIG", "/nonexistent/npmrc");
            env.put("NPM_CONFIG_UPDATE_NOTIFIER", "false");
        }
        argv.addAll(set.specs());
        return new InstallCommand(argv, env, host);
    }

    /**
     * name → version of what an install left in {@code dir} (host path): pip's {@code site/*.dist-info/METADATA},
     * npm's {@code node_modules/**}{@code /package.json} (scoped packages included, nested copies once each).
     */
    public static Map<String, String> resolved(String ecosystem, Path dir) throws IOException {
        Map<String, String> out = new TreeMap<>();
        if (ecosystem.equals("pip")) {
            Path site = dir.resolve("site");
            if (!Files.isDirectory(site)) return out;
            try (Stream<Path> s = Files.list(site)) {
                for (Path d : s.filter(p -> p.getFileName().toString().endsWith(".dist-info")).toList()) {
                    Path meta = d.resolve("METADATA");
                    if (!Files.isRegularFile(meta)) continue;
                    String name = null, version = null;
                    for (String line : Files.readAllLines(meta)) {
                        if (line.isEmpty()) break; // the headers end at the first empty line
                        if (line.startsWith("Name: ")) name = line.substring(6).strip();
                        else if (line.startsWith("Version: ")) version = line.substring(9).strip();
                    }
                    if (name != null && version != null)
                        out.put(name.toLowerCase(Locale.ROOT).replaceAll("[-_.]+", "-"), version);
                }
            }
            return out;
        }
        Path modules = dir.resolve("node_modules");
        if (!Files.isDirectory(modules)) return out;
        try (Stream<Path> s = Files.walk(modules, 6)) {
            for (Path pkg : s.filter(p -> p.getFileName().toString().equals("package.json")).toList()) {
                Path parent = pkg.getParent();
                Path up = parent.getParent();
                boolean top = up.equals(modules) || (up.getFileName().toString().startsWith("@") && up.getParent().equals(modules));
                if (!top) continue; // a dependency's own copy of another version: the top-level one is what resolves
                JsonNode n = JSON.readTree(Files.readString(pkg));
                if (n.path("name").isString() && n.path("version").isString()) out.put(n.get("name").asString(), n.get("version").asString());
            }
        }
        return out;
    }
}
