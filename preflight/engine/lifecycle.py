"""Rule and failure ids that changed: renamed ids lead to their new id, retired ids are skipped, each with a warning.

A site configuration, a script's --select, --ignore and --set, or ``preflight explain`` may name an id a later
preflight renamed or retired. An unknown id is an error (a typo must not pass), so such ids are kept as data,
as ruff keeps its redirected codes: a rule file (rules/lifecycle.toml for the shipped ones) holds::

    [[renamed]]
    id = "host.shared_memory"    # the old id
    now = "host.shm"             # the id that replaces it (a rule, a failure or a family)
    since = "0.2.0"              # the release (of preflight, or of a site's rule files) that renamed it

    [[retired]]
    id = "gpu.legacy_check"
    since = "0.2.0"
    why = "NVML no longer reports it; gpu.health covers the same fault"

An old id then selects, ignores or sets its new rule with a warning that says to write the new id; a retired id
selects nothing and warns. Nothing is guessed: only ids listed here are redirected.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from preflight.engine.fields import entry_reader
from preflight.errors import RuleFileError

_KEYS = {"renamed": {"id", "now", "since"}, "retired": {"id", "since", "why"}}


class Renamed(NamedTuple):
    id: str
    now: str
    since: str
    origin: str


class Retired(NamedTuple):
    id: str
    since: str
    why: str
    origin: str


def build_renamed(raw: Dict[str, Any], path: str, ruleset, table=()) -> Renamed:
    entry = entry_reader(raw, path, "renamed", ruleset.fixes, table)
    entry.check_keys(_KEYS["renamed"], "a [[renamed]] entry")
    return Renamed(entry.entry_id, entry.string("now", required=True), entry.string("since", required=True), path)


def build_retired(raw: Dict[str, Any], path: str, ruleset, table=()) -> Retired:
    entry = entry_reader(raw, path, "retired", ruleset.fixes, table)
    entry.check_keys(_KEYS["retired"], "a [[retired]] entry")
    return Retired(entry.entry_id, entry.string("since", required=True), entry.string("why", required=True), path)


def check(ruleset) -> None:
    """An old id that is also a current one, a new id that names nothing loaded, or a loop: a bad rule file."""
    current = _current_ids(ruleset)
    for old in list(ruleset.renamed.values()) + list(ruleset.retired.values()):
        if old.id in current:
            raise RuleFileError(old.origin, "'%s' is listed as renamed or retired, but a loaded entry still has it"
                                % old.id, old.id, kind="renamed" if isinstance(old, Renamed) else "retired")
    for old in ruleset.renamed.values():
        now, _ = resolve(ruleset, old.id)
        # Without the failure catalog (check does not load it) a new id may be a failure's: judged when it is loaded.
        if now is not None and now not in current and ruleset.failures:
            raise RuleFileError(old.origin, "'now' names '%s', which nothing loaded here has as its id" % old.now,
                                old.id, kind="renamed")


def resolve(ruleset, entry_id: str) -> Tuple[Optional[str], str]:
    """(the id to use, what to tell the user or ""): the id itself when nothing is known of it, its newest id when it
    was renamed (and how to write it), None when it was retired (and why: the caller says what it does instead)."""
    renames: List[Renamed] = []
    while entry_id in ruleset.renamed:
        renames.append(ruleset.renamed[entry_id])
        entry_id = renames[-1].now
        if entry_id in [old.id for old in renames]:
            raise RuleFileError(renames[0].origin, "the renames starting at '%s' form a loop" % renames[0].id,
                                renames[0].id, kind="renamed")
    if entry_id in ruleset.retired:
        gone = ruleset.retired[entry_id]
        return None, "'%s' was retired in %s (%s)" % (renames[0].id if renames else gone.id, gone.since, gone.why)
    if renames:
        return entry_id, "'%s' is now '%s' (renamed in %s): write the new id" % (renames[0].id, entry_id,
                                                                                renames[-1].since)
    return entry_id, ""


def _current_ids(ruleset) -> set:
    return set(ruleset.rules) | set(ruleset.failures) | set(ruleset.families)
