"""Python session runner: one interpreter whose __main__ namespace persists across calls, like a notebook
kernel. Each call's code runs as a cell; the value of a final expression, the error, figures and whether the call
was interrupted come back on the control channel. Protocol: docs/interpreter-protocol.md."""

import sys

import codeexec_site

codeexec_site.start()
# What the interpreter imported by itself: the modules a plain run also has before the user's code.
STARTUP_MODULES = frozenset(sys.modules) - {"codeexec_site"}

import os  # noqa: E402

import __future__  # noqa: E402 (after the snapshot on purpose, as are the imports below)
import ast  # noqa: E402
import base64  # noqa: E402
import io  # noqa: E402
import signal  # noqa: E402

import codeexec_main  # noqa: E402
import codeexec_mpl  # noqa: E402

# Imported above from this file's directory (sys.path[0]); the user's imports resolve from the working directory,
# as they would for a script run there.
sys.path[0] = os.getcwd()


class Session:
    def __init__(self):
        self.namespace = codeexec_main.new_main_module().__dict__
        self.cells = 0
        # __future__ imports in one cell apply to the later ones, as in the interactive interpreter.
        self.future_flags = 0
        # For cells with top-level await, made at the first one: asyncio costs ~15 ms to import.
        self.loop = None

    def parse_cell(self, source, filename):
        """The cell's syntax tree. Python first; only where that fails, notebook habits are read as IPython reads
        them (lines starting with `!` run in the shell, `name = !cmd` takes its output lines, `%cd`, `%pwd`, `%pip`):
        code that is valid Python keeps exactly its Python meaning."""
        flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT | self.future_flags
        try:
            return compile(source, filename, "exec", flags, dont_inherit=True)
        except SyntaxError:
            rewritten = _rewrite_magics(source)
            if rewritten == source:
                raise
            try:
                tree = compile(rewritten, filename, "exec", flags, dont_inherit=True)
            except SyntaxError:
                pass
            else:
                # only now, so that a session without these habits has exactly a script's namespace
                self.namespace.setdefault(_MAGICS, Magics())
                return tree
            # the error of the code as written, not of the rewriting
            return compile(source, filename, "exec", flags, dont_inherit=True)

    def compile_cell(self, source, filename):
        """The cell's code, split so that a final expression statement is evaluated on its own for its value (none
        when the statement ends with `;`, as in a notebook). A cell that awaits anywhere runs whole as one coroutine
        on the session's loop, its final expression's value kept in a hidden name: statements before the first
        await then run inside the loop too (asyncio.create_task, get_running_loop)."""
        tree = self.parse_cell(source, filename)
        hidden = False
        last_node = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        if last_node is not None and _ends_with_semicolon(source, last_node):
            last_node = None
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT | self.future_flags
        whole = compile(tree, filename, "exec", flags, dont_inherit=True)
        last = None
        if whole.co_flags & _CO_COROUTINE:
            if last_node is not None:
                assign = ast.Assign(targets=[ast.Name(id=_HIDDEN_RESULT, ctx=ast.Store())], value=last_node.value)
                tree.body[-1] = ast.copy_location(assign, last_node)
                ast.fix_missing_locations(tree)
                hidden = True
            body = compile(tree, filename, "exec", flags, dont_inherit=True)
        else:
            if last_node is not None:
                last = ast.Expression(tree.body.pop().value)
                body = compile(tree, filename, "exec", flags, dont_inherit=True)
            else:
                body = whole
        self.future_flags |= body.co_flags & _FUTURE_FLAGS
        if last is not None:
            last = compile(last, filename, "eval", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT | self.future_flags,
                           dont_inherit=True)
        return body, last, hidden

    def run(self, code):
        """Runs compiled cell code in the namespace; code with top-level await runs to completion on the session's
        event loop, which lives as long as the session (tasks a cell starts go on in later cells' awaits). Each
        step into user code goes through call_user, so that a SIGINT interrupts it."""
        value = codeexec_main.call_user(eval, code, self.namespace)
        if code.co_flags & _CO_COROUTINE:
            if self.loop is None:
                import asyncio
                self.loop = asyncio.new_event_loop()
            task = self.loop.create_task(value)
            try:
                value = codeexec_main.call_user(self.loop.run_until_complete, task)
            except BaseException:
                # Interrupted: the cell's coroutine must not resume at the next cell's await.
                task.cancel()
                raise
        return value

    def call(self, source, stdin):
        self.cells += 1
        filename = "<cell %d>" % self.cells
        # Sent indented (a model's or an SDK's habit): the common indentation goes, the line numbers stay.
        source = _dedent(source)
        codeexec_main.register_source(filename, source)
        sys.stdin = io.StringIO(stdin)
        result = None
        error = None
        error_info = None
        interrupted = False
        try:
            body, last, hidden = self.compile_cell(source, filename)
            value = None
            try:
                self.run(body)
            finally:
                if hidden:
                    value = self.namespace.pop(_HIDDEN_RESULT, None)
            if last is not None:
                value = self.run(last)
            if value is not None:
                result = codeexec_main.call_user(repr, value)
        except KeyboardInterrupt as e:
            interrupted = True
            error = "KeyboardInterrupt"
            codeexec_main.print_exception(e, _is_cell)
        except BaseException as e:
            # SystemExit included: sys.exit() in a cell ends the cell, not the session.
            error = codeexec_main.describe(e)
            codeexec_main.print_exception(e, _is_cell)
            error_info = _error_info(e)
        figures = self.figures()
        if isinstance(figures, BaseException):
            error = error or codeexec_main.describe(figures)
            interrupted = interrupted or isinstance(figures, KeyboardInterrupt)
            figures = []
        sys.stdin = io.StringIO("")
        return {
            "result": result,
            "error": error,
            "errorInfo": error_info,
            "executionCount": self.cells,
            "interrupted": interrupted,
            "figures": [{"mimeType": "image/png", "data": base64.b64encode(png).decode("ascii")} for png in figures],
        }

    def figures(self):
        """PNGs of the figures shown during the call plus those still open at its end; the exception instead, when
        rendering the open ones failed."""
        try:
            if "matplotlib.pyplot" in sys.modules:
                codeexec_main.call_user(codeexec_mpl.capture_open_figures)
        except BaseException as e:
            codeexec_main.print_exception(e, _is_cell)
            codeexec_mpl.take_captured()
            return e
        return codeexec_mpl.take_captured()


