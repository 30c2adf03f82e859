"""preflight's cache folder, and what is kept in it: torch's architectures, GPU counters, the drains it set.

The folder is PREFLIGHT_CACHE_DIR, else $XDG_CACHE_HOME/preflight, else
~/.cache/preflight. Everything in it can be deleted at any time; a missing,
unwritable or damaged cache only costs time.

What the cache says is believed (whether torch has kernels for this GPU, which
drains preflight set), so nothing another user could have written is read:

- the folder is opened once per use without following a link, and judged by
  its descriptor: a real folder owned by the user preflight runs as. Every entry
  is then opened relative to that descriptor (no path is looked up again, so a
  folder swapped for a link after the check is never followed);
- a folder of ours that others could use (any group or other permission) is
  made private and emptied before use: what it holds may have been planted;
- an entry is believed only when it is a regular file owned by this user that
  no one else can write, at most MAX_ENTRY_BYTES, and JSON: anything else
  (a link, a FIFO, someone else's file, a damaged or huge one) is a miss;
- entries are written through a temporary file created with O_EXCL|O_NOFOLLOW
  under a random name, renamed over the entry within the folder.

A folder owned by someone else, or a link, turns the cache off for the run, with one warning.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any, Optional, Set

from preflight.terminal import say

MAX_ENTRY_BYTES = 16 << 20  # the entries are kilobytes; a larger one is damaged, not read into memory
_told: Set[str] = set()  # folders whose problem was already said in this process


def cache_dir() -> str:
    explicit = os.environ.get("PREFLIGHT_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "preflight")


class _Unusable(Exception):
    """Why the cache folder is not used (said once); ``quiet``: only slower (no home folder), not worth a word."""

    def __init__(self, why: str, quiet: bool = False) -> None:
        super().__init__(why)
        self.quiet = quiet


def _open_folder() -> int:
    """A descriptor of the cache folder, created, tightened and emptied as needed; _Unusable when it cannot be."""
    folder = cache_dir()
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError as exc:
        if not os.path.lexists(folder):
            raise _Unusable("cannot create it: %s" % (exc.strerror or exc), quiet=True)
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(folder, flags)
    except OSError as exc:
        link = os.path.islink(folder)
        raise _Unusable("it is a symbolic link" if link else "it is not a folder" if os.path.exists(folder)
                        and not os.path.isdir(folder) else "cannot open it: %s" % (exc.strerror or exc))
    try:
        info = os.fstat(descriptor)
        if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            raise _Unusable("it belongs to user %d, not to this user (%d)" % (info.st_uid, os.geteuid()))
        if info.st_mode & 0o077:
            _make_private(descriptor, info)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _make_private(descriptor: int, info: os.stat_result) -> None:
    """Ours, but others could have written in it: private from now on, and nothing it held believed."""
    try:
        os.fchmod(descriptor, 0o700)
    except OSError as exc:
        raise _Unusable("others can use it (mode %o) and it cannot be made private: %s"
                        % (info.st_mode & 0o777, exc.strerror or exc))
    for name in os.listdir(descriptor):
        try:
            os.unlink(name, dir_fd=descriptor)
        except IsADirectoryError:
            pass  # not an entry of ours: never opened, so never believed
        except OSError:
            pass


def _folder() -> Optional[int]:
    try:
        return _open_folder()
    except _Unusable as problem:
        folder = cache_dir()
        if not problem.quiet and folder not in _told:
            _told.add(folder)
            say("preflight: warning: not using the cache folder %s: %s; caching is off (set PREFLIGHT_CACHE_DIR to a "
                "folder of your own)" % (folder, problem))
        return None


def usable() -> bool:
    """Whether the cache folder can be used (said once when not)."""
    descriptor = _folder()
    if descriptor is None:
        return False
    os.close(descriptor)
    return True


def read_json(name: str) -> Any:
    """The entry's JSON, or None when it is missing, damaged, too large, or not this user's own private file."""
    folder = _folder()
    if folder is None:
        return None
    try:
        data = _read(folder, name)
    finally:
        os.close(folder)
    if data is None:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError, MemoryError):
        return None


def _read(folder: int, name: str) -> Optional[bytes]:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(name, flags, dir_fd=folder)
    except OSError:
        return None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_mode & 0o022 or info.st_size > MAX_ENTRY_BYTES:
            return None  # a folder, FIFO or device; writable by others; or larger than any entry of ours
        if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            return None
        with os.fdopen(os.dup(descriptor), "rb") as handle:
            data = handle.read(MAX_ENTRY_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    return data if len(data) <= MAX_ENTRY_BYTES else None


def write_json(name: str, data: Any) -> None:
    """Write ``data`` as the entry ``name``, atomically; data that is not JSON (dates, NaN) or a folder that
    cannot be written is skipped: a missing cache entry only costs time."""
    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return
    folder = _folder()
    if folder is None:
        return
    from preflight.files import paths

    temporary = ".%s.%s.tmp" % (name, paths.random_suffix())
    try:
        with os.fdopen(paths.create_exclusive(temporary, folder, 0o600), "wb") as out:
            out.write(text.encode("utf-8"))
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except OSError:
        try:
            os.unlink(temporary, dir_fd=folder)
        except OSError:
            pass
    finally:
        os.close(folder)
