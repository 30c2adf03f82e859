"""The one path from a command's options to a judged report: prepare, observe, judge.

``prepare`` settles what to check: the site configuration merged under the
command line, the rules loaded, validated, chosen and resolved, the workload
sized. ``observe`` takes the snapshot (a saved file, or the probes the rules
need, reusing what matching the configuration already probed). ``judge``
evaluates the rules on the snapshot in its context (the workload split over
the visible GPUs, the GPUs expected) and wraps the results in a Report.

check, exec, slurm, serve, fleet and config show go through here; diagnose and
plan use ``prepare`` for their rules and site settings. A second copy of any
of these steps is a verdict waiting to disagree.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from preflight.commands import common, site
from preflight.engine import loader
from preflight.commands.options import CheckOptions
from preflight.errors import PreflightError
from preflight.facts.view import Context

if TYPE_CHECKING:
    from preflight.config import site_config
    from preflight.engine.loader import RuleSet
    from preflight.engine.model import ResolvedRule
    from preflight.report import Report


class NoRulesLeft(PreflightError):
    """The selection leaves no rule to check: a verdict needs rules (an empty check would pass anything)."""


class Prepared(NamedTuple):
    """What to check and how, settled once: the options in effect, how the site configuration contributed, the
    rules, the sized workload, and the Slurm node being admitted."""

    applied: site.Applied
    ruleset: "RuleSet"
    rules: List["ResolvedRule"]
    settings: Dict[str, Dict[str, str]]  # --set and the configuration's set, by rule id
    workload: Optional[Dict[str, Any]]
    node: Any = None
    fit_requests: Tuple[Dict[str, Any], ...] = ()  # the workloads of --fit-label / fit_labels, sized

    @property
    def options(self) -> CheckOptions:
        return self.applied.options

    def origin(self, key: str) -> Optional["site_config.Origin"]:
        """Where the site configuration set ``key``; None when the command line or a built-in default did."""
        effective = self.applied.effective
        if key in self.options.given or effective is None:
            return None
        return effective.origins.get(key)

    def resolve(self, rule_id: str) -> "ResolvedRule":
        """Any loaded rule (selected or not) resolved for this profile with its settings: diagnose's related checks."""
        return self.ruleset.rules[rule_id].resolve(self.options.profile, self.settings.get(rule_id))


class Sized(NamedTuple):
    """What a plan needs, and no more: the site configuration applied, the rule files and entries loaded (the
    capacity model and GPU catalog with --rules' own workloads and GPUs), every section of the configuration
    validated, and the workload sized. No rule is selected: a plan judges none."""

    applied: site.Applied
    ruleset: "RuleSet"
    workload: Optional[Dict[str, Any]]

    @property
    def options(self) -> CheckOptions:
        return self.applied.options


def size(options: CheckOptions, warn: common.Warn = None, node=None,
         target: "Optional[site_config.Target]" = None, kinds: Sequence[str] = ("capacity",),
         applied: Optional[site.Applied] = None) -> Sized:
    """plan's preparation, and the first half of check's: the configuration applied (to this machine, the Slurm
    ``node`` or ``target``) unless ``applied`` already is, the entries of ``kinds`` loaded ("failures", "capacity";
    "smoke" and "requirements" for the rules those options add), the configuration validated against them, the
    workload sized."""
    if applied is None:
        applied = site.apply(options, node, warn, target)
    options = applied.options
    capacity = "capacity" in kinds or options.workload is not None or bool(options.fit_labels) \
        or site.needs_capacity(applied.config)
    ruleset = loader.load(options.rules_paths, failures="failures" in kinds, capacity=capacity,
                          smoke="smoke" in kinds, requirements=options.requirements if "requirements" in kinds else None)
    site.validate(applied, ruleset)
    workload = workload_request(ruleset, options.workload) if options.workload is not None else None
    return Sized(applied, ruleset, workload)


