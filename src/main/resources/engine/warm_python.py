"""Warm Python runner: started ahead of a run inside its sandbox (as `python3 -S -u` this file), it does what site
would (codeexec_site), preloads modules, says it is ready, then runs the one piece of code it is sent as
`python3 -u FILE args...` would. Single use: the sandbox is discarded after. Protocol: docs/interpreter-protocol.md.

Its imports are the interpreter's own start-up modules: what the runner costs is paid by every run, so nothing
here may import a module a plain run does not have (the run message is not JSON for that reason)."""

import sys

import codeexec_site

codeexec_site.start()
# What the interpreter imported by itself: the modules a plain run also has before the user's code.
STARTUP_MODULES = frozenset(sys.modules) - {"codeexec_site"}

import posix  # noqa: E402 (after the snapshot on purpose)

import codeexec_run  # noqa: E402

# `--stdio`: the sandbox passes no descriptors beyond 0-2 (gVisor): the run message comes in on stdin ahead of the
# user's input, and the ready line goes out on stdout ahead of the output; neither is closed.
STDIO = sys.argv[1:] == ["--stdio"]
CONTROL_IN = 0 if STDIO else 8
PACKAGES_SITE = "/opt/codeexec-packages/site"
CONTROL_OUT = 1 if STDIO else 9


def read_message():
    """(file, code bytes, args) from `run FILELEN CODELEN ARGLEN...\\n` (`runp`: with declared packages) and then
    those many bytes of the file name, the code and each argument; None when input ends first (the server
    discarded this sandbox). Over stdin the header is read a byte at a time and the rest to its exact length, so
    that nothing of the user's input after the message is taken."""
    data = b""
    while b"\n" not in data:
        chunk = posix.read(CONTROL_IN, 1 if STDIO else 65536)
        if not chunk:
            return None
        data += chunk
    header, _, data = data.partition(b"\n")
    fields = header.split(b" ")
    if fields[0] not in (b"run", b"runp") or len(fields) < 3 or not all(f.isdigit() for f in fields[1:]):
        posix._exit(2)
    if fields[0] == b"runp":
        # the run's declared packages were mounted at their place: first after the code's directory, where a cold
        # run's PYTHONPATH puts them (ahead of the preinstalled libraries)
        sys.path.insert(1, PACKAGES_SITE)
    lengths = [int(f) for f in fields[1:]]
    total = sum(lengths)
    chunks = [data]
    have = len(data)
    while have < total:
        chunk = posix.read(CONTROL_IN, total - have)
        if not chunk:
            return None
        chunks.append(chunk)
        have += len(chunk)
    data = b"".join(chunks)
    if have != total:
        posix._exit(2)
    parts = []
    at = 0
    for n in lengths:
        parts.append(data[at:at + n])
        at += n
    text = [p.decode("utf-8", "surrogateescape") for p in parts]
    return text[0], parts[1], text[2:]


def place_code_file(file, code):
    """Over stdio nothing can be mounted into the sandbox after its start, so the server cannot place the code file:
    the runner writes it where a cold run has it (programs read __file__), read-only as a cold run's; a failure
    (a full disk) removes what was written and leaves the run to go on from the message, like a warm run without a
    late working directory."""
    try:
        fd = posix.open(file, posix.O_WRONLY | posix.O_CREAT | posix.O_EXCL, 0o444)
    except OSError:
        return
    try:
        view = memoryview(code)
        while view:
            view = view[posix.write(fd, view):]
    except OSError:
        # no truncated copy where the program looks for its source
        try:
            posix.unlink(file)
        except OSError:
            pass
    finally:
        posix.close(fd)


def main():
    codeexec_run.RUNNER_FILES.add(__file__)
    preloaded = codeexec_run.preload()
    # The compiler's first compile() builds its AST types (~1 ms of CPU): done here, before the run's clock starts.
    # It imports nothing and leaves nothing in sys.modules.
    compile("", "<warm>", "exec", dont_inherit=True)
    try:
        codeexec_run.write_all(CONTROL_OUT, b'{"ready":true}\n')
        message = read_message()
    except OSError:
        # Started without the control fds: nothing to talk to. Not the user's output, so exit with a code only.
        posix._exit(2)
    if message is None:
        posix._exit(0)
    if not STDIO:
        posix.close(CONTROL_IN)
        posix.close(CONTROL_OUT)
    file, code, args = message
    if not file.startswith("/"):
        posix._exit(2)
    if STDIO:
        place_code_file(file, code)
    try:
        # Resolved again now: a workspace may have been mounted over the working directory after the start.
        posix.chdir(codeexec_run.dirname(file))
    except (OSError, ValueError):
        posix._exit(2)
    if not preloaded:
        codeexec_run.run_file(code, file, args, STARTUP_MODULES)
        return
    # With preloaded modules, the interpreter's own shutdown (clearing every module's objects: ~10 ms for
    # numpy+pandas) would be most of a short run; end the way it ends, minus that teardown.
    try:
        codeexec_run.run_file(code, file, args, STARTUP_MODULES)
        status = 0
    except SystemExit as e:
        status = codeexec_run.exit_status(e.code)
    codeexec_run.finish_without_teardown(status)


main()
