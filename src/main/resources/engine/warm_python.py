"""Warm Python runner: started ahead of a run inside its sandbox, it preloads modules, says it is ready, then runs
the one piece of code it is sent as `python3 -u FILE args...` would. Single use: the sandbox is discarded after.
Protocol: docs/interpreter-protocol.md."""

import os
import sys

# What the interpreter imported by itself: the modules a plain run also has before the user's code.
STARTUP_MODULES = frozenset(sys.modules)

import codeexec_main  # noqa: E402 (after the snapshot on purpose)


def main():
    codeexec_main.RUNNER_FILES.add(__file__)
    channel = codeexec_main.Channel()
    codeexec_main.preload()
    channel.send({"ready": True})
    message = channel.receive()
    if message is None:
        # The server discarded this sandbox before using it.
        os._exit(0)
    channel.close()
    file = message.get("file")
    code = message.get("code")
    args = message.get("args") or []
    if not (isinstance(file, str) and os.path.isabs(file) and isinstance(code, str)
            and isinstance(args, list) and all(isinstance(a, str) for a in args)):
        os._exit(2)
    try:
        # Resolved again now: a workspace may have been mounted over the working directory after the start.
        os.chdir(os.path.dirname(file))
    except OSError:
        os._exit(2)
    # The user's `import codeexec_main` must find their own file, as in a cold run, not this runner's helper.
    del sys.modules["codeexec_main"]
    codeexec_main.run_file(code, file, args, STARTUP_MODULES)


main()
