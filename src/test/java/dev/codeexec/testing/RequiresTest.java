package dev.codeexec.testing;

import org.junit.jupiter.api.Test;
import org.opentest4j.AssertionFailedError;
import org.opentest4j.TestAbortedException;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** {@link Requires}: a missing requirement skips a test, fails it in a strict run, and says what was missing. */
class RequiresTest {

    @Test
    void onlyOneOrTrueInTheEnvironmentMakesARunStrict() {
        assertThat(Requires.strict("1")).isTrue();
        assertThat(Requires.strict("true")).isTrue();
        assertThat(Requires.strict("TRUE")).isTrue();
        assertThat(Requires.strict(null)).isFalse();
        assertThat(Requires.strict("")).isFalse();
        assertThat(Requires.strict("0")).isFalse();
        assertThat(Requires.strict("no")).isFalse();
    }

    @Test
    void aMissingRequirementSkipsTheTestOutsideAStrictRun() {
        assertThatThrownBy(() -> Requires.that(false, "root: loop mounts", false))
                .isInstanceOf(TestAbortedException.class).hasMessageContaining("needs root: loop mounts");
        assertThat(Requires.orFallBack(false, "a sandbox", false)).isFalse();
    }

    @Test
    void aMissingRequirementFailsTheTestInAStrictRunNamingItAndTheSwitch() {
        assertThatThrownBy(() -> Requires.that(false, "root: loop mounts", true))
                .isInstanceOf(AssertionFailedError.class)
                .hasMessageContaining("needs root: loop mounts").hasMessageContaining("CODEEXEC_STRICT_TESTS=1");
        assertThatThrownBy(() -> Requires.orFallBack(false, "a sandbox", true))
                .isInstanceOf(AssertionFailedError.class).hasMessageContaining("needs a sandbox").hasMessageContaining("fall back");
    }

    @Test
    void aPresentRequirementLetsTheTestGoOnInEitherRun() {
        assertThatCode(() -> Requires.that(true, "x", true)).doesNotThrowAnyException();
        assertThatCode(() -> Requires.that(true, "x", false)).doesNotThrowAnyException();
        assertThat(Requires.orFallBack(true, "x", true)).isTrue();
        assertThatCode(() -> Requires.onlyWhere(true, "x")).doesNotThrowAnyException();
    }

    @Test
    void whatOnlySomeMachinesHaveIsASkipWhateverTheRun() {
        // onlyWhere never looks at the switch: a strict run on a machine without the feature still passes
        assertThatThrownBy(() -> Requires.onlyWhere(false, "a kernel that mounts XFS with prjquota"))
                .isInstanceOf(TestAbortedException.class).hasMessageContaining("a kernel that mounts XFS with prjquota");
    }
}
