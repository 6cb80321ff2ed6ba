package dev.codeexec.engine;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;

import static org.assertj.core.api.Assertions.assertThat;

class CapturedTextTest {

    @Test
    void upToTheCapEverythingIsKeptInOrder() {
        CapturedText t = new CapturedText(10);
        t.append("abc");
        t.append("defghij");
        assertThat(t.captured()).isEqualTo(new CapturedText.Captured("abcdefghij", false));
    }

    @Test
    void overTheCapTheHeadAndTheTailAreKeptHalfEachWithTheBytesLeftOut() {
        CapturedText t = new CapturedText(8);
        for (char c = 'a'; c <= 'z'; c++) t.append(String.valueOf(c));
        CapturedText.Captured r = t.captured();
        assertThat(r.truncated()).isTrue();
        assertThat(r.text()).isEqualTo("abcd\n[... 18 bytes left out ...]\nwxyz");
    }

    @Test
    void bytesAreCountedAsUtf8AndNoCharacterIsSplit() {
        CapturedText t = new CapturedText(6);
        t.append("é€😀");  // 2 + 3 + 4 bytes
        t.append("xyz");
        CapturedText.Captured r = t.captured();
        // head: "é" (2 bytes; "€" would pass 3); tail: the last 3 bytes whole
        assertThat(r.text()).startsWith("é\n[... ").endsWith(" bytes left out ...]\nxyz");
        long left = "é€😀xyz".getBytes(StandardCharsets.UTF_8).length - "éxyz".getBytes(StandardCharsets.UTF_8).length;
        assertThat(r.text()).contains("[... " + left + " bytes left out ...]");
    }

    @Test
    void aSurrogatePairSplitAcrossAppendsStaysWhole() {
        CapturedText t = new CapturedText(100);
        String smile = "😀";
        t.append("a" + smile.charAt(0));
        t.append(smile.charAt(1) + "b");
        assertThat(t.captured().text()).isEqualTo("a😀b");
    }

    @Test
    void aMillionAppendsKeepMemoryBounded() {
        CapturedText t = new CapturedText(1000);
        for (int i = 0; i < 1_000_000; i++) t.append("line " + i + "\n");
        CapturedText.Captured r = t.captured();
        assertThat(r.text()).startsWith("line 0\nline 1\n").endsWith("line 999999\n");
        assertThat(r.text().length()).isLessThan(1100);
    }
}
