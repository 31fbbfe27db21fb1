"""Backplane stub template: a warm interpreter that every stub of one (interpreter, environment) is a
fork of (StubTemplate.java is the host's side).

The host starts ``python -u -B backplane_stub.py --template``; by then numpy, the utils modules and
the stub itself are imported, once, with the collector off (the forks share those pages; a collection
would write to every object's header and copy them). The template is single-threaded: it only reads
requests on stdin, forks, and reaps its children.

Protocol: requests on stdin, one JSON object a line::

    {"id": 7, "argv": [...], "env": {...}, "cwd": "...", "log": "<socket path>", "key": "<hex>"}

and ``ping <n>`` lines, the host's heartbeat; answers on stdout, one line each: ``ready <pid>`` once,
``forked <id> <pid>`` or ``error <id> <text>`` per request, ``pong <n>`` per ping, and
``exit <pid> <status>`` when a child ends (the raw status word of waitpid, so the host tells an exit
code from a signal). The host does not depend on these exit lines: it watches each child through a
pidfd too, so a stopped or dead template never hides a stub's death.

The child makes itself what a freshly spawned stub is: a session (and process group) of its own, no
descriptor of the template's, stdout and stderr on two connections to the host (stdin on the first:
it reaches end of file when the host dies, which the stub watches), the requested environment and
working directory, its own random state; then it runs the stub's main() with the requested argv.
The model is loaded (initialize) there, in the child.
"""

import gc
import json
import os
import signal
import socket
import sys
import traceback

import numpy  # noqa: F401  (imported once here, shared by every fork)


def _write(line):
    data = (line + "\n").encode("utf-8", "replace")
    while data:
        data = data[os.write(1, data):]


def _reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _write("exit %d %d" % (pid, status))


def _close_inherited():
    """Closes every descriptor above 2: a stub holds nothing of the template's."""
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        return
    for fd in fds:
        if fd > 2:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor, closed already


def _connect(path, key, tag):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall((key + tag).encode("ascii"))
    return s


def _child(request, main):
    os.setsid()  # its own session and process group: a kill of its group touches nothing else
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    out = _connect(request["log"], request["key"], "o")
    err = _connect(request["log"], request["key"], "e")
    os.dup2(out.fileno(), 0)
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    out.detach()
    err.detach()
    _close_inherited()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if "numpy.random" in sys.modules:
        numpy.random.seed()  # the template's global random state would repeat in every fork (random reseeds itself)
    gc.enable()
    sys.argv = list(request["argv"])
    try:
        main()
    except BaseException:
        traceback.print_exc()  # as an uncaught exception of a spawned stub: its stderr, exit status 1
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)


def _fork(request, main):
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            _child(request, main)
        except BaseException:
            try:
                sys.stderr.write("backplane stub template: the forked stub failed to start:\n" + traceback.format_exc())
                sys.stderr.flush()
            finally:
                os._exit(3)
    return pid


def serve(main):
    """Answers fork requests until stdin (the host) closes; never returns."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the host stops the template by closing stdin
    gc.freeze()  # what the imports made is shared with every fork and never collected
    _write("ready %d" % os.getpid())
    import select
    buf = b""
    while True:
        ready, _, _ = select.select([0, wake_r], [], [])
        if wake_r in ready:
            try:
                while os.read(wake_r, 4096):
                    pass
            except BlockingIOError:
                pass
            _reap()
        if 0 not in ready:
            continue
        data = os.read(0, 65536)
        if not data:
            _reap()
            os._exit(0)  # the host closed the channel (or died): the stubs live on and watch the host themselves
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if not line.strip():
                continue
            if line.startswith(b"ping "):
                _write("pong " + line[5:].decode("ascii", "replace").strip())
                continue
            rid = -1
            try:
                request = json.loads(line.decode("utf-8"))
                rid = int(request["id"])
                pid = _fork(request, main)
                _write("forked %d %d" % (rid, pid))
            except Exception as e:
                _write("error %d %s" % (rid, ("%s: %s" % (type(e).__name__, e)).replace("\n", " ")))
        _reap()
