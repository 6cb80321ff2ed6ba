"""Cold Python runner: `python3 -S -u run_python.py FILE args...` runs FILE as `python3 -u FILE args...` would,
after doing what site would at start-up (codeexec_site) for a fraction of its cost. Every Python run that does not
take a warm sandbox starts this way, so cold and warm runs see the same interpreter. docs/interpreter-protocol.md."""

import sys

import codeexec_site

codeexec_site.start()
# What the interpreter imported by itself: the modules a plain run also has before the user's code.
STARTUP_MODULES = frozenset(sys.modules) - {"codeexec_site"}

import codeexec_run  # noqa: E402 (after the snapshot on purpose)


def main():
    codeexec_run.RUNNER_FILES.add(__file__)
    if len(sys.argv) < 2:
        sys.stderr.write("usage: python3 -S -u run_python.py FILE [ARG...]\n")
        sys.exit(2)
    file = sys.argv[1]
    try:
        with open(file, "rb") as f:
            code = f.read()
    except OSError as e:
        # the interpreter's own words for a script it cannot open
        sys.stderr.write("%s: can't open file %r: [Errno %d] %s\n" % (sys.orig_argv[0], file, e.errno, e.strerror))
        sys.exit(2)
    codeexec_run.run_file(code, file, sys.argv[2:], STARTUP_MODULES)


main()
