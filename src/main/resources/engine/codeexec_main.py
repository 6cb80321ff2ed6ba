"""What the two Python runners (warm_python.py, session_python.py) share: the control channel, the preload, and
the way user code is compiled, run and reported so that it looks like `python3 -u file.py` did it.

The protocol is described in docs/interpreter-protocol.md. This module never writes to fds 1 and 2 itself: those
belong to the user's program (and to the session's markers)."""

import atexit
import builtins
import fcntl
import gc
import importlib
import json
import linecache
import os
import signal
import sys
import traceback
from importlib.machinery import SourceFileLoader

CONTROL_IN = 8
CONTROL_OUT = 9

# Frames of these files are the runner's own: they are cut from the front of tracebacks, and a SIGINT that lands
# in them (while the session is idle or doing its bookkeeping) is ignored. codeexec_mpl is deliberately not here:
# its show() runs on behalf of the user and must be interruptible.
RUNNER_FILES = {__file__}


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


def write_all(fd, data):
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            # The user made the pipe non-blocking (os.set_blocking(1, False)): wait until it drains.
            import select
            select.select([], [fd], [])
            continue
        view = view[n:]


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


def flush_std():
    """Flushes sys.stdout and sys.stderr, whatever the user's code made of them."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


def preload():
    """Imports the modules named in CODE_EXEC_PRELOAD with fds 1 and 2 on /dev/null (an import that prints or
    warns must not reach the user's output), skipping any that fail, then freezes the heap: the preloaded objects
    are never collected, and a frozen generation is not scanned (or written to, which keeps the pages shared).
    Returns whether any module was asked for."""
    names = [n.strip() for n in os.environ.pop("CODE_EXEC_PRELOAD", "").split(",") if n.strip()]
    if names:
        saved = (os.dup(1), os.dup(2))
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
        try:
            for name in names:
                try:
                    importlib.import_module(name)
                except BaseException:
                    pass
            flush_std()
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
    gc.collect()
    gc.freeze()
    return bool(names)


def register_source(filename, source):
    """Puts the code in linecache under its filename, so tracebacks show its lines even when no such file exists
    (cells) or the file is not the code that ran. An mtime of None keeps linecache.checkcache from dropping it."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def strip_runner_frames(tb, first_user_file=None):
    """The traceback without the runner's frames: those that called into the user's code, at its head, and the
    SIGINT handler that raised KeyboardInterrupt, at its tail. With first_user_file (a predicate on file names),
    everything before the first frame of such a file goes too (the event loop between a session and its cell), if
    there is one."""
    while tb is not None and tb.tb_frame.f_code.co_filename in RUNNER_FILES:
        tb = tb.tb_next
    if first_user_file is not None:
        entry = tb
        while entry is not None and not first_user_file(entry.tb_frame.f_code.co_filename):
            entry = entry.tb_next
        if entry is not None:
            tb = entry
    last_user = None
    entry = tb
    while entry is not None:
        if entry.tb_frame.f_code.co_filename not in RUNNER_FILES:
            last_user = entry
        entry = entry.tb_next
    if last_user is not None:
        last_user.tb_next = None
    return tb


def print_exception(exc, first_user_file=None):
    """Prints an exception the way the interpreter does for an uncaught one, without the runner's frames. The
    interpreter's own printer reads source lines from disk only; the traceback module prints the same text but
    reads them through linecache, where cells and sent code are. A hook the user installed is honoured."""
    tb = strip_runner_frames(exc.__traceback__, first_user_file)
    exc.__traceback__ = tb
    hook = sys.excepthook
    try:
        if hook is sys.__excepthook__:
            traceback.print_exception(type(exc), exc, tb)
        else:
            hook(type(exc), exc, tb)
    except BaseException:
        sys.__excepthook__(type(exc), exc, tb)


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


def forget_shadowed_modules(directory, startup_modules):
    """Drops from sys.modules what the runner (or the preload) imported that a module in the user's directory would
    shadow in a plain run, where that directory comes first on sys.path: with a token.py or re.py there, the user's
    `import token` must find their file, not the runner's copy of the standard one. The runner keeps its references."""
    tops = {name.partition(".")[0] for name in sys.modules if name not in startup_modules}
    for top in tops:
        if os.path.isfile(os.path.join(directory, top + ".py")) or \
                os.path.isfile(os.path.join(directory, top, "__init__.py")):
            for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
                del sys.modules[name]


def new_main_module(**attributes):
    """A fresh module that becomes sys.modules["__main__"], with what the interpreter puts in a script's globals."""
    module = type(sys)("__main__")
    module.__annotations__ = {}
    module.__builtins__ = builtins
    for key, value in attributes.items():
        setattr(module, key, value)
    sys.modules["__main__"] = module
    return module


def run_file(code, file, args, startup_modules):
    """Runs code as `python3 -u file args...` would, and exits the way that would: the code's SystemExit goes
    through untouched, an uncaught exception prints its traceback and exits 1, and a KeyboardInterrupt ends the
    process by SIGINT after the interpreter's usual shutdown (threads joined, atexit handlers run)."""
    module = new_main_module(__file__=file, __cached__=None, __loader__=SourceFileLoader("__main__", file))
    sys.argv = [file] + list(args)
    sys.path[0] = os.path.dirname(file)
    forget_shadowed_modules(sys.path[0], startup_modules)
    register_source(file, code)
    interrupted = []

    def exit_by_sigint():
        # Registered before the user's handlers, so it runs after them (atexit is last in, first out).
        if interrupted:
            flush_std()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
            os._exit(128 + signal.SIGINT)

    atexit.register(exit_by_sigint)
    try:
        compiled = compile(code, file, "exec", dont_inherit=True)
        exec(compiled, module.__dict__)
    except SystemExit:
        raise
    except BaseException as e:
        print_exception(e)
        if isinstance(e, KeyboardInterrupt):
            interrupted.append(True)
        raise SystemExit(1) from None


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
