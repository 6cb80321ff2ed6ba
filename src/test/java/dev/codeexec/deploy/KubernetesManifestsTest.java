package dev.codeexec.deploy;

import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigKey;
import dev.codeexec.deploy.Manifests.Document;
import dev.codeexec.deploy.Manifests.InvalidManifest;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerPort;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.IntOrString;
import io.fabric8.kubernetes.api.model.LabelSelector;
import io.fabric8.kubernetes.api.model.Namespace;
import io.fabric8.kubernetes.api.model.PersistentVolumeClaim;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.Probe;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.SecretKeySelector;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServicePort;
import io.fabric8.kubernetes.api.model.Volume;
import io.fabric8.kubernetes.api.model.VolumeMount;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyPeer;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyPort;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyEgressRule;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyIngressRule;
import io.fabric8.kubernetes.api.model.node.v1.RuntimeClass;
import io.fabric8.kubernetes.api.model.policy.v1.PodDisruptionBudget;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * deploy/kubernetes/ validated offline: every manifest parses into typed objects with no unknown field, and the
 * objects are wired to each other and to the server's configuration the way the gateway/worker design needs
 * (docs/cluster.md).
 */
class KubernetesManifestsTest {

    private static final String WORKER_COMPONENT = "worker";
    private static final String GATEWAY_COMPONENT = "gateway";
    private static final String COMPONENT_LABEL = "app.kubernetes.io/component";
    /** The JVM's own variable; every other env name must be a configuration key. */
    private static final Set<String> NON_CONFIG_ENV = Set.of("JDK_JAVA_OPTIONS");

    private final List<Document> applied = Manifests.applied();
    private final List<HasMetadata> objects = applied.stream().map(Document::object).toList();

    @Test
    void everyManifestParsesIntoKnownTypesWithoutUnknownFields() {
        List<Path> files = Manifests.kubernetesFiles();
        assertThat(files).extracting(p -> Manifests.KUBERNETES_DIR.relativize(p).toString()).contains(
                "00-namespace.yaml", "gateway.yaml", "workers.yaml", "network-policies.yaml", "workspaces-pvc.yaml",
                "optional/gvisor-runtimeclass.yaml", "optional/worker-sandbox-gvisor.patch.yaml");
        List<Document> all = new ArrayList<>();
        for (Path f : files) all.addAll(Manifests.load(f));
        all.addAll(Manifests.load(Manifests.SECRET_EXAMPLE));
        assertThat(all).extracting(d -> d.object().getKind()).contains("Namespace", "PersistentVolumeClaim",
                "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy", "RuntimeClass", "Secret");
        assertThat(objects.stream().filter(o -> o instanceof Deployment)).hasSize(2);
        assertThat(objects.stream().filter(o -> o instanceof Service)).hasSize(2);
        assertThat(objects.stream().filter(o -> o instanceof PodDisruptionBudget)).hasSize(2);
        assertThat(objects.stream().filter(o -> o instanceof NetworkPolicy)).hasSize(2);
    }

