"""The command line: parse options, call ``preflight.commands``, print, exit.

Exit codes (stable):
  0  every error-severity rule passed (warnings allowed unless --strict)
  1  at least one error-severity rule failed or could not be evaluated
  2  usage error, or a bad rule, facts or fixture file
  3  internal error in preflight (a bug: please report it)
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional

import click

from preflight import __version__
from preflight.errors import EXIT_INTERNAL, EXIT_USAGE, PreflightError

_PROFILES = ("train", "inference", "node")


def _split(values) -> List[str]:
    """Repeatable options that also take comma-separated lists: --select gpu,driver."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _warn(message: str) -> None:
    click.echo("preflight: warning: %s" % message, err=True)


def _use_color(choice: str) -> bool:
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return sys.stdout.isatty()


_probe_options = [
    click.option("--python", "python", metavar="PATH",
                 help="Probe this interpreter's environment (the training environment) instead of preflight's own."),
    click.option("--nvml-fixture", metavar="FILE", envvar="PREFLIGHT_NVML_FIXTURE",
                 help="Replay a recorded machine's NVML answers (nvml-fixture/1 JSON) instead of asking the driver. "
                      "[env: PREFLIGHT_NVML_FIXTURE]"),
    click.option("--timeout", type=float, default=10.0, show_default=True, metavar="SECONDS",
                 help="Deadline for all probing; a probe that has not answered by then is reported unknown."),
    click.option("--no-cache", is_flag=True, help="Ask torch for its GPU architectures again instead of using the cache."),
    click.option("--rules", "rules_paths", multiple=True, metavar="PATH",
                 help="Add or override rules from a .toml file or a folder of them (repeatable)."),
]


_workload_options = [
    click.option("--workload", metavar="ID", help="Size a workload against free GPU memory (yolov9-t, -s, -m, -c, -e)."),
    click.option("--task", type=click.Choice(["train", "inference"]),
                 help="What the workload does [default: train, or inference with --profile inference]."),
    click.option("--batch", type=int, metavar="N", help="Total batch size (under DDP split across the GPUs) "
                 "[default: 16 to train, as train_dual.py; 1 for inference]."),
    click.option("--img", "imgsz", type=int, default=640, show_default=True, metavar="N", help="Image size (--img)."),
    click.option("--fp32", is_flag=True, help="Training without AMP (train_dual.py uses AMP by default)."),
    click.option("--half", is_flag=True, help="Inference in FP16, as detect_dual.py --half (FP32 by default)."),
]


def _workload(workload, task, batch, imgsz, fp32, half, default_task: str):
    from preflight import commands

    if workload is None:
        given = [name for name, value in (("--task", task), ("--batch", batch), ("--fp32", fp32), ("--half", half))
                 if value]
        if given or imgsz != 640:
            raise click.UsageError("%s only mean something with --workload" % ", ".join(given or ["--img"]))
        return None
    return commands.WorkloadOptions(workload, task or default_task, batch, imgsz, fp32, half)


def _with(options):
    def decorate(function):
        for option in reversed(options):
            function = option(function)
        return function
    return decorate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="preflight")
def cli() -> None:
    """Find what will make a GPU training or inference job fail, before it starts.

    \b
    Exit codes: 0 passed, 1 a check failed, 2 bad usage or input file, 3 internal error.
    """


@cli.command()
@click.option("--profile", type=click.Choice(_PROFILES), default="train", show_default=True,
              help="train and inference check the job's environment; node checks hardware and driver only.")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--strict", is_flag=True, help="Fail (exit 1) on warnings too.")
@click.option("-q", "--quiet", is_flag=True, help="Show only failures, warnings and errors.")
@click.option("--select", multiple=True, metavar="ID",
              help="Run only these rules: an id or a dotted prefix (gpu selects gpu.*); repeatable or comma-separated.")
@click.option("--ignore", multiple=True, metavar="ID", help="Skip these rules (id or prefix); the more specific selector wins.")
@click.option("--set", "settings", multiple=True, metavar="RULE.KEY=VALUE",
              help="Change a threshold without editing files, e.g. --set driver.version.min=535 --set gpu.memory.min=24GB.")
@click.option("--facts", "facts_file", metavar="FILE",
              help="Evaluate a snapshot saved by 'preflight facts' instead of probing this machine ('-' reads stdin).")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="Colour the text report (auto: only on a terminal, never when NO_COLOR is set).")
