package dev.codeexec.worker;

import io.grpc.Grpc;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;

/**
 * WORKER_TOKEN: every call of the Worker service must carry {@code authorization: Bearer <token>}. Compared in
 * constant time, so the time a wrong guess takes tells nothing about how much of it was right. Refused calls end
 * before the service sees them: no run, no session, no status.
 */
final class TokenInterceptor implements ServerInterceptor {

    static final Metadata.Key<String> AUTHORIZATION =
            Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

    private static final Logger log = LoggerFactory.getLogger(TokenInterceptor.class);

    private final byte[] expected;

    TokenInterceptor(String token) {
        this.expected = ("Bearer " + token).getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
            ServerCallHandler<Q, R> next) {
        String got = headers.get(AUTHORIZATION);
        if (got != null && MessageDigest.isEqual(got.getBytes(StandardCharsets.UTF_8), expected)) {
            return next.startCall(call, headers);
        }
        log.warn("refused {} from {}: {} worker token", call.getMethodDescriptor().getBareMethodName(),
                call.getAttributes().get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR), got == null ? "missing" : "wrong");
        call.close(Status.UNAUTHENTICATED.withDescription("missing or wrong worker token"), new Metadata());
        return new ServerCall.Listener<>() {
        };
    }
}
