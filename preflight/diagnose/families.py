"""Families of failures: recognised by their structure, explained from a table of public data.

One catalog entry per message cannot keep up with the long tail of real failures. Most unseen ones belong to a
family whose meaning follows from a value in the message: a CUDA runtime error's name, number or text, an NCCL
result, an errno, a Windows error number (so a message in any language is recognised), a shared library that
cannot be opened, a Python API a release removed, an Xid in a pasted kernel log. A ``[[family]]`` entry
(rules/failures/families.toml) names the patterns that capture the value and the table (rules/knowledge/<table>.toml)
that explains it::

    id = "cuda.runtime_error"
    title = "CUDA runtime error {name} ({code}): {meaning}"   # the row's fields (every row has them)
    table = "cuda-runtime-errors"                             # rules/knowledge/cuda-runtime-errors.toml
    rows = "error"                                            # its array of rows: [[error]]
    key = ["name", "text", "code"]                            # row fields, tried in this order, against the
                                                              # pattern groups of the same names
    match = { text = "prefix" }                               # exact (default), prefix (the longest row value
                                                              # that begins the log's value), dotted (a module:
                                                              # the row's, or one inside it) or contains
    label = "name"                                            # the row field that names the finding: id/label
    priority = 45                                             # or by the row's kind:
    priorities = { device = 70, setup = 72 }
    quiet = ["harmless"]                                      # row kinds that are no problem: no finding
    patterns = [...]                                          # as a [[failure]]'s; named groups are the values
    cause = "..."                                             # may use the row's fields
    undetermined = ["which call failed first"]                # what the log cannot tell
    fix = { title = "...", steps = ["{step}"] }               # may use the row's fields and the groups

A row may hold ``when = { group = "regex" }``: it applies only when the log's value matches. A key field may be a
list, the wordings one code had across releases: any of them matches. A table may hold an
``[unlisted]`` row, used (with the log's value as its key field) when no row matches; without one, a value the
table does not know is no finding (a lookup table lists only what it can explain).

A family finding is reported with less confidence than a known failure: it names the family, what the table
says, and what the log could not tell. It is dropped when a known failure was found on the same line (the known
entry is more specific), unless the family ``supersedes`` that entry.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from preflight.diagnose import emitters
from preflight.diagnose.emitters import Emitter
from preflight.diagnose.failures import Failure, Pattern, pattern_from
from preflight.engine.fields import EntryReader, entry_reader
from preflight.engine.fix import Fix
from preflight.engine.loader import RuleSet
from preflight.engine.placeholders import all_placeholders

KNOWLEDGE = "knowledge"
MATCHES = ("exact", "prefix", "dotted", "contains")
_KEYS = {"id", "title", "table", "rows", "key", "match", "label", "priority", "priorities", "quiet", "patterns",
         "cause", "undetermined", "fix", "rules", "facts", "context", "supersedes", "examples", "source", "defaults",
         "emitted"}
MOST_ROWS = 16  # distinct rows of one family kept from one log (a table without an [unlisted] row bounds it too)


class Table(NamedTuple):
    """A knowledge table: rows of public facts about one family's values."""

    name: str
    path: str
    rows: List[Dict[str, Any]]
    unlisted: Optional[Dict[str, Any]]
    source: str


_tables: Dict[Tuple[str, str], Table] = {}


def load_table(name: str, rows_key: str) -> Table:
    """rules/knowledge/<name>.toml and its [[<rows_key>]] rows (read once per process)."""
    if (name, rows_key) in _tables:
        return _tables[(name, rows_key)]
    from preflight.errors import PreflightError
    from preflight.knowledge.shipped import data_dir, knowledge

    path = os.path.join(data_dir(), KNOWLEDGE, name + ".toml")
    data = knowledge(os.path.join(KNOWLEDGE, name + ".toml"), "knowledge table")
    rows = data.get(rows_key)
    if not isinstance(rows, list) or not rows or not all(isinstance(row, dict) for row in rows):
        raise PreflightError("knowledge table %s has no [[%s]] rows" % (path, rows_key))
    unlisted = data.get("unlisted")
    table = Table(name, path, rows, unlisted if isinstance(unlisted, dict) else None, str(data.get("source", "")))
    _tables[(name, rows_key)] = table
    return table


def _plain(value: Any) -> str:
    """A value as compared: case and surrounding space, quotes and end punctuation ignored."""
    return " ".join(str(value).split()).strip("'\"`.,;: ").lower()


