"""The command line: declare the options, build the options values, dispatch to ``preflight.commands``.

No command's behaviour lives here: each command is a module of
``preflight.commands``; this module only turns click's options into the values
those modules take, and turns what they raise into exit codes.

Exit codes (stable; ``preflight.errors.ExitCode``):
  0  every error-severity rule passed (warnings allowed unless --strict)
  1  at least one error-severity rule failed or could not be evaluated
  2  usage error, a bad rule, facts or fixture file, or the report could not be written
  3  internal error in preflight (a bug: please report it)
  4  preflight slurm: scontrol missing, failing or not answering
  5  preflight slurm: unknown (a probe timed out, or the site configuration or rules cannot be used);
     the node was left as it was
  128+N  killed by signal N (130 SIGINT, 143 SIGTERM), helpers killed first
  78 preflight exec: the checks failed and the command was not started (--fail-exit-code)
exec passes the command's own status through (126/127: it cannot be run / is not found);
check --format npd uses node-problem-detector's codes (0 OK, 1 problem, 2 unknown); check --format nagios the
Nagios plugin codes (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN, also when the check could not run).
"""

from __future__ import annotations

import functools
import io
import os
import signal
import sys
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import click

from preflight import __version__
from preflight.engine.model import PROFILES
from preflight.errors import ExitCode, PreflightError
from preflight.render.formats import names as format_names
from preflight.terminal import say

_COLORS = click.Choice(["auto", "always", "never"])


def _warn(message: str) -> None:
    say("preflight: warning: %s" % message)


def _log(message: str) -> None:
    say(message)


def _duration(option: str, text: str) -> float:
    from preflight.units import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option)


# --- shell completion of values: rule ids, workloads, catalog GPUs (read only while completing) ----------

def _complete(kind: str):
    def complete(context, parameter, incomplete: str):
        from preflight.commands import completion

        return completion.values(kind, incomplete)
    return complete


