package dev.codeexec.gateway;

import io.grpc.LoadBalancer;
import io.grpc.LoadBalancerProvider;
import io.grpc.LoadBalancerRegistry;
import io.grpc.NameResolver.ConfigOrError;
import io.grpc.protobuf.services.HealthCheckingLoadBalancerUtil;

import java.util.Map;

/**
 * A balancing policy wrapped so that only workers whose health service says SERVING get picks. grpc-java honours
 * the service config's {@code healthCheckConfig} for round_robin only; weighted_round_robin and least_request
 * would keep sending runs to a draining worker. Registered as {@code codeexec_healthy_<child policy>}, taking the
 * child's own configuration unchanged.
 */
final class HealthCheckedPolicyProvider extends LoadBalancerProvider {

    static final String PREFIX = "codeexec_healthy_";

    private final LoadBalancerProvider child;

    private HealthCheckedPolicyProvider(LoadBalancerProvider child) {
        this.child = child;
    }

    /** Registers the wrapper of {@code childPolicy} once per JVM and returns its policy name. */
    static synchronized String register(String childPolicy) {
        LoadBalancerRegistry registry = LoadBalancerRegistry.getDefaultRegistry();
        String name = PREFIX + childPolicy;
        if (registry.getProvider(name) == null) {
            LoadBalancerProvider child = registry.getProvider(childPolicy);
            if (child == null) throw new IllegalStateException("grpc balancing policy " + childPolicy + " is missing");
            registry.register(new HealthCheckedPolicyProvider(child));
        }
        return name;
    }

    @Override
    public boolean isAvailable() {
        return true;
    }

    @Override
    public int getPriority() {
        return 5;
    }

    @Override
    public String getPolicyName() {
        return PREFIX + child.getPolicyName();
    }

    @Override
    public LoadBalancer newLoadBalancer(LoadBalancer.Helper helper) {
        return HealthCheckingLoadBalancerUtil.newHealthCheckingLoadBalancer(child, helper);
    }

    @Override
    public ConfigOrError parseLoadBalancingPolicyConfig(Map<String, ?> rawConfig) {
        return child.parseLoadBalancingPolicyConfig(rawConfig);
    }
}
