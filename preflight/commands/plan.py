"""preflight plan: will a workload fit, and on which GPU: every catalog GPU and this machine's, or one GPU the
user describes (--gpu-memory, --cc)."""

from __future__ import annotations

import re
from typing import List, Optional

from preflight.commands import common, pipeline
from preflight.commands.options import CheckOptions, OutputOptions
from preflight.errors import ExitCode, PreflightError

MIN_GPU_MEMORY = 256 * 2**20
MAX_GPU_MEMORY = 2**40


def custom_gpu(size: str, compute_capability: Optional[str]):
    """The GPU --gpu-memory (its total, as nvidia-smi shows it) and --cc describe."""
    from preflight import units
    from preflight.capacity.workloads import GpuModel

    try:
        total = units.parse_size_threshold(size)
    except ValueError as exc:
        raise PreflightError("--gpu-memory: %s" % exc, "the card's total as nvidia-smi shows it: 6GiB or 6144MiB")
    if not MIN_GPU_MEMORY <= total <= MAX_GPU_MEMORY:
        raise PreflightError("--gpu-memory %s is outside 256 MiB to 1 TiB" % size,
                             "the card's total as nvidia-smi shows it: 6GiB or 6144MiB")
    if compute_capability is not None and not re.match(r"^\d{1,2}\.\d$", compute_capability):
        raise PreflightError("--cc must look like 8.6, got %r" % compute_capability,
                             "nvidia-smi --query-gpu=compute_cap --format=csv shows it")
    mib = total // 2**20
    return GpuModel("custom", "custom GPU (%d MiB)" % mib, mib, compute_capability or "", "--gpu-memory %s" % size)


def run(options: CheckOptions, gpu_filters: List[str], warn: common.Warn = None, custom=None):
    from preflight.capacity import planning

    prepared = pipeline.prepare(options, warn, kinds=("capacity",), checking=False)
    request = prepared.workload  # sized for the trainers' default batch when none is given
    if custom is not None:  # that GPU alone: this machine's are not probed
        return planning.plan(request, prepared.ruleset, None, gpu_filters, custom)
    snapshot, _ = common.snapshot(prepared.options, {"nvml"}, [], prepared.applied.early_facts)
    return planning.plan(request, prepared.ruleset, snapshot, gpu_filters)


def main(options: CheckOptions, gpu_filters: List[str], shown: OutputOptions, warn: common.Warn = None,
         custom=None) -> int:
    from preflight.output import emit
    from preflight.render import plan as render

    result = run(options, gpu_filters, warn, custom)
    if shown.format == "text":
        emit(render.text(result, color=shown.colored()), shown.output)
    else:
        emit({"json": render.as_json, "markdown": render.markdown}[shown.format](result), shown.output)
    return ExitCode.OK
