package dev.codeexec.http;

import dev.codeexec.mcp.FakeExecutor;
import dev.codeexec.mcp.RawClient;
import dev.codeexec.mcp.TestServers;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;

import java.net.http.HttpResponse;
import java.util.List;

import static dev.codeexec.mcp.FakeExecutor.worker;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * /healthz over real HTTP with the executor's worker list: a local server's answer is as before; a gateway's
 * status follows how many workers are healthy, and the unauthenticated answer names no worker's error.
 */
class HealthWorkersTest {

    FakeExecutor executor = new FakeExecutor();
    HttpServer server;
    RawClient raw;

    @BeforeEach
    void start() throws Exception {
        server = TestServers.start(executor, "API_KEY", "a-key-healthz-does-not-need");
        raw = new RawClient(server.port());
    }

    @AfterEach
    void stop() {
        server.close();
    }

    private HttpResponse<String> healthz() throws Exception {
        return raw.send(raw.request("/healthz").GET());
    }

    @Test
    void aLocalServerSaysOkWithModeLocalAndNoWorkers() throws Exception {
        HttpResponse<String> r = healthz();
        assertThat(r.statusCode()).isEqualTo(200);
        JsonNode body = JsonErrors.JSON.readTree(r.body());
        assertThat(body.path("status").asString()).isEqualTo("ok");
        assertThat(body.path("mode").asString()).isEqualTo("local");
        assertThat(body.has("workers")).isFalse();
        assertThat(body.path("sandbox").asString()).isEqualTo("fake");
    }

    @Test
    void aGatewayWithEveryWorkerHealthyIsOkAndListsThem() throws Exception {
        executor.workers = List.of(worker("10.0.0.1:30031", "w-1", true, 2, 4), worker("10.0.0.2:30031", "w-2", true, 0, 4));
        HttpResponse<String> r = healthz();
        assertThat(r.statusCode()).isEqualTo(200);
        JsonNode body = JsonErrors.JSON.readTree(r.body());
        assertThat(body.path("status").asString()).isEqualTo("ok");
        assertThat(body.path("mode").asString()).isEqualTo("gateway");
        JsonNode ws = body.path("workers");
        assertThat(ws.path("total").asInt()).isEqualTo(2);
        assertThat(ws.path("healthy").asInt()).isEqualTo(2);
        JsonNode first = ws.path("list").get(0);
        assertThat(first.path("address").asString()).isEqualTo("10.0.0.1:30031");
        assertThat(first.path("name").asString()).isEqualTo("w-1");
        assertThat(first.path("healthy").asBoolean()).isTrue();
        assertThat(first.path("running").asInt()).isEqualTo(2);
        assertThat(first.path("slots").asInt()).isEqualTo(4);
        assertThat(first.path("lastSeen").asString()).isEqualTo("2026-11-30T12:00:00Z");
        assertThat(ws.path("list").get(1).path("address").asString()).isEqualTo("10.0.0.2:30031");
    }

    @Test
    void someWorkersDownIsDegradedButStill200AndTheirErrorsStayPrivate() throws Exception {
        executor.workers = List.of(worker("10.0.0.1:30031", "w-1", true, 0, 4), worker("10.0.0.2:30031", "w-2", false, 0, 0));
        HttpResponse<String> r = healthz();
        assertThat(r.statusCode()).isEqualTo(200);
        JsonNode body = JsonErrors.JSON.readTree(r.body());
        assertThat(body.path("status").asString()).isEqualTo("degraded");
        assertThat(body.path("workers").path("healthy").asInt()).isEqualTo(1);
        assertThat(body.path("workers").path("list").get(1).path("healthy").asBoolean()).isFalse();
        assertThat(body.path("workers").path("list").get(1).has("error")).isFalse();
        assertThat(r.body()).doesNotContain("connection refused").doesNotContain("10.9.8.7");
    }

    @Test
    void noHealthyWorkerIs503Unavailable() throws Exception {
        executor.workers = List.of(worker("10.0.0.1:30031", "w-1", false, 0, 0), worker("10.0.0.2:30031", "w-2", false, 0, 0));
        HttpResponse<String> r = healthz();
        assertThat(r.statusCode()).isEqualTo(503);
        JsonNode body = JsonErrors.JSON.readTree(r.body());
        assertThat(body.path("status").asString()).isEqualTo("unavailable");
        assertThat(body.path("workers").path("total").asInt()).isEqualTo(2);
        assertThat(body.path("workers").path("healthy").asInt()).isZero();
    }

    @Test
    void aGatewayThatKnowsNoWorkerYetIs503NotOk() throws Exception {
        executor.remote = true;
        HttpResponse<String> r = healthz();
        assertThat(r.statusCode()).isEqualTo(503);
        JsonNode body = JsonErrors.JSON.readTree(r.body());
        assertThat(body.path("status").asString()).isEqualTo("unavailable");
        assertThat(body.path("mode").asString()).isEqualTo("gateway");
        assertThat(body.path("workers").path("total").asInt()).isZero();
        assertThat(body.path("workers").path("list").isArray()).isTrue();
    }
}
