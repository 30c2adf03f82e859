"""Which GPU architectures the installed torch has kernels for.

``torch._C._cuda_getArchFlags()`` answers without initialising CUDA, but only
after ``import torch`` (3-6 s). So it runs in a subprocess of the target
interpreter, with a timeout, and the answer is cached against what it
describes (the interpreter, the torch folder, its version, and the sizes and
mtimes of its files), with a hash of the answer: the cost is paid once per
torch install, and an entry for another install, or edited, is a miss.
"""

from __future__ import annotations

import os
import zlib
from typing import Any, Dict, List, Optional

from preflight.errors import ProbeError, ProbeTimeout
from preflight.files.cache import read_json, write_json
from preflight.probes import process

_SCRIPT = "import sys, torch; sys.stdout.write('\\n' + str(torch._C._cuda_getArchFlags()) + '\\n')"
FILE = "torch-arch-flags.json"
# The files whose change means another torch: the compiled extension, the version file, the CUDA library.
_FILES = ("version.py", os.path.join("lib", "libtorch_cuda.so"))


def cache_key(torch_facts: Dict[str, Any], python: str = "") -> Optional[str]:
    """What an answer describes: the interpreter, the torch folder and version, and its files' sizes and mtimes.
    An entry for anything else (another interpreter, a reinstalled torch, someone else's) is a miss."""
    extension = torch_facts.get("extension") or {}
    location = torch_facts.get("location")
    if not location:
        return None
    parts = [os.path.realpath(python) if python else "", os.path.realpath(location), torch_facts.get("version"),
             extension.get("size"), extension.get("mtime_ns")]
    for name in _FILES:
        try:
            info = os.stat(os.path.join(location, name))
            parts += [info.st_size, info.st_mtime_ns]
        except OSError:
            parts += [None, None]
    return "|".join(str(part) for part in parts)


def digest(key: str, flags: List[str]) -> str:
    """A hash of an answer and what it describes, kept with the answer: an entry edited by hand is a miss."""
    text = ("%s\n%s" % (key, " ".join(flags))).encode("utf-8")
    return "%d-%08x" % (len(text), zlib.crc32(text))


def probe(torch_facts: Dict[str, Any], python: str, timeout: float, use_cache: bool = True) -> Dict[str, Any]:
    key = cache_key(torch_facts, python)
    cached = bool(use_cache and key)
    cache = _read_cache() if cached else {}
    entry = cache.get(key) if key else None
    if isinstance(entry, dict) and _valid_flags(entry.get("flags")) and entry.get("digest") == digest(key, entry["flags"]):
        return {"flags": entry["flags"], "source": "cache"}
    flags = _ask_torch(python, timeout)
    if cached:
        cache[key] = {"flags": flags, "digest": digest(key, flags)}
        write_json(FILE, cache)
    return {"flags": flags, "source": "probe"}


def _ask_torch(python: str, timeout: float) -> List[str]:
    try:
        completed = process.run([python, "-c", _SCRIPT], timeout)
    except process.CommandTimeout as exc:
        raise ProbeTimeout("'import torch' gave no answer within %.1f s (raise --timeout; the answer is cached once "
                           "known)" % exc.seconds, exc.seconds)
    except process.CommandFailed as exc:
        raise ProbeError(str(exc))
    lines = [line.strip() for line in completed.stdout.splitlines() if line.strip()]
    if completed.returncode != 0 or not lines:
        detail = (completed.stderr.strip().splitlines() or ["exit status %d" % completed.returncode])[-1]
        raise ProbeError("cannot ask torch for its architectures: %s" % detail)
    return lines[-1].split()


def _valid_flags(flags: Any) -> bool:
    return isinstance(flags, list) and all(isinstance(flag, str) and len(flag) < 64 for flag in flags) \
        and len(flags) < 256


def _read_cache() -> Dict[str, Any]:
    """The cache's entries; a damaged file is a miss (and is rewritten after the next probe)."""
    data = read_json(FILE)
    if not isinstance(data, dict):
        return {}
    return {key: entry for key, entry in data.items() if isinstance(entry, dict)}
