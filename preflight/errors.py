"""Errors a user can cause, each with the exit code the CLI documents.

Anything raised as a ``PreflightError`` reaches the user as one clear message
(what is wrong, where, and what to do) instead of a traceback.
"""

from __future__ import annotations



class ExitCode:
    """Every exit code preflight documents (docs/configuration.md: Exit codes). Stable."""

    OK = 0                # no error-severity rule failed (diagnose: nothing known found)
    FAILED = 1            # a check failed or could not be evaluated (diagnose: a known problem found)
    USAGE = 2             # bad usage, a bad input file, or the report could not be written
    INTERNAL = 3          # a bug in preflight
    SLURM_FAILED = 4      # preflight slurm: scontrol missing, failing or not answering
    SLURM_UNKNOWN = 5     # preflight slurm: a probe timed out or the configuration is broken; node left as it was
    EXEC_BLOCKED = 78     # preflight exec: the checks failed, the command was not started (EX_CONFIG; --fail-exit-code)
    CANNOT_RUN = 126      # preflight exec: the command cannot be run
    NOT_FOUND = 127       # preflight exec: the command is not found
    INTERRUPTED = 130     # SIGINT (128 + 2); other signals: 128 + their number


class NpdCode:
    """node-problem-detector's plugin protocol (check --format npd)."""

    OK = 0
    PROBLEM = 1
    UNKNOWN = 2



class PreflightError(Exception):
    """A problem with the user's input; exit code 2."""

    exit_code = ExitCode.USAGE

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else "%s\n  hint: %s" % (self.message, self.hint)


def suggestions(word: str, choices) -> list:
    """Up to three of ``choices`` that look like ``word`` (a typo's likely meaning)."""
    import difflib  # only for a mistyped word

    return difflib.get_close_matches(word, list(choices), n=3)


def close_matches(word: str, choices) -> str:
    """" (did you mean a or b?)" for a message, or "" when nothing is close."""
    close = suggestions(word, choices)
    return " (did you mean %s?)" % " or ".join(close) if close else ""


class RuleFileError(PreflightError):
    """A rule file cannot be read, parsed or validated: ``path:LINE: kind 'id': problem``."""

    def __init__(self, path: str, problem: str, rule_id: str = "", hint: str = "", kind: str = "rule",
                 line=None) -> None:
        place = "%s:%d" % (path, line) if line else str(path)
        where = "%s: %s '%s'" % (place, kind, rule_id) if rule_id else place
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
    """The report cannot be written where it should go (a missing folder, a folder given as a file name)."""


class WriteFailed(OutputError):
    """The destination was right but the bytes did not land (a full disk, an I/O error, a closed standard output):
    a warning that keeps the check's own verdict, never a verdict on the machine."""


class ProbeError(Exception):
    """A probe ran but could not produce its facts; the message says why (the facts become unknown)."""


class ProbeTimeout(ProbeError):
    """A probe's helper gave no answer within the deadline (recorded as a timeout, not a failure)."""

    def __init__(self, message: str, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds
