"""Pieces every text renderer shares: status labels and colours, and the fix block."""

from __future__ import annotations

from typing import Any, Dict, List

LABELS = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "SKIP", "error": "ERROR"}
COLORS = {"pass": "32", "fail": "1;31", "warn": "33", "skip": "2", "error": "1;35"}


def paint(text: str, code: str, color: bool) -> str:
    return "\033[%sm%s\033[0m" % (code, text) if color else text


def fix_lines(fix: Dict[str, Any], indent: str = "", label: str = "fix: ") -> List[str]:
    """A rendered fix (title, steps, commands) as lines: "fix: title", "  - step", "  $ command"."""
    lines = ["%s%s%s" % (indent, label, fix["title"])]
    lines += ["%s  - %s" % (indent, step) for step in fix["steps"]]
    lines += ["%s  $ %s" % (indent, command) for command in fix["commands"]]
    return lines
