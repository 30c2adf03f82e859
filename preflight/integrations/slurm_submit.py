"""A Slurm job judged before it queues (``preflight plan --slurm-comment ...``, run by deploy/slurm/cli_filter.lua).

A job declares its workload in its ``--comment`` ("preflight: workload=gelan-c batch=64 img=640", each key one of
plan's options); its GPUs are read as Slurm writes them (``--gres=gpu:h200:2``, ``--gpus=h200:2``,
``--gpus-per-node``, ``--nodes``). A Slurm GPU type is the catalog GPU of that id, or the one the site maps it to
(``slurm_gpu_types``); anything else is not judged. Only a certain "does not fit" stops a job, and only where the
site refuses such jobs (``slurm_does_not_fit``): the batch is taken as split over every GPU the job asks for, the
most generous reading of a job that may not use them all.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from preflight.errors import PreflightError

MARK = "preflight:"
DECLARATION_HINT = 'declare a workload as --comment "preflight: workload=gelan-c batch=64 img=640" (keys: plan\'s options)'
SUBMIT, WARN, REFUSE, NOT_JUDGED = "submit", "warn", "refuse", "not judged"
DECISIONS = (SUBMIT, WARN, REFUSE, NOT_JUDGED)


_MARKED = re.compile(r"(?:^|\s)%s" % re.escape(MARK), re.IGNORECASE)


def declaration(comment: Optional[str]) -> Optional[List[Tuple[str, Optional[str]]]]:
    """The (key, value) pairs a job's comment declares after "preflight:" (a word of its own: at the start or after
    white space, so "nopreflight:" declares nothing), up to a ";" or the end; a key without "=" is a flag (value
    None). None: the comment declares nothing for preflight."""
    if not comment:
        return None
    found = _MARKED.search(comment)
    if found is None:
        return None
    text = comment[found.end():].split(";", 1)[0]
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise PreflightError("the job's comment: %s after %r" % (exc, MARK), DECLARATION_HINT)
    if not words:
        raise PreflightError("the job's comment says %r and declares nothing after it" % MARK, DECLARATION_HINT)
    pairs = []
    for word in words:
        key, equals, value = word.partition("=")
        key = key.strip().lstrip("-").replace("_", "-")
        if not re.match(r"^[a-z][a-z0-9-]*$", key) or (equals and not value):
            raise PreflightError("the job's comment: %r is not KEY=VALUE" % word, DECLARATION_HINT)
        pairs.append((key, value if equals else None))
    return pairs


class GpuRequest(NamedTuple):
    """The GPUs a job asks for: the Slurm GPU types it names ("" for a count without a type) and how many GPUs
    its batch is split over (per node times the most nodes, or --gpus in all)."""

    types: Tuple[str, ...]
    count: int
    asked: str  # as the job asked: --gres=gpu:h200:2 --nodes=2

    @property
    def slurm_type(self) -> Optional[str]:
        """The one type named, or None: untyped, or several types."""
        return self.types[0] if len(self.types) == 1 and self.types[0] else None


def _gpu_items(spec: str, gres_form: bool, flag: str) -> List[Tuple[str, int]]:
    """(type, count) of each GPU item of a --gres (gpu[:type][:count], other GRES left out) or --gpus value
    ([type:]count); PreflightError for one Slurm would not take."""
    items = []
    for item in spec.split(","):
        parts = re.sub(r"^gres[:/]", "", item.strip(), flags=re.IGNORECASE).split(":")  # Slurm's own prefixes
        if gres_form:
            if parts[0].lower() != "gpu":
                continue  # another GRES (shard, mps, a license)
            parts = parts[1:]
        elif len(parts) > 1 and parts[0].lower() == "gpu":
            parts = parts[1:]
        if not parts:
            items.append(("", 1))
            continue
        count = parts[-1]
        if not count.isdigit():
            if len(parts) == 1 and gres_form:
                items.append((count.lower(), 1))  # gpu:h200: one GPU of that type
                continue
            raise PreflightError("%s %r: the GPU count %r is not a number" % (flag, spec, count),
                                 "as Slurm writes it: gpu:h200:2 (--gres) or h200:2 (--gpus)")
        if len(parts) > 2:
            raise PreflightError("%s %r: %r is not [type:]count" % (flag, spec, item),
                                 "as Slurm writes it: gpu:h200:2 or h200:2")
        items.append((parts[0].lower() if len(parts) == 2 else "", int(count)))
    return items


def _most_nodes(nodes: Optional[str]) -> int:
    """The most nodes of --nodes as the filter reads it (N, or MIN-MAX where a MAX of 0 means none given)."""
    if not nodes:
        return 1
    match = re.match(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$", nodes)
    if not match:
        raise PreflightError("--slurm-nodes %r is not N or MIN-MAX" % nodes, "as Slurm writes it: 2, or 2-4")
    low, high = int(match.group(1)), int(match.group(2) or 0)
    return max(low, high, 1)


def gpu_request(gres: Optional[str] = None, gpus: Optional[str] = None, gpus_per_node: Optional[str] = None,
                nodes: Optional[str] = None) -> Optional[GpuRequest]:
    """The GPUs of a job's --gres, --gpus, --gpus-per-node and --nodes; None when it asks for none."""
    per_node = _gpu_items(gres, True, "--slurm-gres") if gres else []
    per_node += _gpu_items(gpus_per_node, False, "--slurm-gpus-per-node") if gpus_per_node else []
    in_all = _gpu_items(gpus, False, "--slurm-gpus") if gpus else []
    asked = " ".join("--%s=%s" % (flag, re.sub(r"(^|,)gres[:/]", r"\1", value)) for flag, value in (
        ("gres", gres), ("gpus", gpus), ("gpus-per-node", gpus_per_node)) if value)  # as the user typed it
    most = _most_nodes(nodes)
    if nodes and most > 1:
        asked += " --nodes=%s" % nodes
    items = in_all or per_node
    count = sum(n for _, n in items) * (1 if in_all else most)
    if not items or count == 0:
        return None
    return GpuRequest(tuple(sorted({t for t, _ in items})), count, asked)


