"""The click options the commands share, declared once each, and the one path from them to a CheckOptions value.

A command's own options are declared in its module (``build()``); the groups
here are the ones several commands take: what to probe (PROBE), what to check
(``check_group``, with each command's defaults from its row in
``preflight.commands.COMMANDS``), the workload to size (``workload_group``),
where to write (OUTPUT), what to keep (KEEP). ``check_options`` declares groups
on a command and hands its function one ``options`` value.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, Optional

import click

from preflight.engine.model import PROFILES
from preflight.render.formats import names as format_names
from preflight.terminal import say

__all__ = ["CHECK", "CHECK_WITHOUT_FACTS", "COLORS", "CONFIG", "FIT", "NODE_WATCH", "KEEP", "OUTPUT", "PROBE", "WORKLOAD", "check_group", "check_options",
           "complete", "complete_files", "complete_folders", "declare", "duration", "format_names", "kept", "log",
           "one_facts_file", "setting", "shown", "warn", "workload_group", "PROFILES"]

COLORS = click.Choice(["auto", "always", "never"])


def warn(message: str) -> None:
    say("preflight: warning: %s" % message)


def log(message: str) -> None:
    say(message)


def duration(option: str, text: str) -> float:
    from preflight.units import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option)


# --- shell completion of values: rule ids, workloads, catalog GPUs (read only while completing) ----------


def complete(kind: str):
    def complete(context, parameter, incomplete: str):
        from preflight.commands import completion

        return completion.values(kind, incomplete)
    return complete


def complete_files(context, parameter, incomplete: str):
    """A path: the shell completes file names (click's bash script then falls back to compgen -f)."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="file")]


def complete_folders(context, parameter, incomplete: str):
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="dir")]


# --- option groups: declared once, each collapsed into the value a command takes ---------------


def one_facts_file(context, parameter, values):
    """--facts names one snapshot: click would keep the last of several silently."""
    if len(values) > 1:
        raise click.UsageError("--facts was given %d times; a check evaluates one snapshot. To evaluate many "
                               "(a fleet), use: preflight fleet %s" % (len(values), " ".join(values)))
    return values[0] if values else None


def setting(key: str, help: Optional[str] = None, **more) -> Callable:
    """The click option of a setting declared in preflight.config.settings (its flag, field, metavar and help; parsed and
    checked when the options value is built, as the site configuration's value is)."""
    from preflight.config.settings import SETTINGS

    declared = SETTINGS[key]
    more.setdefault("metavar", declared.metavar)
    return click.option(declared.flag, declared.field, multiple=declared.multiple, help=help or declared.help, **more)


PROBE = [
    click.option("--python", "python", metavar="PATH", shell_complete=complete_files,
                 help="Probe this interpreter's environment (the training environment) instead of preflight's own."),
    click.option("--nvml-fixture", metavar="FILE", envvar="PREFLIGHT_NVML_FIXTURE", shell_complete=complete_files,
                 help="Replay a recorded machine's NVML answers (nvml-fixture/1 JSON) instead of asking the driver. "
                      "[env: PREFLIGHT_NVML_FIXTURE]"),
    click.option("--kernel-log", metavar="FILE", shell_complete=complete_files, help="Read Xid events from this captured kernel log (dmesg, "
                 "journalctl -k, /var/log/kern.log) instead of this machine's."),
    setting("timeout", default="10", show_default=True),
    click.option("--no-cache", is_flag=True, help="Ask torch for its GPU architectures again, and keep no GPU counter "
                 "readings (PCIe replay and NVLink error rates need the last one), instead of using the cache."),
    setting("rules", shell_complete=complete_files),
]


CONFIG = click.option(
    "--config", metavar="FILE", envvar="PREFLIGHT_CONFIG", shell_complete=complete_files,
    help="Site configuration ([defaults] and [[match]] tables) [default: /etc/preflight/config.toml when it exists]; "
         "the command line overrides it. [env: PREFLIGHT_CONFIG]")


