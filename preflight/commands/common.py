"""What several commands share: rules loaded with their warnings, and facts from a file or from probing."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from preflight.commands.options import CheckOptions, WorkloadOptions
from preflight.engine import loader, selection
from preflight.engine.model import ResolvedRule
from preflight.facts import collect

Warn = Optional[Callable[[str], None]]


def load_rules(rules_paths: List[str], warn: Warn = None, **kinds) -> loader.RuleSet:
    ruleset = loader.load(rules_paths, **kinds)
    for warning in ruleset.warnings:
        if warn:
            warn(warning)
    return ruleset


def choose_rules(options: CheckOptions, ruleset: loader.RuleSet) -> List[ResolvedRule]:
    """The selected rules of the profile, resolved once with the --set settings (the loaded rules stay as they are)."""
    settings = selection.parse_settings(ruleset, options.settings, options.profile)
    return selection.choose(ruleset, options.profile, options.select, options.ignore, settings)


def collect_options(options: CheckOptions, packages: List[Dict[str, Any]]) -> collect.Options:
    python = None
    if options.python:
        from preflight.probes.python_env import resolve_interpreter

        python = resolve_interpreter(options.python)
    return collect.Options(timeout=options.timeout, python=python, nvml_fixture=options.nvml_fixture,
                           packages=packages, use_cache=options.use_cache, environ=options.environ,
                           on_wait=tell_terminal, kernel_log=options.kernel_log)


def tell_terminal(line: str) -> None:
    """A progress line for a person watching (stderr is a terminal); nothing in logs or pipes."""
    import sys

    stream = sys.stderr
    try:
        if stream is not None and stream.isatty():
            stream.write(line + "\n")
            stream.flush()
    except (OSError, ValueError):
        pass


def snapshot(options: CheckOptions, probes: Set[str], packages: List[Dict[str, Any]],
             reuse: Optional[Dict[str, Any]] = None) -> Tuple[Dict[str, Any], str]:
    """(snapshot, where it came from): the saved file of --facts, else these probes run now (``reuse``: some
    already probed)."""
    if options.facts_file:
        from preflight.facts import snapshot as snapshot_file

        return snapshot_file.load(options.facts_file), "file %s" % options.facts_file
    facts = collect.collect(probes, collect_options(options, packages), reuse)
    return facts, facts["source"]


# nvmlInit outcomes that, with no /dev/nvidia* either, mean no NVIDIA driver runs here (an image may ship the
# driver's libraries to every node; without a GPU its kernel module never loads).
_NO_DRIVER = ("library_not_found", "driver_not_loaded")


def has_nvidia_driver(facts: Dict[str, Any]) -> bool:
    nvml = facts.get("nvml") or {}
    status = (nvml.get("init") or {}).get("status")
    if status is None:
        return True  # the probe did not answer: assume a driver, never call a GPU node CPU-only by mistake
    return not (status in _NO_DRIVER and not any(name[len("nvidia"):].isdigit() or name == "nvidiactl"
                                                  for name in nvml.get("device_files") or []))


def expected_gpus(options: CheckOptions, facts: Dict[str, Any], node=None, configured_at: str = "") -> Optional[Dict[str, Any]]:
    """How many GPUs this node or job should have, and who says so; None when nothing says.

    ``node`` (preflight slurm) is the node as Slurm describes it: ``auto``
    takes its Gres, counted over the whole machine. Elsewhere ``auto`` takes
    the job's allocation (SLURM_GPUS_ON_NODE), counted as CUDA sees it.
    ``configured_at`` names the place in the site configuration that set the count (``config.toml:9``).
    """
    wanted = options.expect_gpus
    scope = "machine" if node is not None else "visible"
    if wanted is None:
        return None
    if wanted != "auto":
        said = "expect_gpus %s, %s" % (wanted, configured_at) if configured_at else "--expect-gpus %s" % wanted
        return {"count": int(wanted), "source": said, "scope": scope}
    if node is not None:
        if node.gres_gpus:
            return {"count": node.gres_gpus, "source": "Slurm Gres", "scope": scope}
        if not has_nvidia_driver(facts):
            return {"count": 0, "source": "no GPU in its Slurm Gres and no NVIDIA driver", "scope": scope}
        return None  # GPUs without Gres: the site does not schedule them through Slurm; nothing to compare
    environ = options.environ if options.environ is not None else os.environ
    allocated = (environ.get("SLURM_GPUS_ON_NODE") or "").strip()
    if allocated.isascii() and allocated.isdigit():
        return {"count": int(allocated), "source": "SLURM_GPUS_ON_NODE", "scope": scope}
    return None


def workload_request(ruleset: loader.RuleSet, wanted: WorkloadOptions) -> Dict[str, Any]:
    from preflight.capacity import estimate

    batch = wanted.batch if wanted.batch is not None else estimate.DEFAULT_BATCH[wanted.task]
    return estimate.make_request(ruleset.workloads, wanted.workload, wanted.task, wanted.precision, batch,
                                 wanted.imgsz, wanted.optimizer, wanted.max_objects)


def attach_workload(request: Dict[str, Any], facts: Dict[str, Any], ruleset: loader.RuleSet) -> None:
    """Put the workload into the facts: split over the visible GPUs, with the catalog GPUs that would hold it."""
    from preflight.capacity import estimate

    visible = (facts.get("visibility") or {}).get("count") or 1
    request = dict(request, gpus=visible, per_gpu_batch=estimate.per_gpu_batch(request["batch"], visible))
    if visible > 1:
        request["notes"] = request["notes"] + [
            "split over %d GPUs as torchrun (DDP) does; with --device 0,1,... but no torchrun the trainers use "
            "DataParallel, and GPU 0 holds more than its share" % visible]
    if request["batch"] % visible:
        request["notes"] = request["notes"] + [
            "batch %d does not divide by %d GPUs; train_dual.py needs a multiple of the GPU count under DDP"
            % (request["batch"], visible)]
    request["catalog_fits"] = [g.name for g in estimate.fitting_gpus(request, request["per_gpu_batch"],
                                                                      ruleset.gpus.values())]
    facts["workload"] = request
