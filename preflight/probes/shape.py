"""The shape of a facts snapshot: every key the code reads, with its type, in JSON Schema.

A snapshot comes from a file (``check --facts``), another interpreter
(``--python``) or this machine's probes. Whatever comes from outside is
checked against this shape before anything reads it, so that a string where a
number belongs, ``null`` in place of a list, a number too large for a float or
a NaN is a clear error naming the key (exit 2), never a crash or a wrong
verdict. Keys the shape does not name are allowed (newer preflights add facts).

The shapes are JSON Schema (draft 2020-12), the language of every document
preflight writes or reads (``preflight schema facts`` prints this one), built
with the helpers of files/json_schema.py. ``check`` validates the part of JSON
Schema they use (``type``, ``properties``, ``required``,
``additionalProperties``, ``items``, ``const``) with messages that name the key,
and holds every number to what a real fact can be: finite, and a whole number
below 2**63. A full validator (jsonschema) is a test dependency, not a runtime
one: the tests check the shipped schema with it.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

from preflight.files.json_schema import BOOL, INT, NUM, STR, nullable

LARGEST_INT = 2 ** 63  # NVML counters are 64-bit; anything larger is not a real fact

ANY: Dict[str, Any] = {}
OPT_STR, OPT_INT, OPT_NUM, OPT_BOOL = nullable(STR), nullable(INT), nullable(NUM), nullable(BOOL)


def record(properties: Dict[str, Any], null: bool = False, required: List[str] = (), other: Any = True
           ) -> Dict[str, Any]:
    """An object with these properties (``null`` allowed too when ``null``); ``other``: the schema of any other key
    (True: anything)."""
    schema: Dict[str, Any] = {"type": ["object", "null"] if null else "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = other
    return schema


def array(items: Dict[str, Any]) -> Dict[str, Any]:
    return {"type": "array", "items": items}


STATUS = record({"status": STR, "seconds": OPT_NUM, "error": OPT_STR}, required=["status"])
GPU = record(
    {
        "index": INT,
        "name": OPT_STR,
        "uuid": OPT_STR,
        "pci_bus_id": OPT_STR,
        "brand": OPT_STR,
        "architecture": OPT_STR,
        "compute_capability": OPT_STR,
        "memory": record(
            {"total": OPT_INT, "free": OPT_INT, "used": OPT_INT, "reserved": OPT_INT, "source": OPT_STR}, null=True
        ),
        "mig_mode": record({"current": BOOL, "pending": BOOL}, null=True),
        "mig_devices": array(STR),
        "persistence_mode": OPT_BOOL,
        "ecc_mode": record({"current": BOOL, "pending": BOOL}, null=True),
        "ecc_uncorrected_volatile": OPT_INT,
        "remapped_rows": record(
            {"corrected": OPT_INT, "uncorrected": OPT_INT, "pending": OPT_BOOL, "failure": OPT_BOOL}, null=True
        ),
        "retired_pages_pending": OPT_BOOL,
        "temperature_c": OPT_NUM,
        "clock_event_reasons": record({"mask": OPT_INT, "active": array(STR)}, null=True),
        "processes": array(record({"pid": OPT_INT, "used_memory": OPT_INT, "name": OPT_STR})),
        "lost": OPT_BOOL,
        "unsupported": array(STR),
        "errors": record({}, other=STR),
        "fabric": record({"state": STR, "status": OPT_INT}, null=True, required=["state"]),
        "pcie": record(
            {
                "current_generation": OPT_INT,
                "max_generation": OPT_INT,
                "current_width": OPT_INT,
                "max_width": OPT_INT,
                "replay_counter": OPT_INT,
                "replay_rate_per_min": OPT_NUM,
            },
            null=True,
        ),
        "utilization_gpu": OPT_NUM,
        "nvlink": record(
            {
                "links": INT,
                "active": INT,
                "inactive": array(INT),
                "errors": record({}, other=INT),
                "errors_since_last": record({}, other=INT),
                "seconds_since_last": OPT_NUM,
            },
            null=True,
            required=["links", "active", "inactive"],
        ),
        "temperature_thresholds": record({"slowdown": OPT_NUM, "shutdown": OPT_NUM}, null=True),
        "power": record({"usage_mw": OPT_INT, "enforced_limit_mw": OPT_INT, "default_limit_mw": OPT_INT}, null=True),
        "retired_pages": record(
            {"single_bit": INT, "double_bit": INT, "previous_total": OPT_INT},
            null=True,
            required=["single_bit", "double_bit"],
        ),
        "inforom": OPT_STR,
    },
    required=["index"],
)
NVML = record(
    {
        "init": record(
            {"status": STR, "error": OPT_STR, "code": OPT_INT, "message": OPT_STR, "python": OPT_STR},
            required=["status"],
        ),
        "driver_version": OPT_STR,
        "cuda_driver_version": OPT_STR,
        "device_count": OPT_INT,
        "gpus": array(GPU),
        "errors": record({}, other=STR),
        "device_files": array(STR),
        "pci_gpus": array(STR),
        "health_read": OPT_BOOL,
    },
    null=True,
)
VISIBILITY = record(
    {
        "cuda_visible_devices": OPT_STR,
        "cuda_device_order": OPT_STR,
        "order": OPT_STR,
        "visible": array(INT),
        "mig_selected": array(STR),
        "notes": array(STR),
        "count": OPT_INT,
    },
    null=True,
)
HOST = record(
    {
        "cpu": record({"logical": OPT_INT, "affinity": OPT_INT, "cgroup_quota": OPT_NUM, "count": OPT_INT}, null=True),
        "memory": record(
            {
                "physical_total": OPT_INT,
                "physical_available": OPT_INT,
                "cgroup_limit": OPT_INT,
                "total": OPT_INT,
                "available": OPT_INT,
            },
            null=True,
        ),
        "shm": record({"total": OPT_INT, "free": OPT_INT, "error": OPT_STR}, null=True),
        "container": record({"detected": OPT_BOOL, "kind": OPT_STR, "markers": array(STR)}, null=True),
        "os": record({}, null=True, other=OPT_STR),
    },
    null=True,
)
PACKAGE = record({"dist": OPT_STR, "version": OPT_STR, "import": OPT_STR, "importable": OPT_BOOL})
TORCH = record(
    {
        "installed": BOOL,
        "location": OPT_STR,
        "version": OPT_STR,
        "cuda": OPT_STR,
        "hip": OPT_STR,
        "extension": record({"path": OPT_STR, "size": OPT_INT, "mtime_ns": OPT_INT}, null=True),
        "error": OPT_STR,
    },
    null=True,
)
COMPANION = record({"version": OPT_STR, "requires_torch": OPT_STR, "error": OPT_STR})
CONDA = record(
    {
        "active": OPT_BOOL,
        "env_name": OPT_STR,
        "is_base": OPT_BOOL,
        "prefix": OPT_STR,
        "source": OPT_STR,
        "CONDA_DEFAULT_ENV": OPT_STR,
        "CONDA_PREFIX": OPT_STR,
        "interpreter_in_active_env": OPT_BOOL,
    },
    null=True,
)
PYTHON = record(
    {
        "executable": OPT_STR,
        "version": OPT_STR,
        "implementation": OPT_STR,
        "prefix": OPT_STR,
        "base_prefix": OPT_STR,
        "venv": OPT_BOOL,
        "conda": CONDA,
        "packages": record({}, other=PACKAGE),
        "torch": TORCH,
        "torch_companions": record({}, null=True, other=COMPANION),
    },
    null=True,
)
TORCH_ARCH = record({"flags": array(STR), "source": OPT_STR}, null=True)
CONTAINER = record({"requirements": record({}, other=STR)}, null=True, other=OPT_STR)
KERNEL_LOG = record(
    {
        "readable": BOOL,
        "source": OPT_STR,
        "reason": OPT_STR,
        "truncated": OPT_BOOL,
        "events": array(
            record({"xid": INT, "pci": OPT_STR, "pid": OPT_STR, "process": OPT_STR, "text": OPT_STR}, required=["xid"])
        ),
    },
    null=True,
    required=["readable"],
)
# The active test's answer (probes/smoke_worker.py): every check may instead hold "error" (and "where") or
# "skipped"; NaN never appears (the worker writes losses as text and non-finite errors as null).
_FAILED = {"error": OPT_STR, "where": OPT_STR, "skipped": OPT_STR, "iterations": OPT_INT}  # any check may say these
_PRECISION = record({"supported": OPT_BOOL, "max_relative_error": OPT_NUM, "finite": OPT_BOOL}, null=True)
SMOKE = record(
    {
        "python": OPT_STR,
        "interpreter": OPT_STR,
        "torch": OPT_STR,
        "torch_cuda": OPT_STR,
        "device": OPT_STR,
        "seconds": OPT_NUM,
        "errors": array(STR),
        "cut": OPT_STR,
        "asked": array(STR),
        "devices": array(
            record(
                {
                    "index": OPT_INT,
                    "device": OPT_STR,
                    "name": OPT_STR,
                    "compute_capability": OPT_STR,
                    "memory": record(
                        {
                            **_FAILED,
                            "tested_bytes": OPT_INT,
                            "free_bytes": OPT_INT,
                            "total_bytes": OPT_INT,
                            "errors": OPT_INT,
                            "seconds": OPT_NUM,
                        },
                        null=True,
                    ),
                    "matmul": record(
                        {**_FAILED, "fp32": _PRECISION, "tf32": _PRECISION, "fp16": _PRECISION, "bf16": _PRECISION},
                        null=True,
                    ),
                    "throughput": record(
                        {**_FAILED, "matmul_tflops": OPT_NUM, "matmul_dtype": OPT_STR, "bandwidth_gbs": OPT_NUM},
                        null=True,
                    ),
                    "train_step": record(
                        {
                            **_FAILED,
                            "ok": OPT_BOOL,
                            "losses": array(STR),
                            "amp": OPT_STR,
                            "finite_gradients": OPT_BOOL,
                            "cudnn": OPT_BOOL,
                        },
                        null=True,
                    ),
                }
            )
        ),
        "checks": record(
            {
                "collective": record(
                    {
                        **_FAILED,
                        "peers": array(
                            record({"pair": array(INT), "access": OPT_BOOL, "gbs": OPT_NUM, "correct": OPT_BOOL})
                        ),
                        "allreduce": record(
                            {
                                **_FAILED,
                                "backend": OPT_STR,
                                "world": OPT_INT,
                                "correct": OPT_BOOL,
                                "bus_gbs": OPT_NUM,
                                "errors": array(STR),
                            },
                            null=True,
                        ),
                    },
                    null=True,
                ),
                "fit": record(
                    {
                        **_FAILED,
                        "device": OPT_STR,
                        "missing_module": OPT_STR,
                        "requirements": OPT_STR,
                        "cfg": OPT_STR,
                        "classes": OPT_INT,
                        "budget_seconds": OPT_NUM,
                        "seconds": OPT_NUM,
                        "stopped": OPT_STR,
                        "bounded": OPT_STR,
                        "repo": OPT_STR,
                        "imgsz": OPT_INT,
                        "per_image_bytes": OPT_INT,
                        "total_bytes": OPT_INT,
                        "largest_batch": OPT_INT,
                        "points": array(
                            record(
                                {
                                    "batch": INT,
                                    "loss": OPT_STR,
                                    "allocated_bytes": OPT_INT,
                                    "reserved_bytes": OPT_INT,
                                    "steps": OPT_INT,
                                    "seconds_per_step": OPT_NUM,
                                }
                            )
                        ),
                    },
                    null=True,
                ),
            },
            null=True,
        ),
    },
    null=True,
)
SNAPSHOT = record(
    {
        "schema": STR,
        "preflight_version": OPT_STR,
        "knowledge_as_of": OPT_STR,
        "collected_at": OPT_STR,
        "source": OPT_STR,
        "seconds": OPT_NUM,
        "hostname": OPT_STR,
        "probes": record({}, other=STATUS),
        "nvml": NVML,
        "visibility": VISIBILITY,
        "host": HOST,
        "python": PYTHON,
        "torch_arch": TORCH_ARCH,
        "container": CONTAINER,
        "kernel_log": KERNEL_LOG,
        "smoke": SMOKE,
    }
)


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


def check(value: Any, schema: Optional[Dict[str, Any]] = None, key: str = "") -> None:
    """Raise ShapeError naming the first key whose value does not fit ``schema`` (the snapshot's by default)."""
    try:
        _check(value, SNAPSHOT if schema is None else schema)
    except _Mismatch as mismatch:
        where = key or ""
        for part in reversed(mismatch.parts):
            where = (where + part) if part.startswith("[") or not where else "%s.%s" % (where, part)
        raise ShapeError(where or "(top level)", mismatch.problem) from None


_KINDS = {
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}
_WORDS = {"string": "a string", "boolean": "true or false", "integer": "a whole number", "number": "a number",
          "array": "a list", "object": "an object", "null": "null"}


def _check(value: Any, schema: Dict[str, Any]) -> None:
    if "const" in schema and value != schema["const"]:
        raise _Mismatch("expected %r, found %s" % (schema["const"], _describe(value)))
    kinds = schema.get("type")
    if kinds is None:  # any value: still a real one
        _finite(value)
        return
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if not any(_KINDS[kind](value) for kind in kinds):
        raise _Mismatch("expected %s, found %s" % (_WORDS[kinds[0]], _describe(value)))
    if isinstance(value, (int, float)):
        _finite(value)
    elif isinstance(value, list) and "items" in schema:
        for position, item in enumerate(value):
            try:
                _check(item, schema["items"])
            except _Mismatch as mismatch:
                mismatch.parts.append("[%d]" % position)
                raise
    elif isinstance(value, dict):
        for name in schema.get("required", ()):
            if name not in value:
                raise _Mismatch("'%s' is missing" % name)
        properties, other = schema.get("properties", {}), schema.get("additionalProperties", True)
        for name, item in value.items():
            item_schema = properties.get(name, other)
            if isinstance(item_schema, dict):
                try:
                    _check(item, item_schema)
                except _Mismatch as mismatch:
                    mismatch.parts.append(name)
                    raise
            elif item_schema is False:
                raise _Mismatch("'%s' is not a key this object has" % name)


def _finite(value: Any) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int) and abs(value) >= LARGEST_INT:
        raise _Mismatch("the number %s is too large to be a real fact" % _short(value))
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise _Mismatch("expected a finite number, found %r" % value)


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


def problems(value: Any, schema: Dict[str, Any]) -> Optional[str]:
    """The shape problem of ``value`` as one sentence, or None."""
    try:
        check(value, schema)
    except ShapeError as exc:
        return str(exc)
    return None


__all__: List[str] = ["check", "problems", "ShapeError", "SNAPSHOT", "PYTHON", "SMOKE"]
