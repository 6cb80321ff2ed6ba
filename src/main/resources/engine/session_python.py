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

    def compile_cell(self, source, filename):
        """The cell's code, split so that a final expression statement is evaluated on its own for its value."""
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT | self.future_flags
        tree = compile(source, filename, "exec", ast.PyCF_ONLY_AST | flags, dont_inherit=True)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        body = compile(tree, filename, "exec", flags, dont_inherit=True)
        self.future_flags |= body.co_flags & _FUTURE_FLAGS
        if last is not None:
            last = compile(last, filename, "eval", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT | self.future_flags,
                           dont_inherit=True)
        return body, last

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
        codeexec_main.register_source(filename, source)
        sys.stdin = io.StringIO(stdin)
        result = None
        error = None
        interrupted = False
        try:
            body, last = self.compile_cell(source, filename)
            self.run(body)
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
        figures = self.figures()
        if isinstance(figures, BaseException):
            error = error or codeexec_main.describe(figures)
            interrupted = interrupted or isinstance(figures, KeyboardInterrupt)
            figures = []
        sys.stdin = io.StringIO("")
        return {
            "result": result,
            "error": error,
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
