"""preflight plan: will a workload fit, and on which GPU: every catalog GPU and this machine's, or one GPU the
user describes (--gpu-memory, --cc)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Dict, List, Optional

import click

from preflight.capacity import estimate
from preflight.capacity.planning import Plan, Row
from preflight.commands import common, pipeline
from preflight.commands.click_options import (COLORS, CONFIG, OUTPUT, check_options, complete, complete_files, declare,
                                              format_names, one_facts_file, setting, shown, warn, workload_group)
from preflight.commands.options import CheckOptions, OutputOptions
from preflight.errors import ExitCode, PreflightError
from preflight.facts.view import SnapshotView, Unknown
from preflight.knowledge.gpus import GpuModel

if TYPE_CHECKING:
    from preflight.engine.loader import RuleSet

MIN_GPU_MEMORY = 256 * 2**20
MAX_GPU_MEMORY = 2**40


def custom_gpu(size: str, compute_capability: Optional[str]):
    """The GPU --gpu-memory (its total, as nvidia-smi shows it) and --cc describe."""
    from preflight import units

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


MAX_PLAN_GPUS = 1024


def _check_gpu_count(gpus: int, name: str) -> None:
    if not 1 <= gpus <= MAX_PLAN_GPUS:
        raise PreflightError("%s must be from 1 to %d, got %d" % (name, MAX_PLAN_GPUS, gpus),
                             "the GPUs the run spreads its total batch over under torchrun (DDP)")


def run(options: CheckOptions, gpu_filters: List[str], warn: common.Warn = None, custom=None, gpus: int = 1) -> Plan:
    _check_gpu_count(gpus, "--gpus")
    prepared = pipeline.size(options, warn)
    request = prepared.workload  # sized for the trainers' default batch when none is given
    if options.workload is not None and options.workload.batch is not None:
        estimate.check_split(request["batch"], gpus, "of --gpus")
    if custom is not None:  # that GPU alone: this machine's are not probed
        return plan(request, prepared.ruleset, None, gpu_filters, custom, gpus)
    snapshot, _ = common.snapshot(prepared.options, {"nvml"}, [], prepared.applied.early_facts)
    return plan(request, prepared.ruleset, snapshot, gpu_filters, gpus=gpus)


def _arch(rule, compute_capability: Optional[str]) -> str:
    """The default rule's verdict on a compute capability: yes, below recommended, or no."""
    if rule is None or compute_capability is None:
        return "unknown"
    resolved = rule.resolve("train")
    texts = resolved.texts()
    verdict = rule.comparison.evaluate(compute_capability, resolved.params, {})
    if verdict.status == "pass":
        return "yes"
    if verdict.status == "warn":
        return "yes, below the recommended %s" % texts.get("recommended", "")
    return "no (needs %s)" % texts.get("min", "")


def _chosen(gpus, filters: List[str]):
    if not filters:
        return list(gpus)
    chosen = []
    for wanted in filters:
        # An id names one GPU (l4 is the L4, not also the L40 and L40S); any other word is looked up in the names.
        found = [g for g in gpus if wanted.lower() == g.id] or \
            [g for g in gpus if wanted.lower() in g.name.lower()]
        if not found:
            raise PreflightError("--gpu %s: no catalog GPU matches" % wanted,
                                 "catalog: %s" % ", ".join(g.name for g in gpus))
        chosen.extend(g for g in found if g not in chosen)
    return sorted(chosen, key=lambda g: g.memory_mib)


def plan(request: Dict[str, Any], ruleset: "RuleSet", snapshot: Optional[Dict[str, Any]], filters: List[str],
         custom: Optional[GpuModel] = None, gpus: int = 1, models: Optional[List[GpuModel]] = None) -> Plan:
    """Every catalog GPU (or those ``filters`` name, or the ``models`` given) and this machine's; or ``custom``
    alone. ``request["batch"]``
    is the trainers' total, split over ``gpus`` as DDP splits it; each row judges rank 0's share (the tightest:
    it also validates), and its largest batches are totals over the ``gpus``."""
    batch = estimate.per_gpu_batch(request["batch"] or 1, gpus)
    rule = ruleset.rules.get("gpu.compute_capability")
    catalog = sorted(ruleset.gpus.values(), key=lambda g: g.memory_mib)
    rows = []
    for gpu in [custom] if custom is not None else models if models is not None else _chosen(catalog, filters):
        available = estimate.catalog_available(gpu)
        cc = gpu.compute_capability or None
        rows.append(_row(request, batch, gpus, gpu.name, "custom" if gpu is custom else "catalog", gpu.id,
                         gpu.memory_bytes, available, cc, _arch(rule, cc), gpu.usable_basis,
                         None if gpu is custom else gpu.ecc, gpu.usable_figures))
    machine_rows, note = _this_machine(request, batch, gpus, rule, snapshot)
    smallest = [g.name for g in estimate.fitting_gpus(request, batch, catalog)[:3]]
    return Plan(request, batch, rows + machine_rows, smallest, note, gpus)


