package dev.codeexec.egress;

import dev.codeexec.http1.RequestHead;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * What a tunnel to a secret's host does to a request's text and its response's: placeholders in clear and inside
 * Basic credentials (git's and pip's way to send a token given in a URL) become the value for the secret's host and
 * are refused for any other; an echo of the value, in clear or in the credentials encoded here, goes back as the
 * program sent it.
 */
class PlaceholderSwapTest {

    static final String VALUE = "ghp_real_value_1234";
    static final RunSecrets SECRETS = EgressSecrets.parse("""
            {"GITHUB_TOKEN": {"value": "${GH}", "hosts": ["github.test"]},
             "PYPI_TOKEN": {"value": "pypi-real", "hosts": ["pypi.test"]}}
            """, Map.of("GH", VALUE)::get).forRun(EgressPolicy.parse("github.test,pypi.test"), "team");
    static final String GH = SECRETS.environment().get("GITHUB_TOKEN");
    static final String PYPI = SECRETS.environment().get("PYPI_TOKEN");

    static String basic(String userPass) {
        return "Basic " + Base64.getEncoder().encodeToString(userPass.getBytes(StandardCharsets.ISO_8859_1));
    }

    static String decoded(String basic) {
        return new String(Base64.getDecoder().decode(basic.substring("Basic ".length())), StandardCharsets.ISO_8859_1);
    }

    @Test
    void basicCredentialsHoldingAPlaceholderForThisHostAreSwappedAndEncodedAgain() throws Exception {
        PlaceholderSwap swap = new PlaceholderSwap(SECRETS, "github.test", 443);
        String sent = swap.field("Authorization", basic("x-access-token:" + GH));
        assertThat(sent).startsWith("Basic ");
        assertThat(decoded(sent)).isEqualTo("x-access-token:" + VALUE);
        assertThat(swap.applied()).containsExactly("GITHUB_TOKEN");
        // the scheme's case and the field's name do not matter; the placeholder may be the user as well
        assertThat(decoded(swap.field("authorization", "basic  " + basic(GH + ":x-oauth-basic").substring(6))))
                .isEqualTo(VALUE + ":x-oauth-basic");
        // in clear as before
        assertThat(swap.field("Authorization", "Bearer " + GH)).isEqualTo("Bearer " + VALUE);
        assertThat(swap.text("GET /x?token=" + GH + " HTTP/1.1")).isEqualTo("GET /x?token=" + VALUE + " HTTP/1.1");
    }

    @Test
    void aPlaceholderInBasicCredentialsForAnotherHostIsNotAllowedNamingTheSecret() {
        PlaceholderSwap swap = new PlaceholderSwap(SECRETS, "github.test", 443);
        assertThatThrownBy(() -> swap.field("Authorization", basic("__token__:" + PYPI)))
                .isInstanceOfSatisfying(PlaceholderSwap.NotAllowed.class,
                        e -> assertThat(e.placeholder().name()).isEqualTo("PYPI_TOKEN"))
                .hasMessageNotContaining("pypi-real").hasMessageNotContaining(PYPI);
        assertThat(swap.applied()).isEmpty();
        // the same in the proxy's other credentials field, which a client never sends inside a tunnel
        assertThatThrownBy(() -> swap.field("Proxy-Authorization", basic("u:" + PYPI)))
                .isInstanceOf(PlaceholderSwap.NotAllowed.class);
    }

    @Test
    void credentialsWithoutAPlaceholderAndValuesThatAreNotBase64PassAsTheyCame() throws Exception {
        PlaceholderSwap swap = new PlaceholderSwap(SECRETS, "github.test", 443);
        String unpadded = "Basic dXNlcjpwYXNz"; // user:pass
        assertThat(swap.field("Authorization", unpadded)).isEqualTo(unpadded);
        assertThat(swap.field("Authorization", "Basic not*base64!")).isEqualTo("Basic not*base64!");
        // a placeholder in clear after "Basic" is not base64 ('_'): swapped in clear
        assertThat(swap.field("Authorization", "Basic " + GH)).isEqualTo("Basic " + VALUE);
        // another field that merely looks like credentials is not decoded
        String lookalike = basic("u:" + PYPI);
        assertThat(swap.field("X-Note", lookalike)).isEqualTo(lookalike);
        assertThat(swap.applied()).containsExactly("GITHUB_TOKEN");
    }

    @Test
    void anEchoOfTheCredentialsEncodedHereOrOfTheValueGoesBackAsTheProgramSentIt() throws Exception {
        PlaceholderSwap swap = new PlaceholderSwap(SECRETS, "github.test", 443);
        String program = basic("x-access-token:" + GH);
        String sent = swap.field("Authorization", program);
        String echo = "{\"headers\": {\"Authorization\": \"" + sent + "\", \"X\": \"" + VALUE + "\"}}";
        assertThat(swap.scrub(echo)).isEqualTo("{\"headers\": {\"Authorization\": \"" + program + "\", \"X\": \"" + GH + "\"}}");
        assertThat(new String(swap.scrub(echo.getBytes(StandardCharsets.UTF_8)), StandardCharsets.UTF_8))
                .doesNotContain(sent.substring(6)).doesNotContain(VALUE).contains(program);
    }

    @Test
    void aPlainHttpHeadHidesNoPlaceholderInBasicCredentials() {
        List<RequestHead.Field> fields = List.of(new RequestHead.Field("Accept", "*/*"),
                new RequestHead.Field("Authorization", basic("__token__:" + PYPI)));
        assertThat(SECRETS.foundIn("GET http://pypi.test/simple/ HTTP/1.1", fields)).map(RunSecrets.Placeholder::name)
                .contains("PYPI_TOKEN");
        assertThat(SECRETS.foundIn("GET http://pypi.test/simple/ HTTP/1.1",
                List.of(new RequestHead.Field("Authorization", basic("__token__:other"))))).isEmpty();
        assertThat(RunSecrets.NONE.foundIn("GET / HTTP/1.1", fields)).isEmpty();
    }
}
