"""Pieces every text renderer shares: status labels and colours, and the fix block."""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List

from preflight.terminal import printable

LABELS = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "SKIP", "error": "ERROR"}
COLORS = {"pass": "32", "fail": "1;31", "warn": "33", "skip": "2", "error": "1;35"}


_MARKDOWN_SPECIAL = "\\`*_{}[]<>#|!"


def markdown_text(text: str) -> str:
    """A value inside Markdown: ``printable`` (no newline can start a heading), and Markdown's own characters
    escaped, so a host name or message cannot add a link, HTML, emphasis or a table cell."""
    text = printable(str(text))
    if not any(character in _MARKDOWN_SPECIAL for character in text):
        return text
    return "".join("\\" + character if character in _MARKDOWN_SPECIAL else character for character in text)


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value) -> str:
    """A value for a CSV cell: ``printable``, and a leading = + - @ neutralised with a quote, so a spreadsheet
    shows it instead of running it as a formula (=HYPERLINK(...), the OWASP list)."""
    text = "" if value is None else str(value)
    if text.startswith(_FORMULA):
        text = "'" + text
    return printable(text)


def paint(text: str, code: str, color: bool) -> str:
    return "\033[%sm%s\033[0m" % (code, text) if color else text


DEFAULT_WIDTH = 100


def width(stream=None) -> int:
    """Columns to fit: COLUMNS, else the terminal's, else 100."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= 40:
        return int(columns)
    try:
        target = stream or sys.stdout
        if target is not None and target.isatty():
            return max(40, os.get_terminal_size(target.fileno()).columns)
    except (OSError, ValueError, AttributeError):
        pass
    return DEFAULT_WIDTH


MAX_WORD = 1000  # characters of one word shown; a longer one (a corrupt GPU or host name) is cut for display


def _words(text: str):
    """The words of ``text``; one longer than MAX_WORD is cut, and what was cut is said in words of its own."""
    for word in text.split():
        if len(word) <= MAX_WORD:
            yield word
        else:
            yield word[:MAX_WORD] + "..."
            yield "[%d" % (len(word) - MAX_WORD)
            yield "more"
            yield "characters]"


def wrap(text: str, columns: int, first: str = "", hanging: str = "") -> List[str]:
    """``text`` in lines of at most ``columns``, the first after ``first``, the rest after ``hanging``; a word
    longer than a whole line (a long path in a log excerpt) is broken too, and one longer than MAX_WORD is cut.
    Commands never come here: they are printed whole, to be copied. (Greedy, like textwrap without its import:
    every check's header is wrapped. Linear in the text's length, however long one word is.) The text is made
    ``printable`` first: it comes from the machine, files and logs."""
    text = printable(text)
    if columns <= 0 or len(first) + len(text) <= columns:
        return [first + text]
    lines: List[str] = []
    line, empty = first, True  # empty: no word on this line yet (only its indent)
    for word in _words(text):
        candidate = line + word if empty else line + " " + word
        if len(candidate) <= columns:
            line, empty = candidate, False
            continue
        if not empty:
            lines.append(line)
            line, empty = hanging, True
        offset = 0
        room = max(1, columns - len(line))
        while len(word) - offset > room:  # a word longer than a line: break it (by index: no copies of the rest)
            lines.append(line + word[offset:offset + room])
            offset += room
            line = hanging
            room = max(1, columns - len(line))
        line, empty = line + word[offset:], False
    if not empty or not lines:
        lines.append(line)
    return lines


def fix_lines(fix: Dict[str, Any], indent: str = "", label: str = "fix: ", columns: int = 0) -> List[str]:
    """A rendered fix (title, steps, commands) as lines: "fix: title", "  - step", "  $ command"; with ``columns``,
    titles and steps wrap with hanging indents, and commands are never broken (they are copied whole)."""
    lines = wrap(fix["title"], columns, indent + label, indent + " " * len(label))
    for step in fix["steps"]:
        lines += wrap(step, columns, indent + "  - ", indent + "    ")
    lines += ["%s  $ %s" % (indent, printable(command)) for command in fix["commands"]]
    return lines
