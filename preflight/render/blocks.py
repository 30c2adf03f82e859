"""Pieces every text renderer shares: status labels and colours, and the fix block."""

from __future__ import annotations

from typing import Any, Dict, List

LABELS = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "SKIP", "error": "ERROR"}
COLORS = {"pass": "32", "fail": "1;31", "warn": "33", "skip": "2", "error": "1;35"}


def paint(text: str, code: str, color: bool) -> str:
    return "\033[%sm%s\033[0m" % (code, text) if color else text


DEFAULT_WIDTH = 100


def width(stream=None) -> int:
    """Columns to fit: COLUMNS, else the terminal's, else 100."""
    import os

    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= 40:
        return int(columns)
    try:
        import sys

        target = stream or sys.stdout
        if target is not None and target.isatty():
            return max(40, os.get_terminal_size(target.fileno()).columns)
    except (OSError, ValueError, AttributeError):
        pass
    return DEFAULT_WIDTH


def wrap(text: str, columns: int, first: str = "", hanging: str = "") -> List[str]:
    """``text`` in lines of at most ``columns``, the first after ``first``, the rest after ``hanging``; a word
    longer than a whole line (a long path in a log excerpt) is broken too. Commands never come here: they are
    printed whole, to be copied. (Greedy, like textwrap without its import: every check's header is wrapped.)"""
    if columns <= 0 or len(first) + len(text) <= columns:
        return [first + text]
    lines: List[str] = []
    line, empty = first, True  # empty: no word on this line yet (only its indent)
    for word in text.split():
        candidate = line + word if empty else line + " " + word
        if len(candidate) <= columns:
            line, empty = candidate, False
            continue
        if not empty:
            lines.append(line)
            line, empty = hanging, True
        room = max(1, columns - len(line))
        while len(word) > room:  # a word longer than a line: break it
            lines.append(line + word[:room])
            word, line = word[room:], hanging
            room = max(1, columns - len(line))
        line, empty = line + word, False
    if not empty or not lines:
        lines.append(line)
    return lines


def fix_lines(fix: Dict[str, Any], indent: str = "", label: str = "fix: ", columns: int = 0) -> List[str]:
    """A rendered fix (title, steps, commands) as lines: "fix: title", "  - step", "  $ command"; with ``columns``,
    titles and steps wrap with hanging indents, and commands are never broken (they are copied whole)."""
    lines = wrap(fix["title"], columns, indent + label, indent + " " * len(label))
    for step in fix["steps"]:
        lines += wrap(step, columns, indent + "  - ", indent + "    ")
    lines += ["%s  $ %s" % (indent, command) for command in fix["commands"]]
    return lines
