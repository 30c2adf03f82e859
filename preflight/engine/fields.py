"""Reading one entry of a rule file ([[rule]], [[fix]], [[failure]], [[clue]], [[workload]], [[gpu]]): the typed
reader of preflight.files.toml_entries, with fixes and placeholders. Every problem, an unknown key too, is a
RuleFileError naming the file, the line, the entry and the key."""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from preflight.engine import template
from preflight.engine.fix import Fix
from preflight.errors import RuleFileError, close_matches
from preflight.files.toml_entries import Entry, Table

ENTRY_ID = r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$"
FIX_ID = r"^[a-z][a-z0-9_.-]*$"
FIX_KEYS = {"id", "title", "steps", "commands", "changes"}
# What a fix's step changes beyond the job's environment, which later steps of a plan depend on (fix_plan).
FIX_CHANGES = ("driver",)


class EntryReader(Entry):
    """An entry of a rule file (preflight.files.toml_entries.Entry) that may name fixes and placeholders."""

    def __init__(self, raw: Dict[str, Any], path: str, kind: str, entry_id: str,
                 fixes: Dict[str, Fix], table: Table = ()) -> None:
        super().__init__(raw, path, table, "%s '%s'" % (kind, entry_id) if entry_id else "")
        self.kind = kind
        self.entry_id = entry_id
        self.fixes = fixes

    def error(self, problem: str, hint: str = "", key: Optional[str] = None) -> RuleFileError:
        return RuleFileError(self.path, problem, self.entry_id, hint=hint, kind=self.kind, line=self.line(key))

    def check_keys(self, known: Iterable[str], what: str = "", hint: str = "") -> None:
        super().check_keys(known, what or "a %s" % self.kind, hint)

    def lines(self, key: str) -> List[Union[str, Tuple[str, ...]]]:
        """A fix's steps or commands: each a string, or a list of alternatives (the first whose values are
        all known is shown, so a fix keeps its main step with generic words when values are unknown)."""
        value = self.raw.get(key, [])
        ok = isinstance(value, list) and all(
            isinstance(item, str) or (isinstance(item, list) and item and all(isinstance(i, str) for i in item))
            for item in value)
        if not ok:
            raise self.error("'%s' must be a list whose items are strings or lists of alternative strings, found %r"
                             % (key, value))
        return [item if isinstance(item, str) else tuple(item) for item in value]

    def check_placeholders(self, texts: Iterable[str], allowed: set, what: str) -> None:
        for text in texts:
            unknown = sorted(template.placeholders(text) - allowed)
            if unknown:
                raise self.error("%s uses unknown placeholder(s) %s in %r (known here: %s)"
                                 % (what, ", ".join("{%s}" % u for u in unknown), text, ", ".join(sorted(allowed))))

    def fix(self, value: Any, name: str, allowed: set) -> Fix:
        """A fix named by id, or written inline as a table."""
        if isinstance(value, str):
            if value not in self.fixes:
                raise self.error("%s names fix '%s', which no rule file defines%s"
                                 % (name, value, close_matches(value, self.fixes)))
            return self.fixes[value]
        if isinstance(value, dict):
            inline = self.child(value, tuple(name.split(".", 1)))
            return build_fix(inline, "%s.%s" % (self.entry_id, name.replace("fixes.", "")), allowed)
        raise self.error("%s must be a fix id or a table with title, steps and commands" % name)


def entry_reader(raw: Dict[str, Any], path: str, kind: str, fixes: Dict[str, Fix],
                 table: Table = (), pattern=ENTRY_ID, example: str = "dotted lowercase words, e.g. 'gpu.memory'"
                 ) -> EntryReader:
    """A reader for one entry (the ``table``-th of its kind in the file); its id must match ``pattern``."""
    plain = EntryReader(raw, path, kind, "", fixes, table)
    entry_id = plain.string("id", required=True)
    if not re.match(pattern, entry_id):
        raise plain.error("%s id %r must be %s" % (kind, entry_id, example), key="id")
    return EntryReader(raw, path, kind, entry_id, fixes, table)


def build_fix(reader: EntryReader, fix_id: str, allowed: set) -> Fix:
    if not re.match(FIX_ID, fix_id):
        raise reader.error("fix id %r must be lowercase letters, digits, '-', '_' or '.'" % fix_id)
    reader.check_keys(FIX_KEYS, "a fix")
    changes = reader.string("changes", default="")
    if changes and changes not in FIX_CHANGES:
        raise reader.error("changes = %r: a fix can say it changes %s" % (changes, ", ".join(FIX_CHANGES)))
    fix = Fix(fix_id, reader.string("title", required=True), reader.lines("steps"), reader.lines("commands"),
              reader.path, changes)
    reader.check_placeholders(fix.texts(), allowed, "fix '%s'" % fix_id)
    return fix