def _complete_files(context, parameter, incomplete: str):
    """A path: the shell completes file names (click's bash script then falls back to compgen -f)."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="file")]


def _complete_folders(context, parameter, incomplete: str):
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="dir")]


# --- option groups: declared once, each collapsed into the value a command takes ---------------

def _one_facts_file(context, parameter, values):
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
    click.option("--python", "python", metavar="PATH", shell_complete=_complete_files,
                 help="Probe this interpreter's environment (the training environment) instead of preflight's own."),
    click.option("--nvml-fixture", metavar="FILE", envvar="PREFLIGHT_NVML_FIXTURE", shell_complete=_complete_files,
                 help="Replay a recorded machine's NVML answers (nvml-fixture/1 JSON) instead of asking the driver. "
                      "[env: PREFLIGHT_NVML_FIXTURE]"),
    click.option("--kernel-log", metavar="FILE", shell_complete=_complete_files, help="Read Xid events from this captured kernel log (dmesg, "
                 "journalctl -k, /var/log/kern.log) instead of this machine's."),
    setting("timeout", default="10", show_default=True),
    click.option("--no-cache", is_flag=True, help="Ask torch for its GPU architectures again, and keep no GPU counter "
                 "readings (PCIe replay and NVLink error rates need the last one), instead of using the cache."),
    setting("rules", shell_complete=_complete_files),
]
CONFIG = click.option(
    "--config", metavar="FILE", envvar="PREFLIGHT_CONFIG", shell_complete=_complete_files,
    help="Site configuration ([defaults] and [[match]] tables) [default: /etc/preflight/config.toml when it exists]; "
         "the command line overrides it. [env: PREFLIGHT_CONFIG]")


# The built-in --profile and --expect-gpus of each command that checks (config show --command reports them): slurm
# admits nodes and serve watches one, so both check the node profile; check and exec check a job's environment.
COMMAND_DEFAULTS: Dict[str, Tuple[str, Optional[str]]] = {
    "check": ("train", None), "exec": ("train", None), "fix": ("train", None), "slurm": ("node", "auto"),
    "serve": ("node", None)}


def check_group(command: str = "check", with_facts: bool = True, with_requirements: bool = True) -> List[Callable]:
    """The options that say what to check, with ``command``'s defaults (COMMAND_DEFAULTS)."""
    from preflight.config.settings import SETTINGS

    default_profile, expect_gpus = COMMAND_DEFAULTS[command]

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
        setting("select", shell_complete=_complete("rules")),
        setting("ignore", shell_complete=_complete("rules")),
        setting("set"),
        CONFIG,
    ]
    if with_requirements:
        group.insert(-1, click.option(
            "--requirements", metavar="FILE", shell_complete=_complete_files,
            help="Also check the job's interpreter against the project's requirements file (requirements.txt, PEP "
                 "508 lines, -r includes): an unmet one fails, with one pip line for that interpreter."))
    if with_facts:
        group.insert(-1, click.option(
            "--facts", "facts_file", metavar="FILE", multiple=True, callback=_one_facts_file, shell_complete=_complete_files,
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
        click.option("--workload", metavar="ID", shell_complete=_complete("workloads"),
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
    click.option("--labels", "labels", metavar="DIR", shell_complete=_complete_folders,
                 help="Instead of --max-objects: the dataset's YOLO label folder; the most lines in one label file "
                      "is the exact count."),
]
WORKLOAD = workload_group()
FIT = [setting("fit_labels", help=None)]  # check --format nfd and serve --nfd-output publish them
SMOKE_TIMEOUT = "60"  # the active test's default deadline: a few seconds per GPU plus torch's import
FIT_BUDGET = 240.0  # with --repo the measured fit's own budget, added to the default deadline (building a real
# GELAN or YOLOv9 model and a few steps at batch 16 takes minutes on a CPU, tens of seconds on a GPU)
SMOKE = [
    click.option("--device", "smoke_device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto",
                 show_default=True, help="Where the active test runs: auto takes the GPUs on a machine with an "
                 "NVIDIA driver (a failure there is a finding), else the CPU; cpu runs its logic without a GPU."),
    click.option("--gpus", "smoke_gpus", metavar="LIST", help="CUDA indices to test, e.g. 0,1 [default: every "
                 "visible GPU]."),
    click.option("--level", "smoke_level", type=click.Choice(["quick", "standard", "long"]), default="standard",
                 show_default=True, help="How deep: quick runs the memory test over a tenth of free memory, the "
                 "matrix products and the training step; standard every test over half; long every test over 90% "
                 "of free memory, each per-GPU test three times (as DCGM's r1-r3)."),
    click.option("--iterations", "smoke_iterations", type=click.IntRange(1, 100), metavar="N",
                 help="Run each per-GPU test N times and keep the worst result [default: the level's: 1, long 3]."),
    click.option("--memory-share", "smoke_memory_share", type=float, metavar="FRACTION",
                 help="Share of each GPU's free memory the memory test writes and reads back [default: the "
                      "level's: quick 0.1, standard 0.5, long 0.9]."),
    click.option("--repo", "smoke_repo", metavar="PATH", shell_complete=_complete_folders,
                 help="A YOLOv9 checkout: with --workload, measure that workload's training steps there (its own "
                      "models/ and loss) beside plan's estimate. Nothing in it is changed, but its code runs, as "
                      "you: as root, a checkout with any file or folder another user could change is refused unless "
                      "--trust-repo."),
    click.option("--cfg", "smoke_cfg", metavar="PATH",
                 help="With --repo: the model definition to build, as the trainer's --cfg takes it (relative to "
                      "the checkout) [default: models/detect/WORKLOAD.yaml]."),
    click.option("--hyp", "smoke_hyp", metavar="PATH",
                 help="With --repo: the hyperparameter file the loss reads, as the trainer's --hyp takes it "
                      "[default: data/hyps/hyp.scratch-high.yaml]."),
    click.option("--data", "smoke_data", metavar="PATH",
                 help="With --repo: the dataset YAML whose nc (number of classes) the model is built with, as the "
                      "trainer's --data [default: 80 classes, COCO's]."),
    click.option("--trust-repo", "smoke_trust_repo", is_flag=True,
                 help="Run --repo's code as root even though another user could change some of it (as git's "
                      "safe.directory: whoever can change it decides what root runs)."),
]
OUTPUT = click.option("--output", metavar="FILE", shell_complete=_complete_files, help="Write to FILE instead of standard output ('-'): a regular "
                      "file is replaced atomically (a link is followed and kept, unless it lies in a folder others can write "
                      "and neither root nor you own it); a device or pipe is written in place.")


def _workload(values: Dict[str, Any], profile: str):
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


def _refuse_code_others_can_change(values: Dict[str, Any]) -> None:
    """Root runs --repo's Python and evaluates its model definition: only a checkout no one but root (or the
    user who ran sudo) can change, unless --trust-repo."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    from preflight.files import trusted_code

    read = [values.get("smoke_cfg") or "models/detect/%s.yaml" % values["workload"],
            values.get("smoke_hyp") or "data/hyps/hyp.scratch-high.yaml"] + \
        ([values["smoke_data"]] if values.get("smoke_data") else [])
    problem = trusted_code.first_untrusted(values["smoke_repo"], read)
    if problem:
        raise click.BadParameter("%s, and the checkout's code would run as root; run smoke as that user, or add "
                                 "--trust-repo if you trust whoever can change it" % problem, param_hint="--repo")


def _smoke(values: Dict[str, Any], command: str):
    from preflight.commands.options import SmokeOptions

    gpus: Tuple[int, ...] = ()
    if values.get("smoke_gpus"):
        try:
            gpus = tuple(int(part) for part in values["smoke_gpus"].split(",") if part.strip())
        except ValueError:
            raise click.BadParameter("a list of CUDA indices such as 0,1, got %r" % values["smoke_gpus"],
                                     param_hint="--gpus")
    from preflight.probes.smoke import LEVELS

    level = LEVELS[values.get("smoke_level") or "standard"]
    share = values.get("smoke_memory_share")
    share = level["memory_share"] if share is None else share
    if not 0 < share <= 0.95:
        raise click.BadParameter("must be more than 0 and at most 0.95 (the test must leave the GPU room), got %s"
                                 % share, param_hint="--memory-share")
    if values.get("smoke_repo") and not values.get("workload"):
        raise click.UsageError("--repo measures a workload: give --workload too (e.g. --workload gelan-c)")
    for name in ("cfg", "hyp", "data"):
        if values.get("smoke_" + name) and not values.get("smoke_repo"):
            raise click.UsageError("--%s is a file of the checkout the fit measures in: give --repo PATH too" % name)
    if values.get("smoke_repo") and not values.get("smoke_trust_repo"):
        _refuse_code_others_can_change(values)
    if command == "smoke" and values.get("workload") and not values.get("smoke_repo"):
        raise click.UsageError("--workload is measured in a YOLOv9 checkout (its models/ and loss): give --repo "
                               "PATH, e.g. --repo ~/yolov9 (preflight plan estimates it without one)")
    return SmokeOptions(values.get("smoke_device") or "auto", gpus, share, values.get("smoke_repo"), level["tests"],
                        values.get("smoke_iterations") or level["iterations"], values.get("smoke_cfg"),
                        values.get("smoke_hyp"), values.get("smoke_data"), FIT_BUDGET)


KEEP = [
    click.option("--report-dir", metavar="DIR", shell_complete=_complete_folders,
                 help="Also write the JSON report to DIR/HOST.json, replaced atomically at every run: the folder "
                      "'preflight fleet' reads (a shared folder for many nodes). The folder must exist."),
    click.option("--syslog", is_flag=True,
                 help="Also send one line per run to the system log (/dev/log, read by journald and rsyslog; "
                      "PREFLIGHT_SYSLOG_SOCKET names another socket)."),
]


def _kept(report_dir: Optional[str], syslog: bool):
    from preflight.commands.common import Keep

    return Keep(report_dir, syslog)


def check_options(*groups) -> Callable:
    """Declare these option groups on a command and hand it one ``options`` value (CheckOptions), made of every
    option its function does not take itself: these groups', and those declared above it (check's CHECK group,
    plan's --facts)."""
    declarations = [declaration for group in groups for declaration in group]

    def decorate(function: Callable) -> Callable:
        code = function.__code__
        own = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])

        @functools.wraps(function)
        def command(**kwargs):
            from preflight.commands.options import CheckOptions

            if kwargs.get("slurm_comment") is not None:
                kwargs = _declared(kwargs)
            values = {name: kwargs.pop(name) for name in list(kwargs) if name not in own}
            context = click.get_current_context()
            given = [name for name in values if context.get_parameter_source(name) in (
                click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)]
            profile = values.get("profile", "train")
            workload = _workload(values, profile) if "workload" in values else None
            smoke = _smoke(values, context.info_name) if values.get("smoke") or context.info_name == "smoke" \
                else None
            inert = [name for name in given if name.startswith("smoke_")]
            if smoke is None and inert:
                raise click.UsageError("%s only mean something with --smoke" % ", ".join(
                    "--" + name[len("smoke_"):].replace("_", "-") for name in sorted(inert)))
            if smoke is not None and "timeout" not in given:
                values["timeout"] = str(float(SMOKE_TIMEOUT) + (FIT_BUDGET if smoke.repo else 0))
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