def gpu_names(mapping: Sequence[str], catalog: Dict[str, Any]) -> Dict[str, Tuple[str, ...]]:
    """Slurm GPU type (lower case) -> the catalog ids it may name: the site's own mapping (slurm_gpu_types) first,
    then every name the catalog gives its GPUs (ids, AutoDetect=nvml's names, common site spellings)."""
    from preflight.knowledge.gpus import slurm_types

    names = dict(slurm_types(catalog.values()))
    for item in mapping:
        slurm_type, _, gpu_id = item.partition("=")
        names[slurm_type.lower()] = (gpu_id,)
    return names


def catalog_gpu(slurm_type: str, mapping: Sequence[str], catalog: Dict[str, Any]):
    """(the catalog GPU a Slurm GPU type names, None, how many it may name) or (None, why not, 0). A type that may
    name several catalog GPUs (a100: the 40 and 80 GB cards) is judged by the one with the most usable memory:
    never refuse a job one of them holds."""
    names = gpu_names(mapping, catalog)
    ids = [gpu_id for gpu_id in names.get(slurm_type.lower(), ()) if gpu_id in catalog]
    if ids:
        return max((catalog[gpu_id] for gpu_id in ids), key=lambda gpu: gpu.usable_bytes), None, len(ids)
    return None, ("the GPU type %s is not one preflight knows%s: the site names it with slurm_gpu_types = "
                  "[\"%s=ID\"] in its configuration" % (slurm_type, _could_be(slurm_type.lower(), names), slurm_type)), 0


def _could_be(wanted: str, names: Dict[str, Tuple[str, ...]]) -> str:
    """"; it could be a100-40gb, a100-80gb": the catalog ids of names that share the type's model number with its
    letters ("a100" of "a100x", "rtx4090" of "rtx4090ti"), for the mapping line."""
    words = [w for w in re.findall(r"[a-z]*\d+", wanted) if len(w) >= 2]
    near = sorted({gpu_id for name, ids in names.items() for gpu_id in ids
                   if any(word in name for word in words) or (len(wanted) >= 2 and wanted in name)})
    return "; it could be %s" % ", ".join(near[:8]) if near else ""


class Submission(NamedTuple):
    """What the submit filter does with a job, and the one line its user sees ("" when there is nothing to say)."""

    decision: str  # DECISIONS
    message: str
    request: Dict[str, Optional[str]]  # as the job asked: comment, gres, gpus, gpus_per_node, nodes
    gpu_type: Optional[str] = None
    gpu: Optional[str] = None  # the catalog id judged against
    gpu_count: Optional[int] = None
    plan: Optional[Any] = None  # capacity.planning.Plan

    @property
    def refused(self) -> bool:
        return self.decision == REFUSE

    def to_json(self) -> Dict[str, Any]:
        return {"schema": "preflight.submission/1", "decision": self.decision, "message": self.message,
                "request": self.request, "gpu_type": self.gpu_type, "gpu": self.gpu, "gpu_count": self.gpu_count,
                "plan": self.plan.to_json() if self.plan is not None else None}


