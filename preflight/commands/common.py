"""What several commands share: rules loaded with their warnings, and facts from a file or from probing."""

from __future__ import annotations

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
                           packages=packages, use_cache=options.use_cache, environ=options.environ)


def snapshot(options: CheckOptions, probes: Set[str], packages: List[Dict[str, Any]]) -> Tuple[Dict[str, Any], str]:
    """(snapshot, where it came from): the saved file of --facts, else these probes run now."""
    if options.facts_file:
        from preflight.facts import snapshot as snapshot_file

        return snapshot_file.load(options.facts_file), "file %s" % options.facts_file
    facts = collect.collect(probes, collect_options(options, packages))
    return facts, facts["source"]


def workload_request(ruleset: loader.RuleSet, wanted: WorkloadOptions) -> Dict[str, Any]:
    from preflight.capacity import estimate

    batch = wanted.batch if wanted.batch is not None else (16 if wanted.task == "train" else 1)
    return estimate.make_request(ruleset.workloads, wanted.workload, wanted.task, wanted.precision, batch,
                                 wanted.imgsz)


def attach_workload(request: Dict[str, Any], facts: Dict[str, Any], ruleset: loader.RuleSet) -> None:
    """Put the workload into the facts: split over the visible GPUs, with the catalog GPUs that would hold it."""
    from preflight.capacity import estimate

    visible = (facts.get("visibility") or {}).get("count") or 1
    request = dict(request, gpus=visible, per_gpu_batch=estimate.per_gpu_batch(request["batch"], visible))
    if request["batch"] % visible:
        request["notes"] = request["notes"] + [
            "batch %d does not divide by %d GPUs; train_dual.py needs a multiple of the GPU count under DDP"
            % (request["batch"], visible)]
    request["catalog_fits"] = [g.name for g in estimate.fitting_gpus(request, request["per_gpu_batch"],
                                                                      ruleset.gpus.values())]
    facts["workload"] = request