def check_group(command: str = "check", with_facts: bool = True, with_requirements: bool = True) -> List[Callable]:
    """The options that say what to check, with ``command``'s defaults (its row in preflight.commands.COMMANDS)."""
    from preflight.commands import COMMANDS
    from preflight.config.settings import SETTINGS

    default_profile, expect_gpus = COMMANDS[command].profile, COMMANDS[command].expect_gpus

    group = [
        setting("expect_gpus", default=expect_gpus, show_default=expect_gpus is not None,
                help=SETTINGS["expect_gpus"].help + " auto: %s." % (
                              "the node's Slurm Gres; a node with no GPU in its Gres and no NVIDIA driver is not a "
                              "GPU node" if expect_gpus else
                              "the job's Slurm allocation (SLURM_GPUS_ON_NODE) where set, else no expectation")
                + ("" if expect_gpus else " [default: no expectation]")),
        setting("profile", type=click.Choice(PROFILES), default=default_profile, show_default=True,
                envvar="PREFLIGHT_PROFILE", metavar=None,
                help=SETTINGS["profile"].help + " [env: PREFLIGHT_PROFILE]"),
        click.option("--strict", is_flag=True, help="Fail (exit 1) on warnings too."),
        setting("select", shell_complete=complete("rules")),
        setting("ignore", shell_complete=complete("rules")),
        setting("set"),
        CONFIG,
    ]
    if with_requirements:
        group.insert(-1, click.option(
            "--requirements", metavar="FILE", shell_complete=complete_files,
            help="Also check the job's interpreter against the project's requirements file (requirements.txt, PEP "
                 "508 lines, -r includes): an unmet one fails, with one pip line for that interpreter."))
    if with_facts:
        group.insert(-1, click.option(
            "--facts", "facts_file", metavar="FILE", multiple=True, callback=one_facts_file, shell_complete=complete_files,
            help="Evaluate a snapshot saved by 'preflight facts' instead of probing this machine ('-' reads stdin)."))
    return group


CHECK = check_group()
CHECK_WITHOUT_FACTS = check_group(with_facts=False, with_requirements=False)  # fleet: many snapshots
NODE_WATCH = check_group("serve", with_facts=False, with_requirements=False)


MAX_OBJECTS_HELP = ("Training on dense data: the most labelled objects in one image (the loss pads every image of "
                    "a batch to its most). Without it the estimate assumes a typical count (8, as measured).")


def workload_group(planned: bool = False) -> List[Callable]:
    """The workload to size: check, exec and serve (optional, against free GPU memory) and plan (required, unless
    its Slurm mode reads it from the job's comment: plan checks that itself)."""
    return [
        click.option("--workload", metavar="ID", shell_complete=complete("workloads"),
                     help="%s (yolov9-t ... yolov9-e, gelan-t ... gelan-e, or your own from --rules)." % (
                         "The workload to plan [required, except in the Slurm mode]" if planned
                         else "Size a workload against free GPU memory")),
    ] + _WORKLOAD_DETAILS


_WORKLOAD_DETAILS = [
    click.option("--task", type=click.Choice(["train", "inference"]),
                 help="What the workload does [default: train, or inference with --profile inference]."),
    click.option("--batch", type=int, metavar="N", help="Total batch size (under DDP split across the GPUs) "
                 "[default: 16 to train, as train_dual.py; 1 for inference]."),
    click.option("--img", "imgsz", type=int, default=640, show_default=True, metavar="N", help="Image size (--img)."),
    click.option("--fp32", is_flag=True, help="Training without AMP (train_dual.py uses AMP by default)."),
    click.option("--half", is_flag=True, help="Inference in FP16, as detect_dual.py --half (FP32 by default)."),
    click.option("--optimizer", type=click.Choice(["SGD", "Adam", "AdamW"]), default="SGD", show_default=True,
                 help="Training optimizer (train.py/train_dual.py --optimizer): Adam and AdamW keep 4 more bytes of "
                      "state per parameter than SGD."),
    click.option("--max-objects", type=int, metavar="N", help=MAX_OBJECTS_HELP),
    click.option("--instances-per-batch", type=int, metavar="N",
                 help="Instead of --max-objects: the largest Instances figure your training log shows for one batch; "
                      "taken as the most in one image (all could be in one: conservative)."),
    click.option("--labels", "labels", metavar="DIR", shell_complete=complete_folders,
                 help="Instead of --max-objects: the dataset's YOLO label folder; the most lines in one label file "
                      "is the exact count."),
]


WORKLOAD = workload_group()


FIT = [setting("fit_labels", help=None)]  # check --format nfd and serve --nfd-output publish them


OUTPUT = click.option("--output", metavar="FILE", shell_complete=complete_files, help="Write to FILE instead of standard output ('-'): a regular "
                      "file is replaced atomically (a link is followed and kept, unless it lies in a folder others can write "
                      "and neither root nor you own it); a device or pipe is written in place.")


