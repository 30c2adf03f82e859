"""The known-failure catalog: signatures of real error messages, as data.

A ``[[failure]]`` entry (rules/failures/*.toml, or a user's --rules file)::

    id = "cuda.oom"                       # stable, dotted lowercase
    title = "CUDA ran out of GPU memory"
    priority = 70                          # 0-100: how likely the root cause when several appear
    patterns = [                           # a plain string is a literal
      "CUBLAS_STATUS_ALLOC_FAILED",
      { anchor = "CUDA out of memory", regex = 'CUDA out of memory\\. Tried to allocate (?P<requested>\\S+ \\S+?)' },
    ]
    cause = "..."                          # plain words
    fix = "cuda-oom"                       # a [[fix]] id (shared with check), or an inline table
    rules = ["gpu.memory"]                 # the check rules that catch it beforehand
    facts = ["gpu.memory.total"]           # facts that make the fix concrete
    context = ["{gpu_name}: {gpu_memory_total} total"]   # lines shown when every name is known
    supersedes = ["dataloader.worker_exited"]            # generic follow-ups this explains
    only_with = ["cuda.invalid_device"]                  # a problem only beside one of these failures or clues
    set = { missing_pip = "'setuptools<82'" }            # fixed template values (override facts)
    defaults = { index_url = "..." }                      # used only when nothing better is known
    examples = ["..."]                     # real messages it must recognise (the tests replay them)
    emitted = [{ project = "...", file = "...", versions = ">=2.0", says = "..." }]  # diagnose/emitters.py

A ``[[clue]]`` is not a problem but something a log says about its run (the
YOLO banner's torch, Python and GPU; the training arguments; an nvidia-smi
header): ``id``, ``patterns`` whose named groups are the values
(``run_<name>`` in fixes and context), ``source`` and ``examples``.

Every pattern has a literal ``anchor`` that any matching line contains; the
scanner looks for anchors in raw bytes and runs the regex only on those lines.
Named groups become template values (``(?P<gpu_sm>sm_\\d+)`` fills
``{gpu_sm}``). Matching ignores case (tools print the same message in either:
``nvml error: driver/library version mismatch``), typographic quotes (a forum
turns ``couldn't`` into ``couldn‘t``), markdown emphasis around a pasted line, full-width punctuation and
digits, and the prefix a log collector puts before each line (Docker, containerd's CRI format, kubectl, srun,
torchrun).
"""

from __future__ import annotations

import functools
import re
from typing import Any, Dict, List, NamedTuple, Optional

from preflight.diagnose import emitters
from preflight.diagnose.emitters import Emitter
from preflight.engine.fields import EntryReader, entry_reader
from preflight.engine.fix import Fix
from preflight.engine.loader import RuleSet
from preflight.engine.placeholders import CLUE_VALUES, RUN_PREFIX, all_placeholders
from preflight.errors import close_matches
from preflight.facts.registry import REGISTRY

_KEYS = {"id", "title", "priority", "patterns", "cause", "fix", "rules", "facts", "context", "supersedes", "set",
         "defaults", "examples", "source", "only_with", "emitted"}
# Typographic quotes and markdown emphasis, as pasted logs carry them: (text, replacement).
_TYPOGRAPHY = (("\u2018", "'"), ("\u2019", "'"), ("\u201a", "'"), ("\u201b", "'"), ("\u2032", "'"),
               ("\u201c", '"'), ("\u201d", '"'), ("\u201e", '"'), ("**", ""), ("`", ""))


# The full-width forms of ASCII (U+FF01-FF5E) and the ideographic space, as Chinese and Japanese locales and IDE
# consoles print punctuation and digits ("exit code 137（interrupted by signal 9：SIGKILL）"): as ASCII.
_FULL_WIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
_FULL_WIDTH[0x3000] = 0x20
_FULL_WIDTH_BYTES = re.compile(b"\xe3\x80\x80|\xef\xbc[\x81-\xbf]|\xef\xbd[\x80-\x9e]")
# What log collectors put before each line the program wrote, so that a pattern anchored at the start of a line
# (a bare "Killed") still matches: the CRI log format of containerd and CRI-O ("<RFC 3339 time> stderr F "),
# `docker logs --timestamps` ("<RFC 3339 time> "), `docker compose logs` ("trainer-1  | "), `kubectl logs --prefix`
# ("[pod/name/container] "), `srun --label` ("0: ") and torchrun's per-rank prefixes ("[rank0]: ", "[default0]:").
_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)"
_WRAPPER = re.compile(r"(?:%s (?:stdout|stderr) [FP] |%s |[\w.-]{1,64} {1,32}\| |\[pod/[^\]\s]{1,300}\] |"
                      r"\[(?:rank|default)\d{1,6}\]: ?|\d{1,6}: ){1,4}" % (_TIME, _TIME))


def normalize(text: str) -> str:
    """The text as patterns see it: straight quotes, no markdown emphasis, ASCII for full-width punctuation and
    digits (case is ignored separately)."""
    for old, new in _TYPOGRAPHY:
        if old in text:
            text = text.replace(old, new)
    return text.translate(_FULL_WIDTH)


