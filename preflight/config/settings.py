"""The settings a site configuration may give and the command line overrides, each declared once.

A declaration says everything about a setting: its configuration key, the
field of ``CheckOptions`` that holds it, its command-line flag and help, how a
value is parsed and checked (the same for ``--timeout 30s`` and
``timeout = "30s"``), and how ``config show`` prints it. The click options
(``commands/click_options.py``), the site configuration reader (``site_config.py``), the options
value (``commands/options.py``) and ``config show`` are all built from
``SETTINGS``; adding a setting is adding one entry here.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

MAX_TIMEOUT = 3600


class Setting(NamedTuple):
    key: str  # in the site configuration: expect_gpus = 8
    field: str  # in CheckOptions
    flag: str  # on the command line: --expect-gpus
    metavar: str
    help: str
    parse: Callable[[Any], Any]  # a value from the file or the command line -> the value; ValueError says why
    multiple: bool = False  # a list: repeated or comma-separated on the command line, a list in the file
    example: str = ""  # a value that works, for messages
    accumulates: bool = False  # the file's items and the command line's both apply (set, rules); else it replaces
    schema: Optional[Callable[[], Dict[str, Any]]] = None  # its JSON Schema in the configuration; None: strings

    def read(self, value: Any, where: str = "") -> Any:
        """The parsed value; PreflightError naming ``where`` (the flag, or the file's place) when it is wrong."""
        from preflight.errors import PreflightError

        try:
            return self.parse(value)
        except ValueError as exc:
            raise PreflightError("%s %s" % (where or self.flag, exc), "for example: %s" % self.example)

    def show(self, value: Any) -> str:
        """The value as ``config show`` prints it."""
        if self.multiple:
            return ", ".join(value) or ("(all)" if self.key == "select" else "(none)")
        return "none" if value is None else (str(value) or "(none)")


def _profile(value: Any) -> str:
    from preflight.engine.model import PROFILES

    if value not in PROFILES:
        raise ValueError("must be one of %s, got %r" % (", ".join(PROFILES), value))
    return value


def _strings(value: Any) -> Tuple[str, ...]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, str) for v in values):
        raise ValueError("must be a string or a list of strings, got %r" % (value,))
    return tuple(v.strip() for v in values)


def _selectors(value: Any) -> Tuple[str, ...]:
    """Rule ids or prefixes; a comma-separated string counts as several (--select gpu,driver)."""
    return tuple(part.strip() for item in _strings(value) for part in item.split(",") if part.strip())


def _settings(value: Any) -> Tuple[str, ...]:
    items = _strings(value)
    for item in items:
        target, equals, _ = item.partition("=")
        if not equals or "." not in target.strip():
            raise ValueError("%r is not RULE.KEY=VALUE" % item)
    return items


def _expect_gpus(value: Any) -> Optional[str]:
    from preflight.units import parse_gpu_count

    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError("must be a GPU count or \"auto\", got %r" % (value,))
    return parse_gpu_count(value)


def _timeout(value: Any) -> float:
    from preflight.units import parse_duration

    try:
        if isinstance(value, bool):
            raise ValueError(value)
        try:
            seconds = float(value)  # 10, "10", and "inf" or "nan", which the bound below refuses by name
        except (TypeError, ValueError):
            seconds = parse_duration(value)
    except (TypeError, ValueError, AttributeError):
        raise ValueError("must be seconds (10) or a duration (\"30s\"), got %r" % (value,))
    if math.isnan(seconds) or not 0 < seconds <= MAX_TIMEOUT:
        raise ValueError("must be more than 0 and at most %d seconds, got %r" % (MAX_TIMEOUT, value))
    return seconds


def _facts_from(value: Any) -> str:
    if value == "auto":  # the default, on every command: no need to load diagnose's module to accept it
        return value
    from preflight.diagnose.whose_facts import MODES

    if value not in MODES:
        raise ValueError("must be one of %s, got %r" % (", ".join(MODES), value))
    return value


def _fit_labels(value: Any) -> Tuple[str, ...]:
    """WORKLOAD[:TASK[:IMG]] items, each written out in full (gelan-c -> gelan-c:train:640). The tasks and image
    sizes are the capacity model's; whether the workload exists is checked against the rules (they may add
    workloads), where the rules are loaded."""
    items = _selectors(value)
    if not items:
        return ()

    from preflight.capacity.estimate import IMG_STRIDE, MAX_IMGSZ
    from preflight.capacity.workloads import PRECISIONS

    found = []
    for item in items:
        parts = [part.strip() for part in item.split(":")]
        if len(parts) > 3 or not re.match(r"^[a-z0-9][a-z0-9._-]{0,40}$", parts[0]):
            raise ValueError("%r is not WORKLOAD[:TASK[:IMG]] (a workload id such as gelan-c)" % item)
        task = parts[1] if len(parts) > 1 else "train"
        if task not in PRECISIONS:
            raise ValueError("%r: the task must be %s, got %r" % (item, " or ".join(PRECISIONS), task))
        size = parts[2] if len(parts) > 2 else "640"
        if not size.isdigit() or not IMG_STRIDE <= int(size) <= MAX_IMGSZ:
            raise ValueError("%r: the image size must be from %d to %d pixels, got %r"
                             % (item, IMG_STRIDE, MAX_IMGSZ, size))
        found.append("%s:%s:%d" % (parts[0], task, int(size)))
    return tuple(found)


SLURM_TYPE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
DOES_NOT_FIT = ("refuse", "warn")