def _row(request, batch: int, gpus: int, name: str, source: str, subject: str, memory: int, available: int,
         cc: Optional[str], arch: str, usable: str = "free now", ecc: Optional[str] = None, figures=()) -> Row:
    return Row(name, source, subject, memory, available, cc, arch, estimate.required_bytes(request, batch),
               estimate.verdict(request, batch, available), estimate.max_batch(request, available) * gpus,
               estimate.max_tight_batch(request, available) * gpus, usable, ecc, tuple(figures))


def _this_machine(request, batch: int, gpus: int, rule, snapshot):
    if snapshot is None:
        return [], None
    facts = SnapshotView(snapshot)
    try:
        nvml = facts.section("nvml")
        if nvml.get("init", {}).get("status") != "ok":
            return [], "NVML is not available here (%s)" % nvml.get("init", {}).get("status")
        rows = []
        for gpu in facts.visible_gpus(readable=True):
            index = gpu.get("index")
            memory = gpu.get("memory") or {}
            if memory.get("free") is None or memory.get("total") is None:
                continue
            rows.append(_row(request, batch, gpus, gpu.get("name") or "GPU %d" % index, "this machine",
                             "gpu%d" % index, memory["total"], memory["free"], gpu.get("compute_capability"),
                             _arch(rule, gpu.get("compute_capability"))))
        return rows, None if rows else "no GPU is visible here"
    except Unknown as unknown:
        return [], "this machine's GPUs are unknown: %s" % unknown


def main(options: CheckOptions, gpu_filters: List[str], shown: OutputOptions, warn: common.Warn = None,
         custom=None, gpus: int = 1) -> int:
    from preflight.files.output import emit
    from preflight.render import formats

    result = run(options, gpu_filters, warn, custom, gpus)
    emit(formats.render("plan", result, shown.format, color=shown.colored()), shown.output)
    return ExitCode.OK


def submission(options: CheckOptions, slurm: Dict[str, Optional[str]], declared_gpus: Optional[int],
               warn: common.Warn = None):
    """A Slurm job's declared workload judged against the one GPU type it asks for (integrations/slurm_submit):
    the GPUs of the submit host play no part."""
    from preflight.integrations import slurm_submit as submit

    gpus = submit.gpu_request(slurm["gres"], slurm["gpus"], slurm["gpus_per_node"], slurm["nodes"])
    if options.workload is None:
        return submit.not_judged(slurm, "", gpus)  # no declaration: the job goes on untouched, nothing said
    if gpus is None:
        return submit.not_judged(slurm, "the job declares %s but asks for no GPU (--gres=gpu:TYPE:N or "
                                        "--gpus=TYPE:N)" % options.workload.workload)
    if gpus.slurm_type is None:
        return submit.not_judged(slurm, "%s names %s: preflight judges one GPU type (--gres=gpu:TYPE:N)" % (
            gpus.asked, "no GPU type" if gpus.types == ("",) else "several GPU types"), gpus)
    prepared = pipeline.size(options, warn)
    model, why, named = submit.catalog_gpu(gpus.slurm_type, prepared.options.slurm_gpu_types, prepared.ruleset.gpus)
    if model is None:
        return submit.not_judged(slurm, why, gpus)
    count = gpus.count if declared_gpus is None else declared_gpus
    _check_gpu_count(count, "gpus")
    if count > gpus.count:
        return submit.not_judged(slurm, "the job declares gpus=%d, more than the %d GPU%s it asks for (%s): a run "
                                        "cannot use GPUs it was not given" % (count, gpus.count,
                                                                             "" if gpus.count == 1 else "s",
                                                                             gpus.asked), gpus)
    request = prepared.workload
    if request["batch"] % count:
        return submit.uneven(slurm, request["batch"], gpus, count, model.id)
    result = plan(request, prepared.ruleset, None, [], gpus=count, models=[model])
    fitting = submit.alternatives(request, result.batch, model, prepared.ruleset.gpus,
                                  prepared.options.slurm_gpu_types)
    return submit.decide(result, slurm, gpus, prepared.options.slurm_does_not_fit, fitting, named > 1)


def submission_main(options: CheckOptions, slurm: Dict[str, Optional[str]], declared_gpus: Optional[int],
                    shown: OutputOptions, warn: common.Warn = None) -> int:
    from preflight.files.output import emit
    from preflight.render import formats

    result = submission(options, slurm, declared_gpus, warn)
    text = formats.render("submission", result, shown.format)
    if text or shown.output not in (None, "-"):  # a job with nothing to say about it: no line at all
        emit(text, shown.output)
    return ExitCode.FAILED if result.refused else ExitCode.OK


# --- the command line ----------------------------------------------------------------------------------------

SLURM_JOB = [  # plan's Slurm mode: the job as deploy/slurm/cli_filter.lua reads it from sbatch, srun or salloc
    click.option("--slurm-comment", metavar="TEXT", help="The job's --comment: its 'preflight: workload=ID batch=N "
                 "img=N' declaration (keys: this command's workload options and gpus) gives the workload, judged "
                 "against the GPUs the job asks for; a comment without one: nothing judged, exit 0."),
    click.option("--slurm-gres", metavar="SPEC", help="The job's --gres as Slurm writes it (gpu:h200:2)."),
    click.option("--slurm-gpus", metavar="SPEC", help="The job's --gpus, its GPUs in all ([type:]count)."),
    click.option("--slurm-gpus-per-node", metavar="SPEC", help="The job's --gpus-per-node ([type:]count)."),
    click.option("--slurm-nodes", metavar="N[-M]", help="The job's --nodes: the GPUs per node times the most "
                 "nodes share the batch."),
    setting("slurm_gpu_types"),
    setting("slurm_does_not_fit", type=click.Choice(["refuse", "warn"]), metavar=None, default="refuse",
            show_default=True),
]


_WORKLOAD_KEYS = ("workload", "task", "batch", "imgsz", "fp32", "half", "optimizer", "max_objects",
                  "instances_per_batch", "labels", "gpus")


