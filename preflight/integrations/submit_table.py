"""The submit filters' table: what deploy/slurm/preflight_submit.lua decides a job from, written as Lua data.

The filters (cli_filter.lua on submit hosts, job_submit.lua in slurmctld) run inside Slurm for every submission and
start no process, so they cannot ask preflight: ``preflight slurm --submit-table FILE`` writes down, once, what
``plan --slurm-comment`` knows. For each workload and each setup a declaration can ask for (task, precision,
optimizer), the capacity model's coefficients, so that the filter computes the memory a batch needs at any image
size exactly as estimate.required_bytes and steps_need_bytes do (same operations, same order, IEEE doubles); for
each catalog GPU its name, kind and usable memory; every Slurm GPU type the catalog and the site give GPUs
(slurm_submit.gpu_names); the site's policy (slurm_does_not_fit); and, to notice a stale table, the preflight release
that wrote it and the text of the site configuration it was written from. tests/test_submit_table.py holds the
filter's decisions equal to plan's over the whole grid of image sizes, at each workload's edges.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from typing import Any, Dict, List, Optional

from preflight import __version__

FORMAT = 1
FILE_NAME = "preflight-fit.lua"  # beside slurm.conf, where both filters look for it
MAX_CONFIG_TEXT = 1 << 20


def table(ruleset, mapping, does_not_fit: str, config_path: Optional[str], config_text: Optional[bytes]) \
        -> Dict[str, Any]:
    """The table's content as plain data (what ``lua`` writes)."""
    from preflight.capacity import estimate
    from preflight.capacity.workloads import OPTIMIZER_STATE_BYTES, PRECISIONS
    from preflight.integrations import slurm_submit

    workloads: Dict[str, Any] = {}
    for workload in sorted(ruleset.workloads.values(), key=lambda w: w.id):
        setups: Dict[str, Any] = {}
        for task, precisions in PRECISIONS.items():
            for precision in precisions:
                if (task, precision) not in workload.estimates:
                    continue
                for optimizer in (OPTIMIZER_STATE_BYTES if task == "train" else [None]):
                    request = estimate.make_request(ruleset.workloads, workload.id, task, precision, None,
                                                    workload.reference_imgsz, optimizer or estimate.DEFAULT_OPTIMIZER)
                    key = " ".join(part for part in (task, precision, optimizer) if part)
                    setups[key] = {
                        "fixed": request["fixed_bytes"], "whole": estimate.per_image(request),
                        "steps": estimate.per_image(request, with_validation=False), "margin": request["margin"],
                        "reference": request["reference_imgsz"]}
        workloads[workload.id] = {"setups": setups}
    gpus = sorted(ruleset.gpus.values(), key=lambda gpu: gpu.memory_mib)  # the order fitting_gpus gives ties
    names = slurm_submit.gpu_names(mapping, ruleset.gpus)
    site = {}
    for item in mapping:
        slurm_type, _, gpu_id = item.partition("=")
        site.setdefault(gpu_id, slurm_type)
    return {
        "format": FORMAT, "preflight": __version__,
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": {"path": config_path, "text": config_text},
        "does_not_fit": does_not_fit,
        "limits": {"batch": estimate.MAX_BATCH, "imgsz": estimate.MAX_IMGSZ, "stride": estimate.IMG_STRIDE,
                   "gpus": 1024, "validation_factor": estimate.VALIDATION_BATCH_FACTOR},
        "defaults": {"batch": dict(estimate.DEFAULT_BATCH), "precision": dict(estimate.DEFAULT_PRECISION),
                     "optimizer": estimate.DEFAULT_OPTIMIZER, "imgsz": 640},
        "gpu_order": [gpu.id for gpu in gpus],
        "gpus": {gpu.id: {"name": gpu.name, "segment": gpu.segment, "usable": gpu.usable_bytes,
                          "slurm_type": site.get(gpu.id, gpu.id)} for gpu in gpus},
        "names": {name: list(ids) for name, ids in sorted(names.items())},
        "workloads": workloads,
    }


