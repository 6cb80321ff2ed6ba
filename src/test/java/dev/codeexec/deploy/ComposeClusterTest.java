package dev.codeexec.deploy;

import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigKey;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * compose.cluster.yaml checked structurally (scripts/container-test.sh runs it for real with podman): one gateway
 * and two workers of one image, wired by WORKERS, sharing the workspaces volume at one WORKSPACE_ROOT, workers
 * unpublished, and a gateway with the same restricted settings as deploy/kubernetes/gateway.yaml.
 */
class ComposeClusterTest {

    private static final Path FILE = Path.of("compose.cluster.yaml");
    /** ${NAME}, ${NAME:-default}, ${NAME:?error}: what compose substitutes from .env. */
    private static final Pattern INTERPOLATION = Pattern.compile("\\$\\{([A-Z_][A-Z0-9_]*)(?:(:?[-?])([^}]*))?}");

    private final JsonNode compose = read();
    private final JsonNode services = compose.path("services");

    private static JsonNode read() {
        try {
            return Manifests.YAML.readTree(Files.readString(FILE));
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Test
    void oneGatewayAndTwoWorkersOfOneImage() {
        assertThat(names(services)).containsExactlyInAnyOrder("gateway", "worker1", "worker2");
        Set<String> images = new HashSet<>();
        for (String name : names(services)) {
            images.add(services.path(name).path("image").asString());
            assertThat(services.path(name).path("build").path("context").asString()).as(name).isEqualTo(".");
        }
        assertThat(images).hasSize(1);
        assertThat(services.path("gateway").path("command").isMissingNode()).as("the gateway is the default command").isTrue();
        for (String w : workers()) {
            assertThat(strings(services.path(w).path("command"))).as(w).containsExactly("worker");
            assertThat(services.path(w).path("ports").isMissingNode()).as(w + " must not be published to the host").isTrue();
        }
    }

    @Test
    void theGatewayNamesEveryWorkerAtItsPort() {
        Map<String, String> gateway = environment("gateway");
        List<String> targets = new ArrayList<>();
        for (String w : workers()) {
            Map<String, String> env = environment(w);
            assertThat(Config.isLoopback(env.get("WORKER_HOST"))).as(w + " listens beyond loopback").isFalse();
            assertThat(Config.isLoopback(env.get("HOST"))).as(w + " serves no HTTP beyond loopback").isTrue();
            assertThat(env.get("WORKER_PLAINTEXT")).isEqualTo(gateway.get("WORKER_PLAINTEXT"));
            targets.add(w + ":" + env.get("WORKER_PORT"));
        }
        assertThat(gateway.get("WORKERS")).isEqualTo("static:///" + String.join(",", targets));
        Set<String> names = workers().stream().map(w -> environment(w).get("WORKER_NAME")).collect(Collectors.toSet());
        assertThat(names).as("results tell the workers apart").hasSize(workers().size());
        assertThat(strings(services.path("gateway").path("ports"))).singleElement().asString().startsWith("127.0.0.1:");
    }

    @Test
    void theWorkerTokenComesFromDotEnvAndIsRequired() {
        Set<String> tokens = new HashSet<>();
        for (String name : names(services)) {
            String raw = services.path(name).path("environment").path("WORKER_TOKEN").asString();
            Matcher m = INTERPOLATION.matcher(raw);
            assertThat(m.matches()).as(name + " WORKER_TOKEN from .env: " + raw).isTrue();
            assertThat(m.group(1)).isEqualTo("WORKER_TOKEN");
            assertThat(m.group(2)).as("${WORKER_TOKEN:?...}: compose refuses to start without it").isEqualTo(":?");
            tokens.add(raw);
            assertThat(services.path(name).path("env_file").asString()).isEqualTo(".env");
        }
        assertThat(tokens).hasSize(1);
    }

    @Test
    void everyServiceMountsTheSharedVolumeAtTheSameWorkspaceRoot() {
        assertThat(names(compose.path("volumes"))).contains("workspaces");
        Set<String> roots = new HashSet<>();
        for (String name : names(services)) {
            String root = environment(name).get("WORKSPACE_ROOT");
            assertThat(strings(services.path(name).path("volumes"))).as(name).contains("workspaces:" + root);
            roots.add(root);
        }
        assertThat(roots).hasSize(1);
    }

    @Test
    void workersGetBubblewrapsOptionsAndTheGatewayTheKubernetesGatewaysRestrictions() {
        for (String w : workers())
            assertThat(strings(services.path(w).path("security_opt")))
                    .contains("systempaths=unconfined", "seccomp=unconfined");
        JsonNode gateway = services.path("gateway");
        assertThat(strings(gateway.path("security_opt"))).noneMatch(s -> s.contains("unconfined"));
        assertThat(gateway.path("read_only").asBoolean()).isTrue();
        assertThat(strings(gateway.path("tmpfs"))).contains("/tmp");
        assertThat(strings(gateway.path("cap_drop"))).containsExactly("ALL");
        Deployment k8s = Manifests.load(Manifests.KUBERNETES_DIR.resolve("gateway.yaml")).stream()
                .map(Manifests.Document::object).filter(o -> o instanceof Deployment).map(Deployment.class::cast)
                .findFirst().orElseThrow();
        var caps = k8s.getSpec().getTemplate().getSpec().getContainers().getFirst().getSecurityContext().getCapabilities();
        assertThat(strings(gateway.path("cap_add"))).containsExactlyInAnyOrderElementsOf(caps.getAdd());
    }

    @Test
    void everyEnvironmentIsAValidConfiguration() {
        Set<String> keys = Config.KEYS.stream().map(ConfigKey::name).collect(Collectors.toSet());
        for (String name : names(services)) {
            Map<String, String> env = environment(name);
            assertThat(keys).as(name).containsAll(env.keySet());
            // The image's ENV (HOST=0.0.0.0) under the service's own, with .env's API_KEY for the gateway.
            Map<String, String> effective = new HashMap<>(Map.of("HOST", "0.0.0.0", "API_KEY", "from-dot-env"));
            if (!name.equals("gateway")) effective.remove("API_KEY");
            effective.putAll(env);
            Config.load(effective);
        }
    }

    // ---- helpers ----

    private List<String> workers() {
        return names(services).stream().filter(n -> !n.equals("gateway")).sorted().toList();
    }

    private static List<String> names(JsonNode mapping) {
        assertThat(mapping.isObject()).as("a mapping").isTrue();
        return new ArrayList<>(mapping.propertyNames());
    }

    private static List<String> strings(JsonNode list) {
        List<String> out = new ArrayList<>();
        for (JsonNode n : list) out.add(n.asString());
        return out;
    }

    /** A service's `environment` (mapping form), interpolations replaced by a stand-in or their default. */
    private Map<String, String> environment(String service) {
        JsonNode env = services.path(service).path("environment");
        assertThat(env.isObject()).as(service + ": environment as a mapping").isTrue();
        Map<String, String> out = new HashMap<>();
        for (String key : names(env)) {
            Matcher m = INTERPOLATION.matcher(env.path(key).asString());
            out.put(key, m.replaceAll(r -> "-".equals(r.group(2)) || ":-".equals(r.group(2))
                    ? Matcher.quoteReplacement(r.group(3)) : "from-dot-env"));
        }
        return out;
    }
}
