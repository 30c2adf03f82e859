"""The report for people: one line per result (identical passing GPUs share one), the fix under each failure,
a "fix first" list, a summary; wrapped to the terminal's width."""

from __future__ import annotations

from typing import List, NamedTuple, Tuple

from preflight import __version__
from preflight.engine.evaluate import Result
from preflight.render.blocks import COLORS, LABELS, fix_lines, paint, width, wrap
from preflight.fix_plan import FixPlan
from preflight.report import Report


class Line(NamedTuple):
    result: Result
    subject: str
    message: str


def _plural(count: int, word: str) -> str:
    return "%d %s%s" % (count, word, "" if count == 1 else "s")


def _subjects(subjects: List[str]) -> str:
    """gpu0, gpu1, gpu2, gpu3, gpu5 -> gpu0-3,5."""
    indices = sorted(int(s[3:]) for s in subjects)
    ranges: List[Tuple[int, int]] = []
    for index in indices:
        if ranges and index == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], index)
        else:
            ranges.append((index, index))
    return "gpu" + ",".join("%d" % a if a == b else "%d-%d" % (a, b) for a, b in ranges)


def collapsed(results: List[Result]) -> List[Line]:
    """Passing (and skipped) GPU results of one rule with the same message, as one line: gpu0-7."""
    lines: List[Line] = []
    index = 0
    while index < len(results):
        result = results[index]
        group = [result]
        if result.status in ("pass", "skip") and result.subject.startswith("gpu") and not result.fix:
            message = result.message
            while index + len(group) < len(results):
                other = results[index + len(group)]
                if (other.id, other.status) != (result.id, result.status) or not other.subject.startswith("gpu") \
                        or other.message != message:
                    break
                group.append(other)
            if len(group) > 1:
                lines.append(Line(result, _subjects([r.subject for r in group]), message))
                index += len(group)
                continue
        lines.append(Line(result, result.subject, result.message))
        index += 1
    return lines


def plan_lines(plan: FixPlan, columns: int, footer: bool = True) -> List[str]:
    """"Fix first": the plan's steps in order, each with the pip commands preflight fix runs for it (the other
    commands are in the fixes above), and who does what."""
    if not plan.steps:
        return []
    lines = ["", "Fix first, in this order:"]
    for step in plan.steps:
        lines += wrap("%d. %s (%s)" % (step.number, step.title, ", ".join(step.where)), columns, "  ", "     ")
        for command in step.run:
            lines.append("     $ " + command)
        for note in step.notes:
            lines += wrap(note, columns, "     ", "     ")
    pip = [str(step.number) for step in plan.pip_steps]
    if pip and footer:
        yours = [str(step.number) for step in plan.yours]
        lines += wrap("preflight fix, with these options, runs step%s %s (pip, into %s) and checks again%s." % (
            "s" if len(pip) > 1 else "", ", ".join(pip), plan.interpreter,
            "; step%s %s %s yours" % ("s" if len(yours) > 1 else "", ", ".join(yours),
                                      "are" if len(yours) > 1 else "is") if yours else ""),
            columns, "  ", "  ")
    return lines


def render(report: Report, quiet: bool = False, color: bool = False, show_exit: bool = True,
           columns: int = 0) -> str:
    """``show_exit``: end the summary with the exit code (exec says its own: the command's, or 78)."""
    columns = columns or width()
    shown = collapsed([r for r in report.results if not quiet or r.status in ("fail", "warn", "error")])
    id_width = max([len(line.result.id) for line in shown] + [10])
    subject_width = max([len(line.subject) for line in shown] + [6])
    lines: List[str] = []
    if not quiet:
        from preflight import inventory

        header = "preflight %s | %s | profile %s | facts: %s%s" % (
            __version__, inventory.line(report.host, report.inventory()), report.profile, report.facts_source,
            " | strict" if report.strict else "")
        lines += wrap(header, columns, "", "  ")
    for line in shown:
        result = line.result
        mark = paint(LABELS[result.status].ljust(5), COLORS[result.status], color)
        severity = " (%s)" % result.severity if result.status == "fail" and result.severity != "error" else ""
        prefix = "%s  %s  %s  " % (LABELS[result.status].ljust(5), result.id.ljust(id_width),
                                   line.subject.ljust(subject_width))
        wrapped = wrap(line.message + severity, columns, prefix, " " * min(len(prefix), columns // 2))
        lines.append(mark + wrapped[0][5:])
        lines += wrapped[1:]
        if result.fix:
            lines.extend(fix_lines(result.fix, " " * 7, columns=columns))
    counts = report.counts()
    verdict = paint("OK", COLORS["pass"], color) if report.ok else paint("FAILED", COLORS["fail"], color)
    if not report.ok:
        lines += plan_lines(report.plan, columns)
    if lines and not quiet:
        lines.append("")
    for note in report.notes:
        lines += wrap(note, columns, "note: ", "      ")
    lines.append("%d passed, %s, %d failed, %s, %d skipped: %s%s" % (
        counts["pass"], _plural(counts["warn"], "warning"), counts["fail"], _plural(counts["error"], "error"),
        counts["skip"], verdict, " (exit %d)" % report.exit_code if show_exit else ""))
    return "\n".join(lines)
