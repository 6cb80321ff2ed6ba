package dev.codeexec.workspace;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** File names as raw bytes, as held, and as shown: nothing lost, nothing confused. */
class NamesTest {

    private static byte[] bytes(int... b) {
        byte[] out = new byte[b.length];
        for (int i = 0; i < b.length; i++) out[i] = (byte) b[i];
        return out;
    }

    @Test
    void utf8NamesAreHeldAndShownAsTheyAre() {
        for (String s : new String[]{"main.py", "café.txt", "数据.csv", "emoji-😀.png", "a b"}) {
            byte[] raw = s.getBytes(StandardCharsets.UTF_8);
            assertThat(Names.decode(raw)).isEqualTo(s);
            assertThat(Names.encode(s)).isEqualTo(raw);
            assertThat(Names.display(s)).isEqualTo(s);
        }
    }

    @Test
    void bytesThatAreNotUtf8AreShownEscapedAndTwoSuchNamesNeverShowAlike() {
        String ff = Names.decode(bytes('a', 0xff));
        String fe = Names.decode(bytes('a', 0xfe));
        assertThat(Names.display(ff)).isEqualTo("a\\xff");
        assertThat(Names.display(fe)).isEqualTo("a\\xfe");
        assertThat(Names.encode(ff)).isEqualTo(bytes('a', 0xff));
        // Latin-1 "café" is not the UTF-8 one
        assertThat(Names.display(Names.decode(bytes('c', 'a', 'f', 0xe9)))).isEqualTo("caf\\xe9");
        // an overlong '/' and an encoded surrogate are invalid UTF-8 too
        assertThat(Names.display(Names.decode(bytes(0xc0, 0xaf)))).isEqualTo("\\xc0\\xaf");
        assertThat(Names.display(Names.decode(bytes(0xed, 0xa0, 0x80)))).isEqualTo("\\xed\\xa0\\x80");
    }

    @Test
    void controlCharactersAndBackslashesAreEscapedSoNoPlainNameLooksLikeAnEscapedOne() {
        assertThat(Names.display("line\nbreak")).isEqualTo("line\\x0abreak");
        assertThat(Names.display("a\\xff")).isEqualTo("a\\\\xff"); // the literal text, not the byte
        assertThat(Names.display("esc\u009b[31m")).isEqualTo("esc\\xc2\\x9b[31m");
    }

    @Test
    void everyRawNameRoundTripsAndDifferentNamesShowDifferently() {
        Random random = new Random(11);
        Map<String, byte[]> shown = new HashMap<>();
        for (int i = 0; i < 20_000; i++) {
            byte[] raw = new byte[1 + random.nextInt(6)];
            for (int k = 0; k < raw.length; k++) {
                int b = random.nextInt(256);
                raw[k] = (byte) (b == 0 || b == '/' ? 'x' : b); // the two bytes no name can hold
            }
            String held = Names.decode(raw);
            assertThat(Names.encode(held)).isEqualTo(raw);
            byte[] before = shown.putIfAbsent(Names.display(held), raw);
            if (before != null) assertThat(before).as("shown as %s", Names.display(held)).isEqualTo(raw);
        }
    }

    @Test
    void aClientPathWithALoneSurrogateIsRefused() {
        assertThatThrownBy(() -> RelPath.parse("a\udcff")).isInstanceOf(WorkspaceException.class)
                .hasMessageContaining("not valid Unicode");
        assertThat(RelPath.parse("emoji-😀.png").parts()).containsExactly("emoji-😀.png");
    }
}
