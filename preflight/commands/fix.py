"""preflight fix: check, show the plan, run its pip steps in the job's interpreter, check again.

It changes only an interpreter it was given (--python) or the one of the active virtual environment or conda
environment, never conda's base environment, and runs nothing but ``<that python> -m pip install ...`` lines of
the plan, exactly as the plan prints them (sudo, drivers, system packages, conda, Slurm and the kernel are left to
the user, and the plan says so). It asks first on a terminal and needs --yes elsewhere; --dry-run shows the plan and
changes nothing. pip's output goes to a log file it names; a pip step that fails stops the plan there (pip rolls
back what that one install changed) and the check runs again to say where things stand. The exit code is the last
check's: 0 it passes, 1 it still fails.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
import time
from typing import Callable, List, Mapping, Optional

import click

from preflight import fix_plan
from preflight.commands import common, pipeline
from preflight.commands.click_options import (OUTPUT, PROBE, check_group, check_options, complete_files, declare,
                                              format_names, shown, warn)
from preflight.commands.options import CheckOptions, OutputOptions
from preflight.errors import OutputError, PreflightError
from preflight.terminal import say

PIP_DEADLINE = 3600.0  # seconds one pip install may take (a CUDA torch is gigabytes)


def target_interpreter(python: Optional[str], environ: Mapping[str, str]) -> str:
    """The interpreter fix may change: --python, else the active virtual environment's, else the active conda
    environment's (not base); exit 2 when there is none, or when it is conda's base environment."""
    from preflight.probes.python_env import resolve_interpreter

    if python:
        return resolve_interpreter(python)
    for variable, kind in (("VIRTUAL_ENV", "virtual environment"), ("CONDA_PREFIX", "conda environment")):
        prefix = environ.get(variable)
        if not prefix:
            continue
        if kind == "conda environment" and _conda_base(prefix, environ):
            raise PreflightError("preflight fix does not install into conda's base environment (%s): packages "
                                 "there shadow or miss each environment's own" % prefix,
                                 "create and activate an environment for the job (conda create -n NAME python=3.11 "
                                 "&& conda activate NAME), or give --python PATH")
        for candidate in (os.path.join(prefix, "bin", "python"), os.path.join(prefix, "python.exe"),
                          os.path.join(prefix, "Scripts", "python.exe")):
            if os.path.isfile(candidate):
                return resolve_interpreter(candidate)
        raise PreflightError("%s is set (%s) but holds no python" % (variable, prefix), "give --python PATH")
    raise PreflightError("preflight fix installs only into an interpreter you name, and none is: no --python, and no "
                         "virtual or conda environment is active",
                         "give the job's interpreter (--python ~/envs/yolov9/bin/python), or activate its "
                         "environment first")


def _conda_base(prefix: str, environ: Mapping[str, str]) -> bool:
    return environ.get("CONDA_DEFAULT_ENV") == "base" or os.path.isdir(os.path.join(prefix, "condabin"))


def main(options: CheckOptions, shown: OutputOptions, dry_run: bool, yes: bool, log_path: Optional[str],
         ask: Callable[[str], bool], warn: common.Warn = None, environ: Mapping[str, str] = os.environ,
         interactive: Optional[bool] = None) -> int:
    from preflight.files.output import emit
    from preflight.render import formats

    interpreter = target_interpreter(options.python, environ)
    options = options._replace(python=interpreter)
    before = pipeline.check(options, warn)
    plan = before.plan
    outcome = _nothing_run(interpreter, plan, before, "")
    if before.ok:
        outcome = outcome._replace(why_not="the check passes: nothing to fix")
    elif not plan.pip_steps:
        outcome = outcome._replace(why_not="no step is preflight fix's to run (pip into %s): they are yours"
                                   % interpreter)
    elif _conda_base_interpreter(before.facts):
        outcome = outcome._replace(why_not="%s is conda's base environment, where preflight fix installs nothing "
                                   "(its packages shadow or miss each environment's own)" % interpreter)
    elif dry_run:
        outcome = outcome._replace(why_not="--dry-run: nothing was changed")
    else:
        interactive = sys.stdin.isatty() if interactive is None else interactive
        if not yes and not interactive:
            raise PreflightError("preflight fix would run pip in %s; standard input is not a terminal, so it cannot "
                                 "ask" % interpreter, "add --yes to run the plan, or --dry-run to see it")
        if not yes:
            say(formats.render("fix", outcome._replace(why_not="(asking)"), "text"))
            if not ask("Run the pip command%s of step%s %s in %s?" % (
                    "s" if len(plan.commands()) > 1 else "", "s" if len(plan.pip_steps) > 1 else "",
                    ", ".join(str(step.number) for step in plan.pip_steps), interpreter)):
                outcome = outcome._replace(why_not="not confirmed: nothing was changed")
                emit(formats.render("fix", outcome, shown.format), shown.output)
                return before.exit_code
        outcome = _apply(options, plan, before, log_path, warn)
    emit(formats.render("fix", outcome, shown.format), shown.output)
    return outcome.exit_code


def _nothing_run(interpreter: str, plan: fix_plan.FixPlan, report, why: str) -> fix_plan.Outcome:
    return fix_plan.Outcome(interpreter, plan, False, why, [], None, [], None, report.exit_code,
                            report.summary_line())


def _conda_base_interpreter(snapshot) -> bool:
    conda = ((snapshot.get("python") or {}).get("conda") or {}) if isinstance(snapshot, dict) else {}
    return conda.get("source") == "interpreter" and bool(conda.get("is_base"))


def _apply(options: CheckOptions, plan: fix_plan.FixPlan, before, log_path: Optional[str],
           warn: common.Warn) -> fix_plan.Outcome:
    log_name, log = _open_log(log_path)
    ran: List[fix_plan.Ran] = []
    with log:
        for step in plan.pip_steps:
            for command in step.run:
                say("preflight fix: step %d: %s" % (step.number, command))
                log.write(("\n$ %s\n" % command).encode("utf-8"))
                log.flush()
                result = _run_pip(step.number, command, log)
                ran.append(result)
                say("preflight fix: step %d: %s (%.1f s)" % (step.number, result.failure or "done", result.seconds))
                if result.failure:
                    break
            if ran and ran[-1].failure:
                break
    after = pipeline.check(options, warn)
    return fix_plan.Outcome(plan.interpreter, plan, True, "", ran, log_name,
                            fix_plan.changes(before.results, after.results), after.plan if not after.ok else None,
                            after.exit_code, after.summary_line())


def _run_pip(step: int, command: str, log) -> fix_plan.Ran:
    from preflight.probes import process

    started = time.monotonic()
    try:
        code = process.run_logged(shlex.split(command), PIP_DEADLINE, log)
    except process.CommandTimeout:
        return fix_plan.Ran(step, command, None, time.monotonic() - started,
                            "pip gave no answer within %d s and was stopped" % PIP_DEADLINE)
    except process.CommandFailed as exc:
        return fix_plan.Ran(step, command, None, time.monotonic() - started, str(exc))
    seconds = time.monotonic() - started
    if code != 0:
        return fix_plan.Ran(step, command, code, seconds, "pip failed (exit %d): it rolled back what this install "
                            "had changed; its last lines are in the log" % code)
    return fix_plan.Ran(step, command, code, seconds)


def _open_log(path: Optional[str]):
    """(its name, the open file) of a new file for pip's output: ``path``, created and never an existing file or a
    planted link, else a new file in the system's temporary folder."""
    if path is None:
        descriptor, name = tempfile.mkstemp(prefix="preflight-fix-", suffix=".log")
        return name, os.fdopen(descriptor, "wb")
    from preflight.files import paths

    resolved = paths.resolve(path, "--log %s" % path)
    folder = paths.open_folder(resolved.folder, "--log %s" % path)
    try:
        descriptor = paths.create_exclusive(resolved.name, folder)
    except FileExistsError:
        raise OutputError("--log %s exists; preflight fix writes a new log, never over a file" % path,
                          "give a new file name, or leave --log out for one in %s" % tempfile.gettempdir())
    except OSError as exc:
        raise OutputError("--log %s: cannot create it: %s" % (path, exc.strerror or exc))
    finally:
        os.close(folder)
    return os.path.join(resolved.folder, resolved.name), os.fdopen(descriptor, "wb")


# --- the command line ----------------------------------------------------------------------------------------

def build() -> click.Command:
    @click.command("fix")
    @declare(check_group("fix", with_facts=False))
    @click.option("--dry-run", is_flag=True, help="Show the plan and what preflight fix would run; change nothing.")
    @click.option("-y", "--yes", is_flag=True, help="Run the plan's pip steps without asking (needed when standard "
                  "input is not a terminal).")
    @click.option("--log", "log_path", metavar="FILE", shell_complete=complete_files,
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
        return main(options, shown(output_format, output), dry_run, yes, log_path,
                    lambda question: click.confirm(question, default=False, err=True), warn)
    return fix