def _slurm_gpu_types(value: Any) -> Tuple[str, ...]:
    """TYPE=GPU items (a Slurm GPU type, as gres.conf names it, = a catalog GPU id), written out as type=gpu with
    the type in lower case; whether the GPU is in the catalog is checked against the rules, where they are loaded."""
    found = []
    for item in _selectors(value):
        slurm_type, equals, gpu = (part.strip() for part in item.partition("="))
        if not equals or not re.match(SLURM_TYPE_PATTERN, slurm_type) or not re.match(r"^[a-z0-9][a-z0-9._-]*$", gpu):
            raise ValueError("%r is not TYPE=GPU (a Slurm GPU type and a catalog GPU id: a100l=a100-80gb)" % item)
        found.append("%s=%s" % (slurm_type.lower(), gpu))
    return tuple(found)


def _does_not_fit(value: Any) -> str:
    if value not in DOES_NOT_FIT:
        raise ValueError("must be one of %s, got %r" % (", ".join(DOES_NOT_FIT), value))
    return value


def string_or_strings() -> Dict[str, Any]:
    return {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}


def _profile_schema() -> Dict[str, Any]:
    from preflight.engine.model import PROFILES

    return {"enum": list(PROFILES)}


def _expect_gpus_schema() -> Dict[str, Any]:
    return {"oneOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": r"^\s*(auto|[0-9]+)\s*$"}]}


def _timeout_schema() -> Dict[str, Any]:
    return {"oneOf": [{"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT}, {"type": "string"}],
            "description": "seconds, or a duration such as \"30s\"; more than 0 and at most %d seconds" % MAX_TIMEOUT}


def _settings_schema() -> Dict[str, Any]:
    item = {"type": "string", "pattern": r"^[^=]*\.[^=]*="}
    return {"oneOf": [item, {"type": "array", "items": item}], "description": "RULE.KEY=VALUE"}


def _slurm_gpu_types_schema() -> Dict[str, Any]:
    item = {"type": "string", "pattern": r"^[^=]+=[^=]+$"}
    return {"oneOf": [item, {"type": "array", "items": item}], "description": "TYPE=GPU"}


def _does_not_fit_schema() -> Dict[str, Any]:
    return {"enum": list(DOES_NOT_FIT)}


def _facts_from_schema() -> Dict[str, Any]:
    from preflight.diagnose.whose_facts import MODES

    return {"enum": list(MODES)}


SETTINGS: Dict[str, Setting] = {s.key: s for s in [
    Setting("profile", "profile", "--profile", "NAME",
            "train and inference check the job's environment; node checks hardware and driver only.", _profile,
            example="--profile node", schema=_profile_schema),
    Setting("select", "select", "--select", "ID",
            "Run only these rules: an id or a dotted prefix (gpu selects gpu.*); repeatable or comma-separated.",
            _selectors, multiple=True, example="--select gpu,driver"),
    Setting("ignore", "ignore", "--ignore", "ID",
            "Skip these rules (id or prefix); the more specific selector wins.", _selectors, multiple=True,
            example="--ignore gpu.nvlink"),
    Setting("expect_gpus", "expect_gpus", "--expect-gpus", "N|auto",
            "The GPUs this node or job must have: fewer fails, more warns; 0 means not a GPU node (GPU checks "
            "skipped).", _expect_gpus, example="--expect-gpus 8 on an 8-GPU node; auto takes the count from Slurm",
            schema=_expect_gpus_schema),
    Setting("timeout", "timeout", "--timeout", "SECONDS",
            "Deadline for all probing (10, 30s); a probe that has not answered by then is reported unknown.",
            _timeout, example="--timeout 10 (probing takes well under a second)", schema=_timeout_schema),
    Setting("set", "settings", "--set", "RULE.KEY=VALUE",
            "Change a threshold without editing files, e.g. --set driver.version.min=535 --set gpu.memory.min=24GB.",
            _settings, multiple=True, example='set = ["driver.version.min=550"]', accumulates=True,
            schema=_settings_schema),
    Setting("rules", "rules_paths", "--rules", "PATH",
            "Add or override rules from a .toml file or a folder of them (repeatable).", _strings, multiple=True,
            example="--rules site-rules.toml", accumulates=True),
    Setting("fit_labels", "fit_labels", "--fit-label", "WORKLOAD[:TASK[:IMG]]",
            "NFD labels of the largest batch per GPU that fits here, for these workloads: gelan-c:train:640 gives "
            "preflight.fit.gelan-c.train.640=N (repeatable or comma-separated; task train by default, image 640).",
            _fit_labels, multiple=True, example='fit_labels = ["gelan-c:train:640", "yolov9-e:inference:1280"]'),
    Setting("facts_from", "facts_from", "--facts-from", "auto|machine|log",
            "diagnose: whose facts make fixes concrete: auto uses this machine's unless the log contradicts them "
            "(another host, OS, Python, torch, GPU or driver), machine always, log never (--no-facts).", _facts_from,
            example="--facts-from log (a helpdesk reading users' logs)", schema=_facts_from_schema),
    Setting("slurm_gpu_types", "slurm_gpu_types", "--slurm-gpu-type", "TYPE=GPU",
            "plan's Slurm mode: the catalog GPU a Slurm GPU type names where the type is not a catalog id itself "
            "(a100l=a100-80gb; repeatable or comma-separated). A type neither names is not judged.",
            _slurm_gpu_types, multiple=True, example='slurm_gpu_types = ["a100l=a100-80gb", "rtx6k=rtx-6000-ada"]',
            schema=_slurm_gpu_types_schema),
    Setting("slurm_does_not_fit", "slurm_does_not_fit", "--slurm-does-not-fit", "refuse|warn",
            "plan's Slurm mode: what a job whose declared workload does not fit the GPUs it asks for gets: refuse "
            "(exit 1; the submit filter stops it) or warn (exit 0 with the message).", _does_not_fit,
            example='slurm_does_not_fit = "warn"', schema=_does_not_fit_schema),
]}
