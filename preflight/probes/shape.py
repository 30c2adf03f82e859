"""The shape of a facts snapshot: every key the code reads, with its type.

A snapshot comes from a file (``check --facts``), another interpreter
(``--python``) or this machine's probes. Whatever comes from outside is
checked against this shape before anything reads it, so that a string where a
number belongs, ``null`` in place of a list, a number too large for a float or
a NaN is a clear error naming the key (exit 2), never a crash or a wrong
verdict. Keys the shape does not name are allowed (newer preflights add facts).

A spec is a type name (``str``, ``int``, ``num``, ``bool``, ``any``), with a
trailing ``?`` where ``null`` is allowed; a dict (an object with these keys;
``*`` for any other key; ``?`` as a key makes the object itself nullable, ``!``
lists the keys it must have); or a
one-item list (a list of that).
"""

from __future__ import annotations

import math
from typing import Any, List, Optional

LARGEST_INT = 2 ** 63  # NVML counters are 64-bit; anything larger is not a real fact

STATUS = {"!": ("status",), "status": "str", "seconds": "num?", "error": "str?"}
GPU = {
    "!": ("index",),
    "index": "int", "name": "str?", "uuid": "str?", "pci_bus_id": "str?", "brand": "str?", "architecture": "str?",
    "compute_capability": "str?",
    "memory": {"?": True, "total": "int?", "free": "int?", "used": "int?", "reserved": "int?", "source": "str?"},
    "mig_mode": {"?": True, "current": "bool", "pending": "bool"},
    "mig_devices": ["str"],
    "persistence_mode": "bool?",
    "ecc_mode": {"?": True, "current": "bool", "pending": "bool"},
    "ecc_uncorrected_volatile": "int?",
    "remapped_rows": {"?": True, "corrected": "int?", "uncorrected": "int?", "pending": "bool?", "failure": "bool?"},
    "retired_pages_pending": "bool?",
    "temperature_c": "num?",
    "clock_event_reasons": {"?": True, "mask": "int?", "active": ["str"]},
    "processes": [{"pid": "int?", "used_memory": "int?", "name": "str?"}],
    "lost": "bool?",
    "unsupported": ["str"],
    "errors": {"*": "str"},
    "fabric": {"?": True, "!": ("state",), "state": "str", "status": "int?"},
    "pcie": {"?": True, "current_generation": "int?", "max_generation": "int?", "current_width": "int?",
             "max_width": "int?", "replay_counter": "int?", "replay_rate_per_min": "num?"},
    "utilization_gpu": "num?",
    "nvlink": {"?": True, "!": ("links", "active", "inactive"), "links": "int", "active": "int", "inactive": ["int"], "errors": {"*": "int"},
               "errors_since_last": {"*": "int"}, "seconds_since_last": "num?"},
    "temperature_thresholds": {"?": True, "slowdown": "num?", "shutdown": "num?"},
    "power": {"?": True, "usage_mw": "int?", "enforced_limit_mw": "int?", "default_limit_mw": "int?"},
    "retired_pages": {"?": True, "!": ("single_bit", "double_bit"), "single_bit": "int", "double_bit": "int", "previous_total": "int?"},
    "inforom": "str?",
}
NVML = {
    "?": True,
    "init": {"!": ("status",), "status": "str", "error": "str?", "code": "int?", "message": "str?", "python": "str?"},
    "driver_version": "str?", "cuda_driver_version": "str?", "device_count": "int?",
    "gpus": [GPU],
    "errors": {"*": "str"},
    "device_files": ["str"],
    "pci_gpus": ["str"],
    "health_read": "bool?",
}
VISIBILITY = {
    "?": True, "cuda_visible_devices": "str?", "cuda_device_order": "str?", "order": "str?", "visible": ["int"],
    "mig_selected": ["str"], "notes": ["str"], "count": "int?",
}
HOST = {
    "?": True,
    "cpu": {"?": True, "logical": "int?", "affinity": "int?", "cgroup_quota": "num?", "count": "int?"},
    "memory": {"?": True, "physical_total": "int?", "physical_available": "int?", "cgroup_limit": "int?",
               "total": "int?", "available": "int?"},
    "shm": {"?": True, "total": "int?", "free": "int?", "error": "str?"},
    "container": {"?": True, "detected": "bool?", "kind": "str?", "markers": ["str"]},
    "os": {"?": True, "*": "str?"},
}
PACKAGE = {"dist": "str?", "version": "str?", "import": "str?", "importable": "bool?"}
TORCH = {
    "?": True, "installed": "bool", "location": "str?", "version": "str?", "cuda": "str?", "hip": "str?",
    "extension": {"?": True, "path": "str?", "size": "int?", "mtime_ns": "int?"}, "error": "str?",
}
COMPANION = {"version": "str?", "requires_torch": "str?", "error": "str?"}
CONDA = {
    "?": True, "active": "bool?", "env_name": "str?", "is_base": "bool?", "prefix": "str?", "source": "str?",
    "CONDA_DEFAULT_ENV": "str?", "CONDA_PREFIX": "str?", "interpreter_in_active_env": "bool?",
}
PYTHON = {
    "?": True, "executable": "str?", "version": "str?", "implementation": "str?", "prefix": "str?",
    "base_prefix": "str?", "venv": "bool?", "conda": CONDA, "packages": {"*": PACKAGE}, "torch": TORCH,
    "torch_companions": {"?": True, "*": COMPANION},
}
TORCH_ARCH = {"?": True, "flags": ["str"], "source": "str?"}
CONTAINER = {"?": True, "*": "str?", "requirements": {"*": "str"}}
KERNEL_LOG = {
    "?": True, "!": ("readable",), "readable": "bool", "source": "str?", "reason": "str?", "truncated": "bool?",
    "events": [{"!": ("xid",), "xid": "int", "pci": "str?", "pid": "str?", "process": "str?", "text": "str?"}],
}
# The active test's answer (probes/smoke_worker.py): every check may instead hold "error" (and "where") or
# "skipped"; NaN never appears (the worker writes losses as text and non-finite errors as null).
_FAILED = {"error": "str?", "where": "str?", "skipped": "str?", "iterations": "int?"}
_PRECISION = {"?": True, "supported": "bool?", "max_relative_error": "num?", "finite": "bool?"}
SMOKE = {
    "?": True, "python": "str?", "interpreter": "str?", "torch": "str?", "torch_cuda": "str?", "device": "str?",
    "seconds": "num?", "errors": ["str"], "cut": "str?", "asked": ["str"],
    "devices": [{
        "index": "int?", "device": "str?", "name": "str?", "compute_capability": "str?",
        "memory": dict(_FAILED, **{"?": True, "tested_bytes": "int?", "free_bytes": "int?", "total_bytes": "int?",
                                   "errors": "int?", "seconds": "num?"}),
        "matmul": dict(_FAILED, **{"?": True, "fp32": _PRECISION, "tf32": _PRECISION, "fp16": _PRECISION,
                                   "bf16": _PRECISION}),
        "throughput": dict(_FAILED, **{"?": True, "matmul_tflops": "num?", "matmul_dtype": "str?",
                                       "bandwidth_gbs": "num?"}),
        "train_step": dict(_FAILED, **{"?": True, "ok": "bool?", "losses": ["str"], "amp": "str?",
                                       "finite_gradients": "bool?", "cudnn": "bool?"}),
    }],
    "checks": {
        "?": True,
        "collective": dict(_FAILED, **{
            "?": True, "peers": [{"pair": ["int"], "access": "bool?", "gbs": "num?", "correct": "bool?"}],
            "allreduce": dict(_FAILED, **{"?": True, "backend": "str?", "world": "int?", "correct": "bool?",
                                          "bus_gbs": "num?", "errors": ["str"]})}),
        "fit": dict(_FAILED, **{
            "?": True, "device": "str?", "missing_module": "str?", "requirements": "str?", "cfg": "str?",
            "classes": "int?", "budget_seconds": "num?", "seconds": "num?", "stopped": "str?", "bounded": "str?", "repo": "str?", "imgsz": "int?", "per_image_bytes": "int?", "total_bytes": "int?",
            "largest_batch": "int?",
            "points": [{"batch": "int", "loss": "str?", "allocated_bytes": "int?", "reserved_bytes": "int?",
                        "steps": "int?", "seconds_per_step": "num?"}]}),
    },
}
SNAPSHOT = {
    "schema": "str", "preflight_version": "str?", "knowledge_as_of": "str?", "collected_at": "str?", "source": "str?", "seconds": "num?",
    "hostname": "str?",
    "probes": {"*": STATUS},
    "nvml": NVML, "visibility": VISIBILITY, "host": HOST, "python": PYTHON, "torch_arch": TORCH_ARCH,
    "container": CONTAINER, "kernel_log": KERNEL_LOG, "smoke": SMOKE,
}


