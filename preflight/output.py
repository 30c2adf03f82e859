"""Where a report goes: standard output, or ``--output PATH``, without harming what is at PATH.

``--output`` writes according to what the path is:

- ``-``: standard output.
- a regular file, or nothing yet: the text goes to a hidden temporary file in
  the target's folder (NFD and the node_exporter textfile collector ignore
  dot-files), is flushed to disk, renamed over the target (atomic within one
  filesystem), and the folder is flushed too. If anything fails, the
  temporary file is removed and the old file stays as it was.
- a symbolic link: followed; the final target is replaced in its own folder
  and the link stays a link.
- a character device, FIFO or socket (``/dev/null``, ``/dev/stdout``, a named
  pipe): written in place, never replaced.
- a folder: refused.

Temporary files are named ``.NAME.preflight-PID-RANDOM.tmp``; one whose writer
is gone (killed half-way) is removed by the next write to the same target.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import time

from preflight.errors import OutputError, PreflightError

_TEMP = r"^\.(?P<name>.+)\.preflight-(?P<pid>\d+)-[A-Za-z0-9_]+\.tmp$"  # compiled when needed: start-up time
STALE_AFTER = 3600.0  # seconds: a temporary file this old is stale even if its PID was reused


def emit(text: str, path=None) -> None:
    """Write ``text`` to standard output (``path`` None or ``-``) or to ``path``."""
    if not text.endswith("\n"):
        text += "\n"
    if path is None or path == "-":
        write_stdout(text)
    else:
        write_file(path, text)


def write_stdout(text: str) -> None:
    """Print ``text``; a closed or failing standard output is an error (the report would be lost)."""
    stream = sys.stdout
    if stream is None:
        raise OutputError("cannot write the report: standard output is closed",
                          "run with standard output open, or write to a file with --output FILE")
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError) as exc:  # ENOSPC, EPIPE, EBADF; ValueError: the stream was closed
        _silence_stdout()
        detail = getattr(exc, "strerror", None) or str(exc)
        raise OutputError("cannot write the report to standard output: %s" % detail,
                          "write it to a file with --output FILE")


def _silence_stdout() -> None:
    """After a failed write, keep Python's exit-time flush from failing again (and printing a traceback)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _is_stream_path(path: str) -> bool:
    """/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: an open descriptor, whatever it points to."""
    if path in ("/dev/stdout", "/dev/stderr"):
        return True
    head, _, number = path.rpartition("/")
    return number.isdigit() and (head == "/dev/fd" or (head.startswith("/proc/") and head.endswith("/fd")))


def write_file(path: str, text: str) -> None:
    if _is_stream_path(path):
        _write_in_place(path, path, text)  # an open descriptor: write to it, whatever it is
        return
    try:
        info = os.stat(path)  # follows symbolic links
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise OutputError("--output %s: cannot look at it: %s; nothing was written" % (path, exc.strerror or exc))
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise OutputError("--output %s is a folder; give a file name" % path)
    if info is not None and not stat.S_ISREG(info.st_mode):
        _write_in_place(path, path, text)
        return
    # A regular file or nothing yet: replace the final target of any links, in its own folder.
    write_atomically(os.path.realpath(path), text, shown=path)


def _write_in_place(path: str, target: str, text: str) -> None:
    """A device, FIFO or socket: write into it; replacing it would destroy it."""
    try:
        with open(target, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
    except OSError as exc:
        raise OutputError("--output %s: cannot write the report: %s" % (path, exc.strerror or exc))


def write_atomically(path: str, text: str, shown: str = "") -> None:
    shown = shown or path
    folder = os.path.dirname(os.path.abspath(path))
    name = os.path.basename(path)
    if not os.path.isdir(folder):
        raise PreflightError("--output %s: the folder %s does not exist; nothing was written" % (shown, folder))
    remove_stale_temporaries(folder, name)
    import tempfile  # only when writing a file: start-up time

    try:
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".%s.preflight-%d-" % (name, os.getpid()),
                                             suffix=".tmp")
    except OSError as exc:
        raise OutputError("--output %s: cannot create a file in %s: %s; the old file is unchanged"
                          % (shown, folder, exc.strerror or exc))
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        _copy_ownership(path, temporary)
        os.replace(temporary, path)
    except OSError as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise OutputError("--output %s: writing failed: %s; the old file is unchanged" % (shown, exc.strerror or exc))
    _sync_folder(folder)


def _copy_ownership(path: str, temporary: str) -> None:
    try:
        old = os.stat(path)
    except FileNotFoundError:
        os.chmod(temporary, 0o644)  # readers (NFD, node_exporter) often run as other users
        return
    os.chmod(temporary, old.st_mode & 0o7777)
    if hasattr(os, "chown") and (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
        try:
            os.chown(temporary, old.st_uid, old.st_gid)
        except OSError:
            pass  # not root: the new file is ours, as any rewrite by this user would be


def _sync_folder(folder: str) -> None:
    """Make the rename itself durable: without this a crash can bring the old file back."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass  # some filesystems cannot sync a folder; the rename is still atomic
    finally:
        os.close(descriptor)


def remove_stale_temporaries(folder: str, name: str) -> None:
    """Remove our own temporary files for ``name`` whose writer died before renaming them."""
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    now = time.time()
    for entry in entries:
        found = re.match(_TEMP, entry)
        if not found or found.group("name") != name:
            continue
        full = os.path.join(folder, entry)
        try:
            age = now - os.lstat(full).st_mtime
            if age > STALE_AFTER or not _alive(int(found.group("pid"))):
                os.unlink(full)
        except OSError:
            continue


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # another write of this run may be under way (never, today; be safe)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
