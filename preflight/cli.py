"""The command line: parse options, call ``preflight.commands``, print, exit.

Exit codes (stable):
  0  every error-severity rule passed (warnings allowed unless --strict)
  1  at least one error-severity rule failed or could not be evaluated
  2  usage error, a bad rule, facts or fixture file, or the report could not be written
  3  internal error in preflight (a bug: please report it)
  4  preflight slurm: scontrol missing, failing or not answering
  5  preflight slurm: unknown (a probe timed out); the node was left as it was
  128+N  killed by signal N (130 SIGINT, 143 SIGTERM), helpers killed first
exec passes the command's own status through (126/127: it cannot be run / is not found);
check --format npd uses node-problem-detector's codes (0 OK, 1 problem, 2 unknown).
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional

import click

from preflight import __version__
from preflight.errors import EXIT_FAILED, EXIT_INTERNAL, EXIT_OK, PreflightError

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
    return sys.stdout is not None and sys.stdout.isatty()


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


_check_options = [
    click.option("--profile", type=click.Choice(_PROFILES), default="train", show_default=True, envvar="PREFLIGHT_PROFILE",
                 help="train and inference check the job's environment; node checks hardware and driver only. "
                      "[env: PREFLIGHT_PROFILE]"),
    click.option("--strict", is_flag=True, help="Fail (exit 1) on warnings too."),
    click.option("--select", multiple=True, metavar="ID",
                 help="Run only these rules: an id or a dotted prefix (gpu selects gpu.*); repeatable or comma-separated."),
    click.option("--ignore", multiple=True, metavar="ID",
                 help="Skip these rules (id or prefix); the more specific selector wins."),
    click.option("--set", "settings", multiple=True, metavar="RULE.KEY=VALUE",
                 help="Change a threshold without editing files, e.g. --set driver.version.min=535 "
                      "--set gpu.memory.min=24GB."),
    click.option("--facts", "facts_file", metavar="FILE",
                 help="Evaluate a snapshot saved by 'preflight facts' instead of probing this machine ('-' reads stdin)."),
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


_output_option = click.option("--output", metavar="FILE", help="Write to FILE instead of standard output ('-'): a regular "
                              "file is replaced atomically (links are followed); a device or pipe is written in place.")


def _emit(text: str, output: Optional[str] = None) -> None:
    """Print, or write to --output (atomically for files; devices and pipes in place)."""
    from preflight.output import emit

    emit(text, output)


def _duration(option: str, text: str) -> float:
    from preflight.units import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option)


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
    Exit codes: 0 passed, 1 a check failed, 2 bad usage, input or output, 3 internal error,
    4 (slurm) scontrol failed, 5 (slurm) unknown, 130/143 interrupted; exec ends with its
    command's status; see each command's --help.
    """


@cli.command()
@_with(_check_options)
@click.option("--format", "output_format", type=click.Choice(["text", "json", "junit", "prometheus", "nfd", "npd"]),
              default="text", show_default=True,
              help="text for people; json (preflight.report/1); junit for CI; prometheus for node_exporter's textfile "
                   "collector; nfd for Node Feature Discovery's features.d; npd for node-problem-detector "
                   "(exit 0 OK, 1 problem, 2 unknown).")
@_output_option
@click.option("--expires-in", default="1h", show_default=True, metavar="DURATION",
              help="With --format nfd: NFD drops the labels if the file is not rewritten within this time (0: never).")