# --- Lua data ------------------------------------------------------------------------------------------------

STAMP = "-- preflight-submit-table "  # the first line: what wrote it, from which configuration (for Python)


def lua(data: Dict[str, Any]) -> str:
    """``data`` as a Lua chunk that returns it: tables, strings, numbers and booleans only (no code)."""
    config = data.get("config") or {}
    text = config.get("text")
    stamp = {"preflight": data.get("preflight"), "config": config.get("path"),
             "config_sha256": hashlib.sha256(text).hexdigest() if text is not None else None}
    header = (STAMP + json.dumps(stamp, sort_keys=True) + "\n"
              "-- preflight's submit table, written by `preflight slurm --submit-table` (preflight %s): data for\n"
              "-- preflight_submit.lua, which cli_filter.lua and job_submit.lua load. Do not edit: write it again when\n"
              "-- preflight, the site configuration or the cluster's GPU types change (docs/slurm.md).\n"
              % data.get("preflight"))
    return header + "return " + _value(data, "") + "\n"


def stale(table_path: str, config_path: str) -> Optional[str]:
    """Why the table at ``table_path`` no longer matches this preflight and the configuration at ``config_path``
    (as the filters would find: another release wrote it, or the configuration it was written from changed);
    None when it matches, or when it was written from another configuration than this one (nothing to say)."""
    import os

    try:
        with open(table_path, encoding="utf-8", errors="replace") as handle:
            first = handle.readline()
    except OSError as exc:
        return "the submit table %s cannot be read: %s" % (table_path, exc.strerror or exc)
    if not first.startswith(STAMP):
        return "%s is not a submit table this preflight wrote" % table_path
    try:
        stamp = json.loads(first[len(STAMP):])
    except ValueError:
        return "%s is not a submit table this preflight wrote" % table_path
    if stamp.get("preflight") != __version__:
        return "the submit table %s was written by preflight %s, and this is %s" % (
            table_path, stamp.get("preflight"), __version__)
    if not stamp.get("config") or os.path.realpath(stamp["config"]) != os.path.realpath(config_path):
        return None
    text = config_text(config_path)
    now = hashlib.sha256(text).hexdigest() if text is not None else None
    if now != stamp.get("config_sha256"):
        return "the submit table %s was written from another version of %s" % (table_path, config_path)
    return None


def _value(value: Any, indent: str) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return "%d" % value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("a submit table holds finite numbers only")
        return repr(value)
    if isinstance(value, (str, bytes)):
        return _string(value)
    inner = indent + "  "
    if isinstance(value, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            return "{" + ", ".join(_value(v, inner) for v in value) + "}"
        return "{\n" + "".join("%s%s,\n" % (inner, _value(v, inner)) for v in value) + indent + "}"
    items = ["%s[%s] = %s,\n" % (inner, _string(str(key)), _value(v, inner)) for key, v in value.items()
             if v is not None]
    return "{\n" + "".join(items) + indent + "}" if items else "{}"


def _string(text) -> str:
    """A Lua string literal that reads back as ``text`` (str as UTF-8, or bytes): every byte that is not printable
    ASCII escaped as \\ddd."""
    out = []
    for byte in (text if isinstance(text, bytes) else text.encode("utf-8")):
        char = chr(byte)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif 32 <= byte < 127:
            out.append(char)
        else:
            out.append("\\%03d" % byte)
    return '"' + "".join(out) + '"'


def write(path: str, ruleset, mapping, does_not_fit: str, config_path: Optional[str]) -> Dict[str, Any]:
    """Write the table to ``path`` (replaced atomically, under preflight's link policy); the data written."""
    from preflight.files.output import write_file

    data = table(ruleset, mapping, does_not_fit, config_path, config_text(config_path))
    write_file(path, lua(data), "--submit-table %s" % path)
    return data


def config_text(path: Optional[str]) -> Optional[bytes]:
    """The configuration file's bytes, as the filter reads and compares them; None when there is none."""
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_CONFIG_TEXT)
    except OSError:
        return None