class Family(NamedTuple):
    id: str
    title: str
    table: Table
    key: List[str]
    match: Dict[str, str]
    label: str
    priority: int
    priorities: Dict[str, int]
    quiet: List[str]
    patterns: List[Pattern]
    cause: str
    undetermined: List[str]
    fix: Fix
    rules: List[str]
    facts: List[str]
    context: List[str]
    supersedes: List[str]
    examples: List[str]
    source: str
    origin: str
    defaults: Dict[str, str] = {}  # words for a value a pattern may not capture (title, cause and fix use them)
    only_with: List[str] = []
    emitted: List[Emitter] = []  # where each wording is written, and by which releases (diagnose/emitters.py)

    def row(self, groups: Dict[str, str]) -> Optional[Dict[str, Any]]:
        """The table row the log's values name, or None (a value the table does not know, or a quiet row)."""
        for field in self.key:
            value = groups.get(field)
            if value is None or not str(value).strip():
                continue
            found = self._find(field, value, groups)
            if found is not None:
                return None if found.get("kind") in self.quiet else found
        if self.table.unlisted is None:
            return None
        for field in self.key:
            value = groups.get(field)
            if value:
                row = {name: text.replace("{%s}" % field, value) if isinstance(text, str) else text
                       for name, text in self.table.unlisted.items()}
                row[field] = value
                return row
        return None

    def _find(self, field: str, value: str, groups: Dict[str, str]) -> Optional[Dict[str, Any]]:
        mode = self.match.get(field, "exact")
        wanted = _plain(value)
        best, best_length = None, -1
        for row in self.table.rows:
            if field not in row or not _applies(row, groups):
                continue
            have = row[field]
            if isinstance(have, bool):
                continue
            if isinstance(have, int):
                if wanted.lstrip("-").isdigit() and abs(int(wanted)) == have:
                    return row
                continue
            # A list holds the wordings of one row, as releases changed them (CUDA's text for error 46).
            for have in map(_plain, have if isinstance(have, list) else [have]):
                if mode == "exact" and have == wanted:
                    return row
                if mode == "prefix" and wanted.startswith(have) and len(have) > best_length:
                    best, best_length = row, len(have)
                if mode == "dotted" and (wanted == have or wanted.startswith(have + ".")) and len(have) > best_length:
                    best, best_length = row, len(have)
                if mode == "contains" and have and have in wanted and len(have) > best_length:
                    best, best_length = row, len(have)
        return best

    def link(self, ruleset: RuleSet) -> None:
        """Check references to other entries once every file is loaded."""
        from preflight.errors import RuleFileError, close_matches

        for rule_id in self.rules:
            if rule_id not in ruleset.rules:
                raise RuleFileError(self.origin, "'rules' names '%s', which is not a rule%s"
                                    % (rule_id, close_matches(rule_id, ruleset.rules)), self.id, kind="family")
        for other in self.supersedes:
            if other not in ruleset.failures and other not in ruleset.families:
                raise RuleFileError(self.origin, "'supersedes' names '%s', which is not a failure%s"
                                    % (other, close_matches(other, ruleset.failures)), self.id, kind="family")
        if self.id in ruleset.failures or self.id in ruleset.rules:
            raise RuleFileError(self.origin, "family id '%s' is also the id of a rule or a failure; ids must be "
                                "unique" % self.id, self.id, kind="family")

    def classify(self, text: str) -> List[Tuple[Dict[str, str], Dict[str, Any]]]:
        """Every (groups, row) the family finds in one line of text."""
        found = []
        for pattern in self.patterns:
            groups = pattern.match(text)
            if groups is None:
                continue
            row = self.row(groups)
            if row is not None:
                found.append((groups, row))
        return found

    def row_named(self, label: str) -> Dict[str, Any]:
        """The row a finding's key names (cuda.runtime_error/cudaErrorNoDevice: its label); exit 2 when none."""
        from preflight.errors import PreflightError, close_matches

        labels = {}
        for row in self.table.rows:
            names = row.get(self.label, "")
            for name in names if isinstance(names, list) else [names]:
                labels.setdefault(str(name), row)
        for name, row in labels.items():
            if name.lower() == label.lower():
                return row
        hint = close_matches(label, list(labels)).strip(" ()") or "'preflight explain %s' shows the family" % self.id
        raise PreflightError("%s has no row '%s' in %s" % (self.id, label, self.table.path), hint)

    def hit_key(self, groups: Dict[str, str], row: Dict[str, Any]) -> str:
        """How one family finding is told apart from the others of its family: id/label."""
        return "%s/%s" % (self.id, _one(row.get(self.label, groups.get(self.label, "?")), None))

    def entry(self, groups: Dict[str, str], row: Dict[str, Any]) -> Failure:
        """The failure this row describes, as a known failure's entry (its values are the row's fields)."""
        from preflight.engine import template

        values = {name: _one(value, groups.get(name)) if isinstance(value, list) and name in self.key else _text(value)
                  for name, value in row.items() if name != "when"}
        label = _one(row.get(self.label), None) if row.get(self.label) else (groups.get(self.label) or "?")
        values.update(family_key=label)
        fix = self.fix
        if isinstance(row.get("step"), list):  # alternatives, as a fix's line: the first whose values are known
            values.pop("step")
            fix = fix._replace(steps=[tuple(row["step"]) if line == "{step}" else line for line in fix.steps])
        known = dict(self.defaults, **dict(groups, **values))
        title = template.render(self.title, known)
        cause = template.render(self.cause, known)
        return Failure(self.id, title, self.priorities.get(str(row.get("kind")), self.priority), self.patterns, cause,
                       fix, self.rules, self.facts, self.context, self.supersedes, values, dict(self.defaults),
                       [], self.source,
                       self.origin, [], family=self, key=label,
                       undetermined=[line for line in template.render_known(
                           self.undetermined + [values.get("undetermined", "")], dict(self.defaults, **dict(groups, **values)))
                           if line.strip()])


