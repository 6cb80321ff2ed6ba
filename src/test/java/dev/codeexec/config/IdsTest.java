package dev.codeexec.config;

import org.junit.jupiter.api.Test;

import java.util.HashSet;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

class IdsTest {

    @Test
    void anIdIsTwoLowercaseHexDigitsPerByteAndNoneRepeats() {
        Set<String> seen = new HashSet<>();
        for (int i = 0; i < 10_000; i++) assertThat(seen.add(Ids.hex(8))).isTrue();
        assertThat(seen).allSatisfy(id -> assertThat(id).matches("[0-9a-f]{16}"));
        assertThat(Ids.hex(4)).matches("[0-9a-f]{8}");
        assertThat(Ids.bytes(32)).hasSize(32).isNotEqualTo(Ids.bytes(32));
    }
}
