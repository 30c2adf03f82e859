"""preflight check: evaluate the rules against this machine (or a saved snapshot) and render the report."""

from __future__ import annotations

import time

from preflight.commands import common, site
from preflight.commands.options import CheckOptions, OutputOptions
from preflight.engine import selection
from preflight.engine.evaluate import evaluate, probes_needed
from preflight.report import Report


def run(options: CheckOptions, warn: common.Warn = None, node=None) -> Report:
    """Check with these options; ``node`` is the Slurm node being admitted (its Gres sets the GPUs expected)."""
    started = time.monotonic()
    applied = site.apply(options, node, warn)
    options = applied.options
    if node is not None:
        from preflight import slurm as admission

        admission.require_job_interpreter(options.profile, options.python, _where(applied, "profile"))
    ruleset = common.load_rules(options.rules_paths, warn, capacity=options.workload is not None)
    site.validate(applied, ruleset)
    rules = common.choose_rules(options, ruleset)
    if not rules:
        raise site.no_rules_left(applied)
    request = common.workload_request(ruleset, options.workload) if options.workload else None
    if warn and request and not any(rule.fact.path == "gpu.workload.fit" for rule in rules):
        warn("--workload has no effect: no selected rule reads it (gpu.memory.workload is in the train and "
             "inference profiles)")
    facts, source = common.snapshot(options, probes_needed(rules), selection.required_packages(rules),
                                    applied.early_facts)
    if request is not None:
        common.attach_workload(request, facts, ruleset)
    configured = applied.effective.origins.get("expect_gpus") if applied.effective else None
    expected = common.expected_gpus(options, facts, node,
                                    configured.short if configured and "expect_gpus" not in options.given else "")
    if expected is not None:
        facts["expected_gpus"] = expected
    results = evaluate(rules, facts)
    report = Report(options.profile, results, strict=options.strict, facts_source=source,
                    seconds=time.monotonic() - started, facts=facts)
    from preflight.package_index import stale_note

    note = stale_note()
    if note:
        report.notes.append(note)
    return report


def _where(applied: site.Applied, key: str) -> str:
    effective = applied.effective
    if key in applied.options.given or effective is None or key not in effective.origins:
        return ""
    return " (from %s)" % effective.origins[key].text


def main(options: CheckOptions, shown: OutputOptions, warn: common.Warn = None) -> int:
    from preflight.output import emit
    from preflight.render import formats

    report = run(options, warn)
    emit(formats.render(report, shown.format, quiet=shown.quiet, color=shown.colored(),
                        expires_in=shown.expires_in), shown.output)
    return formats.exit_code(report, shown.format)
