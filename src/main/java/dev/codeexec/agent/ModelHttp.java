package dev.codeexec.agent;

import dev.langchain4j.exception.HttpException;
import dev.langchain4j.http.client.HttpClient;
import dev.langchain4j.http.client.HttpClientBuilder;
import dev.langchain4j.http.client.HttpRequest;
import dev.langchain4j.http.client.SuccessfulHttpResponse;
import dev.langchain4j.http.client.sse.ServerSentEventListener;
import dev.langchain4j.http.client.sse.ServerSentEventParser;

import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Optional;

/**
 * LangChain4j's HTTP client for the model APIs, over the JDK's: LangChain4j builds every request and reads every
 * answer (both wire formats, streaming or not); this class only carries them. It exists because LangChain4j's own
 * JDK client drops an error's headers, and a rate limit's {@code Retry-After} is one: a 429 whose Retry-After is at
 * most {@link #MAX_RETRY_WAIT} seconds is waited out and sent once more; any other error becomes a
 * {@link Refused} that keeps the header, so the chat can name the wait. Redirects are not followed (a model API
 * that redirects would take the key elsewhere).
 */
final class ModelHttp implements HttpClient {

    /** Longest Retry-After waited out (once) before a request is sent again. */
    static final int MAX_RETRY_WAIT = 5;

    private final java.net.http.HttpClient http;
    private final Duration timeout;

    ModelHttp(Duration connectTimeout, Duration timeout) {
        this.http = java.net.http.HttpClient.newBuilder().connectTimeout(connectTimeout)
                .followRedirects(java.net.http.HttpClient.Redirect.NEVER).build();
        this.timeout = timeout;
    }

    /** An error answer of the model's API, with its Retry-After when it gave one. */
    static final class Refused extends HttpException {
        final Optional<String> retryAfter;

        Refused(int status, String body, Optional<String> retryAfter) {
            super(status, body);
            this.retryAfter = retryAfter;
        }
    }

    @Override
    public SuccessfulHttpResponse execute(HttpRequest request) {
        HttpResponse<byte[]> r = send(request, HttpResponse.BodyHandlers.ofByteArray(), b -> b);
        return SuccessfulHttpResponse.builder().statusCode(r.statusCode()).headers(r.headers().map()).body(r.body()).build();
    }

    @Override
    public void execute(HttpRequest request, ServerSentEventParser parser, ServerSentEventListener listener) {
        HttpResponse<InputStream> r;
        try {
            r = send(request, HttpResponse.BodyHandlers.ofInputStream(), ModelHttp::readAll);
        } catch (RuntimeException e) {
            listener.onError(e);
            return;
        }
        try (InputStream in = r.body()) {
            listener.onOpen(SuccessfulHttpResponse.builder().statusCode(r.statusCode()).headers(r.headers().map()).build());
            parser.parse(in, listener);
            listener.onClose();
        } catch (IOException | RuntimeException e) {
            listener.onError(e);
        }
    }

    /** Sends, waits out one short Retry-After of a 429, and turns an error status into {@link Refused}. */
    private <T> HttpResponse<T> send(HttpRequest request, HttpResponse.BodyHandler<T> handler,
            java.util.function.Function<T, byte[]> errorBody) {
        java.net.http.HttpRequest.Builder b = java.net.http.HttpRequest.newBuilder(URI.create(request.url())).timeout(timeout);
        request.headers().forEach((name, values) -> values.forEach(v -> b.header(name, v)));
        b.method(request.method().name(), request.body() == null ? java.net.http.HttpRequest.BodyPublishers.noBody()
                : java.net.http.HttpRequest.BodyPublishers.ofString(request.body()));
        java.net.http.HttpRequest jdk = b.build();
        for (int attempt = 0; ; attempt++) {
            HttpResponse<T> r;
            try {
                r = http.send(jdk, handler);
            } catch (HttpTimeoutException e) {
                throw new dev.langchain4j.exception.TimeoutException(e);
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new dev.langchain4j.exception.TimeoutException(e);
            }
            if (r.statusCode() >= 200 && r.statusCode() < 300) return r;
            Optional<String> retryAfter = r.headers().firstValue("Retry-After").map(String::strip);
            String body = new String(errorBody.apply(r.body()), StandardCharsets.UTF_8);
            Optional<Integer> wait = retryAfter.flatMap(ModelHttp::seconds);
            if (r.statusCode() == 429 && attempt == 0 && wait.isPresent() && wait.get() <= MAX_RETRY_WAIT) {
                try {
                    Thread.sleep(wait.get() * 1000L);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new Refused(429, body, retryAfter);
                }
                continue;
            }
            throw new Refused(r.statusCode(), body, retryAfter);
        }
    }

    private static Optional<Integer> seconds(String retryAfter) {
        try {
            int s = Integer.parseInt(retryAfter);
            return s >= 0 ? Optional.of(s) : Optional.empty();
        } catch (NumberFormatException e) {
            return Optional.empty(); // an HTTP date: never waited out here, named as given
        }
    }

    private static byte[] readAll(InputStream in) {
        try (in) {
            return in.readNBytes(64 << 10);
        } catch (IOException e) {
            return new byte[0];
        }
    }

    /** What LangChain4j's model builders take: this client with the builder's timeouts. */
    static final class Builder implements HttpClientBuilder {
        private Duration connect = Duration.ofSeconds(10);
        private Duration read;

        Builder(Duration timeout) {
            this.read = timeout;
        }

        @Override
        public Duration connectTimeout() {
            return connect;
        }

        @Override
        public HttpClientBuilder connectTimeout(Duration d) {
            if (d != null) connect = d;
            return this;
        }

        @Override
        public Duration readTimeout() {
            return read;
        }

        @Override
        public HttpClientBuilder readTimeout(Duration d) {
            if (d != null) read = d;
            return this;
        }

        @Override
        public HttpClient build() {
            return new ModelHttp(connect, read);
        }
    }
}
