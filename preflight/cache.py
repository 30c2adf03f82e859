"""preflight's cache folder, and parsed rule files kept in it.

The folder is PREFLIGHT_CACHE_DIR, else $XDG_CACHE_HOME/preflight, else
~/.cache/preflight. Everything in it can be deleted at any time; a missing,
unwritable or damaged cache only costs time.

Rule files are TOML, and TOML is parsed in pure Python: parsing the default
rules was the largest part of ``preflight check``'s start-up. A parsed file is
kept as JSON under a key made of its length and two checksums of its bytes
(CRC-32 and Adler-32), so an edited file is simply a new entry and a cached one
is not stale. (Not a cryptographic hash: importing hashlib alone costs about
3 ms of start-up, and the cache folder is the user's own, so it guards against
accidents, not attackers.)
"""

from __future__ import annotations

import json
import os
import zlib
from typing import Any, Callable, Dict

_FORMAT = "toml-json/1"


def cache_dir() -> str:
    explicit = os.environ.get("PREFLIGHT_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "preflight")


def parsed_toml(data: bytes, parse: Callable[[str], Dict[str, Any]]) -> Dict[str, Any]:
    """``parse(text)`` of a rule file's bytes, from the cache when this exact content was parsed before."""
    digest = "%d-%08x-%08x" % (len(data), zlib.crc32(data) & 0xFFFFFFFF, zlib.adler32(data) & 0xFFFFFFFF)
    path = os.path.join(cache_dir(), "rules", digest[-2:], digest + ".json")
    try:
        with open(path, encoding="utf-8") as handle:
            cached = json.load(handle)
        if isinstance(cached, dict) and cached.get("format") == _FORMAT and isinstance(cached.get("data"), dict):
            return cached["data"]
    except (OSError, ValueError, RecursionError):
        pass  # not cached yet, or damaged: parse again
    result = parse(data.decode("utf-8"))
    _store(path, result)
    return result


def _store(path: str, result: Dict[str, Any]) -> None:
    write_json(path, {"format": _FORMAT, "data": result})


def write_json(path: str, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` in the cache, atomically (a temporary file renamed over it); data that is
    not JSON (dates, NaN) or a folder that cannot be written is skipped: a missing cache entry only costs time."""
    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return
    temporary = "%s.%d.tmp" % (path, os.getpid())
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temporary, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except OSError:
        try:
            os.remove(temporary)
        except OSError:
            pass
