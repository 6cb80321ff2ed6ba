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
    preloaded = codeexec_main.preload()
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
    if not preloaded:
        codeexec_main.run_file(code, file, args, STARTUP_MODULES)
        return
    # With preloaded modules, the interpreter's own shutdown (clearing every module's objects: ~10 ms for
    # numpy+pandas) would be most of a short run; end the way it ends, minus that teardown.
    try:
        codeexec_main.run_file(code, file, args, STARTUP_MODULES)
        status = 0
    except SystemExit as e:
        status = exit_status(e.code)
    finish_without_teardown(status)


def exit_status(code):
    """What the interpreter makes of SystemExit(code): None is 0, an int is itself, anything else is printed to
    stderr and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    try:
        sys.stderr.write(str(code) + "\n")
    except BaseException:
        pass
    return 1


def finish_without_teardown(status):
    """The user-visible part of Py_FinalizeEx, in its order: wait for non-daemon threads, run atexit handlers,
    flush every open file object (a file the program never closed is flushed at shutdown in a plain run), then
    leave without tearing the modules down."""
    if "threading" in sys.modules:
        try:
            sys.modules["threading"]._shutdown()
        except BaseException:
            pass
    import atexit
    import gc
    import io
    atexit._run_exitfuncs()
    for obj in gc.get_objects():
        if isinstance(obj, io.IOBase):
            try:
                if not obj.closed:
                    obj.flush()
            except BaseException:
                pass
    codeexec_main.flush_std()
    os._exit(status & 0xFF)


main()
