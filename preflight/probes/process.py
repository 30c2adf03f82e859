"""Run a helper command with a hard time limit that really holds.

``subprocess.run(timeout=...)`` kills only the direct child and then waits for
its pipes, which a grandchild can keep open forever. Here the command runs in
its own process group and the whole group is killed when time is up.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import List, Optional


class CommandTimeout(Exception):
    def __init__(self, seconds: float) -> None:
        super().__init__("no answer within %.1f s" % seconds)
        self.seconds = seconds


class CommandFailed(Exception):
    pass


def run(argv: List[str], timeout: float, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    """Run ``argv``; CommandTimeout past ``timeout``, CommandFailed if it cannot start."""
    if timeout <= 0:
        raise CommandTimeout(0)
    try:
        child = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, start_new_session=(os.name == "posix"),
        )
    except OSError as exc:
        raise CommandFailed("cannot run %s: %s" % (argv[0], exc.strerror or exc))
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        try:
            child.communicate(timeout=1)
        except subprocess.TimeoutExpired:
            pass
        raise CommandTimeout(timeout)
    return subprocess.CompletedProcess(argv, child.returncode,
                                       stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"))


def _kill_group(child: subprocess.Popen) -> None:
    try:
        if os.name == "posix":
            os.killpg(child.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows
            child.kill()
    except OSError:
        pass