def _shown(output_format: str = "text", output: Optional[str] = None, quiet: bool = False, color: str = "auto",
           expires_in: float = 3600.0):
    from preflight.commands.options import OutputOptions

    return OutputOptions(output_format, output, quiet, color, expires_in)


def _show_version(context, parameter, value) -> None:
    if not value or context.resilient_parsing:
        return
    from preflight.knowledge.shipped import as_of

    click.echo("preflight, version %s (knowledge as of %s)" % (__version__, as_of() or "unknown"))
    context.exit()


# --- commands ---------------------------------------------------------------------------------

class _Commands(click.Group):
    """The group of COMMANDS, each declared only when it runs or a listing names it (click's documented lazy group):
    declaring every command's options would cost each run its start-up time."""

    def list_commands(self, context) -> List[str]:
        return sorted(COMMANDS)

    def get_command(self, context, name: str) -> Optional[click.Command]:
        if name not in self.commands and name in COMMANDS:
            entry = COMMANDS[name]
            built = entry.build()
            built.short_help = entry.summary
            built.epilog = "\b\nExamples:\n" + "\n".join("  " + example for example in entry.examples)
            self.add_command(built, name)
        return self.commands.get(name)


def command(name: str) -> click.Command:
    """The command ``name`` of the CLI, declared now if it was not yet (KeyError: no such command)."""
    found = cli.get_command(None, name)
    if found is None:
        raise KeyError(name)
    return found


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="Show the version and the date of preflight's release knowledge, and exit.")
def cli() -> None:
    """Find what will make a GPU training or inference job fail, before it starts.

    \b
    Exit codes: 0 passed, 1 a check failed, 2 bad usage, input or output, 3 internal error,
    4 (slurm) scontrol failed, 5 (slurm) unknown, 78 (exec) checks kept the command from
    starting, 130/143 interrupted; exec ends with its command's status; see each command's --help.

    \b
    Documentation (in the source tree and the sdist): README.md, and
      docs/workstation.md     check, diagnose, fixes, the JSON report
      docs/capacity.md        will a workload fit: the method and its limits
      docs/slurm.md           health check, prolog, node health
      docs/kubernetes.md      exec, init containers, DaemonSet, NFD, NPD, serve, Prometheus
      docs/fleet.md           many nodes at once
      docs/configuration.md   site configuration, options, environment, exit codes
      docs/writing-rules.md   the default rules and writing your own
      docs/rules.md           every rule, fact and known failure (generated)
      docs/architecture.md    how preflight is built and where new code goes
    """


def _build_check() -> click.Command:
    @click.command("check")
    @declare(CHECK)
    @click.option("--format", "output_format", type=click.Choice(format_names("report")), default="text", show_default=True,
                  help="text for people; json (preflight.report/1); jsonl (the same, one line); junit for CI; prometheus for node_exporter's textfile "
                       "collector; nfd for Node Feature Discovery's features.d; npd for node-problem-detector "
                       "(exit 0 OK, 1 problem, 2 unknown).")
    @OUTPUT
    @click.option("--expires-in", default="1h", show_default=True, metavar="DURATION",
                  help="With --format nfd: NFD drops the labels if the file is not rewritten within this time (0: never).")
    @click.option("-q", "--quiet", is_flag=True, help="Show only failures, warnings and errors.")
    @click.option("--color", type=_COLORS, default="auto", show_default=True,
                  help="Colour the text report (auto: only on a terminal, never when NO_COLOR is set).")
    @declare(KEEP)
    @click.option("--smoke", is_flag=True, help="Also run the active test (as preflight smoke: it loads the GPUs for up "
                  "to --timeout, 60 s by default with --smoke) and judge its results with the other rules.")
    @check_options(PROBE, WORKLOAD, FIT, SMOKE)
    def check(options, output_format, output, expires_in, quiet, color, report_dir, syslog) -> int:
        """Check this machine and environment against the rules; print a report with a fix for every problem."""
        from preflight.commands import check as command

        return command.main(options, _shown(output_format, output, quiet, color, _duration("--expires-in", expires_in)),
                            _warn, _kept(report_dir, syslog))
    return check


def _build_smoke() -> click.Command:
    @click.command("smoke")
    @click.option("--format", "output_format", type=click.Choice(format_names("report")), default="text", show_default=True,
                  help="As check: text, json (preflight.report/1), jsonl, junit, prometheus, nfd, npd.")
    @OUTPUT
    @click.option("-q", "--quiet", is_flag=True, help="Show only failures, warnings and errors.")
    @click.option("--color", type=_COLORS, default="auto", show_default=True,
                  help="Colour the text report (auto: only on a terminal, never when NO_COLOR is set).")
    @declare(KEEP)
    @check_options(PROBE, WORKLOAD, SMOKE, [click.option("--strict", is_flag=True, help="Fail (exit 1) on warnings too."),
                                            setting("select", shell_complete=_complete("rules")),
                                            setting("ignore", shell_complete=_complete("rules")), CONFIG])
    def smoke(options, output_format, output, quiet, color, report_dir, syslog) -> int:
        """Run short, bounded, real work on the GPUs in the job's interpreter and judge it: memory patterns, matrix
        products against a CPU reference (FP32, TF32, FP16, BF16), throughput against the node's other GPUs of the
        same model and NVIDIA's datasheet for the model, a training step with AMP and cuDNN, peer access and an all-reduce over the local GPUs (against their NVLink or PCIe links); with
        --workload and --repo, that workload's training steps measured in the user's YOLOv9 checkout.

        \b
        Everything runs in --python's interpreter (else this one) with its torch, in its own process group, killed
        at --timeout (60 s by default; with --repo 300 s, 240 of them the measured fit's own budget); a test that
        finishes is judged even if the deadline cuts a later one.
        --select and --ignore choose among the smoke rules, and so which tests run (--select smoke.memory runs
        only the memory test). It loads the GPUs: slurm and serve never run it by default.
        Exit codes: 0 passed, 1 a check failed, 2 bad usage.
        """
        from preflight.commands import check as command
        from preflight.probes.smoke import TEST_OF_RULE, not_smoke, rules_for, tests_for

        # --select and --ignore choose among smoke's rules, and so which of its tests run.
        chosen = options.select if "select" in options.given and options.select else ("smoke",)
        others = not_smoke(chosen)
        if others:
            raise click.BadParameter("%s: smoke runs only its own rules (%s)" % (
                ", ".join(others), ", ".join(["smoke.torch"] + list(TEST_OF_RULE))), param_hint="--select")
        # The level's tests, unless --select names rules itself.
        rules = rules_for(chosen, options.ignore, options.smoke.tests if chosen == ("smoke",) else ())
        if not rules:
            raise click.BadParameter("no smoke test is left to run after --select and --ignore",
                                     param_hint="--select")
        options = options.replace(select=("smoke.torch",) + rules, given=options.given | {"select"},
                                  smoke=options.smoke._replace(tests=tests_for(rules)))
        return command.main(options, _shown(output_format, output, quiet, color), _warn, _kept(report_dir, syslog))
    return smoke


