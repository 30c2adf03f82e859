"""preflight's cache folder, and what is kept in it: parsed rule files, torch's architectures, GPU counters.

The folder is PREFLIGHT_CACHE_DIR, else $XDG_CACHE_HOME/preflight, else
~/.cache/preflight. Everything in it can be deleted at any time; a missing,
unwritable or damaged cache only costs time.

What the cache says is believed (a parsed rule file, whether torch has kernels
for this GPU), so only its owner may write it: the folder must be a real folder
(not a link) owned by the user preflight runs as, with mode 0700. A folder of
ours that is looser is tightened; one owned by someone else, or a link, turns
the cache off for the run, with one warning. Entries are written through a
temporary file created with O_EXCL|O_NOFOLLOW under a random name and renamed
over the entry, and read without following links.

Rule files are TOML, and TOML is parsed in pure Python: parsing the default
rules was the largest part of ``preflight check``'s start-up. A parsed file
(a rule file, or a large JSON knowledge file such as the package index) is kept
in marshal's format, which Python reads several times faster than JSON, under a
key made of its length and two checksums of its bytes (CRC-32 and Adler-32) and
the Python version that wrote it, so an edited file is simply a new entry and a
cached one is not stale. (Not a cryptographic hash: importing hashlib alone
costs about 3 ms of start-up; the folder's ownership and mode are what keep
others out, as they do for the marshal-format .pyc files Python caches.)
"""

from __future__ import annotations

import marshal
import os
import stat
import sys
import zlib
from typing import Any, Callable, Dict, Optional

_PARSED = "parsed/2"
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


def content_key(data: bytes) -> str:
    """A key for these exact bytes: their length and two checksums (see the module's note on hashlib)."""
    return "%d-%08x-%08x" % (len(data), zlib.crc32(data) & 0xFFFFFFFF, zlib.adler32(data) & 0xFFFFFFFF)


def parsed(data: bytes, parse: Callable[[bytes], Any], kind: str = "rules", key: Optional[str] = None) -> Any:
    """``parse(data)`` of a file's bytes, from the cache when this exact content was parsed before by this Python
    (a TOML rule file, a JSON knowledge file); what marshal cannot keep (a TOML date) is not cached. ``kind`` names
    what ``parse`` makes of the bytes: one file parsed two ways is two entries. ``key``: ``content_key(data)``,
    when the caller has it already."""
    digest = key or content_key(data)
    path = entry_path(kind, digest[-2:], "%s.py%d%d.marshal" % ((digest,) + tuple(sys.version_info[:2])))
    cached = _read(path)
    if cached is not None:
        try:
            entry = marshal.loads(cached)
        except (EOFError, ValueError, TypeError):
            entry = None
        if isinstance(entry, tuple) and len(entry) == 2 and entry[0] == _PARSED:
            return entry[1]
    result = parse(data)
    if path:
        try:
            _write(path, marshal.dumps((_PARSED, result)))
        except ValueError:  # a value marshal cannot write
            pass
    return result


def parsed_toml(data: bytes, parse: Callable[[str], Dict[str, Any]], key: Optional[str] = None) -> Dict[str, Any]:
    """``parse(text)`` of a rule file's bytes, from the cache when this exact content was parsed before."""
    return parsed(data, lambda raw: parse(raw.decode("utf-8")), "rules", key)


_VALIDATED = "validated/2"


def validated(key: str) -> bool:
    """Whether the rule files ``key`` names (their contents, with this preflight) were once validated in full."""
    return _read(entry_path("validated", key[-2:], key)) == _VALIDATED.encode()


def remember_validated(key: str) -> None:
    path = entry_path("validated", key[-2:], key)
    if path:
        _write(path, _VALIDATED.encode())


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
    import json  # here, not at the top: the rule files' entries need no JSON, and it costs start-up time

    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None


def write_json(path: Optional[str], data: Any) -> None:
    """Write ``data`` as JSON to ``path`` in the cache, atomically; data that is not JSON (dates, NaN) or a
    folder that cannot be written is skipped: a missing cache entry only costs time."""
    if not path:
        return
    import json

    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return
    _write(path, text.encode("utf-8"))


def _write(path: str, data: bytes) -> None:
    from preflight import paths

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