    /** The strictness itself: a mutated copy of a real manifest must fail, naming the field. */
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "gateway.yaml | readinessProbe: | readinesProbe: | readinesProbe",
            "workers.yaml | terminationGracePeriodSeconds: | terminationGracePeriod: | terminationGracePeriod",
            "workers.yaml | secretKeyRef: | secretKeyRefs: | secretKeyRefs",
            "network-policies.yaml | policyTypes: | policyType: | policyType",
            "workers.yaml | clusterIP: None | clusterIp: None | clusterIp",
            "gateway.yaml | sessionAffinityConfig: | sessionAffinityConf: | sessionAffinityConf",
    })
    void aMisspelledFieldFails(String file, String from, String to, String named) throws Exception {
        Path path = Manifests.KUBERNETES_DIR.resolve(file);
        String original = Files.readString(path);
        assertThat(original).contains(from);
        String mutated = original.replaceFirst(Pattern.quote(from), to);
        assertThatThrownBy(() -> Manifests.parse(path, mutated)).isInstanceOf(InvalidManifest.class)
                .hasMessageContaining(named);
    }

    @Test
    void anUnknownKindOrAWrongTypeOrADuplicateKeyFails() throws Exception {
        Path path = Manifests.KUBERNETES_DIR.resolve("workers.yaml");
        String original = Files.readString(path);
        assertThatThrownBy(() -> Manifests.parse(path, original.replaceFirst("kind: Deployment", "kind: Deploymnet")))
                .isInstanceOf(InvalidManifest.class).hasMessageContaining("unknown kind");
        assertThatThrownBy(() -> Manifests.parse(path, original.replaceFirst("replicas: 3", "replicas: three")))
                .isInstanceOf(InvalidManifest.class);
        assertThatThrownBy(() -> Manifests.parse(path, original.replaceFirst("  replicas: 3\n", "  replicas: 3\n  replicas: 4\n")))
                .isInstanceOf(InvalidManifest.class).hasMessageContaining("replicas");
    }

    @Test
    void everythingLivesInTheNamespaceTheManifestsCreate() {
        List<Namespace> namespaces = only(Namespace.class);
        assertThat(namespaces).hasSize(1);
        String ns = namespaces.getFirst().getMetadata().getName();
        for (HasMetadata o : objects) {
            if (o instanceof Namespace) continue;
            assertThat(o.getMetadata().getNamespace()).as(o.getKind() + " " + o.getMetadata().getName()).isEqualTo(ns);
        }
        assertThat(secret().getMetadata().getNamespace()).isEqualTo(ns);
        // The workers are privileged (docs/cluster.md, "bubblewrap in a pod"): a namespace enforcing a stricter Pod Security level would refuse them.
        assertThat(namespaces.getFirst().getMetadata().getLabels())
                .containsEntry("pod-security.kubernetes.io/enforce", "privileged");
    }

    @Test
    void everySelectorPicksExactlyTheIntendedPods() {
        for (Deployment d : only(Deployment.class)) {
            assertThat(matches(d.getSpec().getSelector(), d.getSpec().getTemplate().getMetadata().getLabels()))
                    .as("selector of Deployment " + d.getMetadata().getName()).isTrue();
        }
        Map<String, LabelSelector> selectors = new LinkedHashMap<>();
        for (Service s : only(Service.class))
            selectors.put("Service " + s.getMetadata().getName(), new LabelSelector(null, s.getSpec().getSelector()));
        for (PodDisruptionBudget p : only(PodDisruptionBudget.class))
            selectors.put("PodDisruptionBudget " + p.getMetadata().getName(), p.getSpec().getSelector());
        for (NetworkPolicy n : only(NetworkPolicy.class))
            selectors.put("NetworkPolicy " + n.getMetadata().getName(), n.getSpec().getPodSelector());
        for (var e : selectors.entrySet()) {
            List<Deployment> picked = only(Deployment.class).stream()
                    .filter(d -> matches(e.getValue(), d.getSpec().getTemplate().getMetadata().getLabels())).toList();
            assertThat(picked).as(e.getKey() + " must select the pods of exactly one Deployment").hasSize(1);
            String component = e.getKey().contains("gateway") ? GATEWAY_COMPONENT : WORKER_COMPONENT;
            assertThat(picked.getFirst()).as(e.getKey()).isSameAs(deployment(component));
        }
    }

    @Test
    void servicePortsAreTheContainersPorts() {
        for (Service s : only(Service.class)) {
            Deployment d = only(Deployment.class).stream()
                    .filter(x -> matches(new LabelSelector(null, s.getSpec().getSelector()),
                            x.getSpec().getTemplate().getMetadata().getLabels()))
                    .findFirst().orElseThrow();
            List<ContainerPort> containerPorts = container(d).getPorts();
            assertThat(s.getSpec().getPorts()).isNotEmpty();
            for (ServicePort sp : s.getSpec().getPorts()) {
                ContainerPort target = resolve(sp.getTargetPort(), containerPorts);
                assertThat(target).as("targetPort of Service " + s.getMetadata().getName()).isNotNull();
                assertThat(sp.getPort()).as("Service port = container port (clients and DNS use one number)")
                        .isEqualTo(target.getContainerPort());
                assertThat(sp.getProtocol()).isEqualTo(target.getProtocol());
            }
        }
    }

    @Test
    void theGatewayFindsTheWorkersThroughTheHeadlessService() {
        Service workers = service(WORKER_COMPONENT);
        assertThat(workers.getSpec().getClusterIP()).as("headless").isEqualTo("None");
        int port = workers.getSpec().getPorts().getFirst().getPort();
        String expected = "dns:///" + workers.getMetadata().getName() + "." + workers.getMetadata().getNamespace()
                + ".svc.cluster.local:" + port;
        assertThat(env(deployment(GATEWAY_COMPONENT)).get("WORKERS")).isEqualTo(expected);

        Map<String, String> workerEnv = env(deployment(WORKER_COMPONENT));
        assertThat(Integer.parseInt(workerEnv.get("WORKER_PORT"))).isEqualTo(port);
        assertThat(Config.isLoopback(workerEnv.get("WORKER_HOST"))).as("workers must listen beyond loopback").isFalse();
        assertThat(container(deployment(WORKER_COMPONENT)).getArgs()).containsExactly("worker");
        assertThat(container(deployment(GATEWAY_COMPONENT)).getArgs()).isNullOrEmpty();
        // Both sides must agree on plaintext inside the cluster (or both configure TLS).
        assertThat(workerEnv.get("WORKER_PLAINTEXT")).isEqualTo(env(deployment(GATEWAY_COMPONENT)).get("WORKER_PLAINTEXT"));
        // A gateway behind a ClusterIP Service with more than one replica needs affinity for MCP sessions.
        assertThat(service(GATEWAY_COMPONENT).getSpec().getSessionAffinity()).isEqualTo("ClientIP");
    }

    @Test
    void secretReferencesNameKeysTheSecretHasAndBothSidesShareTheWorkerToken() {
        Secret secret = secret();
        Set<String> keys = new HashSet<>();
        if (secret.getStringData() != null) keys.addAll(secret.getStringData().keySet());
        if (secret.getData() != null) keys.addAll(secret.getData().keySet());
        Map<String, SecretKeySelector> tokenRefs = new HashMap<>();
        int refs = 0;
        for (Deployment d : only(Deployment.class)) {
            for (EnvVar e : container(d).getEnv()) {
                if (e.getValueFrom() == null || e.getValueFrom().getSecretKeyRef() == null) continue;
                SecretKeySelector ref = e.getValueFrom().getSecretKeyRef();
                refs++;
                assertThat(ref.getName()).as(e.getName()).isEqualTo(secret.getMetadata().getName());
                assertThat(keys).as("Secret keys for " + e.getName()).contains(ref.getKey());
                if (e.getName().equals("WORKER_TOKEN")) tokenRefs.put(d.getMetadata().getName(), ref);
            }
        }
        assertThat(refs).isGreaterThanOrEqualTo(3);
        assertThat(tokenRefs).hasSize(2);
        assertThat(new HashSet<>(tokenRefs.values())).as("the same token on gateways and workers").hasSize(1);
        assertThat(secretRef(deployment(GATEWAY_COMPONENT), "API_KEY")).as("API_KEY from the Secret").isNotNull();
    }

    @Test
    void workspacesAreOneReadWriteManyVolumeAtTheSameRootEverywhere() {
        List<PersistentVolumeClaim> claims = only(PersistentVolumeClaim.class);
        assertThat(claims).hasSize(1);
        PersistentVolumeClaim pvc = claims.getFirst();
        assertThat(pvc.getSpec().getAccessModes()).containsExactly("ReadWriteMany");
        Set<String> roots = new HashSet<>();
        for (Deployment d : only(Deployment.class)) {
            PodSpec pod = d.getSpec().getTemplate().getSpec();
            Volume volume = pod.getVolumes().stream()
                    .filter(v -> v.getPersistentVolumeClaim() != null
                            && v.getPersistentVolumeClaim().getClaimName().equals(pvc.getMetadata().getName()))
                    .findFirst().orElseThrow(() -> new AssertionError(d.getMetadata().getName() + " lacks the PVC"));
            VolumeMount mount = container(d).getVolumeMounts().stream()
                    .filter(m -> m.getName().equals(volume.getName())).findFirst().orElseThrow();
            String root = env(d).get("WORKSPACE_ROOT");
            assertThat(mount.getMountPath()).as(d.getMetadata().getName() + " mounts workspaces at WORKSPACE_ROOT")
                    .isEqualTo(root);
            assertThat(mount.getReadOnly()).isNotEqualTo(Boolean.TRUE);
            roots.add(root);
        }
        assertThat(roots).as("one WORKSPACE_ROOT for gateways and workers").hasSize(1);
    }

    @Test
    void workersAcceptOnlyGatewaysAndReachNobody() {
        NetworkPolicy policy = networkPolicy(WORKER_COMPONENT);
        assertThat(policy.getSpec().getPolicyTypes()).containsExactlyInAnyOrder("Ingress", "Egress");
        assertThat(policy.getSpec().getEgress()).as("no egress rule = all egress denied").isEmpty();
        List<NetworkPolicyIngressRule> ingress = policy.getSpec().getIngress();
        assertThat(ingress).hasSize(1);
        assertThat(ingress.getFirst().getFrom()).hasSize(1);
        NetworkPolicyPeer peer = ingress.getFirst().getFrom().getFirst();
        assertThat(peer.getNamespaceSelector()).isNull();
        assertThat(peer.getIpBlock()).isNull();
        assertThat(selects(peer.getPodSelector())).containsExactly(deployment(GATEWAY_COMPONENT));
        assertThat(ports(ingress.getFirst().getPorts())).containsExactly("TCP/" + workerPort());
    }

    @Test
    void gatewaysTakeHttpAndReachOnlyWorkersAndDns() {
        NetworkPolicy policy = networkPolicy(GATEWAY_COMPONENT);
        assertThat(policy.getSpec().getPolicyTypes()).containsExactlyInAnyOrder("Ingress", "Egress");
        assertThat(policy.getSpec().getIngress()).hasSize(1);
        int httpPort = Integer.parseInt(env(deployment(GATEWAY_COMPONENT)).get("PORT"));
        assertThat(ports(policy.getSpec().getIngress().getFirst().getPorts())).containsExactly("TCP/" + httpPort);

        List<NetworkPolicyEgressRule> egress = policy.getSpec().getEgress();
        assertThat(egress).hasSize(2);
        NetworkPolicyEgressRule toWorkers = egress.get(0);
        assertThat(toWorkers.getTo()).hasSize(1);
        assertThat(toWorkers.getTo().getFirst().getNamespaceSelector()).isNull();
        assertThat(selects(toWorkers.getTo().getFirst().getPodSelector())).containsExactly(deployment(WORKER_COMPONENT));
        assertThat(ports(toWorkers.getPorts())).containsExactly("TCP/" + workerPort());

        NetworkPolicyEgressRule dns = egress.get(1);
        assertThat(dns.getTo()).hasSize(1);
        assertThat(dns.getTo().getFirst().getNamespaceSelector().getMatchLabels())
                .containsExactly(Map.entry("kubernetes.io/metadata.name", "kube-system"));
        assertThat(dns.getTo().getFirst().getPodSelector().getMatchLabels())
                .containsExactly(Map.entry("k8s-app", "kube-dns"));
        assertThat(ports(dns.getPorts())).containsExactlyInAnyOrder("UDP/53", "TCP/53");
    }

    @Test
    void probesWatchWhatEachRoleServes() {
        Container gateway = container(deployment(GATEWAY_COMPONENT));
        int httpPort = Integer.parseInt(env(deployment(GATEWAY_COMPONENT)).get("PORT"));
        probes(gateway);
        var ready = gateway.getReadinessProbe().getHttpGet();
        assertThat(ready.getPath()).isEqualTo("/healthz");
        assertThat(resolve(ready.getPort(), gateway.getPorts()).getContainerPort()).isEqualTo(httpPort);
        // /healthz is 503 in gateway mode while no worker is healthy: as a liveness or startup probe it would
        // restart every gateway during a worker outage. Those two only check that the port accepts connections.
        for (Probe p : List.of(gateway.getLivenessProbe(), gateway.getStartupProbe())) {
            assertThat(p.getHttpGet()).isNull();
            assertThat(resolve(p.getTcpSocket().getPort(), gateway.getPorts()).getContainerPort()).isEqualTo(httpPort);
        }
        Container worker = container(deployment(WORKER_COMPONENT));
        for (Probe p : probes(worker)) {
            assertThat(p.getGrpc()).as("workers: the standard gRPC health service").isNotNull();
            assertThat(p.getGrpc().getPort()).isEqualTo(workerPort());
        }
    }

    @Test
    void resourcesAreSetAndWorkersHaveMemoryForEverySlot() {
        for (Deployment d : only(Deployment.class)) {
            var res = container(d).getResources();
            assertThat(res.getRequests()).as(d.getMetadata().getName()).containsKeys("cpu", "memory");
            assertThat(res.getLimits()).as(d.getMetadata().getName()).containsKeys("cpu", "memory");
            assertThat(bytes(res.getRequests().get("memory"))).isLessThanOrEqualTo(bytes(res.getLimits().get("memory")));
        }
        Deployment workers = deployment(WORKER_COMPONENT);
        Config config = config(workers);
        long slots = (long) config.get(Config.MAX_CONCURRENT) * config.get(Config.MEMORY_LIMIT_MB) * MIB;
        assertThat(bytes(container(workers).getResources().getLimits().get("memory")))
                .as("MAX_CONCURRENT × MEMORY_LIMIT_MB + the JVM").isGreaterThanOrEqualTo(slots + jvmBytes(workers));
        Deployment gateway = deployment(GATEWAY_COMPONENT);
        assertThat(bytes(container(gateway).getResources().getLimits().get("memory"))).as("the gateway's JVM")
                .isGreaterThanOrEqualTo(jvmBytes(gateway));
    }

    private static final long MIB = 1024 * 1024;
    private static final Pattern JVM_SIZE = Pattern.compile("-X(?:mx|X:MaxDirectMemorySize=)(\\d+)([mMgG])");

    /** Heap and direct memory as JDK_JAVA_OPTIONS caps them, plus 128 MiB for metaspace, code cache and threads. */
    private static long jvmBytes(Deployment d) {
        String options = env(d).get("JDK_JAVA_OPTIONS");
        assertThat(options).as(d.getMetadata().getName() + " caps the JVM").contains("-Xmx").contains("MaxDirectMemorySize");
        long total = 128 * MIB;
        Matcher m = JVM_SIZE.matcher(options);
        while (m.find()) total += Long.parseLong(m.group(1)) * (m.group(2).equalsIgnoreCase("g") ? 1024 : 1) * MIB;
        return total;
    }

    @Test
    void podsOutliveTheirDrain() {
        for (Deployment d : only(Deployment.class)) {
            Config config = config(d);
            long grace = d.getSpec().getTemplate().getSpec().getTerminationGracePeriodSeconds();
            assertThat(grace).as(d.getMetadata().getName() + ": terminationGracePeriodSeconds > SHUTDOWN_GRACE_SECONDS")
                    .isGreaterThan(config.get(Config.SHUTDOWN_GRACE_SECONDS));
        }
        // The workers' drain lets a run of the longest allowed timeout finish (the comment in workers.yaml says so).
        Config workers = config(deployment(WORKER_COMPONENT));
        assertThat(workers.get(Config.SHUTDOWN_GRACE_SECONDS) * 1000L).isGreaterThanOrEqualTo(workers.get(Config.MAX_TIMEOUT_MS));
        assertThat(config(deployment(GATEWAY_COMPONENT)).get(Config.MAX_TIMEOUT_MS)).isEqualTo(workers.get(Config.MAX_TIMEOUT_MS));
    }

    @Test
    void disruptionBudgetsKeepPodsOfEachRole() {
        for (Deployment d : only(Deployment.class)) {
            List<PodDisruptionBudget> budgets = only(PodDisruptionBudget.class).stream()
                    .filter(p -> matches(p.getSpec().getSelector(), d.getSpec().getTemplate().getMetadata().getLabels()))
                    .toList();
            assertThat(budgets).as(d.getMetadata().getName()).hasSize(1);
            IntOrString max = budgets.getFirst().getSpec().getMaxUnavailable();
            assertThat(max).isNotNull();
            assertThat(max.getIntVal()).isPositive().isLessThan(d.getSpec().getReplicas());
            assertThat(d.getSpec().getStrategy().getRollingUpdate().getMaxUnavailable().getIntVal()).isZero();
        }
    }

    @Test
    void everyEnvironmentVariableIsAValidConfiguration() {
        Set<String> keys = Config.KEYS.stream().map(ConfigKey::name).collect(Collectors.toSet());
        for (Deployment d : only(Deployment.class)) {
            for (EnvVar e : container(d).getEnv())
                assertThat(keys).as(d.getMetadata().getName() + ": " + e.getName()).matches(
                        k -> k.contains(e.getName()) || NON_CONFIG_ENV.contains(e.getName()), "a configuration key");
            config(d); // throws ConfigException naming the key when a value is invalid
        }
    }

    @Test
    void workersAreTheOnlyPrivilegedPodsAndTheGatewayKeepsFewCapabilities() {
        assertThat(container(deployment(WORKER_COMPONENT)).getSecurityContext().getPrivileged()).isTrue();
        var gateway = container(deployment(GATEWAY_COMPONENT)).getSecurityContext();
        assertThat(gateway.getPrivileged()).isNotEqualTo(Boolean.TRUE);
        assertThat(gateway.getAllowPrivilegeEscalation()).isFalse();
        assertThat(gateway.getReadOnlyRootFilesystem()).isTrue();
        assertThat(gateway.getCapabilities().getDrop()).containsExactly("ALL");
        assertThat(gateway.getCapabilities().getAdd()).containsExactlyInAnyOrder("CHOWN", "DAC_OVERRIDE", "FOWNER");
        assertThat(gateway.getSeccompProfile().getType()).isEqualTo("RuntimeDefault");
        // A read-only root needs a writable /tmp for the JVM.
        assertThat(container(deployment(GATEWAY_COMPONENT)).getVolumeMounts()).extracting(VolumeMount::getMountPath)
                .contains("/tmp");
        for (Deployment d : only(Deployment.class))
            assertThat(d.getSpec().getTemplate().getSpec().getAutomountServiceAccountToken()).isFalse();
    }

    @Test
    void optionalPatchesNameRealObjectsAndKeepTheConfigurationValid() {
        RuntimeClass gvisor = (RuntimeClass) Manifests.load(Manifests.KUBERNETES_DIR.resolve("optional/gvisor-runtimeclass.yaml"))
                .getFirst().object();
        assertThat(gvisor.getHandler()).isEqualTo("runsc");
        for (Path file : Manifests.kubernetesFiles().stream().filter(Manifests::isPatch).toList()) {
            Deployment patch = (Deployment) Manifests.load(file).getFirst().object();
            Deployment base = only(Deployment.class).stream()
                    .filter(d -> d.getMetadata().getName().equals(patch.getMetadata().getName())).findFirst()
                    .orElseThrow(() -> new AssertionError(file + " patches no Deployment of deploy/kubernetes/"));
            assertThat(patch.getMetadata().getNamespace()).isEqualTo(base.getMetadata().getNamespace());
            String runtimeClass = patch.getSpec().getTemplate().getSpec().getRuntimeClassName();
            if (runtimeClass != null) {
                assertThat(runtimeClass).isEqualTo(gvisor.getMetadata().getName());
                assertThat(base).as("bubblewrap does not work under gVisor: workers must not use the RuntimeClass")
                        .isSameAs(deployment(GATEWAY_COMPONENT));
            }
            for (Container c : patch.getSpec().getTemplate().getSpec().getContainers()) {
                assertThat(c.getName()).isEqualTo(container(base).getName());
                Map<String, String> merged = new HashMap<>(env(base));
                c.getEnv().forEach(e -> merged.put(e.getName(), e.getValue()));
                Config.load(merged);
                assertThat(merged.get("SANDBOX")).isEqualTo("gvisor");
            }
        }
    }

    // ---- helpers ----

    private <T> List<T> only(Class<T> type) {
        return objects.stream().filter(type::isInstance).map(type::cast).toList();
    }

    private Deployment deployment(String component) {
        return only(Deployment.class).stream()
                .filter(d -> component.equals(d.getMetadata().getLabels().get(COMPONENT_LABEL))).findFirst()
                .orElseThrow();
    }

    private Service service(String component) {
        return only(Service.class).stream()
                .filter(s -> component.equals(s.getMetadata().getLabels().get(COMPONENT_LABEL))).findFirst()
                .orElseThrow();
    }

    private NetworkPolicy networkPolicy(String component) {
        return only(NetworkPolicy.class).stream()
                .filter(n -> component.equals(n.getMetadata().getLabels().get(COMPONENT_LABEL))).findFirst()
                .orElseThrow();
    }

    private static Secret secret() {
        return (Secret) Manifests.load(Manifests.SECRET_EXAMPLE).getFirst().object();
    }

    private static Container container(Deployment d) {
        List<Container> containers = d.getSpec().getTemplate().getSpec().getContainers();
        assertThat(containers).hasSize(1);
        return containers.getFirst();
    }

    private int workerPort() {
        return Integer.parseInt(env(deployment(WORKER_COMPONENT)).get("WORKER_PORT"));
    }

    /** Literal env values; a value from a Secret or the downward API becomes a placeholder (it exists at run time). */
    private static Map<String, String> env(Deployment d) {
        Map<String, String> env = new HashMap<>();
        for (EnvVar e : container(d).getEnv()) {
            assertThat(env).as("duplicate env " + e.getName()).doesNotContainKey(e.getName());
            env.put(e.getName(), e.getValueFrom() == null ? Objects.requireNonNull(e.getValue(), e.getName())
                    : "from-" + e.getName().toLowerCase());
        }
        return env;
    }

    private static SecretKeySelector secretRef(Deployment d, String name) {
        return container(d).getEnv().stream().filter(e -> e.getName().equals(name) && e.getValueFrom() != null)
                .map(e -> e.getValueFrom().getSecretKeyRef()).findFirst().orElse(null);
    }

    /** The server's configuration as this pod would load it (the image's ENV plus the manifest's). */
    private static Config config(Deployment d) {
        Map<String, String> env = new HashMap<>(Map.of("HOST", "0.0.0.0", "PORT", "8080",
                "DATA_DIR", "/var/lib/code-exec-mcp", "WORKSPACE_ROOT", "/var/lib/code-exec-mcp/workspaces"));
        env.putAll(env(d));
        NON_CONFIG_ENV.forEach(env::remove);
        return Config.load(env);
    }

    private static List<Probe> probes(Container c) {
        assertThat(c.getReadinessProbe()).as(c.getName() + " readinessProbe").isNotNull();
        assertThat(c.getLivenessProbe()).as(c.getName() + " livenessProbe").isNotNull();
        List<Probe> probes = new ArrayList<>(List.of(c.getReadinessProbe(), c.getLivenessProbe()));
        if (c.getStartupProbe() != null) probes.add(c.getStartupProbe());
        return probes;
    }

    private static boolean matches(LabelSelector selector, Map<String, String> labels) {
        assertThat(selector).isNotNull();
        assertThat(selector.getMatchExpressions()).as("only matchLabels are used here").isNullOrEmpty();
        Map<String, String> wanted = selector.getMatchLabels();
        assertThat(wanted).as("an empty selector would select every pod").isNotEmpty();
        return labels != null && labels.entrySet().containsAll(wanted.entrySet());
    }

    private List<Deployment> selects(LabelSelector selector) {
        return only(Deployment.class).stream()
                .filter(d -> matches(selector, d.getSpec().getTemplate().getMetadata().getLabels())).toList();
    }

    private static ContainerPort resolve(IntOrString port, List<ContainerPort> ports) {
        return ports.stream().filter(p -> port.getStrVal() != null ? port.getStrVal().equals(p.getName())
                : port.getIntVal().equals(p.getContainerPort())).findFirst().orElse(null);
    }

    private static List<String> ports(List<NetworkPolicyPort> ports) {
        return ports.stream().map(p -> p.getProtocol() + "/" + p.getPort().getIntVal()).toList();
    }

    private static long bytes(Quantity q) {
        return Quantity.getAmountInBytes(q).longValueExact();
    }
}
