"""A fix: what to do about a failure (a title, steps in words, commands), shared by rules and failures.

It sits below the rest of the engine (it needs only the template) so that
every kind of entry (rules, failures, workloads) can hold one.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

Line = Union[str, Tuple[str, ...]]  # a text, or alternatives: the first whose values are all known is shown

from preflight.engine import template


class Fix(NamedTuple):
    """What to do about a failure: a title, steps in words, and commands to run."""

    id: str
    title: str
    steps: List[Line]
    commands: List[Line]
    origin: str
    changes: str = ""  # what doing it changes that later steps depend on: "driver" (it installs another branch)

    def texts(self) -> List[str]:
        flat: List[str] = [self.title]
        for line in list(self.steps) + list(self.commands):
            flat.extend([line] if isinstance(line, str) else line)
        return flat

    def render(self, values: Dict[str, Any], title_words: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        """The fix with values filled in. A step or command that still names an unknown value is left
        out rather than shown with a hole; the title keeps ``title_words`` for unknown values."""
        title = template.render(self.title, values)
        steps, commands = _render_lines(self.steps, values), _render_lines(self.commands, values)
        if any("pip" in command and "install" in command for command in commands):
            # Every pin checked against what exists for the job's Python (preflight.knowledge.pip_commands).
            from preflight.knowledge.pip_commands import review

            commands, more = review(commands, values.get("python_version"), values.get("platform"))
            steps += [step for number, step in enumerate(more) if step not in more[:number] and step not in steps]
        # Alternatives and the review's additions can say one thing twice: each once, in order.
        return {"title": template.render(title, title_words or {}), "steps": list(dict.fromkeys(steps)),
                "commands": list(dict.fromkeys(commands))}


def _render_lines(lines: List[Line], values: Dict[str, Any]) -> List[str]:
    rendered: List[str] = []
    for line in lines:
        for choice in ([line] if isinstance(line, str) else line):
            known = template.render_known([choice], values)
            if known:
                rendered.extend(known)
                break
    return rendered


def json_schema() -> Dict[str, Any]:
    """A rendered fix in a JSON document (null where a result has none)."""
    from preflight.files.json_schema import STR, nullable, obj, strings

    return nullable(obj(["title", "steps", "commands"], {"title": STR, "steps": strings(), "commands": strings()}))
