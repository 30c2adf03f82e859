"""preflight's cache folder, and what is kept in it: torch's architectures, GPU counters, the drains it set.

The folder is PREFLIGHT_CACHE_DIR, else $XDG_CACHE_HOME/preflight, else
~/.cache/preflight. Everything in it can be deleted at any time; a missing,
unwritable or damaged cache only costs time.

What the cache says is believed (whether torch has kernels
for this GPU), so only its owner may write it: the folder must be a real folder
(not a link) owned by the user preflight runs as, with mode 0700. A folder of
ours that is looser is tightened; one owned by someone else, or a link, turns
the cache off for the run, with one warning. Entries are written through a
temporary file created with O_EXCL|O_NOFOLLOW under a random name and renamed
over the entry, and read without following links.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from typing import Any, Dict, Optional

_CANNOT_CREATE = "cannot create it"
_checked: Dict[str, Optional[str]] = {}  # folder -> None when usable, else why not (told once)


def cache_dir() -> str:
    explicit = os.environ.get("PREFLIGHT_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "preflight")


def usable_dir() -> Optional[str]:
    """The cache folder when only this user can write it (created, or tightened, as needed); else None, after
    telling the user once why caching is off."""
    folder = cache_dir()
    if folder not in _checked:
        _checked[folder] = _problem(folder)
        if _checked[folder] and not _checked[folder].startswith(_CANNOT_CREATE):  # no home folder: only slower
            try:
                sys.stderr.write("preflight: warning: not using the cache folder %s: %s; caching is off (set "
                                 "PREFLIGHT_CACHE_DIR to a folder of your own)\n" % (folder, _checked[folder]))
            except (OSError, ValueError, AttributeError):
                pass
    return None if _checked[folder] else folder


def _problem(folder: str) -> Optional[str]:
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError as exc:
        return "%s: %s" % (_CANNOT_CREATE, exc.strerror or exc)
    if stat.S_ISLNK(info.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a folder"
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        return "it belongs to user %d, not to this user (%d)" % (info.st_uid, os.geteuid())
    if info.st_mode & 0o077:
        try:
            os.chmod(folder, 0o700)  # ours, but others may read or write it: make it private
        except OSError as exc:
            return "others can use it (mode %o) and it cannot be made private: %s" % (
                info.st_mode & 0o777, exc.strerror or exc)
    return None


def entry_path(*parts: str) -> Optional[str]:
    """Where an entry lives in the cache, or None when the cache is off."""
    folder = usable_dir()
    return None if folder is None else os.path.join(folder, *parts)


def _read(path: Optional[str]) -> Optional[bytes]:
    """An entry's bytes, or None when it is missing or a link."""
    if not path:
        return None
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        with os.fdopen(descriptor, "rb") as handle:
            return handle.read(64 << 20)
    except OSError:
        return None


def read_json(path: Optional[str]) -> Any:
    """An entry's JSON, or None when it is missing, damaged, or a link."""
    data = _read(path)
    if data is None:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None


def write_json(path: Optional[str], data: Any) -> None:
    """Write ``data`` as JSON to ``path`` in the cache, atomically; data that is not JSON (dates, NaN) or a
    folder that cannot be written is skipped: a missing cache entry only costs time."""
    if not path:
        return
    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return
    _write(path, text.encode("utf-8"))


def _write(path: str, data: bytes) -> None:
    from preflight.files import paths

    folder = os.path.dirname(path)
    temporary = os.path.join(folder, ".%s.%s.tmp" % (os.path.basename(path), paths.random_suffix()))
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        with os.fdopen(os.open(temporary, flags, 0o600), "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except OSError:
        try:
            os.remove(temporary)
        except OSError:
            pass
