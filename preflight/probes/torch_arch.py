"""Which GPU architectures the installed torch has kernels for.

``torch._C._cuda_getArchFlags()`` answers without initialising CUDA, but only
after ``import torch`` (3-6 s). So it runs in a subprocess of the target
interpreter, with a timeout, and the answer is cached against the torch
installation (its folder, version and compiled extension's size and mtime):
the cost is paid once per torch install.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from preflight.cache import cache_dir, write_json
from preflight.errors import ProbeError, ProbeTimeout
from preflight.probes import process

_SCRIPT = "import sys, torch; sys.stdout.write('\\n' + str(torch._C._cuda_getArchFlags()) + '\\n')"




def cache_key(torch_facts: Dict[str, Any]) -> Optional[str]:
    extension = torch_facts.get("extension") or {}
    if not torch_facts.get("location"):
        return None
    return "|".join(str(part) for part in (
        os.path.realpath(torch_facts["location"]), torch_facts.get("version"),
        extension.get("size"), extension.get("mtime_ns"),
    ))


def probe(torch_facts: Dict[str, Any], python: str, timeout: float, use_cache: bool = True) -> Dict[str, Any]:
    key = cache_key(torch_facts)
    path = os.path.join(cache_dir(), "torch-arch-flags.json")
    cache = _read_cache(path) if use_cache else {}
    if key and _valid_flags(cache.get(key)):
        return {"flags": cache[key], "source": "cache"}
    flags = _ask_torch(python, timeout)
    if use_cache and key:
        cache[key] = flags
        write_json(path, cache)
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


def _read_cache(path: str) -> Dict[str, Any]:
    """The cache; a damaged file or entry is a miss (and is rewritten after the next probe)."""
    from preflight.errors import PreflightError
    from preflight.input_files import load_json

    try:
        data = load_json(path, "cache", PreflightError, limit=4 << 20)
    except (PreflightError, RecursionError):
        return {}  # no cache yet, or a damaged one: probe again
    if not isinstance(data, dict):
        return {}
    return {key: flags for key, flags in data.items() if _valid_flags(flags)}


