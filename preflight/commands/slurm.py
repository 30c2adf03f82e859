"""preflight slurm: the health program (check, then drain this node or resume it) and the prolog (stop this job).

As the health program (``HealthCheckProgram``) it owns the node's state: it asks ``scontrol`` what the node is,
drains it when the checks fail and resumes a drain of its own. As a prolog (``--prolog``) it calls no Slurm
command: it judges the job's GPUs (``SLURM_JOB_GPUS``) and what all jobs share, fails only for a fault that must
stop this job, and leaves faults of other GPUs to the health program, which drains. NVML that does not answer
within --timeout is asked once more (a busy host answers late); if it does not answer again, a job with GPUs
fails (its CUDA calls would wait on the same driver) and a job without GPUs starts.

A configuration or rule file that cannot be used is never a verdict on the node: the health program leaves the
node as it is and exits 5 (unknown); the prolog lets the job start and exits 0. Both log the file and line.
"""

from __future__ import annotations

import os
import time
from typing import Callable, List, Optional

import click

from preflight.commands import common, pipeline
from preflight.commands.click_options import (KEEP, PROBE, check_group, check_options, complete_files, declare,
                                              duration, kept, log, warn)
from preflight.commands.options import CheckOptions
from preflight.errors import ExitCode, PreflightError
from preflight.integrations import slurm as admission


def main(options: CheckOptions, node: Optional[str], scontrol: Optional[str], slurm_conf: Optional[str],
         scontrol_timeout: float, dry_run: bool, log: Callable[[str], None], warn: common.Warn = None,
         kept: common.Keep = common.Keep()) -> int:
    name = admission.node_name(node, os.environ)
    tool = admission.Scontrol(admission.find_scontrol(scontrol, os.environ),
                              admission.find_slurm_conf(slurm_conf, os.environ), scontrol_timeout, os.environ)
    info = tool.node(name)  # first: its Gres says how many GPUs the checks expect
    started = time.monotonic()
    try:
        prepared = pipeline.prepare(options, warn, node=info)
    except admission.SlurmError:
        raise
    except PreflightError as exc:
        said = "preflight: UNKNOWN: the site configuration or rules cannot be used, so %s is left as it is " \
               "(%s%s) and admission is not running: %s" % (name, info.state, ", reason: %s" % info.reason
                                                           if info.reason else "", exc)
        log(said)
        common.keep_line(kept, said, "error", warn)
        return ExitCode.SLURM_UNKNOWN
    snapshot, source = pipeline.observe(prepared)
    report = pipeline.judge(prepared, snapshot, source, started)
    expected = report.context.expected_gpus
    if expected and expected["count"] == 0:
        log("preflight: %s is not a GPU node (%s): GPU checks skipped" % (name, expected["source"]))
    failures, undetermined = admission.verdict(report)
    for result in report.blocking():
        log("preflight: %s %s %s: %s" % ("UNKNOWN" if result in undetermined else result.status.upper(),
                                         result.id, result.subject, result.message))
    if undetermined and not failures:
        now = tool.node(name)
        said = "preflight: the checks could not finish (%s timed out); %s is left as it is (%s%s)" % (
            ", ".join(report.timed_out_probes()), name, now.state, ", reason: %s" % now.reason if now.reason else "")
        log(said)
        common.keep(report, kept, warn, name, said, "warning")
        return ExitCode.SLURM_UNKNOWN
    done = admission.admit(failures, tool, name, dry_run)
    for line in done:
        log("preflight: %s" % line)
    common.keep(report, kept, warn, name, "%s; %s" % (report.summary_line(), "; ".join(done)))
    return ExitCode.FAILED if failures else ExitCode.OK


def prolog(options: CheckOptions, log: Callable[[str], None], warn: common.Warn = None,
           kept: common.Keep = common.Keep(), dry_run: bool = False) -> int:
    """Exit 1 only for a fault that must stop this job (Slurm then drains the node and requeues the job);
    0 otherwise, also when preflight itself cannot judge (a broken configuration, a probe that timed out).
    ``dry_run``: say which exit it would be, and exit 0 (for an administrator testing the prolog's line)."""
    code = _prolog(options, log, warn, kept)
    if dry_run:
        log("preflight: prolog --dry-run: the prolog would exit %d (%s)" % (
            code, "Slurm would drain the node and requeue the job" if code else "the job would start"))
        return ExitCode.OK
    return code