def workload_options(values: Dict[str, Any], profile: str):
    from preflight.commands.options import WorkloadOptions

    if values.get("workload") is None:
        given = [name for name, key in (("--task", "task"), ("--batch", "batch"), ("--fp32", "fp32"),
                                        ("--half", "half")) if values.get(key)]
        if values.get("optimizer", "SGD") != "SGD":
            given.append("--optimizer")
        for flag, key in (("--max-objects", "max_objects"), ("--instances-per-batch", "instances_per_batch"),
                          ("--labels", "labels")):
            if values.get(key) is not None:
                given.append(flag)
        if given or values.get("imgsz", 640) != 640:
            raise click.UsageError("%s only mean something with --workload" % ", ".join(given or ["--img"]))
        return None
    task = values["task"] or ("inference" if profile == "inference" else "train")
    return WorkloadOptions(values["workload"], task, values["batch"], values["imgsz"], values["fp32"], values["half"],
                           values.get("optimizer", "SGD"), values.get("max_objects"),
                           values.get("instances_per_batch"), values.get("labels"))


KEEP = [
    click.option("--report-dir", metavar="DIR", shell_complete=complete_folders,
                 help="Also write the JSON report to DIR/HOST.json, replaced atomically at every run: the folder "
                      "'preflight fleet' reads (a shared folder for many nodes). The folder must exist."),
    click.option("--syslog", is_flag=True,
                 help="Also send one line per run to the system log (/dev/log, read by journald and rsyslog; "
                      "PREFLIGHT_SYSLOG_SOCKET names another socket)."),
]


def kept(report_dir: Optional[str], syslog: bool):
    from preflight.commands.common import Keep

    return Keep(report_dir, syslog)


def check_options(*groups, before: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = None,
                  active_test: Optional[Callable[[Dict[str, Any], str], Any]] = None) -> Callable:
    """Declare these option groups on a command and hand it one ``options`` value (CheckOptions), made of every
    option its function does not take itself: these groups', and those declared above it (check's CHECK group,
    plan's --facts). ``before`` may change the values first (plan reads the job's comment into them);
    ``active_test`` makes the SmokeOptions of a command that runs smoke (commands.smoke.options_from), or None."""
    declarations = [declaration for group in groups for declaration in group]

    def decorate(function: Callable) -> Callable:
        code = function.__code__
        own = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])

        @functools.wraps(function)
        def command(**kwargs):
            from preflight.commands.options import CheckOptions

            if before is not None:
                kwargs = before(kwargs)
            values = {name: kwargs.pop(name) for name in list(kwargs) if name not in own}
            context = click.get_current_context()
            given = [name for name in values if context.get_parameter_source(name) in (
                click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)]
            profile = values.get("profile", "train")
            workload = workload_options(values, profile) if "workload" in values else None
            smoke = active_test(values, context.info_name) if active_test is not None else None
            if smoke is not None and "timeout" not in given:
                values["timeout"] = str(smoke.deadline)
            inert = [name for name in given if name.startswith("smoke_")]
            if smoke is None and inert:
                raise click.UsageError("%s only mean something with --smoke" % ", ".join(
                    "--" + name[len("smoke_"):].replace("_", "-") for name in sorted(inert)))
            kwargs["options"] = CheckOptions(
                profile=profile, rules_paths=list(values.get("rules_paths", ())),
                select=values.get("select", ()), ignore=values.get("ignore", ()),
                settings=list(values.get("settings", ())), facts_file=values.get("facts_file"),
                python=values.get("python"), nvml_fixture=values.get("nvml_fixture"),
                kernel_log=values.get("kernel_log"), timeout=values.get("timeout", "10"), use_cache=not values.get("no_cache", False),
                strict=values.get("strict", False), workload=workload, expect_gpus=values.get("expect_gpus"),
                config=values.get("config"), given=given, command=context.info_name or "check",
                facts_from=values.get("facts_from", "auto"), fit_labels=values.get("fit_labels", ()), smoke=smoke,
                requirements=values.get("requirements"), slurm_gpu_types=values.get("slurm_gpu_types", ()),
                slurm_does_not_fit=values.get("slurm_does_not_fit", "refuse"))
            return function(**kwargs)
        for declaration in reversed(declarations):
            command = declaration(command)
        return command
    return decorate


def declare(group) -> Callable:
    """Declare a group's options without collecting them (check_options, nearer the function, does that)."""
    def decorate(function: Callable) -> Callable:
        for declaration in reversed(group):
            function = declaration(function)
        return function
    return decorate


def shown(output_format: str = "text", output: Optional[str] = None, quiet: bool = False, color: str = "auto",
          expires_in: float = 3600.0):
    from preflight.commands.options import OutputOptions

    return OutputOptions(output_format, output, quiet, color, expires_in)
