"""preflight slurm: check, then drain this Slurm node on failure or resume it when preflight's own drain is over."""

from __future__ import annotations

import os
from typing import Callable, Optional

from preflight import slurm as admission
from preflight.commands import common, pipeline
from preflight.commands.options import CheckOptions
from preflight.errors import ExitCode


def main(options: CheckOptions, node: Optional[str], scontrol: Optional[str], slurm_conf: Optional[str],
         scontrol_timeout: float, dry_run: bool, log: Callable[[str], None], warn: common.Warn = None) -> int:
    name = admission.node_name(node, os.environ)
    tool = admission.Scontrol(admission.find_scontrol(scontrol, os.environ),
                              admission.find_slurm_conf(slurm_conf, os.environ), scontrol_timeout, os.environ)
    info = tool.node(name)  # first: its Gres says how many GPUs the checks expect
    report = pipeline.check(options, warn, node=info)
    expected = report.context.expected_gpus
    if expected and expected["count"] == 0:
        log("preflight: %s is not a GPU node (%s): GPU checks skipped" % (name, expected["source"]))
    failures, undetermined = admission.verdict(report)
    for result in report.blocking():
        log("preflight: %s %s %s: %s" % ("UNKNOWN" if result in undetermined else result.status.upper(),
                                         result.id, result.subject, result.message))
    if undetermined and not failures:
        now = tool.node(name)
        log("preflight: the checks could not finish (%s timed out); %s is left as it is (%s%s)"
            % (", ".join(report.timed_out_probes()), name, now.state, ", reason: %s" % now.reason if now.reason else ""))
        return ExitCode.SLURM_UNKNOWN
    for line in admission.admit(failures, tool, name, dry_run):
        log("preflight: %s" % line)
    return ExitCode.FAILED if failures else ExitCode.OK
