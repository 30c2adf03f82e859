"""The report as JUnit XML, for CI systems: one test case per rule and subject.

A result that makes the check fail (exit 1) is a <failure> (an <error> when
the fact could not be known), carrying the message and the fix; a skipped
rule is <skipped>; a warning that does not fail the check is reported in
<system-out> of a passing case, so the CI verdict matches the exit code.
"""

from __future__ import annotations

from xml.etree import ElementTree

from preflight.report import Report


def _fix_text(fix) -> str:
    if not fix:
        return ""
    from preflight.render.blocks import fix_lines

    return "\n".join(fix_lines(fix))


def render(report: Report) -> str:
    blocking = {id(r) for r in report.blocking()}
    counts = report.counts()
    suites = ElementTree.Element("testsuites", name="preflight")
    suite = ElementTree.SubElement(suites, "testsuite", {
        "name": "preflight %s" % report.profile,
        "tests": str(len(report.results)),
        "failures": str(sum(1 for r in report.results if id(r) in blocking and r.status != "error")),
        "errors": str(sum(1 for r in report.results if id(r) in blocking and r.status == "error")),
        "skipped": str(counts["skip"]),
        "time": "%.3f" % report.seconds,
    })
    from preflight.terminal import printable

    for result in report.results:
        message = printable(result.message)  # XML 1.0 cannot carry control characters
        case = ElementTree.SubElement(suite, "testcase", {
            "classname": "preflight.%s" % report.profile, "name": "%s [%s]" % (result.id, result.subject), "time": "0"})
        detail = "\n".join(part for part in (message, "expected: %s" % result.expected, _fix_text(result.fix))
                           if part)
        if result.status == "skip":
            ElementTree.SubElement(case, "skipped", message=message)
        elif id(result) in blocking:
            tag = "error" if result.status == "error" else "failure"
            element = ElementTree.SubElement(case, tag, message=message, type=result.status)
            element.text = detail
        elif result.status != "pass":
            ElementTree.SubElement(case, "system-out").text = "%s (%s): %s" % (result.status.upper(), result.severity,
                                                                               detail)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(suites, encoding="unicode") + "\n"
