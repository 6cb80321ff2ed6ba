package dev.codeexec.deploy;

import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.KubernetesResource;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import tools.jackson.core.StreamReadFeature;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.MappingIterator;
import tools.jackson.dataformat.yaml.YAMLMapper;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The deploy manifests as typed Kubernetes objects (fabric8's models), read strictly: fabric8 keeps any field it
 * does not know in an {@code additionalProperties} map instead of failing, which would let a typo such as
 * {@code readinesProbe} pass as "valid" while the cluster silently ignores it. Every object of the parsed tree is
 * therefore checked for leftovers, and a document whose kind/apiVersion fabric8 does not know (it would become a
 * GenericKubernetesResource) fails too.
 */
final class Manifests {

    static final Path KUBERNETES_DIR = Path.of("deploy/kubernetes");
    static final Path SECRET_EXAMPLE = Path.of("deploy/secret.example.yaml");

    /** Duplicate keys are errors too: YAML would keep the last one, hiding the first. */
    static final YAMLMapper YAML = YAMLMapper.builder().enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build();
    private static final KubernetesSerialization KUBERNETES = new KubernetesSerialization();

    /** A manifest that is not a valid, fully known Kubernetes object. */
    static final class InvalidManifest extends RuntimeException {
        InvalidManifest(String message) {
            super(message);
        }
    }

    record Document(Path file, HasMetadata object) {
    }

    private Manifests() {
    }

    /** Every *.yaml under deploy/kubernetes/ (sub-folders included), in path order. */
    static List<Path> kubernetesFiles() {
        try (Stream<Path> files = Files.walk(KUBERNETES_DIR)) {
            return files.filter(p -> p.getFileName().toString().endsWith(".yaml")).sorted(Comparator.naturalOrder())
                    .toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static List<Document> load(Path file) {
        try {
            return parse(file, Files.readString(file));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The documents of one YAML text (separated by ---), each as a typed object; empty documents are skipped. */
    static List<Document> parse(Path file, String yaml) {
        List<Document> docs = new ArrayList<>();
        List<JsonNode> nodes;
        try (MappingIterator<JsonNode> it = YAML.readerFor(JsonNode.class).readValues(yaml)) {
            nodes = it.readAll();
        } catch (RuntimeException e) {
            throw new InvalidManifest(file + ": not YAML: " + e.getMessage());
        }
        for (JsonNode node : nodes) {
            if (node == null || node.isNull() || node.isMissingNode() || node.isEmpty()) continue;
            String where = file + " (" + node.path("kind").asString("?") + " " + node.path("metadata").path("name").asString("?") + ")";
            Object typed;
            try {
                typed = KUBERNETES.unmarshal(node.toString());
            } catch (RuntimeException e) {
                throw new InvalidManifest(where + ": " + e.getMessage());
            }
            if (!(typed instanceof HasMetadata object) || typed instanceof GenericKubernetesResource)
                throw new InvalidManifest(where + ": unknown kind/apiVersion " + node.path("apiVersion").asString("?")
                        + "/" + node.path("kind").asString("?"));
            List<String> unknown = new ArrayList<>();
            unknownFields(object, "", unknown);
            if (!unknown.isEmpty()) throw new InvalidManifest(where + ": unknown fields " + unknown);
            docs.add(new Document(file, object));
        }
        return docs;
    }

    /**
     * Collects the fields fabric8 did not map, with their path, by walking the getters of every model object
     * (models live in io.fabric8 packages; strings, numbers and the like end the walk).
     */
    static void unknownFields(Object value, String path, List<String> out) {
        switch (value) {
            case null -> {
            }
            case List<?> list -> {
                for (int i = 0; i < list.size(); i++) unknownFields(list.get(i), path + "[" + i + "]", out);
            }
            case Map<?, ?> map -> map.forEach((k, v) -> unknownFields(v, path + "." + k, out));
            default -> {
                if (!(value instanceof KubernetesResource) || !value.getClass().getName().startsWith("io.fabric8.")) return;
                for (Method m : value.getClass().getMethods()) {
                    if (m.getParameterCount() != 0 || Modifier.isStatic(m.getModifiers())) continue;
                    String name = m.getName();
                    if (!name.startsWith("get") || name.equals("getClass")) continue;
                    Object child = invoke(m, value);
                    if (name.equals("getAdditionalProperties")) {
                        if (child instanceof Map<?, ?> extra && !extra.isEmpty())
                            extra.keySet().forEach(k -> out.add(path + "." + k));
                    } else {
                        String field = Character.toLowerCase(name.charAt(3)) + name.substring(4);
                        unknownFields(child, path + "." + field, out);
                    }
                }
            }
        }
    }

    private static Object invoke(Method m, Object target) {
        try {
            return m.invoke(target);
        } catch (IllegalAccessException | InvocationTargetException e) {
            throw new IllegalStateException(m + " failed", e);
        }
    }

    /** What `kubectl apply -f deploy/kubernetes/` applies: the folder's own files (not optional/). */
    static List<Document> applied() {
        return kubernetesFiles().stream().filter(p -> p.getParent().equals(KUBERNETES_DIR))
                .flatMap(p -> load(p).stream()).toList();
    }

    static boolean isPatch(Path file) {
        return file.getFileName().toString().endsWith(".patch.yaml");
    }
}
