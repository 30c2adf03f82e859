"""``{name}`` substitution for rule messages and fixes.

Only plain names are replaced, from a dictionary of values; there is no
attribute access, indexing or formatting language, so a rule file cannot
reach into the program. Unknown names stay as written. ``{{`` and ``}}`` give
literal braces; shell forms such as ``${HOME}`` are left alone.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, List, Mapping, Set

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([a-z_][a-z0-9_]*)\}")


def placeholders(text: str) -> Set[str]:
    return {m.group(1) for m in _PLACEHOLDER.finditer(text) if m.group(1) and not _is_shell(text, m.start())}


def _is_shell(text: str, position: int) -> bool:
    return position > 0 and text[position - 1] == "$"


def render(text: str, values: Mapping[str, Any]) -> str:
    def replace(match: "re.Match[str]") -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = match.group(1)
        if _is_shell(text, match.start()) or name not in values or values[name] is None:
            return token
        return str(values[name])

    return _PLACEHOLDER.sub(replace, text)


def render_known(texts: Iterable[str], values: Mapping[str, Any]) -> List[str]:
    """Render each text; leave out those that still name a value that is unknown (missing or None)."""
    rendered = []
    for text in texts:
        filled = render(text, values)
        if not placeholders(filled):
            rendered.append(filled)
    return rendered