class ShapeError(ValueError):
    def __init__(self, key: str, problem: str) -> None:
        super().__init__("%s: %s" % (key, problem))
        self.key = key
        self.problem = problem


class _Mismatch(Exception):
    """Raised where a value does not fit, with no key yet: each level adds its part on the way out, so a snapshot
    that fits (nearly all) builds no key strings at all."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.parts: List[str] = []  # innermost first


def check(value: Any, spec: Any = None, key: str = "") -> None:
    """Raise ShapeError naming the first key whose value does not have the shape ``spec``."""
    try:
        _check(value, SNAPSHOT if spec is None else spec)
    except _Mismatch as mismatch:
        where = key or ""
        for part in reversed(mismatch.parts):
            where = (where + part) if part.startswith("[") or not where else "%s.%s" % (where, part)
        raise ShapeError(where or "(top level)", mismatch.problem) from None


def _check(value: Any, spec: Any) -> None:
    if isinstance(spec, str):
        _check_leaf(value, spec)
    elif isinstance(spec, list):
        if not isinstance(value, list):
            raise _Mismatch("expected a list, found %s" % _describe(value))
        for position, item in enumerate(value):
            try:
                _check(item, spec[0])
            except _Mismatch as mismatch:
                mismatch.parts.append("[%d]" % position)
                raise
    else:
        if value is None and spec.get("?"):
            return
        if not isinstance(value, dict):
            raise _Mismatch("expected an object, found %s" % _describe(value))
        for name in spec.get("!", ()):
            if name not in value:
                raise _Mismatch("'%s' is missing" % name)
        for name, item in value.items():
            item_spec = spec.get(name, spec.get("*")) if name not in ("?", "!") else None
            if item_spec is not None:
                try:
                    _check(item, item_spec)
                except _Mismatch as mismatch:
                    mismatch.parts.append(name)
                    raise


_KINDS = {
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "num": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}


def _check_leaf(value: Any, spec: str) -> None:
    kind = spec.rstrip("?")
    if value is None:
        if spec.endswith("?") or kind == "any":
            return
        raise _Mismatch("expected %s, found null" % _WORDS[kind])
    if kind == "any":
        _finite(value)
        return
    if not _KINDS[kind](value):
        raise _Mismatch("expected %s, found %s" % (_WORDS[kind], _describe(value)))
    if kind in ("int", "num"):
        _finite(value)


def _finite(value: Any) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int) and abs(value) >= LARGEST_INT:
        raise _Mismatch("the number %s is too large to be a real fact" % _short(value))
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise _Mismatch("expected a finite number, found %r" % value)


_WORDS = {"str": "a string", "bool": "true or false", "int": "a whole number", "num": "a number", "any": "a value"}


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "the string %r" % _short(value)
    if isinstance(value, (int, float)):
        return "the number %s" % _short(value)
    if isinstance(value, list):
        return "a list"
    return "an object"


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def problems(value: Any, spec: Any) -> Optional[str]:
    """The shape problem of ``value`` as one sentence, or None."""
    try:
        check(value, spec)
    except ShapeError as exc:
        return str(exc)
    return None


__all__: List[str] = ["check", "problems", "ShapeError", "SNAPSHOT", "PYTHON"]
