"""What each command does, as plain functions with explicit arguments.

The CLI only parses options and prints; tests call these directly.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

from preflight.engine import loader, selection
from preflight.engine.evaluate import evaluate, probes_needed
from preflight.engine.model import PROFILES, Rule
from preflight.errors import PreflightError
from preflight.facts import collect, snapshot as snapshot_file
from preflight.report import Report


MAX_TIMEOUT = 3600


class WorkloadOptions:
    """A workload to size: --workload, --task, --batch, --img, --fp32/--half."""

    def __init__(self, workload: str, task: str = "train", batch: Optional[int] = None, imgsz: int = 640,
                 fp32: bool = False, half: bool = False) -> None:
        from preflight.capacity.estimate import precision_for

        self.workload = workload
        self.task = task
        self.precision = precision_for(task, fp32, half)
        self.batch = batch
        self.imgsz = imgsz


class CheckOptions:
    def __init__(self, profile: str = "train", rules_paths: Optional[List[str]] = None,
                 select: Optional[List[str]] = None, ignore: Optional[List[str]] = None,
                 settings: Optional[List[str]] = None, facts_file: Optional[str] = None,
                 python: Optional[str] = None, nvml_fixture: Optional[str] = None, timeout: float = 10.0,
                 use_cache: bool = True, strict: bool = False, environ=None,
                 workload: Optional["WorkloadOptions"] = None) -> None:
        if profile not in PROFILES:
            raise PreflightError("unknown profile %r" % profile, "profiles: %s" % ", ".join(PROFILES))
        if not 0 < timeout <= MAX_TIMEOUT:  # also refuses NaN
            raise PreflightError("--timeout must be more than 0 and at most %d seconds, got %s" % (MAX_TIMEOUT, timeout),
                                 "probing takes well under a second; --timeout 10 is the default")
        if facts_file and (python or nvml_fixture):
            given = "--python" if python else "--nvml-fixture (or PREFLIGHT_NVML_FIXTURE)"
            raise PreflightError("--facts evaluates a saved snapshot without probing; %s has nothing to probe" % given,
                                 "give one or the other")
        self.profile = profile
        self.rules_paths = rules_paths or []
        self.select = select or []
        self.ignore = ignore or []
        self.settings = settings or []
        self.facts_file = facts_file
        self.python = python
        self.nvml_fixture = nvml_fixture
        self.timeout = timeout
        self.use_cache = use_cache
        self.strict = strict
        self.environ = environ
        self.workload = workload


def load_rules(rules_paths: List[str], warn=None, **kinds) -> loader.RuleSet:
    ruleset = loader.load(rules_paths, **kinds)
    for warning in ruleset.warnings:
        if warn:
            warn(warning)
    return ruleset


def choose_rules(options: CheckOptions, warn=None, ruleset: Optional[loader.RuleSet] = None) -> List[Rule]:
    ruleset = ruleset or load_rules(options.rules_paths, warn)
    selection.apply_settings(ruleset, options.settings, options.profile)
    return selection.choose(ruleset, options.profile, options.select, options.ignore)


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


def _collect_options(options: CheckOptions, packages: List[Dict[str, Any]]) -> collect.Options:
    python = None
    if options.python:
        from preflight.probes.python_env import resolve_interpreter

        python = resolve_interpreter(options.python)
    return collect.Options(timeout=options.timeout, python=python, nvml_fixture=options.nvml_fixture,
                           packages=packages, use_cache=options.use_cache, environ=options.environ)


def check(options: CheckOptions, warn=None) -> Report:
    started = time.monotonic()
    ruleset = load_rules(options.rules_paths, warn, capacity=options.workload is not None)
    rules = choose_rules(options, warn, ruleset)
    if warn and not rules:
        warn("no rule is left to check: the selected rules are not in profile %s ('preflight rules --profile %s' "
             "lists its rules)" % (options.profile, options.profile))
    request = workload_request(ruleset, options.workload) if options.workload else None
    if warn and request and not any(rule.fact.path == "gpu.workload.fit" for rule in rules):
        warn("--workload has no effect: no selected rule reads it (gpu.memory.workload is in the train and "
             "inference profiles)")
    if options.facts_file:
        facts = snapshot_file.load(options.facts_file)
        source = "file %s" % options.facts_file
    else:
        packages = selection.required_packages(rules, options.profile)
        facts = collect.collect(probes_needed(rules), _collect_options(options, packages))
        source = facts["source"]
    if request is not None:
        attach_workload(request, facts, ruleset)
    results = evaluate(rules, facts, options.profile)
    return Report(options.profile, results, strict=options.strict, facts_source=source,
                  seconds=time.monotonic() - started, facts=facts)


def facts(options: CheckOptions, warn=None) -> Dict[str, Any]:
    """A full snapshot: every probe, and every package any profile's rules list."""
    ruleset = load_rules(options.rules_paths, warn)
    packages = selection.required_packages(list(ruleset.rules.values()), None)
    return collect.collect(set(collect.PROBES), _collect_options(options, packages))


