"""Bash session runner: one bash process whose shell state (variables, functions, aliases, the working directory,
options) persists across calls, like a notebook's bash kernel. This Python process only relays: each call's code is
written to a file that bash sources in its main shell, and bash reports the status on a pipe. The code's output goes
straight from bash and what it starts to fds 1 and 2. Protocol: docs/interpreter-protocol.md.

An interrupt (SIGINT from the server: timeout or cancel) goes to the cell's processes and to bash, whose trap ends
the cell with status 130 and keeps the shell; a cell that replaces that trap and ignores SIGINT is killed after the
server's grace, and the next call starts a new session. A cell's `exit` ends the shell (the call reports its status
and says so on stderr) and a new shell, with nothing of the old one's state, runs the next call; `set -e` does the
same at the first failing command."""

import os
import signal
import sys

import codeexec_main  # noqa: E402

CELLS_DIR = "/tmp/.codeexec-cells"

# bash's side: read a cell's file name from the command pipe, source it in the main shell (a function, so that the
# INT trap's `return` ends the cell and nothing else), answer with its status.
LOOP = r'''
__codeexec_cell() { source "$1"; }
while IFS= read -r -u "$__CODEEXEC_IN" __codeexec_file; do
  trap 'return 130' INT
  __codeexec_cell "$__codeexec_file" < /dev/null
  __codeexec_status=$?
  trap - INT
  printf '%d\n' "$__codeexec_status" >&"$__CODEEXEC_OUT"
done
'''


def children(pid):
    out = []
    try:
        for task in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                out.extend(int(c) for c in f.read().split())
    except OSError:
        pass
    return out


def start_shell(null):
    """A new bash running LOOP; returns (pid, command pipe's write end, status pipe's reader)."""
    cmd_r, cmd_w = os.pipe()
    status_r, status_w = os.pipe()
    env = dict(os.environ, __CODEEXEC_IN=str(cmd_r), __CODEEXEC_OUT=str(status_w))
    os.set_inheritable(cmd_r, True)
    os.set_inheritable(status_w, True)
    pid = os.fork()
    if pid == 0:
        os.dup2(null, 0)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execve("/bin/bash", ["bash", "--noprofile", "--norc", "-c", LOOP, "bash"], env)
    os.close(cmd_r)
    os.close(status_w)
    return pid, cmd_w, os.fdopen(status_r, "r")


def main():
    codeexec_main.RUNNER_FILES.add(__file__)
    channel = codeexec_main.Channel()
    os.makedirs(CELLS_DIR, mode=0o700, exist_ok=True)
    null = os.open("/dev/null", os.O_RDONLY)
    shell = {"pid": 0}
    shell["pid"], cmd_w, status = start_shell(null)
    state = {"running": False, "interrupted": False}

    def on_sigint(signum, frame):
        # only while a cell runs: to what the cell started, then to bash (its trap ends the cell)
        if not state["running"]:
            return
        state["interrupted"] = True
        for child in children(shell["pid"]):
            try:
                os.kill(child, signal.SIGINT)
            except OSError:
                pass
        try:
            os.kill(shell["pid"], signal.SIGINT)
        except OSError:
            pass

    signal.signal(signal.SIGINT, on_sigint)
    cells = 0
    channel.send({"ready": True})
    while True:
        message = channel.receive()
        if message is None:
            os.kill(shell["pid"], signal.SIGKILL)
            os._exit(0)
        call_id = message.get("id")
        if not isinstance(call_id, str) or len(call_id) != 32 or not all(c in "0123456789abcdef" for c in call_id):
            os._exit(2)
        cells += 1
        path = "%s/cell-%d" % (CELLS_DIR, cells)
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(message.get("code", ""))
        state["interrupted"] = False
        state["running"] = True
        try:
            os.write(cmd_w, (path + "\n").encode())
            line = status.readline()
        except OSError:
            line = ""
        state["running"] = False
        try:
            os.unlink(path)
        except OSError:
            pass
        code = int(line) if line.strip().isdigit() else -1
        if line == "":
            # the shell exited (`exit`, `set -e`, killed): its status is the call's, and a new shell takes its place
            _, wait_status = os.waitpid(shell["pid"], 0)
            code = os.waitstatus_to_exitcode(wait_status)
            if code < 0:
                code = 128 - code
            os.close(cmd_w)
            status.close()
            shell["pid"], cmd_w, status = start_shell(null)
            try:
                codeexec_main.write_all(2, ("[session] the shell exited with status %d; the next call runs in a new "
                                            "shell (variables and the working directory start afresh)\n" % code).encode())
            except OSError:
                pass
        interrupted = state["interrupted"] and code == 130
        response = {"id": call_id, "result": None, "interrupted": interrupted,
                    "error": None if code == 0 else ("Interrupted" if interrupted else "exit status %d" % code),
                    "exitCode": code, "figures": [], "executionCount": cells}
        for fd in (1, 2):
            try:
                codeexec_main.write_all(fd, call_id.encode("ascii"))
            except OSError:
                pass
        channel.send(response)


main()
