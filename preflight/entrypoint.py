"""preflight exec: run the checks, then become the command (a container's entrypoint).

The command replaces preflight with ``os.execvp``: it keeps the PID (fine as
PID 1), receives signals directly, and its exit status is the container's. No
shell is involved, so arguments arrive exactly as given.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Callable, List, Sequence

from preflight.report import Report

EXIT_CANNOT_RUN = 126
EXIT_NOT_FOUND = 127
SKIP_VARIABLE = "PREFLIGHT_SKIP"
ARGS_VARIABLE = "PREFLIGHT_ARGS"
_TRUE = ("1", "true", "yes", "on")


def skip_requested(environ) -> bool:
    return (environ.get(SKIP_VARIABLE) or "").strip().lower() in _TRUE


def with_environment_args(argv: List[str], environ) -> List[str]:
    """``preflight exec ...`` with PREFLIGHT_ARGS inserted first, so the command line still wins."""
    extra = environ.get(ARGS_VARIABLE)
    if not extra or not argv or argv[0] != "exec":
        return argv
    import shlex

    return [argv[0]] + shlex.split(extra) + argv[1:]


def check_until(check: Callable[[], Report], retry_timeout: float, sleep: float,
                log: Callable[[str], None]) -> Report:
    """Check; while it fails and time remains, wait ``sleep`` seconds and check again."""
    deadline = time.monotonic() + retry_timeout
    attempt = 1
    report = check()
    while not report.ok and time.monotonic() + sleep <= deadline:
        blocking = report.blocking()
        log("preflight: attempt %d: %d check(s) failing (%s); checking again in %gs"
            % (attempt, len(blocking), ", ".join(sorted({r.id for r in blocking})), sleep))
        time.sleep(sleep)
        attempt += 1
        report = check()
    return report


def become(command: Sequence[str], log: Callable[[str], None]) -> int:
    """Replace this process with ``command``; returns only when that is impossible (126 or 127)."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(command[0], list(command))
    except FileNotFoundError:
        log("preflight: cannot start %r: no such command (PATH=%s)" % (command[0], os.environ.get("PATH", "")))
        return EXIT_NOT_FOUND
    except OSError as exc:
        log("preflight: cannot start %r: %s" % (command[0], exc.strerror or exc))
        return EXIT_CANNOT_RUN
    return EXIT_CANNOT_RUN  # pragma: no cover - execvp does not return
