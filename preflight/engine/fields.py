"""Typed reading of one entry ([[rule]], [[fix]] or [[failure]]) of a rule file.

Every problem becomes a RuleFileError naming the file, the entry and the key;
unknown keys become warnings.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Tuple, Union

from preflight.engine import template
from preflight.engine.fix import Fix
from preflight.errors import RuleFileError

ENTRY_ID = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")
FIX_ID = re.compile(r"^[a-z][a-z0-9_.-]*$")
FIX_KEYS = {"id", "title", "steps", "commands"}


class EntryReader:
    def __init__(self, raw: Dict[str, Any], path: str, kind: str, entry_id: str,
                 warnings: List[str], fixes: Dict[str, Fix]) -> None:
        self.raw = raw
        self.path = path
        self.kind = kind
        self.entry_id = entry_id
        self.warnings = warnings
        self.fixes = fixes

    def error(self, problem: str, hint: str = "") -> RuleFileError:
        return RuleFileError(self.path, problem, self.entry_id, hint=hint, kind=self.kind)

    def warn_unknown(self, known: Iterable[str]) -> None:
        allowed = set(known)
        for key in self.raw:
            if key not in allowed:
                where = "%s '%s': " % (self.kind, self.entry_id) if self.entry_id else ""
                self.warnings.append("%s: %sunknown key '%s' (ignored)" % (self.path, where, key))

    def string(self, key: str, required: bool = False, default: str = "") -> str:
        if key not in self.raw:
            if required:
                raise self.error("missing required key '%s'" % key)
            return default
        value = self.raw[key]
        if not isinstance(value, str) or (required and not value.strip()):
            raise self.error("'%s' must be a non-empty string, found %r" % (key, value))
        return value

    def string_list(self, key: str) -> List[str]:
        value = self.raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.error("'%s' must be a list of strings, found %r" % (key, value))
        return value

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
            inline = EntryReader(value, self.path, self.kind, self.entry_id, self.warnings, self.fixes)
            return build_fix(inline, "%s.%s" % (self.entry_id, name.replace("fixes.", "")), allowed)
        raise self.error("%s must be a fix id or a table with title, steps and commands" % name)


def entry_reader(raw: Dict[str, Any], path: str, kind: str, warnings: List[str], fixes: Dict[str, Fix]) -> EntryReader:
    """A reader for one entry; the entry's id must be a dotted lowercase name."""
    plain = EntryReader(raw, path, kind, "", warnings, fixes)
    entry_id = plain.string("id", required=True)
    if kind != "fix" and not ENTRY_ID.match(entry_id):
        raise plain.error("%s id %r must be dotted lowercase words, e.g. 'gpu.memory'" % (kind, entry_id))
    return EntryReader(raw, path, kind, entry_id, warnings, fixes)


def build_fix(reader: EntryReader, fix_id: str, allowed: set) -> Fix:
    if not FIX_ID.match(fix_id):
        raise reader.error("fix id %r must be lowercase letters, digits, '-', '_' or '.'" % fix_id)
    reader.warn_unknown(FIX_KEYS)
    fix = Fix(fix_id, reader.string("title", required=True), reader.lines("steps"), reader.lines("commands"),
              reader.path)
    reader.check_placeholders(fix.texts(), allowed, "fix '%s'" % fix_id)
    return fix


def suggestions(word: str, choices: Iterable[str]) -> List[str]:
    """Up to three of ``choices`` that look like ``word`` (a typo's likely meaning)."""
    import difflib

    return difflib.get_close_matches(word, list(choices), n=3)


def close_matches(word: str, choices: Iterable[str]) -> str:
    """" (did you mean a or b?)" for a message, or "" when nothing is close."""
    close = suggestions(word, choices)
    return " (did you mean %s?)" % " or ".join(close) if close else ""


def optional_int(reader: EntryReader, key: str, default: int, low: int, high: int) -> int:
    value = reader.raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise reader.error("'%s' must be a whole number from %d to %d, found %r" % (key, low, high, value))
    return value

