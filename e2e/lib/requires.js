// What an end-to-end test needs of the machine (root, a language the test command installs), with the JUnit side's
// policy (dev.codeexec.testing.Requires): without it the test is skipped, but with CODEEXEC_STRICT_TESTS=1 in the
// environment (scripts/test.sh sets it) it fails, naming what was missing, so a CI run cannot be green with a suite
// left out. What is legitimately conditional everywhere (a registry on the internet that may be unreachable) stays a
// plain t.skip; docs/testing.md lists those.

/** Whether this run fails tests whose requirement is missing (rather than skip them). */
export const STRICT = ['1', 'true'].includes(String(process.env.CODEEXEC_STRICT_TESTS ?? '').toLowerCase());

function missing(what) {
    return `needs ${what}, which this machine lacks; CODEEXEC_STRICT_TESTS=1 makes that a failure `
        + '(the test command sets it; unset it to skip such tests)';
}

/**
 * For `describe(name, { skip: skipUnless(present, what) }, ...)`: false when present; else the reason to skip, or
 * in a strict run an error thrown where the suite is declared, which fails the file with that message.
 */
export function skipUnless(present, what) {
    if (present) return false;
    if (STRICT) throw new Error(missing(what));
    return `needs ${what}`;
}

/**
 * Inside a test: true when present; else skips the test (`t.skip`) and answers false (the test then returns), or
 * in a strict run throws, which fails it.
 */
export function requires(t, present, what) {
    if (present) return true;
    if (STRICT) throw new Error(missing(what));
    t.skip(`needs ${what}`);
    return false;
}
