"""preflight exec: run the checks, then become the command (a container's entrypoint).

The command replaces preflight with ``os.execvp``: it keeps the PID (fine as
PID 1), receives signals directly, and its exit status is the container's. No
shell is involved, so arguments arrive exactly as given.
"""

from __future__ import annotations

import os
import shlex
import stat
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence

from preflight.errors import ExitCode, PreflightError
from preflight.report import Report

SKIP_VARIABLE = "PREFLIGHT_SKIP"
ARGS_VARIABLE = "PREFLIGHT_ARGS"
_TRUE = ("1", "true", "yes", "on")


def skip_requested(environ) -> bool:
    return (environ.get(SKIP_VARIABLE) or "").strip().lower() in _TRUE


# The commands that evaluate rules, and so take PREFLIGHT_ARGS.
ARGS_COMMANDS = ("check", "exec", "slurm")


def with_environment_args(argv: List[str], environ,
                          option_arity: Callable[[str], Dict[str, bool]]) -> List[str]:
    """``preflight check|exec|slurm ...`` with PREFLIGHT_ARGS inserted first, so the command line still wins.

    ``option_arity(command)`` maps each option of that command to whether it
    takes a value. PREFLIGHT_ARGS may hold options only: a stray word would
    otherwise become the command that exec starts instead of the training
    command, or an argument another command does not take.
    """
    extra = environ.get(ARGS_VARIABLE)
    if not extra or not argv or argv[0] not in ARGS_COMMANDS:
        return argv

    try:
        words = shlex.split(extra)
    except ValueError as exc:
        raise PreflightError("%s=%r cannot be split into words: %s" % (ARGS_VARIABLE, extra, exc),
                             "quote as in a shell: %s=\"--ignore 'host.shm'\"" % ARGS_VARIABLE)
    arity = option_arity(argv[0])
    index = 0
    while index < len(words):
        word = words[index]
        name = word.split("=", 1)[0]
        if word == "--" or not word.startswith("-") or word == "-":
            raise PreflightError("%s holds %r, which is not an option: %s may hold options only"
                                 % (ARGS_VARIABLE, word, ARGS_VARIABLE),
                                 "the command to run goes after '--' on the command line: "
                                 "preflight exec [options] -- CMD ...")
        if name not in arity:
            raise PreflightError("%s holds %r, which is not an option of preflight %s" % (ARGS_VARIABLE, word, argv[0]),
                                 "'preflight %s --help' lists them" % argv[0])
        if arity[name] and "=" not in word:
            if index + 1 >= len(words):
                raise PreflightError("%s: %s needs a value" % (ARGS_VARIABLE, word))
            index += 1
        index += 1
    return [argv[0]] + words + argv[1:]


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


TERMINATION_LOG = "/dev/termination-log"  # where Kubernetes reads a container's termination message
TERMINATION_LIMIT = 4096  # Kubernetes keeps at most this many bytes of it


def write_termination_message(path: str, line: str, log: Callable[[str], None], create: bool = False) -> bool:
    """Write ``line`` where the orchestrator reads why the container stopped, if that file exists and is writable;
    ``create``: make it when it does not (a path the user named; Kubernetes' own is bind-mounted in place).

    Only into a regular file, written in place (a rename cannot replace a bind mount), reached under the link
    policy of ``preflight.files.paths`` and opened without following a link: never a device, a pipe, or a planted
    link's target. A failure is only logged.
    """
    if not path:
        return False
    from preflight.files import paths

    try:
        resolved = paths.resolve(path, "--termination-log %s" % path)
    except PreflightError as exc:
        if isinstance(exc, paths.UnsafeLink):
            log("preflight: %s" % exc.message)
        return False
    flags = os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        folder = paths.open_folder(resolved.folder, "--termination-log %s" % path)
    except PreflightError:
        return False
    try:
        try:
            descriptor = os.open(resolved.name, flags, dir_fd=folder)
        except FileNotFoundError:
            if not create:
                return False  # not under Kubernetes: nobody reads it
            try:
                descriptor = paths.create_exclusive(resolved.name, folder, 0o644)
            except OSError as exc:
                log("preflight: cannot create the termination log %s: %s" % (path, exc.strerror or exc))
                return False
        except OSError:
            return False  # not writable, or a link: not ours to write
        with os.fdopen(descriptor, "wb") as out:
            if not stat.S_ISREG(os.fstat(out.fileno()).st_mode):
                log("preflight: %s is not a regular file: the termination message is not written there" % path)
                return False
            out.truncate(0)
            out.write((line.strip() + "\n").encode("utf-8", "replace")[:TERMINATION_LIMIT])
        return True
    except OSError as exc:
        log("preflight: cannot write the termination message to %s: %s" % (path, exc.strerror or exc))
        return False
    finally:
        os.close(folder)


def cannot_start(command: Sequence[str], log: Callable[[str], None]) -> Optional[int]:
    """127 or 126 (said) when ``command`` could not be started as execvp would look for it, else None: checked
    before the checks, so that a command that does not exist is not found out only after them."""
    import shutil

    if not command or not command[0]:
        log("preflight: cannot start an empty command name")
        return ExitCode.NOT_FOUND
    name = command[0]
    if "/" in name:
        if not os.path.exists(name):
            log("preflight: cannot start %r: no such file" % name)
            return ExitCode.NOT_FOUND
        if os.path.isdir(name) or not os.access(name, os.X_OK):
            log("preflight: cannot start %r: %s" % (name, "a folder" if os.path.isdir(name) else
                                                      "not executable (chmod +x, or name its interpreter first)"))
            return ExitCode.CANNOT_RUN
        return None
    if shutil.which(name) is None:
        log("preflight: cannot start %r: no such command (PATH=%s)" % (name, os.environ.get("PATH", os.defpath)))
        return ExitCode.NOT_FOUND
    return None


def become(command: Sequence[str], log: Callable[[str], None]) -> int:
    """Replace this process with ``command``; returns only when that is impossible (126 or 127)."""
    if not command or not command[0]:
        log("preflight: cannot start an empty command name")
        return ExitCode.NOT_FOUND
    process = sys.modules.get("preflight.probes.process")
    if process is not None:
        process.kill_all()  # no helper of preflight's may become the command's child
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    try:
        os.execvp(command[0], list(command))
    except FileNotFoundError:
        log("preflight: cannot start %r: no such command (PATH=%s)" % (command[0], os.environ.get("PATH", "")))
        return ExitCode.NOT_FOUND
    except OSError as exc:
        log("preflight: cannot start %r: %s" % (command[0], exc.strerror or exc))
        return ExitCode.CANNOT_RUN
    return ExitCode.CANNOT_RUN  # pragma: no cover - execvp does not return