def declared_from_comment(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """plan --slurm-comment: the comment's declaration as the options of those names (--img for img=640), each
    converted and checked by its own declaration; an option also on the command line is a usage error."""
    from preflight.integrations import slurm_submit

    if kwargs.get("slurm_comment") is None:
        return kwargs
    pairs = slurm_submit.declaration(kwargs.get("slurm_comment"))
    if pairs is None:
        return kwargs
    context = click.get_current_context()
    options = {option.opts[0][2:]: option for option in context.command.params
               if isinstance(option, click.Option) and option.name in _WORKLOAD_KEYS}
    for key, value in pairs:
        option = options.get(key)
        if option is None:
            raise click.UsageError("the job's comment declares %r: not a workload option; keys: %s" % (
                key, ", ".join(sorted(options))))
        if context.get_parameter_source(option.name) == click.core.ParameterSource.COMMANDLINE:
            raise click.UsageError("--%s is given on the command line and in the job's comment: give it once" % key)
        try:
            if option.is_flag:
                if value not in (None, "true", "yes", "1"):
                    raise click.BadParameter("a flag: give %s alone" % key)
                kwargs[option.name] = True
            else:
                if value is None:
                    raise click.BadParameter("give %s=VALUE" % key)
                kwargs[option.name] = option.type_cast_value(context, value)
        except click.BadParameter as exc:
            raise click.UsageError("the job's comment: %s%s: %s" % (key, "=%s" % value if value else "",
                                                                    exc.format_message()))
    return kwargs


def build() -> click.Command:
    @click.command("plan")
    @declare(workload_group(planned=True))
    @click.option("--gpu", "gpu_filters", multiple=True, metavar="NAME", shell_complete=complete("gpus"),
                  help="Only these catalog GPUs (part of the name or the id: 3060, a100-80gb, h200); repeatable.")
    @click.option("--gpu-memory", metavar="SIZE", help="Plan for one GPU that is not in the catalog: its total memory "
                  "as nvidia-smi shows it (6GiB, 6144MiB); usable memory is estimated at 97% of it.")
    @click.option("--gpus", type=int, metavar="N",
                  help="GPUs of each kind the run uses under torchrun (DDP): the total --batch is split over them, each "
                       "row judges rank 0's share (the tightest: only rank 0 validates), and the largest batches are "
                       "totals over the N GPUs. [default: 1; in the Slurm mode, the job's GPUs]")
    @click.option("--cc", "compute_capability", metavar="X.Y", help="With --gpu-memory: that GPU's compute capability "
                  "(8.6), to say whether PyTorch supports its architecture.")
    @click.option("--format", "output_format", type=click.Choice(format_names("plan")), default="text",
                  show_default=True)
    @OUTPUT
    @click.option("--color", type=COLORS, default="auto", show_default=True,
                  help="Colour the text (auto: only on a terminal, never when NO_COLOR is set).")
    @click.option("--facts", "facts_file", metavar="FILE", multiple=True, callback=one_facts_file, shell_complete=complete_files,
                  help="This machine's GPUs from a saved snapshot.")
    @click.option("--nvml-fixture", metavar="FILE", envvar="PREFLIGHT_NVML_FIXTURE", shell_complete=complete_files,
                  help="This machine's GPUs from a replayed NVML recording. [env: PREFLIGHT_NVML_FIXTURE]")
    @setting("timeout", default="10", show_default=True)
    @setting("rules", help="Add workloads ([[workload]]) or GPUs ([[gpu]]) from a .toml file (repeatable).")
    @CONFIG
    @check_options(SLURM_JOB, before=declared_from_comment)
    def plan(options, gpu_filters, gpu_memory, compute_capability, gpus, output_format, output, color,
             slurm_comment, slurm_gres, slurm_gpus, slurm_gpus_per_node, slurm_nodes) -> int:
        """Will a workload fit, and which GPU to use: memory needed, the verdict, and the largest batches, per GPU.

        \b
        Verdicts: fits (the whole run's peak, validation cache and margin included, is
        within the usable memory); tight (only the training steps' own need is: it
        should run, as PyTorch gives back cached memory before it runs out); does not
        fit (not even the training steps). --batch is the trainer's total batch; with
        --gpus N it is split over N GPUs as torchrun (DDP) splits it, rank 0 (which
        alone validates) is judged, and the largest batches are totals over the N.

        \b
        Slurm mode (--slurm-comment and the job's GPU options, as the submit filter
        deploy/slurm/cli_filter.lua passes them): one GPU type judged, one line said.
        Exit 1: it does not fit and the site refuses such jobs (slurm_does_not_fit);
        0: it fits, is tight, only warned about, or not judged; 2: bad input.
        """
        slurm = {"comment": slurm_comment, "gres": slurm_gres, "gpus": slurm_gpus,
                 "gpus_per_node": slurm_gpus_per_node, "nodes": slurm_nodes}
        if any(value is not None for value in slurm.values()):
            if gpu_filters or gpu_memory is not None or compute_capability is not None:
                raise click.UsageError("the Slurm mode judges the GPU type the job asks for: leave out --gpu, "
                                       "--gpu-memory and --cc")
            if output_format not in format_names("submission"):
                raise click.UsageError("the Slurm mode writes %s, not %s" % (
                    " or ".join(format_names("submission")), output_format))
            return submission_main(options, slurm, gpus, shown(output_format, output), warn)
        if options.workload is None:
            raise click.UsageError("Missing option '--workload'.")
        if compute_capability is not None and gpu_memory is None:
            raise click.UsageError("--cc describes the GPU --gpu-memory gives; add --gpu-memory SIZE")
        if gpu_memory is not None and gpu_filters:
            raise click.UsageError("--gpu-memory plans for that GPU alone; leave out --gpu")
        custom = custom_gpu(gpu_memory, compute_capability) if gpu_memory is not None else None
        return main(options, list(gpu_filters), shown(output_format, output, color=color), warn, custom,
                    1 if gpus is None else gpus)
    return plan