def _future_flags():
    flags = 0
    for name in __future__.all_feature_names:
        flags |= getattr(__future__, name).compiler_flag
    return flags


_FUTURE_FLAGS = _future_flags()
_HIDDEN_RESULT = "__codeexec_cell_result__"
_MAGICS = "__codeexec_magics__"


def _error_info(exc):
    """{name, value, traceback} of a failed cell, as a notebook reports it: the exception's (qualified) class name, its
    message and the traceback text the cell printed (the runner's frames already gone)."""
    import traceback
    name = codeexec_main.describe(exc).partition(":")[0]
    try:
        value = exc.msg if isinstance(exc, SyntaxError) and exc.msg is not None else str(exc)
    except BaseException:
        value = "<exception str() failed>"
    try:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except BaseException:
        text = codeexec_main.describe(exc)
    return {"name": name, "value": value, "traceback": text}


def _dedent(source):
    """Removes the indentation every non-blank line shares; nothing else changes (not even line numbers)."""
    lines = source.split("\n")
    indents = [len(l) - len(l.lstrip(" \t")) for l in lines if l.strip()]
    cut = min(indents) if indents else 0
    if cut == 0:
        return source
    prefix = next(l for l in lines if l.strip())[:cut]
    if any(l.strip() and not l.startswith(prefix) for l in lines):
        return source  # tabs and spaces mixed: leave it to the compiler's message
    return "\n".join(l[cut:] if l.strip() else l.lstrip(" \t") for l in lines)


def _ends_with_semicolon(source, node):
    """Whether the statement `node` is followed by `;` on its line (a notebook's "do not show the value")."""
    lines = source.split("\n")
    if node.end_lineno is None or node.end_lineno > len(lines):
        return False
    rest = lines[node.end_lineno - 1].encode("utf-8")[node.end_col_offset:].decode("utf-8", "replace")
    return rest.lstrip().startswith(";")


