"""preflight fix for people: the plan, what ran, what changed, what is left."""

from __future__ import annotations

from typing import List

from preflight.fix_plan import Outcome
from preflight.render.blocks import LABELS, width, wrap
from preflight.render.text import plan_lines


def render(outcome: Outcome, columns: int = 0) -> str:
    columns = columns or width()
    lines: List[str] = ["preflight fix: %s" % outcome.interpreter]
    lines += plan_lines(outcome.plan, columns, footer=False)[1:] if outcome.plan.steps else ["", "Nothing to fix."]
    yours = [str(step.number) for step in outcome.plan.yours]
    if yours:
        lines += wrap("Step%s %s %s yours: preflight fix runs only pip, in %s (preflight check shows %s fix)." % (
            "s" if len(yours) > 1 else "", ", ".join(yours), "are" if len(yours) > 1 else "is",
            outcome.interpreter, "their" if len(yours) > 1 else "its"), columns, "", "  ")
    if outcome.why_not:
        lines += [""] + wrap(outcome.why_not[0].upper() + outcome.why_not[1:] + ".", columns, "", "")
    if outcome.ran:
        lines += ["", "Ran:"]
        for ran in outcome.ran:
            lines += wrap("step %d: %s in %.1f s: %s" % (ran.step, ran.failure and "stopped" or "done", ran.seconds,
                                                         ran.command), columns, "  ", "    ")
            if ran.failure:
                lines += wrap(ran.failure + "; the steps after it did not run.", columns, "    ", "    ")
    if outcome.log:
        lines += wrap("pip's output: %s" % outcome.log, columns, "", "  ")
    if outcome.applied:
        lines += ["", "Checked again:" if outcome.changes else "Checked again: no result changed."]
        rule_width = max([len(change.rule) for change in outcome.changes] + [10])
        subject_width = max([len(change.subject) for change in outcome.changes] + [6])
        for change in outcome.changes:
            lines.append("  %s  %s  %s -> %s" % (change.rule.ljust(rule_width), change.subject.ljust(subject_width),
                                                 LABELS[change.before].strip(), LABELS[change.after].strip()))
        if outcome.after is not None:
            left = plan_lines(outcome.after, columns, footer=False)
            lines += ["", "Still to do:"] + left[2:] if left else []
    lines += ["", "%s (exit %d)" % (outcome.summary, outcome.exit_code)]
    return "\n".join(lines)