@click.option("-q", "--quiet", is_flag=True, help="Show only failures, warnings and errors.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="Colour the text report (auto: only on a terminal, never when NO_COLOR is set).")
@_with(_probe_options)
@_with(_workload_options)
def check(profile, strict, select, ignore, settings, facts_file, output_format, output, expires_in, quiet, color,
          python, nvml_fixture, timeout, no_cache, rules_paths, workload, task, batch, imgsz, fp32, half) -> int:
    """Check this machine and environment against the rules; print a report with a fix for every problem."""
    from preflight import commands
    from preflight.render import formats

    wanted = _workload(workload, task, batch, imgsz, fp32, half, "inference" if profile == "inference" else "train")
    options = commands.CheckOptions(
        profile=profile, rules_paths=list(rules_paths), select=_split(select), ignore=_split(ignore),
        settings=list(settings), facts_file=facts_file, python=python, nvml_fixture=nvml_fixture, timeout=timeout,
        use_cache=not no_cache, strict=strict, workload=wanted,
    )
    expiry = _duration("--expires-in", expires_in)
    report = commands.check(options, warn=_warn)
    colored = output is None and output_format == "text" and _use_color(color)
    _emit(formats.render(report, output_format, quiet=quiet, color=colored, expires_in=expiry), output)
    return formats.exit_code(report, output_format)


@cli.command()
@click.option("--list", "list_facts", is_flag=True, help="List the facts rules can read instead of collecting them.")
@_output_option
@_with(_probe_options)
def facts(list_facts, output, python, nvml_fixture, timeout, no_cache, rules_paths) -> int:
    """Print everything the probes see, as JSON (save it and replay it with 'check --facts FILE')."""
    if list_facts:
        from preflight.facts.catalog import FACTS

        width = max(len(path) for path in FACTS)
        _emit("\n".join("%s  %-8s  %-7s  %s" % (fact.path.ljust(width), fact.kind, "per-GPU" if fact.per_gpu else "",
                                                fact.description) for fact in FACTS.values()))
        return 0
    from preflight import commands
    from preflight.facts import snapshot

    options = commands.CheckOptions(rules_paths=list(rules_paths), python=python, nvml_fixture=nvml_fixture,
                                    timeout=timeout, use_cache=not no_cache)
    _emit(snapshot.dumps(commands.facts(options, warn=_warn)), output)
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
        ruleset = commands.load_rules(list(rules_paths), warn=_warn, failures=True)
        rules = [r for r in ruleset.rules.values() if profile is None or profile in r.profiles]
        _emit(rules_doc.markdown(rules) + rules_doc.failures_markdown(list(ruleset.failures.values())))
        return 0
    ruleset = commands.load_rules(list(rules_paths), warn=_warn)
    rules = [r for r in ruleset.rules.values() if profile is None or profile in r.profiles]
    _emit(rules_doc.list_text(rules) if output_format == "text" else rules_doc.list_json(rules))
    return 0


@cli.command()
@click.argument("rule_id")
@click.option("--rules", "rules_paths", multiple=True, metavar="PATH", help="Add or override rules (repeatable).")
def explain(rule_id, rules_paths) -> int:
    """Show one rule or known failure in full: what it checks or recognises, why, its source and its fix."""
    from preflight import commands
    from preflight.render import rules_doc

    ruleset = commands.load_rules(list(rules_paths), warn=_warn, failures=True)
    if rule_id in ruleset.failures:
        _emit(rules_doc.explain_failure(ruleset.failures[rule_id]))
    else:
        _emit(rules_doc.explain(ruleset.get(rule_id, also=ruleset.failures)))
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
@_output_option
@_with(_probe_options)
def diagnose(log, output_format, facts_file, no_facts, profile, list_catalog, color, output, python, nvml_fixture,
             timeout, no_cache, rules_paths) -> int:
    """Read a failed run's log (a file, '-' or a pipe) and name each known problem with its cause and fix.

    \b
    Exit codes: 0 nothing known found, 1 at least one known problem, 2 bad input.
    """
    from preflight import commands

    if list_catalog:
        from preflight.render import rules_doc

        ruleset = commands.load_rules(list(rules_paths), warn=_warn, failures=True)
        _emit(rules_doc.failures_text(list(ruleset.failures.values())))
        return 0
    if facts_file and no_facts:
        raise click.UsageError("--facts and --no-facts contradict each other: give one")
    if log is None:
        if sys.stdin is not None and sys.stdin.isatty():
            raise click.UsageError("give a log file, or pipe one in: preflight diagnose train.log / ... | preflight diagnose -")
        log = "-"
    options = commands.DiagnoseOptions(use_facts=not no_facts, profile=profile, rules_paths=list(rules_paths),
                                       facts_file=facts_file, python=python, nvml_fixture=nvml_fixture,
                                       timeout=timeout, use_cache=not no_cache)
    diagnosis = commands.diagnose(log, options, warn=_warn)
    if output_format == "json":
        import json

        _emit(json.dumps(diagnosis.to_json(), indent=2), output)
    else:
        from preflight.render import diagnosis_text

        colored = output is None and _use_color(color)
        _emit(diagnosis_text.render(diagnosis, color=colored), output)
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
@_output_option
@click.option("--facts", "facts_file", metavar="FILE", help="This machine's GPUs from a saved snapshot.")
@click.option("--nvml-fixture", metavar="FILE", envvar="PREFLIGHT_NVML_FIXTURE",
              help="This machine's GPUs from a replayed NVML recording. [env: PREFLIGHT_NVML_FIXTURE]")
@click.option("--timeout", type=float, default=10.0, show_default=True, metavar="SECONDS")
@click.option("--rules", "rules_paths", multiple=True, metavar="PATH",
              help="Add workloads ([[workload]]) or GPUs ([[gpu]]) from a .toml file (repeatable).")
def plan(workload, task, batch, imgsz, fp32, half, gpu_filters, output_format, output, facts_file, nvml_fixture,
         timeout, rules_paths) -> int:
    """Will a workload fit, and which GPU to use: memory needed, whether it fits, and the largest batch, per GPU."""
    from preflight import commands
    from preflight.render import plan as render

    options = commands.CheckOptions(rules_paths=list(rules_paths), facts_file=facts_file, nvml_fixture=nvml_fixture,
                                    timeout=timeout, workload=commands.WorkloadOptions(workload, task, batch, imgsz,
                                                                                       fp32, half))
    result = commands.plan(options, list(gpu_filters), warn=_warn)
    _emit({"text": render.text, "json": render.as_json, "markdown": render.markdown}[output_format](result), output)
    return 0


def _report_to_stderr(report, output_format: str, quiet: bool) -> None:
    from preflight.render import formats

    click.echo(formats.render(report, output_format, quiet=quiet, color=_use_color("auto") and sys.stderr.isatty()),
               err=True)


@cli.command("exec", context_settings={"allow_interspersed_args": False})
@_with(_check_options)
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Format of the report, written to standard error.")
@click.option("-q", "--quiet", is_flag=True, help="Report only failures, warnings and errors.")
@click.option("--warn-only", is_flag=True, help="Start the command even when checks fail (the report still says so).")
@click.option("--retry-timeout", default="0", show_default=True, metavar="DURATION",
              help="Keep checking until they pass or this much time has gone (30s, 5m): for a GPU or driver that "
                   "comes up late.")
@click.option("--sleep", default="1s", show_default=True, metavar="DURATION", help="Wait between checks.")
@_with(_probe_options)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_command(profile, strict, select, ignore, settings, facts_file, output_format, quiet, warn_only, retry_timeout,
                 sleep, python, nvml_fixture, timeout, no_cache, rules_paths, command) -> int:
    """Run the checks, then replace preflight with COMMAND (as a container ENTRYPOINT: preflight exec -- CMD...).

    \b
    The report goes to standard error. When the checks fail, preflight exits 1
    and COMMAND does not start (unless --warn-only). Otherwise COMMAND takes
    over this process (same PID, signals and exit status). Extra options can
    come from PREFLIGHT_ARGS (options only: a stray word or '--' there is exit 2);
    PREFLIGHT_SKIP=1 skips the checks (and says so).
    Exit codes: COMMAND's own; 1 checks failed; 2 bad usage; 126 COMMAND cannot
    be run; 127 COMMAND not found.
    """
    from preflight import commands, entrypoint

    def log(message: str) -> None:
        click.echo(message, err=True)

    if entrypoint.skip_requested(os.environ):
        log("preflight: %s is set: checks skipped; starting %s" % (entrypoint.SKIP_VARIABLE, " ".join(command)))
        return entrypoint.become(command, log)
    options = commands.CheckOptions(profile=profile, rules_paths=list(rules_paths), select=_split(select),
                                    ignore=_split(ignore), settings=list(settings), facts_file=facts_file,
                                    python=python, nvml_fixture=nvml_fixture, timeout=timeout, use_cache=not no_cache,
                                    strict=strict)
    report = entrypoint.check_until(lambda: commands.check(options, warn=_warn),
                                    _duration("--retry-timeout", retry_timeout), _duration("--sleep", sleep), log)
    _report_to_stderr(report, output_format, quiet)
    if not report.ok and not warn_only:
        log("preflight: not starting %s: the checks failed" % command[0])
        return report.exit_code
    if not report.ok:
        log("preflight: checks failed; starting %s anyway (--warn-only)" % command[0])
    return entrypoint.become(command, log)


@cli.command()
@_with(_check_options)
@click.option("--node", metavar="NAME", help="Slurm node name [default: SLURMD_NODENAME, else the short host name].")
@click.option("--scontrol", metavar="PATH", help="scontrol to use [default: found in PATH or the usual install folders].")
@click.option("--slurm-conf", metavar="FILE",
              help="slurm.conf for scontrol [default: SLURM_CONF, else /etc/slurm/slurm.conf, /etc/slurm-llnl/slurm.conf, "
                   "/usr/local/etc/slurm.conf or /opt/slurm/etc/slurm.conf, else scontrol's own].")
@click.option("--scontrol-timeout", default="10s", show_default=True, metavar="DURATION")
@click.option("--dry-run", is_flag=True, help="Say what would be done to the node, but do not change it.")
@_with(_probe_options)
def slurm(profile, strict, select, ignore, settings, facts_file, node, scontrol, slurm_conf, scontrol_timeout, dry_run,
          python, nvml_fixture, timeout, no_cache, rules_paths) -> int:
    """Slurm HealthCheckProgram and Prolog: drain this node when checks fail, resume it when they pass.

    \b
    Drains with Reason="preflight: <rule-id> <message>"; resumes only nodes
    whose reason starts with "preflight:". A node whose reason is anyone
    else's (DOWN, FAIL, MAINT, DRAIN by an administrator) is never drained
    over or resumed. Use --profile node for node admission. Exit codes:
    0 checks pass, 1 checks fail (as a Prolog this also makes Slurm requeue
    the job), 2 bad usage, 4 scontrol missing, failing or not answering,
    5 unknown: a probe timed out (not NVML), the node is left as it is.
    """
    from preflight import commands
    from preflight import slurm as admission

    options = commands.CheckOptions(profile=profile, rules_paths=list(rules_paths), select=_split(select),
                                    ignore=_split(ignore), settings=list(settings), facts_file=facts_file,
                                    python=python, nvml_fixture=nvml_fixture, timeout=timeout, use_cache=not no_cache,
                                    strict=strict)
    report = commands.check(options, warn=_warn)
    name = admission.node_name(node, os.environ)
    tool = admission.Scontrol(admission.find_scontrol(scontrol, os.environ),
                              admission.find_slurm_conf(slurm_conf, os.environ),
                              _duration("--scontrol-timeout", scontrol_timeout), os.environ)
    failures, undetermined = admission.verdict(report)
    for result in report.blocking():
        click.echo("preflight: %s %s %s: %s" % ("UNKNOWN" if result in undetermined else result.status.upper(),
                                                 result.id, result.subject, result.message), err=True)
    if undetermined and not failures:
        state, reason = tool.node(name)
        click.echo("preflight: the checks could not finish (%s timed out); %s is left as it is (%s, reason: %s)"
                   % (", ".join(report.timed_out_probes()), name, state, reason), err=True)
        return admission.EXIT_UNKNOWN
    if dry_run:
        state, reason = tool.node(name)
        wanted = "resume if drained by preflight" if not failures else "drain: %s" % admission.drain_reason(failures)
        click.echo("preflight: node %s is %s (reason: %s); would %s" % (name, state, reason, wanted), err=True)
    else:
        for line in admission.admit(failures, tool, name):
            click.echo("preflight: %s" % line, err=True)
    return EXIT_FAILED if failures else EXIT_OK


def _option_arity(command: click.Command):
    """Each option name of ``command`` -> whether it takes a value."""
    arity = {}
    for param in command.params:
        if isinstance(param, click.Option):
            for name in param.opts + param.secondary_opts:
                arity[name] = not (param.is_flag or param.count)
    return arity


def main(argv: Optional[List[str]] = None) -> None:
    from preflight.entrypoint import with_environment_args

    _handle_termination()
    process = sys.modules.get("preflight.probes.process")
    if process is not None:
        process.reopen()  # an earlier run in this process closed it on its way out
    try:
        argv = with_environment_args(list(sys.argv[1:] if argv is None else argv), os.environ,
                                     lambda: _option_arity(exec_command))
        code = cli.main(args=argv, prog_name="preflight", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        code = exc.exit_code  # 2 for usage errors
    except click.Abort:
        click.echo("preflight: interrupted", err=True)
        code = 130
    except PreflightError as exc:
        click.echo("preflight: error: %s" % exc, err=True)
        code = exc.exit_code  # 2 for bad input; 4 when Slurm's scontrol fails (preflight slurm)
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
    try:
        import _signal as signal  # the C module: `import signal` costs half a millisecond of start-up
    except ImportError:  # pragma: no cover - other Pythons
        import signal  # type: ignore[no-redef]

    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            try:
                signal.signal(getattr(signal, name), _on_signal)
            except (ValueError, OSError):  # not the main thread (tests call main in threads)
                pass
