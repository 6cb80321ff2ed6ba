"""Running user code the way `python3 -u FILE args...` does, shared by every Python runner (run_python.py for cold
runs, warm_python.py, session_python.py through codeexec_main). It is imported before every run, so it imports
nothing that the interpreter has not loaded at start (sys, builtins, posix, _signal, atexit, gc, io): the
traceback module and linecache are loaded only for code that is not on disk (below), select only for a
non-blocking stdout. A plain run has none of them loaded before its code either.

The protocol is described in docs/interpreter-protocol.md. This module never writes to fds 1 and 2 itself, except
an uncaught exception's report to sys.stderr, as the interpreter would print it."""

import _signal
import atexit
import builtins
import gc
import posix
import sys

# Frames of these files are the runner's own: they are cut from the front of tracebacks, and a SIGINT that lands
# in them (while a session is idle or doing its bookkeeping) is ignored. codeexec_mpl is deliberately not here:
# its show() runs on behalf of the user and must be interruptible.
RUNNER_FILES = {__file__}

# The runner's helper modules: removed from sys.modules before the user's code runs, so that the user's own
# `import codeexec_run` finds their file, as in a plain run.
RUNNER_MODULES = ("codeexec_site", "codeexec_run", "codeexec_main")

_SourceFileLoader = sys.modules["_frozen_importlib_external"].SourceFileLoader


def dirname(path):
    """posixpath.dirname, without importing it."""
    head = path[:path.rfind("/") + 1]
    if head and head != "/" * len(head):
        head = head.rstrip("/")
    return head


def is_file(path):
    try:
        return posix.stat(path).st_mode & 0o170000 == 0o100000
    except (OSError, ValueError):
        return False


def write_all(fd, data):
    view = memoryview(data)
    while view:
        try:
            n = posix.write(fd, view)
        except BlockingIOError:
            # The user made the pipe non-blocking (os.set_blocking(1, False)): wait until it drains.
            import select
            select.select([], [fd], [])
            continue
        view = view[n:]


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
    The variable leaves the environment either way. Returns whether any module was asked for."""
    raw = posix.environ.pop(b"CODE_EXEC_PRELOAD", None)
    if raw is None:
        return False
    posix.unsetenv(b"CODE_EXEC_PRELOAD")
    names = [n.strip() for n in raw.decode("utf-8", "surrogateescape").split(",") if n.strip()]
    if not names:
        return False
    saved = (posix.dup(1), posix.dup(2))
    null = posix.open("/dev/null", posix.O_WRONLY)
    posix.dup2(null, 1)
    posix.dup2(null, 2)
    posix.close(null)
    try:
        for name in names:
            try:
                __import__(name)
            except BaseException:
                pass
        flush_std()
    finally:
        posix.dup2(saved[0], 1)
        posix.dup2(saved[1], 2)
        posix.close(saved[0])
        posix.close(saved[1])
    gc.collect()
    gc.freeze()
    return True


# The traceback module (and linecache), loaded only for code whose source is not on disk (a warm run's unwritten
# file, a session's cells), and then before the user's code runs: from then on the user's directory comes first on
# sys.path, and their token.py or traceback.py must not be what the runner imports. Code that is on disk has its
# uncaught exception printed by the interpreter's own printer, as in a plain run.
_traceback = None
_linecache = None
_tokenize = None


def load_source_printing():
    global _traceback, _linecache, _tokenize
    if _traceback is None:
        import linecache
        import tokenize
        import traceback
        _traceback, _linecache, _tokenize = traceback, linecache, tokenize


def register_source(filename, source):
    """Puts the code in linecache under its filename, so tracebacks show its lines even when no such file exists
    (cells) or the file is not the code that ran. An mtime of None keeps linecache.checkcache from dropping it."""
    load_source_printing()
    if isinstance(source, bytes):
        # decoded as the interpreter and linecache read a source file: coding cookie or BOM, universal newlines
        import io  # loaded by the interpreter at start
        encoding = _tokenize.detect_encoding(io.BytesIO(source).readline)[0]
        source = io.TextIOWrapper(io.BytesIO(source), encoding=encoding, newline=None).read()
    _linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


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
            if _traceback is not None:
                _traceback.print_exception(type(exc), exc, tb)
            else:
                hook(type(exc), exc, tb)
        else:
            hook(type(exc), exc, tb)
    except BaseException:
        sys.__excepthook__(type(exc), exc, tb)


def forget_shadowed_modules(directory, startup_modules):
    """Drops from sys.modules what the runner (or the preload) imported that a module in the user's directory would
    shadow in a plain run, where that directory comes first on sys.path: with a token.py or re.py there, the user's
    `import token` must find their file, not the runner's copy of the standard one. The runner keeps its references."""
    tops = {name.partition(".")[0] for name in sys.modules if name not in startup_modules}
    for top in tops:
        if is_file(directory + "/" + top + ".py") or is_file(directory + "/" + top + "/__init__.py"):
            for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
                del sys.modules[name]


def forget_runner_modules():
    for name in RUNNER_MODULES:
        sys.modules.pop(name, None)


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
    """Runs code (the bytes of FILE, or text) as `python3 -u FILE args...` would, and exits the way that would: the
    code's SystemExit goes through untouched, an uncaught exception prints its traceback and exits 1, and a
    KeyboardInterrupt ends the process by SIGINT after the interpreter's usual shutdown (threads joined, atexit
    handlers run). Source lines for tracebacks come from the file, as in a plain run; only when there is no such
    file are they registered from the code."""
    if not is_file(file):
        register_source(file, code)
    module = new_main_module(__file__=file, __cached__=None, __loader__=_SourceFileLoader("__main__", file))
    sys.argv = [file] + list(args)
    sys.path[0] = dirname(file)
    forget_runner_modules()
    forget_shadowed_modules(sys.path[0], startup_modules)
    interrupted = []

    def exit_by_sigint():
        # Registered before the user's handlers, so it runs after them (atexit is last in, first out).
        if interrupted:
            flush_std()
            _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
            posix.kill(posix.getpid(), _signal.SIGINT)
            posix._exit(128 + _signal.SIGINT)

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
    import io
    atexit._run_exitfuncs()
    for obj in gc.get_objects():
        if isinstance(obj, io.IOBase):
            try:
                if not obj.closed:
                    obj.flush()
            except BaseException:
                pass
    flush_std()
    posix._exit(status & 0xFF)
