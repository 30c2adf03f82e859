"""The report for people: one line per result (identical passing GPUs share one), the fix under each failure,
a "fix first" list, a summary; wrapped to the terminal's width."""

from __future__ import annotations

from typing import List, NamedTuple, Tuple

from preflight import __version__
from preflight.engine.evaluate import Result
from preflight.render.blocks import COLORS, LABELS, fix_lines, paint, width, wrap
from preflight.report import Report, blocks


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


def fix_first(results: List[Result], strict: bool = False) -> List[str]:
    """The blocking results' fixes, once each, in the order to do them, with what one fix answers merged in.

    The order and what answers what are the rules' own (``fix_order``, ``answers`` in their files): the driver
    before torch's CUDA build, torch before its kernels; one action, one line.
    """
    blocking = [r for r in results if r.fix and blocks(r.status, r.severity, strict)]
    failing = {r.id for r in blocking}
    answered_by = {answered: r.id for r in blocking for answered in r.rule.rule.answers}
    items: List[Tuple[Tuple[int, int], str, List[str]]] = []  # (order, fix title, what it answers)
    by_title = {}
    for position, result in enumerate(blocking):
        if answered_by.get(result.id) in failing:
            continue  # told with the fix that answers it
        title = result.fix["title"]
        where = result.id if result.subject == "system" else "%s on %s" % (result.id, result.subject)
        if title in by_title:
            by_title[title][2].append(where)
            continue
        order = (result.rule.rule.fix_order, position)
        answered = [rule for rule in result.rule.rule.answers if rule in failing]
        item = (order, title, [where] + answered)
        by_title[title] = item
        items.append(item)
    return ["%d. %s (%s)" % (number, title, ", ".join(where))
            for number, (_, title, where) in enumerate(sorted(items, key=lambda item: item[0]), 1)]


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
    first = fix_first(report.results, report.strict) if not report.ok else []
    if first:
        lines += ["", "Fix first, in this order:"]
        for item in first:
            lines += wrap(item, columns, "  ", "     ")
    if lines and not quiet:
        lines.append("")
    for note in report.notes:
        lines += wrap(note, columns, "note: ", "      ")
    lines.append("%d passed, %s, %d failed, %s, %d skipped: %s%s" % (
        counts["pass"], _plural(counts["warn"], "warning"), counts["fail"], _plural(counts["error"], "error"),
        counts["skip"], verdict, " (exit %d)" % report.exit_code if show_exit else ""))
    return "\n".join(lines)