def _prolog(options: CheckOptions, log: Callable[[str], None], warn: common.Warn, kept: common.Keep) -> int:
    job = os.environ.get("SLURM_JOB_ID") or "(no SLURM_JOB_ID)"
    gpus, source = admission.job_gpus(os.environ)
    if options.expect_gpus == "auto" and "expect_gpus" not in options.given:
        options = options.replace(expect_gpus=None)  # the Gres count is the health program's to compare
    started = time.monotonic()
    try:
        prepared = pipeline.prepare(options, warn)
    except PreflightError as exc:
        said = "preflight: prolog job %s: UNKNOWN: the site configuration or rules cannot be used; the job starts " \
               "unchecked: %s" % (job, exc)
        log(said)
        common.keep_line(kept, said, "error", warn)
        return ExitCode.OK
    with admission.whole_machine(os.environ):  # every GPU, so that another GPU's fault is seen and handed on
        snapshot, source_of_facts = pipeline.observe(prepared)
        if _nvml_timed_out(snapshot):  # a busy host answers late once; a hung driver twice
            log("preflight: prolog job %s: NVML gave no answer within %.1f s; asking once more"
                % (job, prepared.options.timeout))
            started = time.monotonic()
            snapshot, source_of_facts = pipeline.observe(prepared)
    report = pipeline.judge(prepared, snapshot, source_of_facts, started)
    from preflight import inventory
    from preflight.engine.evaluate import probes_needed

    machine = inventory.machine_gpus(report.facts)
    present = {gpu.get("index") for gpu in machine}
    undetermined = report.undetermined()
    nvml_hung = _nvml_timed_out(snapshot)
    if nvml_hung:
        # Its GPUs cannot be checked, and nothing is known of where they are: a job that has GPUs would wait on the
        # same driver (a node fault); a job without GPUs does not touch it (left to the health check).
        own = ["FAIL nvml: NVML gave no answer within %.1f s, twice: the job's CUDA calls would wait on the same "
               "driver" % prepared.options.timeout] if gpus else []
    else:
        own = ["FAIL job GPU %d: not on this node (NVML lists %s)" % (index, ", ".join(
            str(i) for i in sorted(i for i in present if isinstance(i, int))) or "no GPU") for index in gpus or ()
            if index not in present]
    others: List[str] = []
    unanswered: List[str] = []  # rules NVML's silence left unknown: said once, with it
    for result in report.blocking():
        line = "%s %s %s: %s" % ("UNKNOWN" if result in undetermined else result.status.upper(), result.id,
                                 result.subject, result.message)
        index = admission.subject_gpu(result.subject)
        if nvml_hung and result.status == "error" and "nvml" in probes_needed([result.rule]):
            unanswered.append(result.id)
        elif index is not None and index not in (gpus or ()):
            others.append(line)
        elif result not in undetermined:
            own.append(line)
        else:
            log("preflight: prolog job %s: %s" % (job, line))
    if unanswered:
        said = "UNKNOWN without NVML: %s" % ", ".join(dict.fromkeys(unanswered))
        (own if gpus else others).append(said)
    machine_size = "?" if nvml_hung else str(len(machine))
    scope = "GPUs %s of %s, from %s" % (",".join(str(i) for i in gpus), machine_size, source) if gpus \
        else "no GPU of %s (%s)" % (machine_size, source)
    said = "preflight: prolog job %s: %s: %s" % (job, scope, "FAILED" if own else "OK")
    log(said)
    for line in own:
        log("preflight: prolog job %s: %s" % (job, line))
    for line in others:
        log("preflight: prolog job %s: not this job's GPU, left to the health check: %s" % (job, line))
    common.keep(report, kept, warn, None, "%s; %s" % (said, "; ".join(own + others) or report.summary_line()),
                "error" if own else ("warning" if others else "info"))
    return ExitCode.FAILED if own else ExitCode.OK


def _nvml_timed_out(snapshot) -> bool:
    probes = snapshot.get("probes") if isinstance(snapshot.get("probes"), dict) else {}
    return isinstance(probes.get("nvml"), dict) and probes["nvml"].get("status") == "timeout"


