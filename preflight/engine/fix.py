"""A fix: what to do about a failure (a title, steps in words, commands), shared by rules and failures.

It sits below the rest of the engine (it needs only the template) so that
every kind of entry (rules, failures, workloads) can hold one.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional

from preflight.engine import template


class Fix(NamedTuple):
    """What to do about a failure: a title, steps in words, and commands to run."""

    id: str
    title: str
    steps: List[str]
    commands: List[str]
    origin: str

    def texts(self) -> List[str]:
        return [self.title] + self.steps + self.commands

    def render(self, values: Dict[str, Any], title_words: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        """The fix with values filled in. A step or command that still names an unknown value is left
        out rather than shown with a hole; the title keeps ``title_words`` for unknown values."""
        title = template.render(self.title, values)
        return {
            "title": template.render(title, title_words or {}),
            "steps": template.render_known(self.steps, values),
            "commands": template.render_known(self.commands, values),
        }