def prepare(options: CheckOptions, warn: common.Warn = None, node=None, target: "Optional[site_config.Target]" = None,
            kinds: Sequence[str] = (), checking: bool = True, applied: Optional[site.Applied] = None) -> Prepared:
    """Settle what to check: what ``size`` settles, then the rules chosen and their settings. ``node``: the Slurm
    node being admitted (its partitions and features match the configuration, its Gres sets the GPUs expected);
    ``target``: what the configuration is matched against when it is not this machine (fleet: a snapshot's host
    and GPUs); ``kinds``: entries beyond rules and fixes to load ("failures", "capacity"); ``checking``: the rules
    will be judged (no rule left is an error; a workload no rule reads is worth a warning), not only consulted
    (diagnose, config show); ``applied``: the configuration already applied (fleet reads the file once)."""
    kinds = tuple(kinds) + ("requirements",) + (("smoke",) if options.smoke is not None else ())
    applied, ruleset, workload = size(options, warn, node, target, kinds, applied)
    options = applied.options
    if node is not None:
        from preflight.integrations import slurm as admission

        where = applied.effective.origins.get("profile") if applied.effective and "profile" not in options.given \
            else None
        admission.require_job_interpreter(options.profile, options.python, " (from %s)" % where.text if where else "")
    from preflight.engine import selection

    settings = selection.parse_settings(ruleset, options.settings, options.profile, warn)
    rules = selection.choose(ruleset, options.profile, options.select, options.ignore, settings, warn)
    if not rules and checking:
        raise no_rules_left(applied)
    if workload is not None and warn and checking and not any("workload" in rule.fact.context for rule in rules):
        readers = ["%s (profiles %s)" % (rule.id, ", ".join(rule.profiles)) for rule in ruleset.rules.values()
                   if "workload" in rule.fact.context]
        warn("--workload has no effect: no selected rule reads it; %s" % (
            "rules that do: %s" % "; ".join(readers) if readers else "no rule reads a workload"))
    return Prepared(applied, ruleset, rules, settings, workload, node, fit_requests(ruleset, options.fit_labels))


def observe(prepared: Prepared) -> Tuple[Dict[str, Any], str]:
    """(snapshot, where it came from): the saved file of --facts, else the probes the rules need, run now."""
    from preflight.engine import selection
    from preflight.engine.evaluate import probes_needed

    rules = prepared.rules
    return common.snapshot(prepared.options, probes_needed(rules), selection.required_packages(rules),
                           prepared.applied.early_facts, prepared.workload)


def context(prepared: Prepared, snapshot: Dict[str, Any]) -> Context:
    """What this run asks of the snapshot: the workload split over its visible GPUs, the GPUs it should have."""
    workload = None
    if prepared.workload is not None:
        workload = split_workload(prepared.workload, snapshot, prepared.ruleset)
    origin = prepared.origin("expect_gpus")
    return Context(workload, expected_gpus(prepared.options, snapshot, prepared.node, origin.short if origin else ""))


def judge(prepared: Prepared, snapshot: Dict[str, Any], source: str = "live",
          started: Optional[float] = None) -> "Report":
    """The rules evaluated on the snapshot in this run's context, as a Report (with its one verdict policy)."""
    from preflight.engine.evaluate import evaluate
    from preflight.knowledge.package_index import stale_note
    from preflight.report import Report

    run_context = context(prepared, snapshot)
    results = evaluate(prepared.rules, snapshot, run_context)
    seconds = time.monotonic() - started if started is not None else 0.0
    report = Report(prepared.options.profile, results, strict=prepared.options.strict, facts_source=source,
                    seconds=seconds, facts=snapshot, context=run_context)
    if prepared.fit_requests:
        from preflight.capacity import estimate
        from preflight.facts.view import SnapshotView, Unknown

        try:
            gpus = SnapshotView(snapshot).visible_gpus(readable=True)
        except Unknown:
            gpus = []
        report.fits = estimate.node_fits(prepared.fit_requests, gpus, prepared.ruleset.gpus.values())
    note = stale_note()
    if note:
        report.notes.append(note)
    return report


def check(options: CheckOptions, warn: common.Warn = None, node=None) -> "Report":
    """prepare, observe, judge: what check, exec, slurm and serve run."""
    started = time.monotonic()
    prepared = prepare(options, warn, node)
    snapshot, source = observe(prepared)
    return judge(prepared, snapshot, source, started)


