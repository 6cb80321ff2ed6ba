package dev.codeexec.gateway;

import io.grpc.Attributes;
import io.grpc.EquivalentAddressGroup;
import io.grpc.NameResolver;
import io.grpc.NameResolverProvider;
import io.grpc.NameResolverRegistry;
import io.grpc.Status;
import io.grpc.StatusOr;
import io.grpc.SynchronizationContext;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.URI;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.Executor;

/**
 * {@code static:///h1:port,h2:port}: grpc has no multi-address target syntax. Host names are looked up again on
 * every refresh (grpc asks after a connection is lost), so a restarted compose service with a new IP is found.
 * Each address carries its host as the TLS authority, so every worker's certificate is checked against its own
 * name rather than the first one's.
 */
final class StaticNameResolverProvider extends NameResolverProvider {

    static final String SCHEME = "static";

    private static boolean registered;

    /** Adds the scheme to grpc's default registry once per JVM (channels look schemes up there). */
    static synchronized void register() {
        if (registered) return;
        NameResolverRegistry.getDefaultRegistry().register(new StaticNameResolverProvider());
        registered = true;
    }

    @Override
    protected boolean isAvailable() {
        return true;
    }

    @Override
    protected int priority() {
        return 5;
    }

    @Override
    public String getDefaultScheme() {
        return SCHEME;
    }

    @Override
    public Collection<Class<? extends SocketAddress>> getProducedSocketAddressTypes() {
        return List.of(InetSocketAddress.class);
    }

    @Override
    public NameResolver newNameResolver(URI targetUri, NameResolver.Args args) {
        if (!SCHEME.equals(targetUri.getScheme())) return null;
        String path = targetUri.getPath() == null ? "" : targetUri.getPath();
        List<WorkersTarget.HostPort> list = WorkersTarget.parseStaticList(path.startsWith("/") ? path.substring(1) : path);
        return new StaticResolver(list, args.getOffloadExecutor(), args.getSynchronizationContext());
    }

    private static final class StaticResolver extends NameResolver {
        private final List<WorkersTarget.HostPort> list;
        private final Executor offload;
        private final SynchronizationContext sync;
        private Listener2 listener;
        private boolean resolving;
        private boolean shutdown;

        StaticResolver(List<WorkersTarget.HostPort> list, Executor offload, SynchronizationContext sync) {
            this.list = list;
            this.offload = offload;
            this.sync = sync;
        }

        @Override
        public String getServiceAuthority() {
            return list.get(0).toString();
        }

        @Override
        public void start(Listener2 l) {
            listener = l;
            resolve();
        }

        @Override
        public void refresh() {
            resolve();
        }

        /** Runs on the synchronization context; the lookups (possibly slow DNS) run on the offload executor. */
        private void resolve() {
            if (resolving || shutdown) return;
            resolving = true;
            offload.execute(() -> {
                List<EquivalentAddressGroup> groups = new ArrayList<>();
                List<String> failed = new ArrayList<>();
                for (WorkersTarget.HostPort hp : list) {
                    try {
                        InetSocketAddress a = new InetSocketAddress(InetAddress.getByName(hp.host()), hp.port());
                        groups.add(new EquivalentAddressGroup(a, Attributes.newBuilder()
                                .set(EquivalentAddressGroup.ATTR_AUTHORITY_OVERRIDE, hp.toString()).build()));
                    } catch (UnknownHostException e) {
                        failed.add(hp.toString());
                    }
                }
                sync.execute(() -> {
                    resolving = false;
                    if (shutdown) return;
                    StatusOr<List<EquivalentAddressGroup>> result = groups.isEmpty()
                            ? StatusOr.fromStatus(Status.UNAVAILABLE.withDescription("no worker address resolves: "
                                    + String.join(", ", failed)))
                            : StatusOr.fromValue(groups);
                    listener.onResult2(ResolutionResult.newBuilder().setAddressesOrError(result).build());
                });
            });
        }

        @Override
        public void shutdown() {
            shutdown = true;
        }
    }
}
