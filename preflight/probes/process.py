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

A helper that runs code preflight does not control (the active test runs the
user's checkout) is run with ``whole_tree``: while it runs preflight is a
subreaper (Linux), so a descendant that leaves the process group with setsid
and outlives the helper is re-parented to preflight, which kills and reaps it
with its own descendants. Reading stops shortly after the helper exits even if such a
leftover still holds its output pipes.
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
LEFTOVER_GRACE = 0.5  # seconds output is still read after the helper exited (a leftover may hold its pipes)
_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h

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
        on_line: Optional[Callable[[str], None]] = None, whole_tree: bool = False) -> subprocess.CompletedProcess:
    """Run ``argv``; CommandTimeout past ``timeout`` (with what it printed so far), CommandFailed if it cannot
    start or prints too much. ``on_line``: called with each line of standard output as it arrives.
    ``whole_tree``: also end every process it started that left its process group."""
    if timeout <= 0:
        raise CommandTimeout(0)
    deadline = time.monotonic() + timeout
    adoption = _Adoption() if whole_tree else None
    child = None
    try:
        child = _start(argv, env, subprocess.PIPE, subprocess.PIPE)
        stdout, stderr = _read(child, deadline, limit, argv[0], timeout, on_line)
        try:
            child.wait(max(0.05, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise CommandTimeout(timeout)  # closed its output but did not exit
    finally:
        if child is not None:
            _finish(child)
        if adoption is not None:
            adoption.end()
    return subprocess.CompletedProcess(argv, child.returncode,
                                       stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"))


def _read(child: subprocess.Popen, deadline: float, limit: int, name: str, timeout: float,
          on_line: Optional[Callable[[str], None]] = None):
    chunks = {child.stdout: [], child.stderr: []}
    total = 0
    pending = b""  # the start of a stdout line not finished yet
    exited = None  # when the helper was seen to have exited
    with selectors.DefaultSelector() as selector:
        for stream in chunks:
            selector.register(stream, selectors.EVENT_READ)
        while selector.get_map():
            now = time.monotonic()
            if now >= deadline:
                raise CommandTimeout(timeout, b"".join(chunks[child.stdout]).decode("utf-8", "replace"))
            if exited is None and child.poll() is not None:
                exited = now
            if exited is not None and now - exited > LEFTOVER_GRACE:
                break  # the helper is gone; what still holds its pipes is a leftover, ended by _finish
            for key, _ in selector.select(min(deadline - now, LEFTOVER_GRACE / 2)):
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


def ended_by(returncode: Optional[int]) -> str:
    """How a process ended, in words: 'killed by signal 9 (SIGKILL)', 'exited with status 3'."""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "an unknown signal"
        return "killed by signal %d (%s)" % (-returncode, name)
    return "exited with status %s" % returncode


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


class _Adoption:
    """While a helper runs, preflight is a subreaper (Linux): its descendants orphaned in that time (one that left
    the group with setsid, then lost its parent) become preflight's children. ``end`` kills and reaps each of them
    with its own descendants; children preflight had before, and helpers it runs, are left alone."""

    def __init__(self) -> None:
        import psutil

        self.me = psutil.Process()
        self.before = {child.pid for child in self.me.children()}
        self.on = _subreaper(True)

    def end(self, patience: float = 2.0) -> None:
        import psutil

        until = time.monotonic() + patience
        while time.monotonic() < until:
            with _lock:
                ours = self.before | set(_running)
            try:
                strays = [child for child in self.me.children() if child.pid not in ours]
            except psutil.Error:
                break
            if not strays:
                break
            for stray in strays:
                try:
                    tree = [stray] + stray.children(recursive=True)
                except psutil.Error:
                    tree = [stray]
                for member in tree:
                    try:
                        member.kill()
                    except psutil.Error:
                        pass
            psutil.wait_procs(strays, timeout=0.2)  # reaps them; their own children come to us next round
        if self.on:
            _subreaper(False)


def _subreaper(on: bool) -> bool:
    """Make preflight a subreaper (or no longer one); False where the system has none (the group is killed)."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


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
