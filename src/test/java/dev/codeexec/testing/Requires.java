package dev.codeexec.testing;

import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;

/**
 * The one policy for a test that needs something of the machine (a sandbox that can run code, root, cgroups, a
 * runtime the test command installs): without it the test is skipped, so a developer without root still gets the
 * rest of the suite. With {@code CODEEXEC_STRICT_TESTS=1} in the environment (the test command, scripts/test.sh,
 * sets it) the same test fails instead, naming what was missing: a CI run cannot be green with the sandbox untested.
 *
 * <p>What is legitimately conditional everywhere (a kernel feature the machine may lack, one of two mechanisms the
 * kernel picks) goes through {@link #onlyWhere}, a skip in every run; docs/testing.md lists those. No test calls
 * JUnit's or AssertJ's assumptions directly: the policy is here.
 */
public final class Requires {

    /** The environment variable that turns a missing requirement into a failure ({@code 1} or {@code true}). */
    public static final String STRICT = "CODEEXEC_STRICT_TESTS";

    private Requires() {
    }

    /** Whether this run fails tests whose requirement is missing (rather than skip them). */
    public static boolean strict() {
        return strict(System.getenv(STRICT));
    }

    static boolean strict(String value) {
        return value != null && (value.equals("1") || value.equalsIgnoreCase("true"));
    }

    /**
     * Goes on when {@code present}; else skips the test, or fails it in a strict run. {@code what} names the
     * requirement ("a sandbox that can run code here", "root: loop mounts").
     */
    public static void that(boolean present, String what) {
        that(present, what, strict());
    }

    static void that(boolean present, String what, boolean strict) {
        if (present) return;
        if (strict) Assertions.fail(missing(what));
        Assumptions.abort("needs " + what);
    }

    /**
     * Goes on when {@code present}; else skips the test in every run, strict too: for behaviour that exists only on
     * some machines (a kernel feature, one of two mechanisms the kernel picks), never for what the test command
     * installs or what root gives. docs/testing.md lists each use and why.
     */
    public static void onlyWhere(boolean present, String what) {
        if (!present) Assumptions.abort("only where there is " + what);
    }

    /**
     * Whether the real thing is there, for a test that then checks it and otherwise checks a stand-in (a fake
     * sandbox): false lets it fall back, except in a strict run, which fails instead.
     */
    public static boolean orFallBack(boolean present, String what) {
        return orFallBack(present, what, strict());
    }

    static boolean orFallBack(boolean present, String what, boolean strict) {
        if (!present && strict) Assertions.fail(missing(what) + " (this test would fall back to a stand-in)");
        return present;
    }

    static String missing(String what) {
        return "needs " + what + ", which this machine lacks; " + STRICT
                + "=1 makes that a failure (the test command sets it; unset it to skip such tests)";
    }
}
