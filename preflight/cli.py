"""The command line: the group of commands (``preflight.commands.COMMANDS``), dispatch, and exit codes.

No command lives here: each is a module of ``preflight.commands`` that declares
its own options (``build()``) and what it does; options several commands share
are declared once in ``preflight.commands.click_options``. This module builds a
command when it runs or a listing needs it, suggests the nearest command for a
mistyped one, and turns what a command raises into exit codes.

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

import importlib
import io
import os
import signal
import sys
from typing import List, Optional

import click

from preflight import __version__
from preflight.commands import COMMANDS
from preflight.errors import ExitCode, PreflightError, suggestions
from preflight.terminal import say

__all__ = ["COMMANDS", "cli", "command", "main"]


def _show_version(context, parameter, value) -> None:
    if not value or context.resilient_parsing:
        return
    from preflight.knowledge.shipped import as_of

    click.echo("preflight, version %s (knowledge as of %s)" % (__version__, as_of() or "unknown"))
    context.exit()


class _Commands(click.Group):
    """The group of COMMANDS, each declared only when it runs or a listing names it (click's documented lazy group):
    declaring every command's options would cost each run its start-up time."""

    def list_commands(self, context) -> List[str]:
        return sorted(COMMANDS)

    def get_command(self, context, name: str) -> Optional[click.Command]:
        if name not in self.commands and name in COMMANDS:
            entry = COMMANDS[name]
            built = getattr(importlib.import_module("preflight.commands." + entry.module), entry.builder)()
            built.short_help = entry.summary
            built.epilog = "\b\nExamples:\n" + "\n".join("  " + example for example in entry.examples)
            self.add_command(built, name)
        return self.commands.get(name)

    def resolve_command(self, context, args):
        """A mistyped command names the nearest ones (``preflight chek``: did you mean check?), as pip does."""
        if args and not args[0].startswith("-") and self.get_command(context, args[0]) is None:
            nearest = suggestions(args[0], COMMANDS)[:1]  # the most alike, as pip and git suggest one
            context.fail("No such command %r.%s Commands: %s." % (
                args[0], " Did you mean %r?" % nearest[0] if nearest else "",
                ", ".join(sorted(COMMANDS))))
        return super().resolve_command(context, args)


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



def _option_arity(command: click.Command):
    """Each option name of ``command`` -> whether it takes a value."""
    arity = {}
    for param in command.params:
        if isinstance(param, click.Option):
            for name in param.opts + param.secondary_opts:
                arity[name] = not (param.is_flag or param.count)
    return arity


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
