"""Run a helper command with a hard time limit and a cap on its output that really hold.

``subprocess.run(timeout=...)`` kills only the direct child and then waits for
its pipes, which a grandchild can keep open forever; and it reads whatever the
child prints, however much. Here the command runs in its own process group,
its output is read up to ``limit`` bytes, and the whole group is killed when
time is up or the output is too large.

Every helper still running is also killed when preflight leaves, on every
path (``kill_all``): at the deadline while a probe thread is abandoned, on
SIGTERM/SIGINT, and before ``exec`` replaces preflight with the training
command, so no helper outlives preflight or becomes the command's child.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from typing import Callable, Dict, List, Optional

MAX_OUTPUT = 8 << 20  # bytes a helper may print (stdout and stderr together)

_running: Dict[int, subprocess.Popen] = {}
_lock = threading.Lock()
_closed = False


class CommandTimeout(Exception):
    def __init__(self, seconds: float, stdout: str = "") -> None:
        super().__init__("no answer within %.1f s" % seconds)
        self.seconds = seconds
        self.stdout = stdout  # what it had printed when the deadline came (a worker that reports as it goes)


class CommandFailed(Exception):
    pass


def run(argv: List[str], timeout: float, env: Optional[dict] = None, limit: int = MAX_OUTPUT,
        on_line: Optional[Callable[[str], None]] = None) -> subprocess.CompletedProcess:
    """Run ``argv``; CommandTimeout past ``timeout`` (with what it printed so far), CommandFailed if it cannot
    start or prints too much. ``on_line``: called with each line of standard output as it arrives."""
    if timeout <= 0:
        raise CommandTimeout(0)
    deadline = time.monotonic() + timeout
    child = _start(argv, env, subprocess.PIPE, subprocess.PIPE)
    try:
        stdout, stderr = _read(child, deadline, limit, argv[0], timeout, on_line)
        try:
            child.wait(max(0.05, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise CommandTimeout(timeout)  # closed its output but did not exit
    finally:
        _finish(child)
    return subprocess.CompletedProcess(argv, child.returncode,
                                       stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"))


def _read(child: subprocess.Popen, deadline: float, limit: int, name: str, timeout: float,
          on_line: Optional[Callable[[str], None]] = None):
    chunks = {child.stdout: [], child.stderr: []}
    total = 0
    pending = b""  # the start of a stdout line not finished yet
    with selectors.DefaultSelector() as selector:
        for stream in chunks:
            selector.register(stream, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise CommandTimeout(timeout, b"".join(chunks[child.stdout]).decode("utf-8", "replace"))
            for key, _ in selector.select(left):
                data = os.read(key.fileobj.fileno(), 65536)
                if not data:
                    selector.unregister(key.fileobj)
                    continue
                total += len(data)
                if total > limit:
                    raise CommandFailed("%s printed more than %d MiB; stopped it" % (name, limit >> 20))
                chunks[key.fileobj].append(data)
                if on_line is not None and key.fileobj is child.stdout:
                    *lines, pending = (pending + data).split(b"\n")
                    for line in lines:
                        on_line(line.decode("utf-8", "replace"))
    return b"".join(chunks[child.stdout]), b"".join(chunks[child.stderr])


def kill_all() -> None:
    """Kill every helper's process group, wait (briefly) until each helper is gone, and start no more: preflight is
    leaving, and what it leaves next (exec's command) must not find a helper still dying."""
    global _closed
    with _lock:
        _closed = True
        children = list(_running.values())
    for child in children:
        _kill_group(child)
    deadline = time.monotonic() + 2.0
    for child in children:
        try:
            child.wait(max(0.01, deadline - time.monotonic()))
        except (subprocess.TimeoutExpired, OSError):
            pass


def reopen() -> None:
    """Allow helpers again (a new run of the command line in the same process, as tests do)."""
    global _closed
    with _lock:
        _closed = False


def _kill_group(child: subprocess.Popen) -> None:
    try:
        if os.name == "posix":
            os.killpg(child.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows
            child.kill()
    except OSError:
        pass


def run_logged(argv: List[str], timeout: float, log, env: Optional[dict] = None) -> int:
    """Run ``argv`` with its standard output and error going to ``log`` (an open binary file), its own process
    group, and a deadline: its exit status, or CommandTimeout (the group killed), CommandFailed if it cannot start.
    For a long helper whose output is kept for the user (pip), not read by preflight."""
    deadline = time.monotonic() + timeout
    child = _start(argv, env, log, subprocess.STDOUT)
    try:
        try:
            return child.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise CommandTimeout(timeout)
    finally:
        _finish(child)


def _start(argv: List[str], env: Optional[dict], stdout, stderr) -> subprocess.Popen:
    """Start ``argv`` in its own process group and register it. Start and register under one lock: kill_all
    (preflight leaving) either sees the child or stops it from starting; a child started just after kill_all
    looked would outlive preflight."""
    with _lock:
        if _closed:
            raise CommandFailed("preflight is exiting")
        try:
            child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env,
                                     start_new_session=(os.name == "posix"))
        except OSError as exc:
            raise CommandFailed("cannot run %s: %s" % (argv[0], exc.strerror or exc))
        _running[child.pid] = child
    return child


def _finish(child: subprocess.Popen) -> None:
    """Kill the child's group (also any grandchild it left behind), close its pipes, reap it, unregister it."""
    _kill_group(child)
    for stream in (child.stdout, child.stderr):
        if stream is not None:
            stream.close()
    try:
        child.wait(1)
    except subprocess.TimeoutExpired:
        pass
    with _lock:
        _running.pop(child.pid, None)
