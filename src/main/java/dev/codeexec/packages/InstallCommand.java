package dev.codeexec.packages;

import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.WorkspaceFs;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

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
 * notice, no package-lock, no user configuration but the machine's global one (as runs read it), a cache inside
 * the entry's build directory that is removed before sealing.
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
     * @param index            PACKAGE_INDEX_PYTHON (a PEP 503 simple index URL) for pip, PACKAGE_REGISTRY_NPM for npm
     * @param npmGlobalConfig  the machine's global npmrc where a run's npm finds it ({@code npm config get
     *                         globalconfig}): npm would otherwise look for it below {@code --prefix}
     * @throws IllegalArgumentException an index that is not an http(s) URL with a host
     */
    public static InstallCommand of(PackageSet set, String dir, String index, Optional<String> npmGlobalConfig) {
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
            // --loglevel http: npm names each failed fetch attempt at once (a certificate error among them), where
            // "error" says nothing until its retries are over, about 70 s later
            argv.addAll(List.of("npm", "install", "--prefix", dir, "--registry", index, "--no-audit",
                    "--no-fund", "--no-package-lock", "--no-save", "--cache", dir + "/.npm-cache", "--loglevel", "http", "--"));
            // no user config; the machine's global one (npm's prefix/etc/npmrc, e.g. a `cafile` for a TLS-inspecting
            // proxy) is read as a run's npm reads it, so an install trusts what the runs' npm trusts
            env.put("NPM_CONFIG_USERCONFIG", "/dev/null");
            npmGlobalConfig.ifPresent(g -> env.put("NPM_CONFIG_GLOBALCONFIG", g));
            env.put("NPM_CONFIG_UPDATE_NOTIFIER", "false");
        }
        argv.addAll(set.specs());
        return new InstallCommand(argv, env, host);
    }

    /** The most bytes of one manifest ({@code package.json}, {@code METADATA}) read from what an install left. */
    static final int MAX_MANIFEST_BYTES = 1 << 20;
    /** What npm itself puts among the packages of {@code node_modules} besides package directories. */
    private static final java.util.Set<String> NPM_OWN = java.util.Set.of(".bin", ".package-lock.json");

    /**
     * Checks that an install left only what its installer makes, once the caches are gone: pip's {@code site/}, or
     * npm's {@code node_modules/} holding package directories ({@code name/}, {@code @scope/name/}), {@code .bin/}
     * and {@code .package-lock.json}. Anything else (an install script's file beside {@code node_modules}, a stray
     * file or hidden name among the packages, a link where a package belongs) fails the install. Nothing is
     * followed or opened: {@code fs} refuses links.
     *
     * @throws PackageStore.InstallFailed naming the first entry that does not belong
     */
    public static void checkLayout(String ecosystem, WorkspaceFs fs) throws PackageStore.InstallFailed {
        String top = ecosystem.equals("pip") ? "site" : "node_modules";
        for (WorkspaceFs.Entry e : fs.list(RelPath.ROOT, PackageStore.MAX_ENTRIES))
            if (!(e.name().equals(top) && e.isDirectory())) throw stray(e);
        if (ecosystem.equals("pip") || !exists(fs, RelPath.parse(top))) return;
        for (WorkspaceFs.Entry e : fs.list(RelPath.parse(top), PackageStore.MAX_ENTRIES)) {
            String n = e.name();
            if (NPM_OWN.contains(n)) {
                if (e.type().equals(n.equals(".bin") ? "directory" : "file")) continue;
                throw stray(e);
            }
            if (n.startsWith(".") || !e.isDirectory()) throw stray(e);
            if (!n.startsWith("@")) continue;
            for (WorkspaceFs.Entry p : fs.list(e.path(), PackageStore.MAX_ENTRIES))
                if (p.name().startsWith(".") || !p.isDirectory()) throw stray(p);
        }
    }

    private static PackageStore.InstallFailed stray(WorkspaceFs.Entry e) {
        return new PackageStore.InstallFailed("the install left " + (e.type().equals("file") ? "a file" : "a " + e.type())
                + " at '" + e.path() + "', which is not part of an installed package (an install script may write "
                + "only inside the packages it installs)");
    }

    private static boolean exists(WorkspaceFs fs, RelPath p) {
        try {
            fs.stat(p);
            return true;
        } catch (WorkspaceException e) {
            if (e.kind() == WorkspaceException.Kind.NOT_FOUND) return false;
            throw e;
        }
    }

    /**
     * name → version of what an install left (read through {@code fs}: no link followed, only regular files opened,
     * and none past {@link #MAX_MANIFEST_BYTES}): pip's {@code site/*.dist-info/METADATA}, npm's top-level packages'
     * {@code node_modules/[@scope/]name/package.json} (a dependency's own nested copy of another version is not what
     * resolves).
     *
     * @throws PackageStore.InstallFailed a manifest that is not a regular file, too large or not readable as one
     */
    public static Map<String, String> resolved(String ecosystem, WorkspaceFs fs) throws PackageStore.InstallFailed {
        Map<String, String> out = new TreeMap<>();
        if (ecosystem.equals("pip")) {
            RelPath site = RelPath.parse("site");
            if (!exists(fs, site)) return out;
            for (WorkspaceFs.Entry d : fs.list(site, PackageStore.MAX_ENTRIES)) {
                if (!d.isDirectory() || !d.name().endsWith(".dist-info")) continue;
                RelPath meta = d.path().child("METADATA");
                if (!exists(fs, meta)) continue;
                String name = null, version = null;
                for (String line : read(fs, meta).lines().toList()) {
                    if (line.isEmpty()) break; // the headers end at the first empty line
                    if (line.startsWith("Name: ")) name = line.substring(6).strip();
                    else if (line.startsWith("Version: ")) version = line.substring(9).strip();
                }
                if (name != null && version != null)
                    out.put(name.toLowerCase(Locale.ROOT).replaceAll("[-_.]+", "-"), version);
            }
            return out;
        }
        RelPath modules = RelPath.parse("node_modules");
        if (!exists(fs, modules)) return out;
        List<RelPath> packages = new ArrayList<>();
        for (WorkspaceFs.Entry e : fs.list(modules, PackageStore.MAX_ENTRIES)) {
            if (!e.isDirectory() || e.name().startsWith(".")) continue;
            if (!e.name().startsWith("@")) packages.add(e.path());
            else for (WorkspaceFs.Entry p : fs.list(e.path(), PackageStore.MAX_ENTRIES)) if (p.isDirectory()) packages.add(p.path());
        }
        for (RelPath pkg : packages) {
            RelPath manifest = pkg.child("package.json");
            if (!exists(fs, manifest)) continue;
            JsonNode n;
            try {
                n = JSON.readTree(read(fs, manifest));
            } catch (JacksonException e) {
                throw new PackageStore.InstallFailed("the install left '" + manifest + "', which is not valid JSON");
            }
            if (n.path("name").isString() && n.path("version").isString()) out.put(n.get("name").asString(), n.get("version").asString());
        }
        return out;
    }

    /** A small regular file's text, through {@code fs}; anything else refuses the install. */
    private static String read(WorkspaceFs fs, RelPath path) throws PackageStore.InstallFailed {
        try (WorkspaceFs.OpenFile f = fs.openFile(path)) {
            if (f.size() > MAX_MANIFEST_BYTES)
                throw new PackageStore.InstallFailed("the install left '" + path + "' of " + f.size()
                        + " bytes; a manifest may have " + MAX_MANIFEST_BYTES);
            ByteBuffer buf = ByteBuffer.allocate((int) f.size() + 1);
            while (buf.hasRemaining() && f.channel().read(buf) > 0) {
                // a regular file that grew after its size was read: at most one byte more is read, and refused
            }
            if (buf.position() > f.size())
                throw new PackageStore.InstallFailed("the install left '" + path + "', which changed while it was read");
            return new String(buf.array(), 0, buf.position(), StandardCharsets.UTF_8);
        } catch (WorkspaceException e) {
            throw new PackageStore.InstallFailed("the install left '" + path + "', which cannot be read as a manifest: "
                    + e.getMessage());
        } catch (IOException e) {
            throw new PackageStore.InstallFailed("the install left '" + path + "', which cannot be read");
        }
    }
}