def no_rules_left(applied: site.Applied) -> NoRulesLeft:
    """The error when the selection leaves no rule to check, naming where select and ignore were set."""
    options, effective = applied.options, applied.effective
    said = []
    for key in ("select", "ignore"):
        values = getattr(options, key)
        if not values:
            continue
        if key in options.given or effective is None or key not in effective.origins:
            where = "--%s" % key
        else:
            where = effective.origins[key].text
        said.append("%s %s (%s)" % (key, ",".join(values), where))
    why = "; ".join(said) or "the rule files give profile %s no rule" % options.profile
    return NoRulesLeft(
        "no rule is left to check in profile %s: %s. A check without rules would pass anything, so preflight "
        "refuses to give a verdict" % (options.profile, why),
        "'preflight config show' says where each setting comes from; 'preflight rules --profile %s' lists the "
        "rules" % options.profile)


# --- the context: what the run asks for -----------------------------------------------------------

def workload_request(ruleset: "RuleSet", wanted) -> Dict[str, Any]:
    """The workload of --workload sized by the capacity model, for the trainer's total batch (its default when
    none is given)."""
    from preflight.capacity import estimate

    batch = wanted.batch if wanted.batch is not None else estimate.DEFAULT_BATCH[wanted.task]
    request = estimate.make_request(ruleset.workloads, wanted.workload, wanted.task, wanted.precision, batch,
                                    wanted.imgsz, wanted.optimizer, wanted.max_objects, wanted.objects_source)
    return dict(request, batch_given=wanted.batch is not None)


def fit_requests(ruleset: "RuleSet", labels: Sequence[str]) -> Tuple[Dict[str, Any], ...]:
    """Each WORKLOAD:TASK:IMG of --fit-label sized by the capacity model (its default precision); an unknown
    workload is bad usage (exit 2), named with the ones there are."""
    if not labels:
        return ()
    from preflight.capacity import estimate

    requests = []
    for label in labels:
        workload, task, imgsz = label.split(":")
        requests.append(estimate.make_request(ruleset.workloads, workload, task, estimate.DEFAULT_PRECISION[task],
                                              None, int(imgsz)))
    return tuple(requests)


def split_workload(request: Dict[str, Any], snapshot: Dict[str, Any], ruleset: "RuleSet") -> Dict[str, Any]:
    """The workload split over the GPUs CUDA sees here (as torchrun splits the batch), with the catalog GPUs that
    would hold each share."""
    from preflight.capacity import estimate

    visible = (snapshot.get("visibility") or {}).get("count") or 1
    if request.get("batch_given"):
        estimate.check_split(request["batch"], visible, "CUDA sees here")
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
    return request


# nvmlInit outcomes that, with no /dev/nvidia* either, mean no NVIDIA driver runs here (an image may ship the
# driver's libraries to every node; without a GPU its kernel module never loads).
_NO_DRIVER = ("library_not_found", "driver_not_loaded")


def has_nvidia_driver(snapshot: Dict[str, Any]) -> bool:
    nvml = snapshot.get("nvml") or {}
    status = (nvml.get("init") or {}).get("status")
    if status is None:
        return True  # the probe did not answer: assume a driver, never call a GPU node CPU-only by mistake
    return not (status in _NO_DRIVER and not any(name[len("nvidia"):].isdigit() or name == "nvidiactl"
                                                  for name in nvml.get("device_files") or []))


def expected_gpus(options: CheckOptions, snapshot: Dict[str, Any], node=None,
                  configured_at: str = "") -> Optional[Dict[str, Any]]:
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
        if not has_nvidia_driver(snapshot):
            return {"count": 0, "source": "no GPU in its Slurm Gres and no NVIDIA driver", "scope": scope}
        return None  # GPUs without Gres: the site does not schedule them through Slurm; nothing to compare
    allocated = (os.environ.get("SLURM_GPUS_ON_NODE") or "").strip()
    if allocated.isascii() and allocated.isdigit():
        return {"count": int(allocated), "source": "SLURM_GPUS_ON_NODE", "scope": scope}
    return None

