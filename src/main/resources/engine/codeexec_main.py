"""What the Python session runner (session_python.py) adds to codeexec_run: the JSON control channel, a short
description of an exception for the call's reply, and the SIGINT handling that interrupts only user code. The
shared running and reporting of user code is codeexec_run's, re-exported here.

The protocol is described in docs/interpreter-protocol.md. This module never writes to fds 1 and 2 itself: those
belong to the user's program (and to the session's markers)."""

import fcntl
import json
import os
import sys

from codeexec_run import (RUNNER_FILES, flush_std, forget_runner_modules, forget_shadowed_modules,  # noqa: F401
                          load_source_printing, new_main_module, preload, print_exception, register_source,
                          write_all)

RUNNER_FILES.add(__file__)
# a session's cells are never on disk: their tracebacks come from linecache, through the traceback module
load_source_printing()

CONTROL_IN = 8
CONTROL_OUT = 9


def _private_fd(fd):
    """A close-on-exec duplicate of an inherited fd, numbered high so that the user's own files get the low numbers
    a plain `python3 file.py` would give them; the inherited fd is closed."""
    try:
        new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100)
    except OSError:
        # RLIMIT_NOFILE below 100: any close-on-exec number will do.
        new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return new


class Channel:
    """One JSON object per line in each direction, on private copies of fds 8 (in) and 9 (out)."""

    def __init__(self):
        try:
            self._in = _private_fd(CONTROL_IN)
            self._out = _private_fd(CONTROL_OUT)
        except OSError as e:
            # Started without the control fds: nothing to talk to. Not the user's output, so exit with a code only.
            os._exit(2)
        self._buffer = b""

    def send(self, message):
        line = json.dumps(message, ensure_ascii=True, separators=(",", ":")) + "\n"
        write_all(self._out, line.encode("ascii"))

    def receive(self):
        """The next message, or None at end of input (the server is done with this interpreter)."""
        while b"\n" not in self._buffer:
            chunk = os.read(self._in, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            message = json.loads(line.decode("utf-8"))
        except ValueError:
            os._exit(2)
        if not isinstance(message, dict):
            os._exit(2)
        return message

    def close(self):
        os.close(self._in)
        os.close(self._out)


def describe(exc):
    """The last line of the interpreter's report of an exception: `ZeroDivisionError: division by zero`."""
    cls = type(exc)
    name = cls.__qualname__
    if cls.__module__ not in ("builtins", "__main__"):
        name = cls.__module__ + "." + name
    if isinstance(exc, SyntaxError):
        text = exc.msg if exc.msg is not None else ""
    else:
        try:
            text = str(exc)
        except BaseException:
            text = "<exception str() failed>"
    line = name + ": " + text if text else name
    return " ".join(line.split("\n"))


def call_user(fn, *args):
    """Every call from the session runner into user code goes through here: a SIGINT raises KeyboardInterrupt only
    while this frame is on the stack, so the runner is never interrupted in its own work."""
    return fn(*args)


_CALL_USER = call_user.__code__


def on_sigint(signum, frame):
    while frame is not None:
        code = frame.f_code
        if code is _CALL_USER:
            raise KeyboardInterrupt
        if code.co_filename in RUNNER_FILES:
            return
        frame = frame.f_back
