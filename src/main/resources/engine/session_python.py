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
        self.display = Display()

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
                bundle = codeexec_main.call_user(mime_bundle, value)
                result = bundle["text/plain"]
                if len(bundle) > 1:
                    self.display.add("result", bundle)
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
        outputs = self.display.take()
        return {
            "outputs": outputs,
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


# ---------------------------------------------------------------------------------------------------- rich outputs

_MIME_METHODS = (("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"), ("text/latex", "_repr_latex_"),
                 ("image/svg+xml", "_repr_svg_"), ("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"),
                 ("application/json", "_repr_json_"))
_BINARY = ("image/png", "image/jpeg", "image/gif")
MAX_OUTPUTS = 64
MAX_TEXT_CHARS = 512 * 1024
MAX_IMAGE_BYTES = 8 << 20


def mime_bundle(obj):
    """The MIME bundle of a value, as a notebook shows it: what its _repr_mimebundle_ and _repr_*_ methods give (a
    method that is missing, fails or returns None gives nothing), and always text/plain (its repr). Images are
    base64 text, JSON its text."""
    data = {}
    method = _repr_method(obj, "_repr_mimebundle_")
    if method is not None:
        got = _quietly(method, include=None, exclude=None)
        if isinstance(got, tuple) and got:
            got = got[0]
        if isinstance(got, dict):
            data.update(got)
    for mime, name in _MIME_METHODS:
        if mime not in data:
            method = _repr_method(obj, name)
            if method is not None:
                got = _quietly(method)
                if isinstance(got, tuple) and got:
                    got = got[0]
                if got is not None:
                    data[mime] = got
    if "text/plain" not in data:
        data["text/plain"] = repr(obj)
    return _normalised(data)


def _repr_method(obj, name):
    """obj's bound method `name`, looked up on its type (an object answering every attribute, like a mock, or a class
    whose methods need an instance, offers none)."""
    if isinstance(obj, type):
        return None
    try:
        if getattr(type(obj), name, None) is None:
            return None
        method = getattr(obj, name)
    except Exception:
        return None
    return method if callable(method) else None


def _quietly(method, *args, **kwargs):
    try:
        return method(*args, **kwargs)
    except Exception:
        return None


def _normalised(data):
    """Every entry as text: bytes of a binary image as base64, JSON as its text, text forms within MAX_TEXT_CHARS;
    entries that are none of these are dropped."""
    import json
    out = {}
    for mime, value in data.items():
        if not isinstance(mime, str) or "/" not in mime:
            continue
        if mime in _BINARY:
            if isinstance(value, str):
                value = value.encode("ascii", "replace")
                try:
                    value = base64.b64decode(value, validate=True)
                except Exception:
                    continue
            if not isinstance(value, (bytes, bytearray)) or len(value) > MAX_IMAGE_BYTES:
                continue
            out[mime] = base64.b64encode(bytes(value)).decode("ascii")
            continue
        if mime == "application/json" or mime.endswith("+json"):
            if not isinstance(value, str):
                try:
                    value = json.dumps(value, default=repr)
                except Exception:
                    continue
        elif isinstance(value, (bytes, bytearray)):
            value = bytes(value).decode("utf-8", "replace")
        if not isinstance(value, str):
            continue
        if len(value) > MAX_TEXT_CHARS:
            value = value[:MAX_TEXT_CHARS] + "\n[cut at %d characters]" % MAX_TEXT_CHARS
        out[mime] = value
    return out


class Display:
    """The session's built-in `display(*objs, raw=False)`: each object's MIME bundle becomes one of the call's
    outputs, in order (raw=True: each object is already a bundle, {mime: data}). Also what IPython.display's and
    PIL's Image.show() reach here. At most MAX_OUTPUTS per call; later ones are counted and dropped."""

    def __init__(self):
        self.outputs = []
        self.dropped = 0

    def __call__(self, *objs, raw=False, include=None, exclude=None, metadata=None, transient=None, display_id=None,
                 clear=False, **kwargs):
        flush_user_streams()
        for obj in objs:
            if raw and isinstance(obj, dict):
                bundle = _normalised(obj)
                bundle.setdefault("text/plain", "<%s>" % ", ".join(sorted(bundle)) if bundle else "<empty>")
            else:
                bundle = mime_bundle(obj)
            self.add("display", bundle)

    def add(self, kind, bundle):
        if len(self.outputs) >= MAX_OUTPUTS:
            self.dropped += 1
            return
        self.outputs.append({"kind": kind, "data": bundle})

    def take(self):
        outputs, dropped = self.outputs, self.dropped
        self.outputs, self.dropped = [], 0
        if dropped:
            print("[%d more outputs dropped: at most %d per call]" % (dropped, MAX_OUTPUTS), file=sys.stderr)
        return outputs


class _ImageViewer:
    """A PIL ImageShow viewer that shows an image as the call's output instead of starting a desktop program."""

    format = "PNG"

    def show(self, image, **options):
        display(image)
        return 1


class _Hooks:
    """A finder first in sys.meta_path: when PIL.ImageShow is imported, registers _ImageViewer first among its
    viewers (Image.show() then becomes an output); when `IPython` cannot be found anywhere else, serves the small
    stand-in below (IPython.display's display, HTML, Markdown, Latex, SVG, JSON, Image). Every other import passes
    through untouched."""

    def find_spec(self, name, path=None, target=None):
        if name == "PIL.ImageShow":
            import importlib.machinery
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                loader = spec.loader
                run = loader.exec_module

                def exec_module(module):
                    run(module)
                    try:
                        module.register(_ImageViewer(), -1)
                    except Exception:
                        pass
                loader.exec_module = exec_module
            return spec
        if name in ("IPython", "IPython.display", "IPython.core", "IPython.core.display"):
            import importlib.machinery
            import importlib.util
            if name == "IPython":
                if importlib.machinery.PathFinder.find_spec(name, path) is not None:
                    return None  # the real one is installed
            elif not getattr(sys.modules.get("IPython"), "__codeexec__", False):
                return None
            return importlib.util.spec_from_loader(name, _IPythonStandIn(), is_package=name in ("IPython", "IPython.core"))
        return None


class _IPythonStandIn:
    """Loads the stand-in IPython modules: `display` (the session's) and IPython.display's everyday objects."""

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__codeexec__ = True
        if module.__name__ in ("IPython.display", "IPython.core.display"):
            module.__dict__.update(_ipython_display_names())
        elif module.__name__ == "IPython":
            module.display = display
            module.get_ipython = lambda: None


def _ipython_display_names():
    """IPython.display's everyday objects: each has the _repr_*_ method display() looks for."""

    class _Data:
        mime = "text/plain"

        def __init__(self, data=None, url=None, filename=None, metadata=None, **kwargs):
            if data is None and filename is not None:
                with open(filename, "rb" if self.mime in _BINARY else "r") as f:
                    data = f.read()
            self.data = data

        def __repr__(self):
            return "<IPython.core.display.%s object>" % type(self).__name__

    def _method(name):
        return lambda self: self.data

    names = {"display": display}
    for cls_name, mime, method in (("HTML", "text/html", "_repr_html_"), ("Markdown", "text/markdown", "_repr_markdown_"),
                                   ("Latex", "text/latex", "_repr_latex_"), ("SVG", "image/svg+xml", "_repr_svg_"),
                                   ("JSON", "application/json", "_repr_json_"), ("Math", "text/latex", "_repr_latex_")):
        names[cls_name] = type(cls_name, (_Data,), {"mime": mime, method: _method(method)})
    names["Math"]._repr_latex_ = lambda self: "$$%s$$" % self.data

    class Image(_Data):
        mime = "image/png"

        def __init__(self, data=None, url=None, filename=None, format=None, **kwargs):
            if isinstance(data, str) and filename is None and not data.startswith(("iVBOR", "/9j/")):
                filename, data = data, None
            fmt = (format or (filename or "").rsplit(".", 1)[-1] or "png").lower()
            self.mime = "image/jpeg" if fmt in ("jpg", "jpeg") else "image/gif" if fmt == "gif" else "image/png"
            super().__init__(data, url, filename)

        def _repr_mimebundle_(self, include=None, exclude=None):
            return {self.mime: self.data}

    names["Image"] = Image
    names["display_html"] = lambda *objs, raw=False, **kw: display(*[{"text/html": o} if raw else o for o in objs], raw=raw)
    names["display_markdown"] = lambda *objs, raw=False, **kw: display(*[{"text/markdown": o} if raw else o for o in objs], raw=raw)
    names["clear_output"] = lambda wait=False: None
    return names


display = None  # the session's Display, set by main()


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
    global display
    display = session.display
    import builtins
    builtins.display = display
    sys.meta_path.insert(0, _Hooks())
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
