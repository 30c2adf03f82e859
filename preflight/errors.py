"""Errors a user can cause, each with the exit code the CLI documents.

Anything raised as a ``PreflightError`` reaches the user as one clear message
(what is wrong, where, and what to do) instead of a traceback.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3


class PreflightError(Exception):
    """A problem with the user's input; exit code 2."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else "%s\n  hint: %s" % (self.message, self.hint)


class RuleFileError(PreflightError):
    """A rule file cannot be read, parsed or validated."""

    def __init__(self, path: str, problem: str, rule_id: str = "", hint: str = "", kind: str = "rule") -> None:
        where = "%s: %s '%s'" % (path, kind, rule_id) if rule_id else str(path)
        super().__init__("%s: %s" % (where, problem), hint)
        self.path = path
        self.rule_id = rule_id
        self.problem = problem


class FactsFileError(PreflightError):
    """A saved facts snapshot cannot be read or does not have the expected shape."""


class FixtureError(PreflightError):
    """An NVML fixture file cannot be replayed."""


class SelectionError(PreflightError):
    """--select/--ignore/--set name a rule or a key that does not exist, or a bad value."""


class OutputError(PreflightError):
    """The report cannot be written where it should go (a full disk, a closed standard output)."""