def _one(value: Any, said: Optional[str]) -> str:
    """A key field's value for one finding: a row that lists several wordings is named by the first (its label,
    stable whatever the log said), and shows the wording the log used where the log gave one."""
    if isinstance(value, list):
        return str(said) if said else str(value[0])
    return str(value)


def _text(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def _applies(row: Dict[str, Any], groups: Dict[str, str]) -> bool:
    for group, regex in (row.get("when") or {}).items():
        if not re.search(regex, groups.get(group, ""), re.IGNORECASE):
            return False
    return True


def build_family(raw: Dict[str, Any], path: str, ruleset: RuleSet, table_index=()) -> Family:
    entry = entry_reader(raw, path, "family", ruleset.fixes, table_index)
    entry.check_keys(_KEYS)
    from preflight.errors import PreflightError

    try:
        table = load_table(entry.string("table", required=True), entry.string("rows", required=True))
    except PreflightError as exc:
        raise entry.error(str(exc), key="table")
    key = entry.string_list("key")
    if not key:
        raise entry.error("'key' must name the row fields a log's values are looked up by", key="key")
    match = raw.get("match", {})
    if not isinstance(match, dict) or any(mode not in MATCHES for mode in match.values()):
        raise entry.error("'match' must be a table of field = one of %s" % ", ".join(MATCHES), key="match")
    priorities = raw.get("priorities", {})
    if not isinstance(priorities, dict) or not all(isinstance(p, int) and 0 <= p <= 100 for p in priorities.values()):
        raise entry.error("'priorities' must be a table of row kind = 0..100", key="priorities")
    patterns_raw = raw.get("patterns")
    if not isinstance(patterns_raw, list) or not patterns_raw:
        raise entry.error("'patterns' must be a non-empty list of {anchor, regex} tables")
    patterns = [pattern_from(entry, item, index) for index, item in enumerate(patterns_raw)]
    groups = {name for p in patterns if p.regex for name in p.regex.groupindex}
    missing = [field for field in key if field not in groups]
    if missing:
        raise entry.error("'key' names %s, which no pattern captures (a named group)" % ", ".join(missing), key="key")
    label = entry.string("label") or key[0]
    defaults = raw.get("defaults", {})
    if not isinstance(defaults, dict) or not all(isinstance(v, str) for v in defaults.values()):
        raise entry.error("'defaults' must be a table of name = \"text\"", key="defaults")
    groups |= set(defaults)
    everywhere = set.intersection(*[set(row) for row in table.rows + ([table.unlisted] if table.unlisted else [])])
    title, cause = entry.string("title", required=True), entry.string("cause", required=True)
    _check_from_rows(entry, [title, cause], everywhere | groups, "title and cause (every row has them)")
    fields = {name for row in table.rows for name in row} | {"family_key"}
    allowed = all_placeholders() | groups | fields
    fix = entry.fix(raw.get("fix"), "fix", allowed) if "fix" in raw else None
    if fix is None:
        raise entry.error("missing required key 'fix'")
    context = entry.string_list("context")
    entry.check_placeholders(context, allowed, "context")
    undetermined = entry.string_list("undetermined")
    entry.check_placeholders(undetermined, allowed, "undetermined")
    emitted = emitters.read(entry, raw.get("emitted"))
    family = Family(entry.entry_id, title, table, key, dict(match), label, entry.integer("priority", 0, 100, default=40),
                    dict(priorities), entry.string_list("quiet"), patterns, cause, undetermined, fix,
                    entry.string_list("rules"), entry.string_list("facts"), context, entry.string_list("supersedes"),
                    entry.string_list("examples") + [emitter.says for emitter in emitted],
                    entry.string("source") or table.source, path, dict(defaults), emitted=emitted)
    for example in family.examples:
        if not family.classify(example):
            raise entry.error("example %r is not recognised by the family's patterns with a row of %s"
                              % (example, table.path), key="examples")
    return family


def _check_from_rows(entry: EntryReader, texts: List[str], allowed: set, what: str) -> None:
    from preflight.engine import template

    for text in texts:
        unknown = sorted(template.placeholders(text) - allowed)
        if unknown:
            raise entry.error("%s use %s, which not every row of the table has" % (what, ", ".join(
                "{%s}" % name for name in unknown)))