@_with(_probe_options)
@_with(_workload_options)
def check(profile, output_format, strict, quiet, select, ignore, settings, facts_file, color, python, nvml_fixture,
          timeout, no_cache, rules_paths, workload, task, batch, imgsz, fp32, half) -> int:
    """Check this machine and environment against the rules; print a report with a fix for every problem."""
    from preflight import commands

    wanted = _workload(workload, task, batch, imgsz, fp32, half, "inference" if profile == "inference" else "train")
    options = commands.CheckOptions(
        profile=profile, rules_paths=list(rules_paths), select=_split(select), ignore=_split(ignore),
        settings=list(settings), facts_file=facts_file, python=python, nvml_fixture=nvml_fixture, timeout=timeout,
        use_cache=not no_cache, strict=strict, workload=wanted,
    )
    report = commands.check(options, warn=_warn)
    if output_format == "json":
        from preflight.render import json_report

        click.echo(json_report.render(report))
    else:
        from preflight.render import text

        colored = _use_color(color)
        # click.echo strips colour codes off terminals unless told otherwise (--color always).
        click.echo(text.render(report, quiet=quiet, color=colored), color=colored)
    return report.exit_code


@cli.command()
@click.option("--list", "list_facts", is_flag=True, help="List the facts rules can read instead of collecting them.")
@_with(_probe_options)
def facts(list_facts, python, nvml_fixture, timeout, no_cache, rules_paths) -> int:
    """Print everything the probes see, as JSON (save it and replay it with 'check --facts FILE')."""
    if list_facts:
        from preflight.facts.catalog import FACTS

        width = max(len(path) for path in FACTS)
        for fact in FACTS.values():
            click.echo("%s  %-8s  %-7s  %s" % (fact.path.ljust(width), fact.kind, "per-GPU" if fact.per_gpu else "",
                                               fact.description))
        return 0
    from preflight import commands
    from preflight.facts import snapshot

    options = commands.CheckOptions(rules_paths=list(rules_paths), python=python, nvml_fixture=nvml_fixture,
                                    timeout=timeout, use_cache=not no_cache)
    click.echo(snapshot.dumps(commands.facts(options, warn=_warn)))
    return 0


@cli.command("rules")
@click.option("--profile", type=click.Choice(_PROFILES), help="Only the rules of this profile.")
@click.option("--format", "output_format", type=click.Choice(["text", "json", "markdown"]), default="text",
              show_default=True)
@click.option("--rules", "rules_paths", multiple=True, metavar="PATH", help="Add or override rules (repeatable).")
def list_rules(profile, output_format, rules_paths) -> int:
    """List the rules (the defaults plus any --rules)."""
    from preflight import commands
    from preflight.render import rules_doc

    if output_format == "markdown":  # the reference page: rules, facts, and the failure catalog
        from preflight.engine import loader

        ruleset = loader.load(list(rules_paths), failures=True)
        rules = [r for r in ruleset.rules.values() if profile is None or profile in r.profiles]
        click.echo(rules_doc.markdown(rules) + rules_doc.failures_markdown(list(ruleset.failures.values())), nl=False)
        return 0
    ruleset = commands.load_rules(list(rules_paths), warn=_warn)
    rules = [r for r in ruleset.rules.values() if profile is None or profile in r.profiles]
    click.echo(rules_doc.list_text(rules) if output_format == "text" else rules_doc.list_json(rules))
    return 0


@cli.command()
@click.argument("rule_id")
@click.option("--rules", "rules_paths", multiple=True, metavar="PATH", help="Add or override rules (repeatable).")
def explain(rule_id, rules_paths) -> int:
    """Show one rule or known failure in full: what it checks or recognises, why, its source and its fix."""
    from preflight.engine import loader
    from preflight.render import rules_doc

    ruleset = loader.load(list(rules_paths), failures=True)
    for warning in ruleset.warnings:
        _warn(warning)
    if rule_id in ruleset.failures:
        click.echo(rules_doc.explain_failure(ruleset.failures[rule_id]))
    else:
        click.echo(rules_doc.explain(ruleset.get(rule_id, also=ruleset.failures)))
    return 0


@cli.command()
@click.argument("log", required=False, metavar="[LOG|-]")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--facts", "facts_file", metavar="FILE", help="Make fixes concrete with a saved snapshot instead of probing.")
@click.option("--no-facts", is_flag=True,
              help="Do not look at this machine (the log comes from elsewhere): fixes stay generic.")
@click.option("--profile", type=click.Choice(_PROFILES), default="train", show_default=True,
              help="Profile of the related check rules shown with each problem.")
