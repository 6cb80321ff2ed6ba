package dev.codeexec.http;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;

import static dev.codeexec.http.ApiFilesTest.assertError;
import static dev.codeexec.http.ApiFilesTest.json;
import static dev.codeexec.http.ApiFilesTest.sha256;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * What {@link Uploads} alone decides; ApiFilesTest and ApiLargeFileTest cover the rest (raw and multipart
 * round trips, quotas, size caps, spooling of large parts).
 */
class UploadsTest {

    ApiClient api;

    @AfterEach
    void stop() throws Exception {
        if (api != null) api.close();
    }

    @Test
    void aMultipartBodyWithoutAFilePartIs400AndCreatesNoWorkspace() throws Exception {
        api = new ApiClient();
        String boundary = "----cem-test-boundary-field-only";
        String body = "--" + boundary + "\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhello\r\n--"
                + boundary + "--\r\n";
        HttpResponse<String> r = api.send(api.req("/api/workspaces/fresh/files/in/")
                .header("Content-Type", "multipart/form-data; boundary=" + boundary)
                .POST(HttpRequest.BodyPublishers.ofString(body)));
        assertError(r, 400, "bad_request");
        assertThat(api.dir("default", "fresh")).doesNotExist();
    }

    @Test
    void theAnswerNamesEachStoredFileWithItsSizeAndChecksum() throws Exception {
        api = new ApiClient();
        byte[] data = ApiFilesTest.random(1000, 3);
        var stored = json(api.multipart("w", "in/", Map.of("a.bin", data))).path("files").get(0);
        assertThat(stored.path("path").asString()).isEqualTo("in/a.bin");
        assertThat(stored.path("size").asLong()).isEqualTo(1000);
        assertThat(stored.path("sha256").asString()).isEqualTo(sha256(data));
    }

    @Test
    void multipartPartsAreSpooledWhereOnlyTheServerCanReadThem() throws Exception {
        api = new ApiClient();
        assertThat(api.multipart("w", "in/", Map.of("a.bin", new byte[] {1})).statusCode()).isEqualTo(201);
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(api.dataDir.resolve("upload-tmp"))))
                .isEqualTo("rwx------");
    }
}