def unwrap(line: str) -> str:
    """The line as the program wrote it, without a log collector's prefix (see _WRAPPER)."""
    found = _WRAPPER.match(line)
    return line[found.end():] if found else line


def normalize_bytes(data: bytes) -> bytes:
    """``normalize`` for raw UTF-8 bytes (the scanner's chunks)."""
    for old, new in _TYPOGRAPHY:
        encoded = old.encode("utf-8")
        if encoded in data:
            data = data.replace(encoded, new.encode("utf-8"))
    if b"\xef\xbc" in data or b"\xef\xbd" in data or b"\xe3\x80\x80" in data:
        data = _FULL_WIDTH_BYTES.sub(lambda found: found.group(0).decode("utf-8").translate(_FULL_WIDTH).encode(), data)
    return data


class Pattern(NamedTuple):
    anchor: str
    regex: Optional["re.Pattern[str]"]

    @property
    def key(self) -> str:
        """The anchor as the scanner looks for it: normalized, lower case."""
        return normalize(self.anchor).lower()

    def match(self, line: str) -> Optional[Dict[str, str]]:
        """The named groups when ``line`` matches (empty for a literal), else None."""
        line = unwrap(normalize(line))
        if self.key not in line.lower():
            return None
        if self.regex is None:
            return {}
        found = self.regex.search(line)
        if found is None:
            return None
        return {k: v for k, v in found.groupdict().items() if v is not None}


class Failure(NamedTuple):
    id: str
    title: str
    priority: int
    patterns: List[Pattern]
    cause: str
    fix: Fix
    rules: List[str]
    facts: List[str]
    context: List[str]
    supersedes: List[str]
    values: Dict[str, str]
    defaults: Dict[str, str]
    examples: List[str]
    source: str
    origin: str
    only_with: List[str] = []  # reported only when one of these failures (or clues) is also in the log
    emitted: List[Emitter] = []  # where each wording is written, and by which releases
    family: Any = None  # the [[family]] this entry was made from for one log value (preflight.diagnose.families)
    key: str = ""  # that value's row: the finding is family id/key
    undetermined: List[str] = []  # what the log could not tell (families)

    def link(self, ruleset: RuleSet) -> None:
        """Check references to other entries once every file is loaded."""
        from preflight.errors import RuleFileError

        for rule_id in self.rules:
            if rule_id not in ruleset.rules:
                raise RuleFileError(self.origin, "'rules' names '%s', which is not a rule%s"
                                    % (rule_id, close_matches(rule_id, ruleset.rules)), self.id, kind="failure")
            if rule_id in ruleset.failures:
                raise RuleFileError(self.origin, "id '%s' is both a rule and a failure" % rule_id, self.id, kind="failure")
        if self.id in ruleset.rules:
            raise RuleFileError(self.origin, "failure id '%s' is also a rule id; ids must be unique" % self.id, self.id,
                                kind="failure")
        for key, others in (("supersedes", self.supersedes), ("only_with", self.only_with)):
            known = dict(ruleset.failures, **ruleset.families, **(ruleset.clues if key == "only_with" else {}))
            for other in others:
                if other not in known:
                    raise RuleFileError(self.origin, "'%s' names '%s', which is not a failure%s%s"
                                        % (key, other, " or clue" if key == "only_with" else "",
                                           close_matches(other, known)), self.id, kind="failure")


def _fast_anchor(entry: EntryReader, where: str, anchor: str) -> None:
    """The scan looks for every anchor at once; one that starts with whitespace makes it stop at every space of
    the log (a tenth of its speed, measured), so the anchor starts at its first word (the regex keeps the rest)."""
    if anchor[:1].isspace():
        raise entry.error("%s: the anchor %r starts with whitespace, which slows every scan: start it at its first "
                          "word (a regex can still require what comes before)" % (where, anchor))


@functools.lru_cache(maxsize=4096)
def _compiled(regex: str):
    """A pattern's regex compiled, and what makes it unsafe (None when nothing). Kept: the catalog holds more
    regexes than re's own cache (512), so every load in one process (serve, a test session) compiled them all again."""
    from preflight.engine.regex_safety import problem

    return re.compile(normalize(regex), re.IGNORECASE), problem(regex)


