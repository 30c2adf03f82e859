"""preflight config show for people: the settings in effect here, where each came from, which sections apply."""

from __future__ import annotations

from typing import Any, Dict, List

from preflight.terminal import printable


def render(document: Dict[str, Any]) -> str:
    """The text of the document ``config show --format json`` writes."""
    def known(values) -> str:
        return "unknown" if values is None else (", ".join(values) or "none")

    here = document["target"]
    lines: List[str] = [
        "configuration: %s" % (document["config"] or "none (no --config, PREFLIGHT_CONFIG or %s)"
                               % document["system_config"]),
        "host %s | GPUs: %s | Slurm partitions: %s | features: %s" % (
            here["host"], known(here["gpus"]), known(here["partitions"]), known(here["features"])),
        "",
    ]
    rows = [(row["setting"], row["value"], row["from"]) for row in document["settings"]]
    width = max(len(key) for key, _, _ in rows)
    value_width = min(40, max(len(value) for _, value, _ in rows))
    for key, value, where in rows:
        lines.append("%-*s  %-*s  %s" % (width, key, value_width, value, where))
    if document["sections"]:
        lines.append("")
        for section in document["sections"]:
            where = "line %d" % section["line"] if section["line"] else "?"
            lines.append("%s (%s): %s" % (section["section"], where, "applies" if section["applies"]
                                          else "does not apply: " + section["why_not"]))
    for problem in document["problems"]:
        lines += ["", "PROBLEM: %s" % problem]
    return "\n".join(printable(line) for line in lines)  # values from the file and the machine, shown as text
