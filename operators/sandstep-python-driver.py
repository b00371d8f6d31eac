# sandstep-python-driver.py: the Python end of run_python, run inside the sandbox
# by `python3 -u -c` from the first line of its stdin (sandstep-python.c embeds
# this file and sends it as a JSON string).
#
# Two processes: this one, the pump, speaks to sandstep and lives as long as
# the session; its child, the interpreter, runs the code, each request in the
# same namespace, so variables, imports and open files persist.  The child's
# fds 1 and 2 are pipes the pump reads, so what the code printed before it
# died (os._exit, a segfault) still comes out.  The protocol, on the
# command's stdin and stdout:
#   sandstep -> here: one JSON object a line, {"id": N, "code": "...", "env":
#     {NAME: VALUE, ...} or absent: set in os.environ for that code only}, or
#     {"id": N, "command": "...", "timeout": SECONDS}: run_command while the
#     session lives (the sandbox runs one command at a time, and this is it),
#     as /bin/sh -c, killed with everything it started (the pump is the
#     subreaper of all of it) when it ends or overruns its timeout.
#   here -> sandstep: frames "O <stream> <length>\n<bytes>" (output: stream 1
#     or 2), and after the last output of a request "R <length>\n<json>", its
#     result: {"id": N, "value": repr or null, "error": traceback or null},
#     or for a command {"id": N, "exit": status (128+N: signal N), "timedOut":
#     bool}; "H <length>\n<json>" once at the start ({"python": version});
#     "D <length>\n<json>" when the interpreter died ({"exit": status}), after
#     which the pump ends and sandstep starts a new session for the next call.
# Nothing here knows host paths.
#
# Only this pump writes frames, and only it may: the code the interpreter and
# the commands run must never reach fd 1 (sandstep reads it as the results).
# So the pump is not dumpable before anything else runs here: the same uid
# without CAP_SYS_PTRACE (the jail has no capabilities) can then neither open
# /proc/PID/fd/N or /proc/PID/mem of it nor pidfd_getfd, ptrace or
# process_vm_writev it (the seccomp policy refuses those three as well).  The
# interpreter inherits that at fork, so its result pipe stays its own too;
# what it writes there is taken only as the answer to the code request it
# is running (so a thread it left behind forges no later command's result).
import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
    sys.exit(f"sandstep-python-driver: cannot make itself undumpable: {os.strerror(ctypes.get_errno())}; "
             "the session would not be safe from the code it runs")

CHUNK = 65536
LIMIT = 4 * 1024 * 1024  # a value or traceback longer than this is cut here already

proto = os.dup(1)
# Nothing was sent after this file's line (sandstep waits for the hello), so
# the buffered reader that read it holds nothing more.
requests = os.dup(0)
null = os.open("/dev/null", os.O_RDWR)
out_r, out_w = os.pipe()
err_r, err_w = os.pipe()
req_r, req_w = os.pipe()
res_r, res_w = os.pipe()


def interpreter():
    """The child: runs each request's code as a REPL does, and writes its result as one line."""
    import ast
    import linecache
    import traceback

    os.dup2(null, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    for fd in (proto, requests, null, out_r, out_w, err_r, err_w, req_w, res_r):
        os.close(fd)
    sys.stdin = open(os.devnull)
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    reader = os.fdopen(req_r, "rb", buffering=0)
    for number, line in enumerate(iter(reader.readline, b""), start=1):
        request = json.loads(line)
        name = f"<cell {number}>"
        code = request["code"]
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        value = None
        error = None
        env = request.get("env") or {}
        saved = {key: os.environ.get(key) for key in env}
        os.environ.update(env)
        try:
            tree = ast.parse(code, filename=name, mode="exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, name, "exec"), namespace)
            if last is not None:
                result = eval(compile(last, name, "eval"), namespace)
                if result is not None:
                    value = repr(result)
        except BaseException as e:  # SystemExit too: the session lives on
            tb = e.__traceback__
            # Leave out this driver's frames: the traceback starts at the model's code.
            while tb is not None and tb.tb_frame.f_code.co_filename != name:
                tb = tb.tb_next
            error = "".join(traceback.format_exception(type(e), e, tb))
        # The code's variables are its own again: what they were, or unset.
        for key, was in saved.items():
            if was is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = was
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        cut = [t if t is None or len(t) <= LIMIT else t[:LIMIT] + "\n[... cut ...]" for t in (value, error)]
        answer = json.dumps({"id": request["id"], "value": cut[0], "error": cut[1]}).encode() + b"\n"
        view = memoryview(answer)
        while view:
            view = view[os.write(res_w, view):]
    os._exit(0)


def send(kind, head, payload):
    frame = f"{kind} {head}{len(payload)}\n".encode() + payload
    view = memoryview(frame)
    while view:
        view = view[os.write(proto, view):]


def forward(fd, stream):
    """Frames what fd holds now; False at its end."""
    try:
        data = os.read(fd, CHUNK)
    except BlockingIOError:
        return None
    if not data:
        return False
    send("O", f"{stream} ", data)
    return True


def drain(fds):
    for fd, stream in fds.items():
        while forward(fd, stream):
            pass


def answer_of(line, expected):
    """The frame for an interpreter's result line: only for the code request it runs, and only the members
    a code result has; None for anything else (whatever else the code wrote on the interpreter's pipe)."""
    if expected is None:
        return None
    try:
        answer = json.loads(line)
        if type(answer) is not dict or answer.get("id") != expected:
            return None
        value, error = answer.get("value"), answer.get("error")
        if not all(t is None or type(t) is str for t in (value, error)):
            return None
    except (ValueError, RecursionError):
        return None
    return json.dumps({"id": expected, "value": value, "error": error}).encode()


def status_of(wait_status):
    return 128 + os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status) else os.WEXITSTATUS(wait_status)


def children():
    """The pids whose parent is this process."""
    found = set()
    me = os.getpid()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat[stat.rindex(b")") + 2:].split()[1]) == me:
                found.add(int(name))
    return found