@click.option("--list", "list_catalog", is_flag=True, help="List the known failures instead of reading a log.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True)
@_with(_probe_options)
def diagnose(log, output_format, facts_file, no_facts, profile, list_catalog, color, python, nvml_fixture, timeout,
             no_cache, rules_paths) -> int:
    """Read a failed run's log (a file, '-' or a pipe) and name each known problem with its cause and fix.

    \b
    Exit codes: 0 nothing known found, 1 at least one known problem, 2 bad input.
    """
    from preflight import commands

    if list_catalog:
        from preflight.engine import loader
        from preflight.render import rules_doc

        click.echo(rules_doc.failures_text(list(loader.load(list(rules_paths), failures=True).failures.values())))
        return 0
    if log is None:
        if sys.stdin.isatty():
            raise click.UsageError("give a log file, or pipe one in: preflight diagnose train.log / ... | preflight diagnose -")
        log = "-"
    options = commands.DiagnoseOptions(use_facts=not no_facts, profile=profile, rules_paths=list(rules_paths),
                                       facts_file=facts_file, python=python, nvml_fixture=nvml_fixture,
                                       timeout=timeout, use_cache=not no_cache)
    diagnosis = commands.diagnose(log, options, warn=_warn)
    if output_format == "json":
        import json

        click.echo(json.dumps(diagnosis.to_json(), indent=2))
    else:
        from preflight.render import diagnosis_text

        colored = _use_color(color)
        click.echo(diagnosis_text.render(diagnosis, color=colored), color=colored)
    return diagnosis.exit_code


@cli.command()
@click.option("--workload", required=True, metavar="ID", help="The workload (yolov9-t, -s, -m, -c, -e, or your own).")
@click.option("--task", type=click.Choice(["train", "inference"]), default="train", show_default=True)
@click.option("--batch", type=int, metavar="N", help="Batch size per GPU [default: batch 1, with the largest that fits].")
@click.option("--img", "imgsz", type=int, default=640, show_default=True, metavar="N", help="Image size (--img).")
@click.option("--fp32", is_flag=True, help="Training without AMP.")
@click.option("--half", is_flag=True, help="Inference in FP16 (detect_dual.py --half).")
@click.option("--gpu", "gpu_filters", multiple=True, metavar="NAME",
              help="Only these catalog GPUs (part of the name or the id: 3060, a100-80gb, h200); repeatable.")
@click.option("--format", "output_format", type=click.Choice(["text", "json", "markdown"]), default="text",
              show_default=True)
@click.option("--facts", "facts_file", metavar="FILE", help="This machine's GPUs from a saved snapshot.")
@click.option("--nvml-fixture", metavar="FILE", envvar="PREFLIGHT_NVML_FIXTURE",
              help="This machine's GPUs from a replayed NVML recording. [env: PREFLIGHT_NVML_FIXTURE]")
@click.option("--timeout", type=float, default=10.0, show_default=True, metavar="SECONDS")
@click.option("--rules", "rules_paths", multiple=True, metavar="PATH",
              help="Add workloads ([[workload]]) or GPUs ([[gpu]]) from a .toml file (repeatable).")
def plan(workload, task, batch, imgsz, fp32, half, gpu_filters, output_format, facts_file, nvml_fixture, timeout,
         rules_paths) -> int:
    """Will a workload fit, and which GPU to use: memory needed, whether it fits, and the largest batch, per GPU."""
    from preflight import commands
    from preflight.render import plan as render

    options = commands.CheckOptions(rules_paths=list(rules_paths), facts_file=facts_file, nvml_fixture=nvml_fixture,
                                    timeout=timeout, workload=commands.WorkloadOptions(workload, task, batch, imgsz,
                                                                                       fp32, half))
    result = commands.plan(options, list(gpu_filters), warn=_warn)
    click.echo({"text": render.text, "json": render.as_json, "markdown": render.markdown}[output_format](result))
    return 0


def main(argv: Optional[List[str]] = None) -> None:
    try:
        code = cli.main(args=argv, prog_name="preflight", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        code = exc.exit_code  # 2 for usage errors
    except click.Abort:
        click.echo("preflight: interrupted", err=True)
        code = 130
    except PreflightError as exc:
        click.echo("preflight: error: %s" % exc, err=True)
        code = EXIT_USAGE
    except KeyboardInterrupt:
        click.echo("preflight: interrupted", err=True)
        code = 130
    except Exception as exc:  # a bug: say so plainly, traceback only on request
        if os.environ.get("PREFLIGHT_DEBUG"):
            raise
        click.echo("preflight: internal error: %s: %s\n  This is a bug in preflight; rerun with PREFLIGHT_DEBUG=1 "
                   "for the traceback and report it." % (type(exc).__name__, exc), err=True)
        code = EXIT_INTERNAL
    _exit(code if isinstance(code, int) else 0)


def _exit(code: int) -> None:
    collect = sys.modules.get("preflight.facts.collect")
    if collect is not None and collect.abandoned_probes():
        # A probe thread is stuck in a library call: leave without waiting for it.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