class DiagnoseOptions(CheckOptions):
    """What diagnose needs: the check's probing options, plus whether to look at this machine at all."""

    def __init__(self, use_facts: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.use_facts = use_facts


def open_log(path: str):
    """A binary stream of the log: a file, '-' for stdin, or a .gz file; exit 2 when it cannot be read."""
    import os
    import sys

    hint = "give the path of a training log, or '-' to read standard input"
    if path == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise PreflightError("standard input is closed: there is no log to read", hint)
        return stream
    if os.path.isdir(path):
        raise PreflightError("%s is a folder, not a log file" % path, hint)
    try:
        if path.endswith(".gz"):
            import gzip
            import zlib

            stream = gzip.open(path, "rb")
            try:
                stream.peek(1)  # fail now, not half-way, on a file that is not gzip
            except (OSError, EOFError, zlib.error) as exc:
                stream.close()
                raise PreflightError("%s: not a complete gzip file (%s)" % (path, exc or type(exc).__name__),
                                     "decompress what there is with: zcat %s > log.txt" % path)
            return stream
        return open(path, "rb")
    except FileNotFoundError:
        raise PreflightError("%s: no such file" % path, hint)
    except PermissionError:
        raise PreflightError("%s: permission denied" % path, "run as a user who can read it")
    except OSError as exc:
        raise PreflightError("%s: cannot read it: %s" % (path, exc), hint)


def diagnose(path: str, options: DiagnoseOptions, warn=None):
    import sys
    import zlib

    from preflight.diagnose import diagnosis
    from preflight.diagnose.scan import scan

    ruleset = load_rules(options.rules_paths, warn, failures=True)
    stream = open_log(path)
    try:
        result = scan(stream, list(ruleset.failures.values()))
    except (EOFError, zlib.error) as exc:  # a damaged or truncated .gz
        raise PreflightError("%s: not a complete gzip file (%s)" % (path, exc or type(exc).__name__),
                             "decompress what there is with: zcat %s > log.txt" % path)
    except OSError as exc:  # a read error, or a damaged .gz
        problem = "not a complete gzip file" if path.endswith(".gz") else "reading failed"
        raise PreflightError("%s: %s: %s" % (path, problem, exc), "is the file complete and readable?")
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    found = diagnosis.findings(result)
    snapshot, facts_source = None, None
    if found and options.use_facts:
        if options.facts_file:
            snapshot = snapshot_file.load(options.facts_file)
            facts_source = "file %s" % options.facts_file
        else:
            probes = diagnosis.probes_for(found, ruleset)
            if probes:
                snapshot = collect.collect(probes, _collect_options(options, selection.required_packages(
                    [ruleset.rules[r] for f in found for r in f.failure.rules if r in ruleset.rules], options.profile)))
                facts_source = snapshot["source"]
    diagnosis.complete(found, ruleset, snapshot, options.profile)
    return diagnosis.Diagnosis("stdin" if path == "-" else path, result, found, facts_source)


def plan(options: CheckOptions, gpu_filters: List[str], warn=None):
    """Size a workload on every catalog GPU and on this machine's GPUs."""
    from preflight.capacity import planning

    ruleset = load_rules(options.rules_paths, warn, capacity=True)
    request = workload_request(ruleset, options.workload)
    if options.workload.batch is None:
        request["batch"] = None
    snapshot = None
    if options.facts_file:
        snapshot = snapshot_file.load(options.facts_file)
    else:
        snapshot = collect.collect({"nvml"}, _collect_options(options, []))
    return planning.plan(request, ruleset, snapshot, gpu_filters)