def write_submit_table(options: CheckOptions, path: str, log: Callable[[str], None], warn: common.Warn = None) -> int:
    """preflight slurm --submit-table FILE: the filters' table, from the capacity model (and --rules) and the site
    configuration as it applies here."""
    from preflight.commands import site
    from preflight.integrations import submit_table

    prepared = pipeline.size(options, warn)  # the capacity model as plan sees it: the table must decide as plan does
    config = site.locate(options.config, os.environ) or site.SYSTEM_CONFIG
    data = submit_table.write(path, prepared.ruleset, prepared.options.slurm_gpu_types,
                              prepared.options.slurm_does_not_fit, config)
    log("preflight: wrote %s: %d workloads, %d GPUs, %d GPU type names; does not fit: %s; site configuration %s%s. "
        "Beside slurm.conf, with deploy/slurm/preflight_submit.lua, it serves cli_filter.lua (CliFilterPlugins=lua) "
        "and job_submit.lua (JobSubmitPlugins=lua)" % (
            path, len(data["workloads"]), len(data["gpus"]), len(data["names"]), data["does_not_fit"], config,
            "" if data["config"]["text"] is not None else " (none there: a file written there later makes the "
            "table stale)"))
    return ExitCode.OK


# --- the command line ----------------------------------------------------------------------------------------

def build() -> click.Command:
    @click.command("slurm")
    @declare(check_group("slurm"))
    @click.option("--prolog", "as_prolog", is_flag=True,
                  help="Run as slurmd's Prolog: call no Slurm command, check the job's GPUs (SLURM_JOB_GPUS, else "
                       "CUDA_VISIBLE_DEVICES) and what every job shares, exit 1 only for a fault that must stop this job; "
                       "other GPUs' faults are logged and left to the health program.")
    @click.option("--node", metavar="NAME", help="Slurm node name [default: SLURMD_NODENAME, else the short host name].")
    @click.option("--scontrol", metavar="PATH", shell_complete=complete_files, help="scontrol to use [default: found in PATH or the usual install folders].")
    @click.option("--slurm-conf", metavar="FILE", shell_complete=complete_files,
                  help="slurm.conf for scontrol [default: SLURM_CONF, else /etc/slurm/slurm.conf, /etc/slurm-llnl/slurm.conf, "
                       "/usr/local/etc/slurm.conf or /opt/slurm/etc/slurm.conf, else scontrol's own].")
    @click.option("--scontrol-timeout", default="10s", show_default=True, metavar="DURATION")
    @click.option("--dry-run", is_flag=True, help="Say what would be done to the node, but do not change it; with "
                  "--prolog, judge the job as the prolog would, say the exit it would give, and exit 0.")
    @click.option("--submit-table", metavar="FILE", shell_complete=complete_files,
                  help="Write the submit filters' table (Lua data: the capacity model, the GPU types, the site's "
                       "policy) to FILE, preflight-fit.lua beside slurm.conf, and exit; nothing is checked.")
    @declare(KEEP)
    @check_options(PROBE)
    def slurm(options, as_prolog, node, scontrol, slurm_conf, scontrol_timeout, dry_run, submit_table, report_dir,
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
        from preflight.integrations.slurm import require_job_interpreter

        if submit_table is not None:
            if as_prolog or dry_run:
                raise click.UsageError("--submit-table writes the filters' table and checks nothing: leave out %s"
                                       % ("--prolog" if as_prolog else "--dry-run"))
            return write_submit_table(options, submit_table, log, warn)
        require_job_interpreter(options.profile, options.python)  # before asking scontrol anything
        keeping = kept(report_dir, syslog)
        if as_prolog:
            given = [name for name, value in (("--node", node), ("--scontrol", scontrol), ("--slurm-conf", slurm_conf))
                     if value]
            if given:
                warn("--prolog calls no Slurm command: %s ignored (options of the health program's line)"
                     % ", ".join(given))
            return prolog(options, log, warn, keeping, dry_run)
        timeout = duration("--scontrol-timeout", scontrol_timeout)
        if timeout <= 0:
            raise click.BadParameter("must be more than 0, got %s" % scontrol_timeout, param_hint="--scontrol-timeout")
        return main(options, node, scontrol, slurm_conf, timeout, dry_run, log, warn, keeping)
    return slurm