def _build_facts() -> click.Command:
    @click.command("facts")
    @click.option("--list", "list_facts", is_flag=True, help="List the facts rules can read instead of collecting them.")
    @click.option("--format", "output_format", type=click.Choice(format_names("facts")), default="json", show_default=True,
                  help="json: the snapshot (preflight.facts/1); text: a block to paste into a bug report.")
    @OUTPUT
    @check_options(PROBE)
    def facts(options, list_facts, output_format, output) -> int:
        """Print everything the probes see, as JSON (save it and replay it with 'check --facts FILE'), or as a short
        text block for a bug report (--format text)."""
        from preflight.commands import facts as command

        return command.list_facts() if list_facts else command.main(options, _shown(output_format, output))
    return facts


def _build_rules() -> click.Command:
    @click.command("rules")
    @setting("profile", type=click.Choice(PROFILES), metavar=None, help="Only the rules of this profile.")
    @click.option("--format", "output_format", type=click.Choice(format_names("rules")), default="text",
                  show_default=True)
    @setting("rules", help="Add or override rules (repeatable).")
    def list_rules(profile, output_format, rules_paths) -> int:
        """List the rules (the defaults plus any --rules)."""
        from preflight.commands import rules

        return rules.list_rules(list(rules_paths), profile, output_format)
    return list_rules


def _build_explain() -> click.Command:
    @click.command("explain")
    @click.argument("rule_id", shell_complete=_complete("explain"))
    @setting("rules", help="Add or override rules (repeatable).")
    def explain(rule_id, rules_paths) -> int:
        """Show one rule or known failure in full: what it checks or recognises, why, its source and its fix."""
        from preflight.commands import rules

        return rules.explain(rule_id, list(rules_paths))
    return explain


def _build_diagnose() -> click.Command:
    @click.command("diagnose")
    @click.argument("log", required=False, metavar="[LOG|-]", shell_complete=_complete_files)
    @click.option("--format", "output_format", type=click.Choice(format_names("diagnosis")), default="text",
                  show_default=True)
    @click.option("--facts", "facts_file", metavar="FILE", multiple=True, callback=_one_facts_file, shell_complete=_complete_files,
                  help="Make fixes concrete with a saved snapshot instead of probing.")
    @setting("facts_from", default="auto", show_default=True)
    @click.option("--no-facts", is_flag=True, help="Do not look at this machine: the same as --facts-from log.")
    @setting("profile", type=click.Choice(PROFILES), metavar=None, default="train", show_default=True,
             help="Profile of the related check rules shown with each problem.")
    @click.option("--list", "list_catalog", is_flag=True, help="List the known failures instead of reading a log.")
    @click.option("--color", type=_COLORS, default="auto", show_default=True)
    @OUTPUT
    @CONFIG
    @check_options(PROBE)
    def diagnose(options, log, output_format, no_facts, list_catalog, color, output) -> int:
        """Read a failed run's log (a file, '-' or a pipe) and name each known problem with its cause and fix.

        \b
        Exit codes: 0 nothing known found, 1 at least one known problem, 2 bad input.
        """
        from preflight.commands import diagnose as command

        if list_catalog:
            from preflight.commands import rules

            return rules.list_failures(options.rules_paths)
        if options.facts_file and (no_facts or options.facts_from == "log"):
            raise click.UsageError("--facts FILE and --no-facts (--facts-from log) contradict each other: give one")
        if no_facts:
            if "facts_from" in options.given and options.facts_from != "log":
                raise click.UsageError("--no-facts is --facts-from log; --facts-from %s contradicts it" % options.facts_from)
            options = options.replace(facts_from="log", given=options.given | {"facts_from"})
        if log is None:
            if sys.stdin is not None and sys.stdin.isatty():
                raise click.UsageError("give a log file, or pipe one in: preflight diagnose train.log / ... | preflight diagnose -")
            log = "-"
        return command.main(log, options, _shown(output_format, output, color=color), _warn)
    return diagnose


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