def reap_all_but(keep):
    """Kills every child but @keep (orphans of a command come to us, the subreaper), until none is left."""
    for _ in range(500):
        left = children() - keep
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        time.sleep(0.01)


libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
child = os.fork()
if child == 0:
    interpreter()
for fd in (out_w, err_w, req_r, res_w, null):
    os.close(fd)
for fd in (out_r, err_r, res_r, requests, req_w):
    os.set_blocking(fd, False)
# A child's end (the interpreter's, a command's) wakes the loop at once.
sig_r, sig_w = os.pipe()
os.set_blocking(sig_r, False)
os.set_blocking(sig_w, False)
signal.signal(signal.SIGCHLD, lambda signum, frame: None)
signal.set_wakeup_fd(sig_w)

send("H", "", json.dumps({"python": sys.version.split()[0]}).encode())
streams = {out_r: 1, err_r: 2}
pending = b""        # bytes of a request line from sandstep
answers = b""        # bytes of result lines from the interpreter
to_child = b""       # bytes of requests not yet written to the interpreter
code_id = None       # the id of the code request the interpreter runs, None: none
command = None       # the run_command running: [request id, Popen, deadline, pipes {fd: stream}, timed out]
while True:
    watched = list(streams) + [res_r, requests, sig_r] + (list(command[3]) if command else [])
    try:
        ready, writable, _ = select.select(watched, [req_w] if to_child else [], [], 0.5)
    except InterruptedError:
        continue
    if sig_r in ready:
        try:
            os.read(sig_r, CHUNK)
        except BlockingIOError:
            pass
    if writable:
        try:
            to_child = to_child[os.write(req_w, to_child):]
        except BlockingIOError:
            pass
    for fd, stream in list(streams.items()):
        if fd in ready:
            forward(fd, stream)
    if command is not None:
        for fd in list(command[3]):
            if fd in ready and forward(fd, command[3][fd]) is False:
                os.close(fd)
                del command[3][fd]
    if res_r in ready:
        try:
            answers += os.read(res_r, CHUNK)
        except BlockingIOError:
            pass
    while b"\n" in answers:
        line, answers = answers.split(b"\n", 1)
        answer = answer_of(line, code_id)
        if answer is not None:
            drain(streams)
            send("R", "", answer)
            code_id = None

    done, wait_status = os.waitpid(child, os.WNOHANG)
    if done:
        # The interpreter died: what it printed first, then how it ended.
        drain(streams)
        send("D", "", json.dumps({"exit": status_of(wait_status)}).encode())
        break

    if command is not None:
        request_id, process, deadline, pipes, timed_out = command
        finished = process.poll() is not None
        if not finished and time.monotonic() >= deadline:
            command[4] = timed_out = True
            finished = True
        if finished:
            reap_all_but({child})
            end = time.monotonic() + 2
            while pipes and time.monotonic() < end:
                for fd in list(pipes):
                    if forward(fd, pipes[fd]) is False:
                        os.close(fd)
                        del pipes[fd]
                time.sleep(0.005)
            for fd in pipes:
                os.close(fd)
            status = process.wait()
            send("R", "", json.dumps({"id": request_id, "exit": status if status >= 0 else 128 - status,
                                      "timedOut": timed_out}).encode())
            command = None

    if requests in ready:
        try:
            data = os.read(requests, CHUNK)
        except BlockingIOError:
            data = None
        if data == b"":
            break
        pending += data or b""
    while b"\n" in pending and command is None:
        line, pending = pending.split(b"\n", 1)
        request = json.loads(line)
        if "command" not in request:
            code_id = request["id"]
            to_child += line + b"\n"
            continue
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        process = subprocess.Popen(["/bin/sh", "-c", request["command"]], stdin=subprocess.DEVNULL, stdout=w1,
                                   stderr=w2, start_new_session=True, close_fds=True)
        os.close(w1)
        os.close(w2)
        os.set_blocking(r1, False)
        os.set_blocking(r2, False)
        command = [request["id"], process, time.monotonic() + request["timeout"], {r1: 1, r2: 2}, False]
reap_all_but(set())