def pattern_from(entry: EntryReader, raw: Any, index: int) -> Pattern:
    """One item of an entry's 'patterns': a literal, or {anchor, regex}."""
    where = "patterns[%d]" % index
    if isinstance(raw, str):
        if not raw.strip():
            raise entry.error("%s: a literal pattern cannot be empty" % where)
        _fast_anchor(entry, where, raw)
        return Pattern(raw, None)
    if not isinstance(raw, dict):
        raise entry.error("%s must be a literal string or a table {anchor, regex}" % where)
    unknown = set(raw) - {"anchor", "regex"}
    if unknown:
        raise entry.error("%s: unknown key(s) %s (a pattern has 'anchor' and 'regex')" % (where, ", ".join(sorted(unknown))))
    anchor, regex = raw.get("anchor"), raw.get("regex")
    if not isinstance(anchor, str) or not anchor.strip():
        raise entry.error("%s needs 'anchor': a literal piece of text every match contains" % where)
    _fast_anchor(entry, where, anchor)
    if regex is None:
        return Pattern(anchor, None)
    if not isinstance(regex, str):
        raise entry.error("%s: 'regex' must be a string" % where)
    try:
        compiled, unsafe = _compiled(regex)
    except (re.error, RecursionError, OverflowError) as exc:
        raise entry.error("%s: %r is not a valid regular expression: %s" % (where, regex, exc))
    if unsafe:
        raise entry.error("%s: %r: %s" % (where, regex, unsafe))
    bad = [name for name in compiled.groupindex if not re.match(r"^[a-z][a-z0-9_]*$", name)]
    if bad:
        raise entry.error("%s: group names must be lowercase words: %s" % (where, ", ".join(bad)))
    return Pattern(anchor, compiled)


def build_failure(raw: Dict[str, Any], path: str, ruleset: RuleSet, table=()) -> Failure:
    entry = entry_reader(raw, path, "failure", ruleset.fixes, table)
    entry.check_keys(_KEYS)
    patterns_raw = raw.get("patterns")
    if not isinstance(patterns_raw, list) or not patterns_raw:
        raise entry.error("'patterns' must be a non-empty list of literal strings or {anchor, regex} tables")
    patterns = [pattern_from(entry, item, index) for index, item in enumerate(patterns_raw)]

    facts = entry.string_list("facts")
    for path_name in facts:
        if path_name not in REGISTRY:
            raise entry.error("'facts' names '%s', which is not a fact%s" % (path_name, close_matches(path_name, REGISTRY)))
    values, defaults = raw.get("set", {}), raw.get("defaults", {})
    for key, table in (("set", values), ("defaults", defaults)):
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise entry.error("'%s' must be a table of name = \"text\"" % key)

    groups = {name for p in patterns if p.regex for name in p.regex.groupindex}
    allowed = all_placeholders() | groups | {RUN_PREFIX + g for g in groups} | set(values) | set(defaults)
    title, cause = entry.string("title", required=True), entry.string("cause", required=True)
    entry.check_placeholders([title, cause], set(), "title and cause (plain words only: a known failure's are shown as written)")
    context = entry.string_list("context")
    entry.check_placeholders(context, allowed, "context")
    if "fix" not in raw:
        raise entry.error("missing required key 'fix'")
    fix = entry.fix(raw["fix"], "fix", allowed)
    emitted = emitters.read(entry, raw.get("emitted"))
    examples = entry.string_list("examples") + [emitter.says for emitter in emitted]
    return Failure(entry.entry_id, title, entry.integer("priority", 0, 100, default=50),
                   patterns, cause, fix, entry.string_list("rules"), facts, context, entry.string_list("supersedes"),
                   dict(values), dict(defaults), examples, entry.string("source"), path, entry.string_list("only_with"),
                   emitted)


class Clue(NamedTuple):
    """Something a log says about its run: its patterns' named groups are values, and ``set`` the values a match
    implies (a Windows path says os = windows); not a problem."""

    id: str
    patterns: List[Pattern]
    examples: List[str]
    source: str
    origin: str
    values: Dict[str, str] = {}


def build_clue(raw: Dict[str, Any], path: str, ruleset: RuleSet, table=()) -> Clue:
    entry = entry_reader(raw, path, "clue", ruleset.fixes, table)
    entry.check_keys({"id", "patterns", "examples", "source", "set"})
    patterns_raw = raw.get("patterns")
    if not isinstance(patterns_raw, list) or not patterns_raw:
        raise entry.error("'patterns' must be a non-empty list of {anchor, regex} tables")
    patterns = [pattern_from(entry, item, index) for index, item in enumerate(patterns_raw)]
    values = raw.get("set", {})
    if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
        raise entry.error("'set' must be a table of name = \"text\"", key="set")
    names = set(values)
    for pattern in patterns:
        names |= set(pattern.regex.groupindex if pattern.regex else ())
        if pattern.regex is None and not values:
            raise entry.error("a clue's literal pattern says nothing without 'set' (the values a match implies)")
    unknown = names - set(CLUE_VALUES)
    if unknown or not names:
        raise entry.error("a clue's values (named groups and 'set') are among: %s%s"
                          % (", ".join(sorted(CLUE_VALUES)), " (unknown: %s)" % ", ".join(sorted(unknown))
                             if unknown else ""))
    clue = Clue(entry.entry_id, patterns, entry.string_list("examples"), entry.string("source"), path, dict(values))
    for example in clue.examples:
        if not any(pattern.match(example) is not None for pattern in patterns):
            raise entry.error("example %r is not recognised by the clue's patterns" % example, key="examples")
    return clue
