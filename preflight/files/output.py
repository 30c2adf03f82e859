"""Where a report goes: standard output, or ``--output PATH``, without harming what is at PATH.

``--output`` (and every other file preflight writes: ``serve --nfd-output``, ``--report-dir``) writes according
to what the path is:

- ``-``: standard output; ``/dev/stdout``, ``/dev/fd/N``: that open descriptor.
- a regular file, or nothing yet: the text goes to a hidden temporary file in
  the target's folder (NFD and the node_exporter textfile collector ignore
  dot-files), created with O_EXCL|O_NOFOLLOW under a random name, flushed to
  disk, renamed over the target (atomic within one filesystem), and the folder
  is flushed too. If anything fails, the temporary file is removed and the old
  file stays as it was.
- a symbolic link: followed under ``preflight.files.paths``' policy (a link in a
  folder other users can write is followed only when root or this user owns
  it); the final target is replaced in its own folder and the link stays a link.
- a character device, FIFO or socket (``/dev/null``, a named pipe): written in
  place, never replaced.
- a folder: refused.

Temporary files are named ``.NAME.preflight-PID-RANDOM.tmp``; one whose writer
is gone (killed half-way) is removed by the next write to the same target.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time

from preflight.errors import OutputError, WriteFailed

_TEMP = r"^\.(?P<name>.+)\.preflight-(?P<pid>\d+)-[A-Za-z0-9_]+\.tmp$"
STALE_AFTER = 3600.0  # seconds: a temporary file this old is stale even if its PID was reused


def json_text(document) -> str:
    """A JSON document as preflight writes every one: indented by 2, keys in the order given, no NaN (invalid JSON)."""
    return json.dumps(document, indent=2, allow_nan=False)


def json_line(document) -> str:
    """A JSON document on one line (``--format jsonl``): compact, no NaN, non-ASCII kept as is."""
    return json.dumps(document, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


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
        raise WriteFailed("cannot write the report: standard output is closed",
                          "run with standard output open, or write to a file with --output FILE")
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError) as exc:  # ENOSPC, EPIPE, EBADF; ValueError: the stream was closed
        _silence_stdout()
        detail = getattr(exc, "strerror", None) or str(exc)
        raise WriteFailed("cannot write the report to standard output: %s" % detail,
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


def write_file(path: str, text: str, what: str = "", follow_final: bool = True) -> None:
    """``follow_final``: a link at the final name is followed (--output's documented behaviour); else the name
    itself is replaced by the new file, whatever it was (a report folder's HOST.json: nobody's link is followed)."""
    what = what or "--output %s" % path
    if _is_stream_path(path) and follow_final:
        _write_in_place(path, path, text, what)  # an open descriptor: write to it, whatever it is
        return
    from preflight.files import paths

    if follow_final:
        resolved = paths.resolve(path, what)  # links followed only where they are safe to follow
    else:
        resolved = paths.Resolved(paths.resolve_folder(os.path.dirname(os.path.abspath(path)), what),
                                  os.path.basename(path))
    folder = paths.open_folder(resolved.folder, what)
    try:
        try:
            info = os.stat(resolved.name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        except OSError as exc:
            raise OutputError("%s: cannot look at it: %s; nothing was written" % (what, exc.strerror or exc))
        if info is not None and stat.S_ISDIR(info.st_mode):
            raise OutputError("%s is a folder; give a file name" % what)
        if info is not None and stat.S_ISLNK(info.st_mode) and not follow_final:
            info = None  # replaced by a file of ours: the link's target is never touched
        elif info is not None and stat.S_ISLNK(info.st_mode):  # appeared since it was resolved
            raise paths.UnsafeLink("%s: %s became a symbolic link while preflight looked at it; nothing was written"
                                   % (what, os.path.join(resolved.folder, resolved.name)))
        if info is not None and not stat.S_ISREG(info.st_mode):
            if not follow_final:
                raise OutputError("%s is not a regular file; nothing was written" % what)
            _write_in_place(path, os.path.join(resolved.folder, resolved.name), text, what)
            return
        _replace(folder, resolved, info, text, what)
    finally:
        os.close(folder)


def _write_in_place(path: str, target: str, text: str, what: str) -> None:
    """A device, FIFO or socket: write into it; replacing it would destroy it."""
    try:
        out = open(target, "w", encoding="utf-8")
    except OSError as exc:
        raise OutputError("%s: cannot open it: %s; nothing was written" % (what, exc.strerror or exc))
    try:
        with out:
            out.write(text)
            out.flush()
    except OSError as exc:
        raise WriteFailed("%s: cannot write the report: %s" % (what, exc.strerror or exc))


def write_atomically(path: str, text: str, shown: str = "", follow_final: bool = True) -> None:
    """Replace the regular file ``path`` (or create it) with ``text``, all or nothing."""
    write_file(path, text, shown, follow_final)


def _replace(folder: int, resolved, old, text: str, what: str) -> None:
    """Write a temporary file beside the target, flush it to disk, rename it over the target, flush the folder.

    Everything is relative to the folder's descriptor, and the temporary is created with O_EXCL|O_NOFOLLOW under
    a random name: nothing another user put in the folder is followed or reused.
    """
    from preflight.files import paths

    name = resolved.name
    remove_stale_temporaries(resolved.folder, name, folder)
    temporary = ".%s.preflight-%d-%s.tmp" % (name, os.getpid(), paths.random_suffix())
    try:
        handle = paths.create_exclusive(temporary, folder)
    except OSError as exc:
        raise OutputError("%s: cannot create a file in %s: %s; the old file is unchanged"
                          % (what, resolved.folder, exc.strerror or exc))
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
            _choose_mode(old, out.fileno())
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except OSError as exc:
        try:
            os.unlink(temporary, dir_fd=folder)
        except OSError:
            pass
        raise WriteFailed("%s: writing failed: %s; the old file is unchanged" % (what, exc.strerror or exc))
    try:
        os.fsync(folder)  # make the rename itself durable: without this a crash can bring the old file back
    except OSError:
        pass  # some filesystems cannot sync a folder; the rename is still atomic


def _choose_mode(old, descriptor: int) -> None:
    """The new file is the writer's own: readable by all (NFD and node_exporter often run as other users), or
    with the read and write bits of the file it replaces when that file was the writer's own too (a mode its
    owner chose). A file someone else put there lends nothing: in a shared folder its 0666 would let them
    rewrite root's report. Never an execute, set-user-ID or set-group-ID bit."""
    mine = old is not None and hasattr(os, "geteuid") and old.st_uid == os.geteuid()
    os.fchmod(descriptor, (old.st_mode & 0o666) | 0o600 if mine else 0o644)


def remove_stale_temporaries(folder: str, name: str, folder_fd: int) -> None:
    """Remove our own temporary files for ``name`` whose writer died before renaming them."""
    try:
        entries = os.listdir(folder_fd)
    except OSError:
        return
    now = time.time()
    for entry in entries:
        found = re.match(_TEMP, entry)
        if not found or found.group("name") != name:
            continue
        try:
            age = now - os.stat(entry, dir_fd=folder_fd, follow_symlinks=False).st_mtime
            if age > STALE_AFTER or not _alive(int(found.group("pid"))):
                os.unlink(entry, dir_fd=folder_fd)
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