def decide(plan, request: Dict[str, Optional[str]], gpus: GpuRequest, does_not_fit: str, fitting: List[str],
           several: bool = False) -> Submission:
    """The decision on a plan of one catalog GPU (its one row): fits submits, tight warns, does not fit refuses
    (or warns, where the site says so), with the largest batch that fits and the GPUs it would fit. ``several``:
    the job's GPU type may name more than one catalog GPU, and this is the largest of them."""
    from preflight import units
    from preflight.capacity.estimate import FITS, TIGHT

    row = plan.rows[0]
    r = plan.request
    workload = "%s (batch %d, img %d%s)" % (r["id"], r["batch"], r["imgsz"],
                                            ", %d per GPU" % plan.batch if plan.gpus > 1 else "")
    on = "%d x %s" % (plan.gpus, row.name) if plan.gpus > 1 else row.name
    if several:
        on += " (the largest GPU %s may name)" % gpus.slurm_type
    need = "needs %s per GPU, %s usable" % (units.format_bytes(row.required_bytes),
                                             units.format_bytes(row.available_bytes))
    keep = dict(request=request, gpu_type=gpus.slurm_type, gpu=row.subject, gpu_count=plan.gpus, plan=plan)
    if row.verdict == FITS:
        return Submission(SUBMIT, "preflight: %s fits %s: %s" % (workload, on, need), **keep)
    largest = "the largest batch that fits is %d" % row.max_batch if row.max_batch else \
        "not even batch %d fits" % plan.gpus
    if row.verdict == TIGHT:
        return Submission(WARN, "preflight: warning: %s is tight on %s: %s with the validation pass; it should run "
                          "with no headroom (%s)" % (workload, on, need, largest), **keep)
    elsewhere = "; it would fit %s" % ", ".join(fitting) if fitting else ""
    words = "preflight: %s does not fit %s: %s; %s%s" % (workload, on, need, largest, elsewhere)
    if does_not_fit == "warn":
        return Submission(WARN, words.replace("preflight: ", "preflight: warning: ", 1), **keep)
    return Submission(REFUSE, words + " (submission refused)", **keep)


def uneven(request: Dict[str, Optional[str]], batch: int, gpus: GpuRequest, count: int, gpu_id: str) -> Submission:
    """A batch the job's GPUs cannot share evenly: YOLOv9's trainer refuses it at start-up under torchrun, unless the
    job runs fewer processes than it asks GPUs for; said, not refused."""
    return Submission(WARN, "preflight: warning: batch %d does not divide by the %d GPUs the job asks for (%s): "
                      "YOLOv9's trainer refuses that under torchrun; declare the GPUs it uses with gpus=N"
                      % (batch, count, gpus.asked), request, gpus.slurm_type, gpu_id, count)


def alternatives(request: Dict[str, Any], batch: int, asked, catalog: Dict[str, Any], mapping: Sequence[str],
                 most: int = 3) -> List[str]:
    """The smallest catalog GPUs of the asked GPU's kind (data-centre, workstation, ...) that hold ``batch`` images
    each, named with the Slurm type the site maps to them, else their catalog id."""
    from preflight.capacity import estimate

    types: Dict[str, str] = {}
    for item in mapping:
        slurm_type, _, gpu_id = item.partition("=")
        types.setdefault(gpu_id, slurm_type)
    kind = [gpu for gpu in catalog.values() if gpu.segment == asked.segment and gpu.id != asked.id]
    return ["%s (gpu:%s)" % (gpu.name, types.get(gpu.id, gpu.id))
            for gpu in estimate.fitting_gpus(request, batch, kind)[:most]]


def not_judged(request: Dict[str, Optional[str]], why: str, gpus: Optional[GpuRequest] = None) -> Submission:
    return Submission(NOT_JUDGED, "preflight: not judged: %s" % why if why else "", request,
                      gpus.slurm_type if gpus else None, None, gpus.count if gpus else None)


def json_schema() -> Dict[str, Any]:
    """``Submission.to_json`` (plan --slurm-comment --format json) as JSON Schema."""
    from preflight.capacity.planning import json_schema as plan_schema
    from preflight.files.json_schema import INT, STR, nullable, obj

    request = obj([], {key: nullable(STR) for key in ("comment", "gres", "gpus", "gpus_per_node", "nodes")})
    return obj(["schema", "decision", "message", "request", "gpu_type", "gpu", "gpu_count", "plan"], {
        "schema": {"const": "preflight.submission/1"}, "decision": {"enum": list(DECISIONS)}, "message": STR,
        "request": request, "gpu_type": nullable(STR), "gpu": nullable(STR), "gpu_count": nullable(INT),
        "plan": {"oneOf": [{"type": "null"}, plan_schema()]}})
