"""preflight plan: will a workload fit, and on which GPU: every catalog GPU and this machine's."""

from __future__ import annotations

from typing import List

from preflight.commands import common
from preflight.commands.options import CheckOptions, OutputOptions
from preflight.errors import ExitCode


def run(options: CheckOptions, gpu_filters: List[str], warn: common.Warn = None):
    from preflight.capacity import planning

    ruleset = common.load_rules(options.rules_paths, warn, capacity=True)
    request = common.workload_request(ruleset, options.workload)  # the trainers' default batch when none is given
    snapshot, _ = common.snapshot(options, {"nvml"}, [])
    return planning.plan(request, ruleset, snapshot, gpu_filters)


def main(options: CheckOptions, gpu_filters: List[str], shown: OutputOptions, warn: common.Warn = None) -> int:
    from preflight.output import emit
    from preflight.render import plan as render

    result = run(options, gpu_filters, warn)
    emit({"text": render.text, "json": render.as_json, "markdown": render.markdown}[shown.format](result), shown.output)
    return ExitCode.OK