def _rewrite_magics(source):
    """IPython's line forms as calls to the session's helpers (see Magics); other lines stay as they are."""
    out = []
    for line in source.split("\n"):
        body = line.lstrip(" \t")
        indent = line[:len(line) - len(body)]
        assign = None
        head, sep, tail = body.partition("=")
        if sep and head.strip().isidentifier() and tail.lstrip().startswith("!") and not tail.startswith("="):
            assign, body = head.strip(), tail.lstrip()
        if body.startswith("!") and not body.startswith("!="):
            call = "%s.shell(%r, %s)" % (_MAGICS, body[1:].strip(), "True" if assign else "False")
        elif body.startswith("%") and not assign:
            name, _, arg = body[1:].partition(" ")
            call = "%s.line(%r, %r)" % (_MAGICS, name.strip(), arg.strip())
        else:
            out.append(line)
            continue
        out.append(indent + (assign + " = " if assign else "") + call)
    return "\n".join(out)


class Magics:
    """What `!cmd`, `name = !cmd`, `%cd`, `%pwd` and `%pip` do in a session (in the namespace as __codeexec_magics__)."""

    PIP = ("pip cannot install here: sandboxed code has no network of its own and the interpreter's libraries are "
           "read-only. Declare what the code needs with execute_code's `packages` argument (a session takes them when "
           "it is created, or from session_reset with `packages`), or ask for what runtime_info lists as installed.")

    def shell(self, command, capture):
        import subprocess
        flush_user_streams()
        if _is_pip(command):
            print(self.PIP, file=sys.stderr)
            return [] if capture else None
        if capture:
            done = subprocess.run(["/bin/sh", "-c", command], stdout=subprocess.PIPE, text=True, errors="replace")
            return done.stdout.splitlines()
        subprocess.run(["/bin/sh", "-c", command])
        return None

    def line(self, name, arg):
        if name == "cd":
            target = os.path.expanduser(arg.strip("'\"")) if arg else os.path.expanduser("~")
            os.chdir(target)
            print(os.getcwd())
            return None
        if name == "pwd":
            return os.getcwd()
        if name == "pip":
            print(self.PIP, file=sys.stderr)
            return None
        raise NameError("%%%s is not supported in this session (supported: %%cd, %%pwd, %%pip, !command)" % name)


def _is_pip(command):
    words = command.split()
    if not words:
        return False
    tool = words[0].rsplit("/", 1)[-1]
    if tool in ("pip", "pip3"):
        return True
    return tool.startswith("python") and words[1:3] == ["-m", "pip"]
def _is_cell(filename):
    return filename.startswith("<cell ")


_CO_COROUTINE = 0x80  # inspect.CO_COROUTINE, without importing inspect


def flush_user_streams():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:
            pass


def main():
    codeexec_main.RUNNER_FILES.add(__file__)
    channel = codeexec_main.Channel()
    codeexec_main.preload()
    codeexec_main.forget_runner_modules()
    codeexec_main.forget_shadowed_modules(sys.path[0], STARTUP_MODULES | {"codeexec_mpl"})
    sys.argv = [""]
    session = Session()
    signal.signal(signal.SIGINT, codeexec_main.on_sigint)
    channel.send({"ready": True})
    while True:
        message = channel.receive()
        if message is None:
            os._exit(0)
        call_id = message.get("id")
        if not isinstance(call_id, str) or len(call_id) != 32 or not all(c in "0123456789abcdef" for c in call_id):
            os._exit(2)
        response = {"id": call_id}
        response.update(session.call(message.get("code", ""), message.get("stdin") or ""))
        flush_user_streams()
        marker = call_id.encode("ascii")
        for fd in (1, 2):
            try:
                codeexec_main.write_all(fd, marker)
            except OSError:
                pass
        channel.send(response)
        # A cell may have replaced the handler; between calls a SIGINT must never reach the runner.
        if signal.getsignal(signal.SIGINT) is not codeexec_main.on_sigint:
            signal.signal(signal.SIGINT, codeexec_main.on_sigint)


main()