def _declared(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """plan --slurm-comment: the comment's declaration as the options of those names (--img for img=640), each
    converted and checked by its own declaration; an option also on the command line is a usage error."""
    from preflight.integrations import slurm_submit

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


def _build_plan() -> click.Command:
    @click.command("plan")
    @declare(workload_group(planned=True))
    @click.option("--gpu", "gpu_filters", multiple=True, metavar="NAME", shell_complete=_complete("gpus"),
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
    @click.option("--color", type=_COLORS, default="auto", show_default=True,
                  help="Colour the text (auto: only on a terminal, never when NO_COLOR is set).")
    @click.option("--facts", "facts_file", metavar="FILE", multiple=True, callback=_one_facts_file, shell_complete=_complete_files,
                  help="This machine's GPUs from a saved snapshot.")
    @click.option("--nvml-fixture", metavar="FILE", envvar="PREFLIGHT_NVML_FIXTURE", shell_complete=_complete_files,
                  help="This machine's GPUs from a replayed NVML recording. [env: PREFLIGHT_NVML_FIXTURE]")
    @setting("timeout", default="10", show_default=True)
    @setting("rules", help="Add workloads ([[workload]]) or GPUs ([[gpu]]) from a .toml file (repeatable).")
    @CONFIG
    @check_options(SLURM_JOB)
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
        from preflight.commands import plan as command

        slurm = {"comment": slurm_comment, "gres": slurm_gres, "gpus": slurm_gpus,
                 "gpus_per_node": slurm_gpus_per_node, "nodes": slurm_nodes}
        if any(value is not None for value in slurm.values()):
            if gpu_filters or gpu_memory is not None or compute_capability is not None:
                raise click.UsageError("the Slurm mode judges the GPU type the job asks for: leave out --gpu, "
                                       "--gpu-memory and --cc")
            if output_format not in format_names("submission"):
                raise click.UsageError("the Slurm mode writes %s, not %s" % (
                    " or ".join(format_names("submission")), output_format))
            return command.submission_main(options, slurm, gpus, _shown(output_format, output), _warn)
        if options.workload is None:
            raise click.UsageError("Missing option '--workload'.")
        if compute_capability is not None and gpu_memory is None:
            raise click.UsageError("--cc describes the GPU --gpu-memory gives; add --gpu-memory SIZE")
        if gpu_memory is not None and gpu_filters:
            raise click.UsageError("--gpu-memory plans for that GPU alone; leave out --gpu")
        custom = command.custom_gpu(gpu_memory, compute_capability) if gpu_memory is not None else None
        return command.main(options, list(gpu_filters), _shown(output_format, output, color=color), _warn, custom,
                            1 if gpus is None else gpus)
    return plan


def _build_fleet() -> click.Command:
    @click.command("fleet")
    @click.argument("paths", nargs=-1, required=True, metavar="PATH|URL|-...", shell_complete=_complete_files)
    @click.option("--baseline", metavar="NODE|FILE",
                  help="A known-good node (its name among the files read) or its report or snapshot file: list the "
                       "facts on which each node differs from it.")
    @click.option("--nodes", "nodes_of", metavar="RULE[:GROUP]", multiple=True,
                  help="Print only the folded list of the nodes RULE fails or warns on (GROUP: those given its Nth "
                       "fix, as the report numbers them), to paste into scontrol or pdsh; empty when no node has it. "
                       "Given several times, from one read of the files: a line 'RULE[:GROUP] LIST' for each. "
                       "Exit 0, or 2 when a RULE is not a rule of the nodes read.")
    @click.option("--jobs", type=click.IntRange(1, 256), metavar="N", help="Processes that read and judge the files of a folder or list "
                  "of 200 or more [default: the CPUs preflight may use, at most 8; 1: all in this process].")
    @click.option("--format", "output_format", type=click.Choice(format_names("fleet")),
                  default="text", show_default=True)
    @OUTPUT
    @setting("rules", help="Add or override rules (as check --rules) for the snapshots evaluated here.")
    @check_options(CHECK_WITHOUT_FACTS)
    def fleet(options, paths, baseline, nodes_of, jobs, output_format, output) -> int:
        """Many nodes at once: reports and facts snapshots (files or folders of .json and .json.gz; '-' reads a
        stream of them from standard input; http://HOST:PORT reads a preflight serve's /report, 32 at a time, 10 s
        each), snapshots evaluated here with the same rules and options as check. Which nodes are not ready and why
        (root causes first, each group of nodes with its own fix, node lists folded as Slurm folds them:
        gpu-b[001-040,044]), and the drift."""
        from preflight.commands import fleet as command

        return command.main(options, list(paths), baseline, _shown(output_format, output), _warn, list(nodes_of),
                            jobs)
    return fleet


def _build_serve() -> click.Command:
    @click.command("serve")
    @declare(NODE_WATCH)
    @click.option("--listen", default="127.0.0.1:10480", show_default=True, metavar="HOST:PORT",
                  help="Where to serve /healthz, /metrics and /report (0.0.0.0:10480 for every interface; port 0: any).")
    @click.option("--interval", default="60s", show_default=True, metavar="DURATION",
                  help="How often to check (requests never start a check).")
    @click.option("--nfd-output", metavar="FILE", shell_complete=_complete_files,
                  help="Also write the NFD feature file after every check (as check --format nfd --output FILE).")
    @click.option("--expires-in", default="1h", show_default=True, metavar="DURATION",
                  help="With --nfd-output: NFD drops the labels if the file is not rewritten within this time.")
    @check_options(PROBE, WORKLOAD, FIT)
    def serve(options, listen, interval, nfd_output, expires_in) -> int:
        """Check every interval and serve the latest result over HTTP: /healthz (200 OK, 503 failing) for
        Kubernetes probes, /metrics for Prometheus, /report as JSON. SIGTERM stops it."""
        from preflight.commands import serve as command

        seconds = _duration("--interval", interval)
        if seconds < 1:
            raise click.UsageError("--interval must be at least 1s, got %s" % interval)
        return command.main(options, listen, seconds, nfd_output, _duration("--expires-in", expires_in), _warn)
    return serve


def _build_schema() -> click.Command:
    from preflight.commands.schema import DOCUMENTS

    @click.command("schema")
    @click.argument("name", required=False, type=click.Choice(list(DOCUMENTS)))
    @OUTPUT
    def schema(name, output) -> int:
        """Print the JSON Schema (draft 2020-12) of a JSON document preflight writes: report (check --format json),
        diagnosis, plan, facts or fleet; or of the site configuration it reads (config, its TOML as JSON); without
        NAME, list them."""
        from preflight.commands import schema as command

        return command.main(name, output)
    return schema


def _build_completion() -> click.Command:
    @click.command("completion")
    @click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
    def completion(shell) -> int:
        """Print a shell completion script: commands, options, rule ids (--select, --ignore, explain), workloads and
        catalog GPUs. bash: eval "$(preflight completion bash)" in ~/.bashrc; zsh: in ~/.zshrc; fish:
        preflight completion fish > ~/.config/fish/completions/preflight.fish"""
        from preflight.commands import completion as command

        return command.main(cli, shell)
    return completion


def _build_exec() -> click.Command:
    @click.command("exec", context_settings={"allow_interspersed_args": False})
    @declare(CHECK)
    @click.option("--format", "output_format", type=click.Choice(["text", "json", "jsonl"]), default="text",
                  show_default=True, help="Format of the report, written to standard error. text: one line when the "
                                          "checks pass, the full report when they fail; jsonl: the JSON report on one "
                                          "line, for log shippers.")
    @click.option("-v", "--verbose", is_flag=True, help="With text: the full report even when the checks pass.")
    @click.option("-q", "--quiet", is_flag=True, help="In a full report, only failures, warnings and errors.")
    @click.option("--warn-only", is_flag=True, help="Start the command even when checks fail (the report still says so).")
    @click.option("--retry-timeout", default="0", show_default=True, metavar="DURATION",
                  help="Keep checking until they pass or this much time has gone (30s, 5m): for a GPU or driver that "
                       "comes up late.")
    @click.option("--sleep", default="1s", show_default=True, metavar="DURATION", help="Wait between checks.")
    @click.option("--fail-exit-code", type=click.IntRange(1, 255), default=int(ExitCode.EXEC_BLOCKED), show_default=True,
                  metavar="N", help="Exit with N when the checks keep COMMAND from starting (78 is EX_CONFIG), so a "
                                    "job controller can tell an unfit node from a crashed script.")
    @click.option("--termination-log", default="/dev/termination-log", show_default=True, metavar="FILE",
                  shell_complete=_complete_files,
                  help="When the checks keep COMMAND from starting, write the reason as one line here: the default "
                       "only when it exists (Kubernetes' terminationMessagePath), a FILE given here is created.")
    @declare(KEEP)
    @check_options(PROBE)
    @click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
    def exec_command(options, output_format, verbose, quiet, warn_only, retry_timeout, sleep, fail_exit_code,
                     termination_log, report_dir, syslog, command) -> int:
        """Run the checks, then replace preflight with COMMAND (as a container ENTRYPOINT: preflight exec -- CMD...).

        \b
        The report goes to standard error: one line when the checks pass (--verbose:
        all of it), the full report when they fail. When they fail, COMMAND does not
        start (unless --warn-only): preflight exits 78 (--fail-exit-code) and writes
        the reason to /dev/termination-log when it exists (Kubernetes). Otherwise
        COMMAND takes over this process (same PID, signals and exit status). Extra
        options can come from PREFLIGHT_ARGS (options only: a stray word or '--'
        there is exit 2); PREFLIGHT_SKIP=1 skips the checks (and says so).
        Exit codes: COMMAND's own; 78 checks failed (--fail-exit-code); 2 bad usage;
        126 COMMAND cannot be run; 127 COMMAND not found.
        """
        from preflight.commands import exec as run

        return run.main(options, command, _shown(output_format, quiet=quiet), warn_only,
                        _duration("--retry-timeout", retry_timeout), _duration("--sleep", sleep), _log, _warn,
                        fail_exit_code, termination_log, verbose, _kept(report_dir, syslog))
    return exec_command


def _build_fix() -> click.Command:
    @click.command("fix")
    @declare(check_group("fix", with_facts=False))
    @click.option("--dry-run", is_flag=True, help="Show the plan and what preflight fix would run; change nothing.")
    @click.option("-y", "--yes", is_flag=True, help="Run the plan's pip steps without asking (needed when standard "
                  "input is not a terminal).")
    @click.option("--log", "log_path", metavar="FILE", shell_complete=_complete_files,
                  help="Write pip's output to FILE, a new file [default: a new preflight-fix-*.log in the temporary "
                       "folder, named in the output].")
    @click.option("--format", "output_format", type=click.Choice(format_names("fix")), default="text",
                  show_default=True, help="text for people; json (preflight.fix/1): the plan, what ran, what changed.")
    @OUTPUT
    @check_options(PROBE)
    def fix(options, dry_run, yes, log_path, output_format, output) -> int:
        """Check, then run the plan's pip steps in the job's interpreter, and check again.

        \b
        The plan is check's "Fix first": every failing rule's fix, in order, its pip
        lines for the job's interpreter merged into one transaction per index. fix
        runs only those lines, exactly as printed, in the interpreter of --python, or
        of the active virtual or conda environment (never conda's base environment);
        drivers, sudo, system packages, conda and Slurm steps stay yours, and it says
        which. It asks first on a terminal; elsewhere it needs --yes. pip's output
        goes to a log file it names; a pip step that fails stops the plan.
        Exit codes: 0 the check passes afterwards, 1 it still fails, 2 bad usage (no
        interpreter to change, no --yes without a terminal).
        """
        from preflight.commands import fix as command

        return command.main(options, _shown(output_format, output), dry_run, yes, log_path,
                            lambda question: click.confirm(question, default=False, err=True), _warn)
    return fix


def _build_slurm() -> click.Command:
    @click.command("slurm")
    @declare(check_group("slurm"))
    @click.option("--prolog", is_flag=True,
                  help="Run as slurmd's Prolog: call no Slurm command, check the job's GPUs (SLURM_JOB_GPUS, else "
                       "CUDA_VISIBLE_DEVICES) and what every job shares, exit 1 only for a fault that must stop this job; "
                       "other GPUs' faults are logged and left to the health program.")
    @click.option("--node", metavar="NAME", help="Slurm node name [default: SLURMD_NODENAME, else the short host name].")
    @click.option("--scontrol", metavar="PATH", shell_complete=_complete_files, help="scontrol to use [default: found in PATH or the usual install folders].")
    @click.option("--slurm-conf", metavar="FILE", shell_complete=_complete_files,
                  help="slurm.conf for scontrol [default: SLURM_CONF, else /etc/slurm/slurm.conf, /etc/slurm-llnl/slurm.conf, "
                       "/usr/local/etc/slurm.conf or /opt/slurm/etc/slurm.conf, else scontrol's own].")
    @click.option("--scontrol-timeout", default="10s", show_default=True, metavar="DURATION")
    @click.option("--dry-run", is_flag=True, help="Say what would be done to the node, but do not change it; with "
                  "--prolog, judge the job as the prolog would, say the exit it would give, and exit 0.")
    @click.option("--submit-table", metavar="FILE", shell_complete=_complete_files,
                  help="Write the submit filters' table (Lua data: the capacity model, the GPU types, the site's "
                       "policy) to FILE, preflight-fit.lua beside slurm.conf, and exit; nothing is checked.")
    @declare(KEEP)
    @check_options(PROBE)
    def slurm(options, prolog, node, scontrol, slurm_conf, scontrol_timeout, dry_run, submit_table, report_dir,
              syslog) -> int:
        """Slurm HealthCheckProgram (drain a failing node, resume it when it passes) and Prolog (--prolog).

        \b
        Health program: drains with Reason="preflight: <rule-id> <message>";
        resumes only nodes whose reason starts with "preflight:". A node whose
        reason is anyone else's (DOWN, FAIL, MAINT, DRAIN by an administrator) is
        never drained over or resumed. Exit codes: 0 checks pass, 1 checks fail
        (the node is drained), 2 bad usage, 4 scontrol missing, failing or not
        answering, 5 unknown: a probe timed out (not NVML) or the site
        configuration or rules cannot be used; the node is left as it is. slurmd
        changes nothing on the exit code of a health program: only preflight's
        own scontrol call drains.
        \b
        Prolog (--prolog): calls no Slurm command. Exit codes: 0 the job may start
        (also when preflight cannot judge: a broken configuration, a probe that
        timed out, logged), 1 a fault of the job's GPUs or of the whole node:
        Slurm drains the node ("Prolog error") and requeues the job, 2 bad usage.
        \b
        The profile is node (hardware and driver); train or inference need
        --python PATH, the job's interpreter.
        \b
        --submit-table FILE writes the table the submit filters decide from
        (deploy/slurm/cli_filter.lua, job_submit.lua): write it again when
        preflight, the site configuration or the cluster's GPU types change.
        """
        from preflight.commands import slurm as command
        from preflight.integrations.slurm import require_job_interpreter

        if submit_table is not None:
            if prolog or dry_run:
                raise click.UsageError("--submit-table writes the filters' table and checks nothing: leave out %s"
                                       % ("--prolog" if prolog else "--dry-run"))
            return command.write_submit_table(options, submit_table, _log, _warn)
        require_job_interpreter(options.profile, options.python)  # before asking scontrol anything
        kept = _kept(report_dir, syslog)
        if prolog:
            given = [name for name, value in (("--node", node), ("--scontrol", scontrol), ("--slurm-conf", slurm_conf))
                     if value]
            if given:
                _warn("--prolog calls no Slurm command: %s ignored (options of the health program's line)"
                      % ", ".join(given))
            return command.prolog(options, _log, _warn, kept, dry_run)
        timeout = _duration("--scontrol-timeout", scontrol_timeout)
        if timeout <= 0:
            raise click.BadParameter("must be more than 0, got %s" % scontrol_timeout, param_hint="--scontrol-timeout")
        return command.main(options, node, scontrol, slurm_conf, timeout, dry_run, _log, _warn, kept)
    return slurm


def _build_config() -> click.Command:
    @click.group("config")
    def config_group() -> None:
        """The site configuration (--config, PREFLIGHT_CONFIG or /etc/preflight/config.toml)."""


    @config_group.command("show")
    @CONFIG
    @click.option("--host", metavar="NAME", help="Match [[match]] hosts against this short host name [default: this host].")
    @click.option("--gpu", "gpus", multiple=True, metavar="NAME",
                  help="Match [[match]] gpus against this GPU name (repeatable) [default: this machine's, from NVML].")
    @click.option("--partition", "partitions", multiple=True, metavar="NAME",
                  help="Slurm partitions to match (repeatable) [default: SLURM_JOB_PARTITION, else unknown].")
    @click.option("--feature", "features", multiple=True, metavar="NAME", help="Slurm node features to match (repeatable).")
    @click.option("--command", "for_command", type=click.Choice(list(COMMAND_DEFAULTS)), default="check",
                  show_default=True, help="Whose built-in defaults to show (slurm: profile node, --expect-gpus auto; "
                                          "serve: profile node).")
    @click.option("--nvml-fixture", metavar="FILE", envvar="PREFLIGHT_NVML_FIXTURE", shell_complete=_complete_files,
                  help="GPU names from a replayed NVML recording. [env: PREFLIGHT_NVML_FIXTURE]")
    @click.option("--format", "output_format", type=click.Choice(format_names("config")), default="text", show_default=True)
    def config_show(config, host, gpus, partitions, features, for_command, nvml_fixture, output_format) -> int:
        """Print the settings in effect here (profile, select, ignore, set, rules, expect_gpus, timeout) and where
        each came from: the built-in default, [defaults], or the [[match]] that set it, with its line.

        \b
        Exit codes: 0 shown, 2 the configuration file is bad (file, line and key are named).
        """
        from preflight.commands import config as command
        from preflight.commands.options import CheckOptions

        profile, expect_gpus = COMMAND_DEFAULTS[for_command]
        options = CheckOptions(profile=profile, expect_gpus=expect_gpus, config=config, nvml_fixture=nvml_fixture,
                               command="config")
        return command.show(options, host, gpus, partitions, features, output_format, click.echo, _warn)


    @config_group.command("validate")
    @click.argument("files", nargs=-1, required=True, metavar="FILE...", shell_complete=_complete_files)
    @click.option("--submit-table", "tables", multiple=True, metavar="FILE", shell_complete=_complete_files,
                  help="Also say whether this submit filters' table is stale for the configuration [default: "
                       "preflight-fit.lua beside slurm.conf, where there is one].")
    def config_validate(files, tables) -> int:
        """Check whole site configuration files, for a rollout pipeline (like nginx -t or goss validate): every section,
        whether it matches this host or not: keys, values, selectors, rule ids and settings in set, select and ignore,
        and rules paths. Each problem is printed with its file and line.

        \b
        Exit codes: 0 every file is valid, 2 a file is not (each problem named).
        """
        from preflight.commands import config as command

        return command.validate(files, click.echo, _warn, tables)
    return config_group


def _option_arity(command: click.Command):
    """Each option name of ``command`` -> whether it takes a value."""
    arity = {}
    for param in command.params:
        if isinstance(param, click.Option):
            for name in param.opts + param.secondary_opts:
                arity[name] = not (param.is_flag or param.count)
    return arity


class Command(NamedTuple):
    """A command of the command line: the function that declares it (its click options; run only when the command
    runs or a listing names it), its one-line summary for the command list, and the examples that end its --help
    (a test parses every example with the real parser)."""

    build: Callable[[], click.Command]
    summary: str
    examples: Tuple[str, ...]


# Every command, once: help, completion and the command list are made from this table.
COMMANDS: Dict[str, Command] = {
    "check": Command(_build_check, "Check this machine and environment; a fix for every problem.", (
        "preflight check",
        "preflight check --profile node --format json --output report.json",
        "preflight check --python ~/envs/yolov9/bin/python --workload yolov9-c --batch 16")),
    "completion": Command(_build_completion, "Print a shell completion script (bash, zsh, fish).", (
        "preflight completion bash",
        "preflight completion fish")),
    "config": Command(_build_config, "Show or validate the site configuration; where each setting comes from.", (
        "preflight config show", "preflight config show --host gpu01 --gpu 'NVIDIA H100 80GB HBM3'",
        "preflight config validate /etc/preflight/config.toml")),
    "diagnose": Command(_build_diagnose, "Name what went wrong in a failed run's log, and how to fix it.", (
        "preflight diagnose train.log", "preflight diagnose --format json runs/exp/train.log")),
    "exec": Command(_build_exec, "Check, then run a command in preflight's place (container entrypoints).", (
        "preflight exec -- python train_dual.py --batch-size 16 --data data/coco.yaml",
        "preflight exec --retry-timeout 5m -- true")),
    "explain": Command(_build_explain, "Show one rule or known failure in full: what, why, source, fix.", (
        "preflight explain gpu.health", "preflight explain cuda.oom")),
    "facts": Command(_build_facts, "Print what the probes see (JSON), or a block for bug reports.", (
        "preflight facts --output facts.json", "preflight facts --format text")),
    "fix": Command(_build_fix, "Check, run the plan's pip steps in the job's interpreter, check again.", (
        "preflight fix --dry-run",
        "preflight fix --python ~/envs/yolov9/bin/python --requirements requirements.txt --yes")),
    "fleet": Command(_build_fleet, "Many nodes' reports and snapshots at once: who fails, why, drift.", (
        "preflight fleet /shared/preflight/ --profile node",
        "preflight fleet reports/ --format html --output fleet.html",
        "preflight fleet http://gpu01:10480 http://gpu02:10480 --baseline gpu01")),
    "plan": Command(_build_plan, "Will a workload fit, and on which GPU.", (
        "preflight plan --workload yolov9-e --batch 64 --gpus 8 --gpu h100",
        "preflight plan --workload gelan-c --labels datasets/mine/labels --gpu-memory 6GiB",
        "preflight plan --slurm-comment 'preflight: workload=gelan-c batch=64' --slurm-gres gpu:h200:1")),
    "rules": Command(_build_rules, "List the rules (the defaults plus any --rules).", (
        "preflight rules --profile node", "preflight rules --format markdown")),
    "schema": Command(_build_schema, "Print the JSON Schema of a document preflight writes or reads.", (
        "preflight schema", "preflight schema report --output report.schema.json")),
    "serve": Command(_build_serve, "Check every interval; serve /healthz, /metrics, /report.", (
        "preflight serve --listen 0.0.0.0:10480 --profile node --interval 5m",
        "preflight serve --profile node --nfd-output /etc/kubernetes/node-feature-discovery/features.d/preflight")),
    "smoke": Command(_build_smoke, "Run short real work on the GPUs and judge it: the active test.", (
        "preflight smoke --python /opt/conda/envs/yolov9/bin/python",
        "preflight smoke --device cpu --timeout 120",
        "preflight smoke --workload gelan-c --batch 16 --img 640 --repo ~/yolov9")),
    "slurm": Command(_build_slurm, "Slurm health check and prolog: drain a failing node, resume it.", (
        "preflight slurm --report-dir /shared/preflight --syslog", "preflight slurm --dry-run --node gpu01",
        "preflight slurm --prolog")),
}


def main(argv: Optional[List[str]] = None) -> None:
    from preflight.integrations.entrypoint import with_environment_args

    _handle_termination()
    process = sys.modules.get("preflight.probes.process")
    if process is not None:
        process.reopen()  # an earlier run in this process closed it on its way out
    argv = list(sys.argv[1:] if argv is None else argv)
    as_prolog = _runs_as_prolog(argv, os.environ)
    as_nagios = _asks_nagios(argv, os.environ)
    could_not_run = None  # why the command did not run (a Nagios plugin reports that as UNKNOWN)
    try:
        argv = with_environment_args(argv, os.environ, lambda name: _option_arity(command(name)))
        code = cli.main(args=argv, prog_name="preflight", standalone_mode=False)
    except click.ClickException as exc:
        shown = io.StringIO()
        exc.show(file=shown)  # the option's value is the user's: escaped like every other message
        say(shown.getvalue())
        code = exc.exit_code  # 2 for usage errors
        could_not_run = exc.format_message()
    except click.Abort:
        click.echo("preflight: interrupted", err=True)
        code = ExitCode.INTERRUPTED
        could_not_run = "interrupted"
    except PreflightError as exc:
        say("preflight: error: %s" % exc)
        code = exc.exit_code  # 2 for bad input; 4 when Slurm's scontrol fails (preflight slurm)
        could_not_run = str(exc)
    except KeyboardInterrupt:
        click.echo("preflight: interrupted", err=True)
        code = ExitCode.INTERRUPTED
        could_not_run = "interrupted"
    except Exception as exc:  # a bug: say so plainly, traceback only on request
        if os.environ.get("PREFLIGHT_DEBUG"):
            raise
        say("preflight: internal error: %s: %s\n  This is a bug in preflight; rerun with PREFLIGHT_DEBUG=1 "
            "for the traceback and report it." % (type(exc).__name__, exc))
        code = ExitCode.INTERNAL
        could_not_run = "internal error: %s" % type(exc).__name__
    code = code if isinstance(code, int) else 0
    if as_nagios and could_not_run is not None and code != 0:
        # A monitoring system reads a plugin's 2 as CRITICAL: a check that did not run is UNKNOWN (3), said on
        # standard output, where it reads the plugin's line.
        from preflight.files.output import write_stdout
        from preflight.render import nagios

        try:
            write_stdout(nagios.could_not_run(could_not_run))
        except PreflightError:  # standard output is what failed: the exit code still says UNKNOWN
            pass
        code = nagios.UNKNOWN
    if as_prolog and code not in (ExitCode.OK, ExitCode.FAILED) and code < 128:
        # Slurm drains the node on any other exit of a prolog ("Prolog error"), which nothing resumes: preflight's
        # own trouble (bad usage, a bad environment variable, a bug) must never take a node out of service.
        say("preflight: prolog: preflight could not judge this job (exit %d, above); the job starts "
            "unchecked: a prolog fails a job only for a fault of its GPUs or of the node" % code)
        code = ExitCode.OK
    _exit(code)


def _asks_nagios(argv: List[str], environ) -> bool:
    """Whether the command line, with PREFLIGHT_ARGS before it where the command takes them, asks for
    --format nagios (read before click, which may refuse the line; the last --format wins, as in click)."""
    from preflight.integrations.entrypoint import ARGS_COMMANDS, ARGS_VARIABLE

    words = list(argv[1:])
    if argv and argv[0] in ARGS_COMMANDS:
        words = (environ.get(ARGS_VARIABLE) or "").split() + words  # split plainly: a bad quote is still seen
    chosen = None
    for word, following in zip(words, words[1:] + [""]):
        if word == "--":
            break
        if word.startswith("--format="):
            chosen = word.split("=", 1)[1]
        elif word == "--format":
            chosen = following
    return chosen == "nagios"


def _runs_as_prolog(argv: List[str], environ) -> bool:
    """Whether this command line is ``preflight slurm --prolog`` (the flag on the line or in PREFLIGHT_ARGS)."""
    words = [word for word in argv if not word.startswith("-")]
    flags = list(argv) + (environ.get("PREFLIGHT_ARGS") or "").split()
    return bool(words) and words[0] == "slurm" and "--prolog" in flags


def _exit(code: int) -> None:
    _stop_helpers()
    collect = sys.modules.get("preflight.facts.collect")
    if collect is not None and collect.abandoned_probes():
        # A probe thread is stuck in a library call: leave without waiting for it.
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        os._exit(code)
    sys.exit(code)


def _stop_helpers() -> None:
    """Kill every helper process (a --python probe, torch's architecture query) still running."""
    process = sys.modules.get("preflight.probes.process")
    if process is not None:
        process.kill_all()


def _on_signal(signum, frame) -> None:
    _stop_helpers()
    try:
        os.write(2, b"preflight: terminated\n")
    except OSError:
        pass
    os._exit(128 + signum)


def _handle_termination() -> None:
    """SIGTERM (and SIGHUP) must not leave helpers behind: kill them, then leave with 128 + the signal."""
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            try:
                signal.signal(getattr(signal, name), _on_signal)
            except (ValueError, OSError):  # not the main thread (tests call main in threads)
                pass
