"""Read rule files: TOML data, checked against the fact catalog and the comparisons.

Nothing in a rule file is executed. A file that cannot be used stops the run
with exit code 2 and a message naming the file, the entry and the problem;
keys nobody reads only warn (a typo must not pass silently).

A rule file holds [[rule]] checks, [[fix]] fixes that rules and failures name
by id, and [[failure]] signatures for `preflight diagnose`. The default
failure catalog lives in rules/failures/ and is read only when asked for.

Layers: the default rules first, then each ``--rules PATH`` in order. An
entry in a later layer replaces the one with the same id (and keeps its place
in the report); the same id twice within one layer is an error.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Dict, List, Optional, Tuple

from preflight.engine.compare import COMPARISONS
from preflight.engine.fields import EntryReader, build_fix, entry_reader
from preflight.engine.fix import Fix
from preflight.engine.model import (
    DEFAULT_FIX_ORDER,
    PROFILES,
    SEVERITIES,
    Rule,
    WarnOnly,
)
from preflight.engine.placeholders import BASE_PLACEHOLDERS, all_placeholders
from preflight.errors import PreflightError, RuleFileError, close_matches
from preflight.facts.conditions import CONDITIONS
from preflight.facts.registry import REGISTRY
from preflight.knowledge import gpus, shipped

_RULE_KEYS = {"examples", "id", "title", "severity", "profiles", "when", "fact", "compare", "per_gpu", "message",
              "pass_message", "labels", "fix", "fixes", "why", "source", "profile", "warn_only", "fix_order", "answers"}
class RuleSet:
    def __init__(self) -> None:
        self.rules: Dict[str, Rule] = {}
        self.fixes: Dict[str, Fix] = {}
        self.failures: Dict[str, Any] = {}
        self.clues: Dict[str, Any] = {}
        self.families: Dict[str, Any] = {}
        self.workloads: Dict[str, Any] = {}
        self.gpus: Dict[str, Any] = {}
        self.renamed: Dict[str, Any] = {}  # old id -> lifecycle.Renamed
        self.retired: Dict[str, Any] = {}  # id -> lifecycle.Retired
        self.files: List[str] = []

    def log_entries(self) -> List[Any]:
        """What diagnose looks for in a log: the known failures, then the families."""
        return list(self.failures.values()) + list(self.families.values())

    def get(self, rule_id: str, also=()) -> Rule:
        """The rule with this id; exit 2 with the closest ids (of rules and of ``also``) when there is none."""
        if rule_id not in self.rules:
            known = list(self.rules) + list(also)
            hint = close_matches(rule_id, known).strip(" ()") or "'preflight rules' lists every rule id"
            raise PreflightError("unknown rule id '%s'" % rule_id, hint)
        return self.rules[rule_id]


def default_rules_dir() -> str:
    return shipped.data_dir()


def rule_files(path: str) -> List[str]:
    if os.path.isdir(path):
        files = sorted(os.path.join(path, name) for name in os.listdir(path) if name.endswith(".toml"))
        if not files:
            raise RuleFileError(path, "the folder holds no .toml rule files")
        return files
    if os.path.isfile(path):
        return [path]
    raise RuleFileError(path, "no such file or folder", hint="--rules takes a .toml file or a folder of them")


def load(paths: Optional[List[str]] = None, include_defaults: bool = True, failures: bool = False,
         capacity: bool = False, smoke: bool = False, requirements: Optional[str] = None) -> RuleSet:
    """Load rules and fixes; with ``failures`` the failure catalog, with ``capacity`` workloads and GPUs, with
    ``smoke`` the rules of the active test (rules/smoke/), with ``requirements`` one more rule: the project's
    requirements file (check --requirements, engine/requirements.py)."""
    layers: List[List[str]] = []
    if include_defaults:
        defaults = default_rules_dir()
        layers.append(rule_files(defaults))
        if failures:
            layers[0] += rule_files(os.path.join(defaults, "failures"))
        if capacity:
            layers[0] += rule_files(os.path.join(defaults, "capacity"))
        if smoke:
            layers[0] += rule_files(os.path.join(defaults, "smoke"))
    for path in paths or []:
        layers.append(rule_files(path))

    ruleset = RuleSet()
    parsed = [[(path, _read_toml(path, ruleset)) for path in files] for files in layers]
    wanted = {"failures": failures, "capacity": capacity, "smoke": smoke}
    if capacity and include_defaults:
        ruleset.gpus.update(gpus.catalog().gpus)  # the shipped catalog; a [[gpu]] of a rule file adds or replaces
    # Fixes first: rules and failures in any layer may name a fix from any layer.
    for kind, attribute, builder, needs in ENTRY_KINDS:
        if needs is None or wanted[needs]:
            _add_entries(ruleset, parsed, kind, getattr(ruleset, attribute), _builder(builder))
    for failure in list(ruleset.failures.values()) + list(ruleset.families.values()):
        failure.link(ruleset)
    for rule in ruleset.rules.values():
        for other in rule.answers:
            if other not in ruleset.rules:
                raise RuleFileError(rule.origin, "'answers' names '%s', which is not a rule%s"
                                    % (other, close_matches(other, ruleset.rules)), rule.id)
        for package, info in (rule.raw_params.get("packages") or {}).items():
            other = info.get("installed_by") if isinstance(info, dict) else None
            if other and other not in ruleset.rules:
                raise RuleFileError(rule.origin, "packages.%s.installed_by names '%s', which is not a rule%s"
                                    % (package, other, close_matches(other, ruleset.rules)), rule.id)
    if requirements:
        from preflight.engine import requirements as project

        rule = build_rule(project.rule_entry(requirements), requirements, ruleset)
        ruleset.rules[rule.id] = rule
    if ruleset.renamed or ruleset.retired:
        from preflight.engine import lifecycle

        lifecycle.check(ruleset)
    for files in layers:
        ruleset.files.extend(files)
    return ruleset


# Every kind of entry a rule file holds, in the order they are built: the RuleSet attribute it fills, its
# builder ("module:function", imported only when that kind is loaded, which keeps the diagnose and capacity
# models off check's path), and the load() option that asks for it (None: always).
ENTRY_KINDS = (
    ("fix", "fixes", "preflight.engine.loader:build_fix_entry", None),
    ("rule", "rules", "preflight.engine.loader:build_rule", None),
    ("failure", "failures", "preflight.diagnose.failures:build_failure", "failures"),
    ("clue", "clues", "preflight.diagnose.failures:build_clue", "failures"),
    ("family", "families", "preflight.diagnose.families:build_family", "failures"),
    ("workload", "workloads", "preflight.engine.capacity_entries:build_workload", "capacity"),
    ("gpu", "gpus", "preflight.engine.capacity_entries:build_gpu", "capacity"),
    ("renamed", "renamed", "preflight.engine.lifecycle:build_renamed", None),
    ("retired", "retired", "preflight.engine.lifecycle:build_retired", None),
)
_TOP_LEVEL = tuple(kind for kind, _, _, _ in ENTRY_KINDS) + ("schema",)


def _builder(reference: str):
    module, _, function = reference.partition(":")
    return getattr(importlib.import_module(module), function)


def _add_entries(ruleset: RuleSet, parsed, kind: str, into: Dict[str, Any], build) -> None:
    for layer in parsed:
        seen: Dict[str, str] = {}
        for path, data in layer:
            for index, raw in enumerate(_tables(data, kind, path)):
                entry = build(raw, path, ruleset, (kind, index))
                if entry.id in seen:
                    raise RuleFileError(path, "%s id '%s' is defined twice (also in %s)" % (kind, entry.id, seen[entry.id]),
                                        entry.id if kind != "fix" else "", kind=kind)
                seen[entry.id] = path
                into[entry.id] = entry


RULE_FILE_LIMIT = 16 << 20


def _read_toml(path: str, ruleset: RuleSet) -> Dict[str, Any]:
    def error(message: str, hint: str = "") -> RuleFileError:
        return RuleFileError(path, message[len(path):].lstrip(": ") or message, hint=hint)

    try:
        data = shipped.read_toml(path, path, error, "a rule file", RULE_FILE_LIMIT)
    except ValueError as exc:
        raise RuleFileError(path, str(exc))
    top = EntryReader(data, path, "file", "", ruleset.fixes)
    top.check_keys(_TOP_LEVEL, "a rule file (at its top level)", "a rule file holds [[rule]], [[fix]], [[failure]], "
                   "[[clue]], [[family]], [[workload]], [[gpu]], [[renamed]] and [[retired]] tables")
    return data


def _tables(data: Dict[str, Any], key: str, path: str) -> List[Dict[str, Any]]:
    tables = data.get(key, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise RuleFileError(path, "'%s' must be an array of tables: write [[%s]]" % (key, key))
    return tables


def build_fix_entry(raw: Dict[str, Any], path: str, ruleset: RuleSet, table=()) -> Fix:
    entry = EntryReader(raw, path, "fix", "", ruleset.fixes, table)
    return build_fix(entry, entry.string("id", required=True), all_placeholders())


def build_rule(raw: Dict[str, Any], path: str, ruleset: RuleSet, table=()) -> Rule:
    entry = entry_reader(raw, path, "rule", ruleset.fixes, table)
    rule_id = entry.entry_id
    compare_name = raw.get("compare")
    entry.check_keys(_RULE_KEYS | set(COMPARISONS[compare_name].params if compare_name in COMPARISONS else ()),
                     "a rule (with compare = %r)" % compare_name if compare_name in COMPARISONS else "a rule")

    title = entry.string("title", required=True)
    severity = entry.string("severity", default="error")
    if severity not in SEVERITIES:
        raise entry.error("severity %r is not one of %s" % (severity, ", ".join(SEVERITIES)))
    if "profiles" in raw and raw["profiles"] == []:
        raise entry.error("'profiles' is empty, so the rule would never run",
                          hint="list the profiles it belongs to (%s), or leave 'profiles' out for all of them"
                          % ", ".join(PROFILES))
    profiles = tuple(entry.string_list("profiles") or PROFILES)
    for profile in profiles:
        if profile not in PROFILES:
            raise entry.error("unknown profile %r (profiles: %s)" % (profile, ", ".join(PROFILES)))
    when = tuple(entry.string_list("when"))
    for condition in when:
        if condition not in CONDITIONS:
            raise entry.error("unknown condition %r in 'when' (conditions: %s)" % (condition, ", ".join(CONDITIONS)))

    fact_name = entry.string("fact", required=True)
    if fact_name not in REGISTRY:
        raise entry.error("unknown fact '%s'%s" % (fact_name, close_matches(fact_name, REGISTRY)),
                          hint="'preflight facts --list' shows every fact a rule can read")
    fact = REGISTRY[fact_name]
    compare_name = entry.string("compare", required=True)
    if compare_name not in COMPARISONS:
        raise entry.error("unknown comparison '%s' (comparisons: %s)" % (compare_name, ", ".join(COMPARISONS)))
    comparison = COMPARISONS[compare_name]
    if fact.kind not in comparison.kinds:
        raise entry.error("comparison '%s' does not apply to fact '%s', which is a %s (use one of: %s)"
                          % (compare_name, fact_name, fact.kind,
                             ", ".join(c.name for c in COMPARISONS.values() if fact.kind in c.kinds)))
    if "per_gpu" in raw and raw["per_gpu"] is not fact.per_gpu:
        raise entry.error("per_gpu = %r, but fact '%s' is %s"
                          % (raw["per_gpu"], fact_name, "read per GPU" if fact.per_gpu else "system-wide"))

    raw_params = {key: raw[key] for key in comparison.params if key in raw}
    profile_params = _profile_overrides(entry, comparison)

    labels = raw.get("labels", {})
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise entry.error("'labels' must be a table of value = \"text\"")
    _check_values(entry, list(labels), fact, "labels")

    allowed = BASE_PLACEHOLDERS | set(fact.details) | set(comparison.details) | set(comparison.params)
    message = entry.string("message") or None
    pass_message = entry.string("pass_message") or None
    entry.check_placeholders([m for m in (message, pass_message) if m] + list(labels.values()), allowed, "message")

    fix = entry.fix(raw["fix"], "fix", allowed) if "fix" in raw else None
    fixes_raw = raw.get("fixes", {})
    if not isinstance(fixes_raw, dict):
        raise entry.error("'fixes' must be a table of observed value = fix")
    _check_values(entry, list(fixes_raw), fact, "fixes")
    fixes_by_value = {value: entry.fix(f, "fixes.%s" % value, allowed) for value, f in fixes_raw.items()}

    examples = _examples(entry, profiles)
    warn_only = _warn_only(entry, profiles, allowed)
    answers = tuple(entry.string_list("answers"))
    if rule_id in answers:
        raise entry.error("'answers' names the rule itself", key="answers")
    rule = Rule(rule_id, title, severity, profiles, when, fact, comparison, raw_params, profile_params, message,
                pass_message, labels, fix, fixes_by_value, entry.string("why"), entry.string("source"), path, examples,
                warn_only, entry.integer("fix_order", 0, 100000, default=DEFAULT_FIX_ORDER), answers)
    # A profile without overrides resolves exactly as the rule is written: checking None covers it.
    for profile in (None,) + tuple(p for p in profiles if p in profile_params):
        validate_params(rule, profile, entry.error)
    return rule


WARN_ONLY_KEYS = {"profiles", "fact", "in", "message"}


def _warn_only(entry: EntryReader, profiles: Tuple[str, ...], allowed: set) -> Optional[WarnOnly]:
    """[rule.warn_only]: profiles = [...], fact = "cuda.compat", in = ["ok"], message = "..." (or None)."""
    raw = entry.raw.get("warn_only")
    if raw is None:
        return None
    where = "warn_only"
    if not isinstance(raw, dict):
        raise entry.error("'warn_only' must be a table: [rule.warn_only]", key="warn_only")
    entry = entry.child(raw, "warn_only")
    entry.check_keys(WARN_ONLY_KEYS, "[rule.warn_only]")
    chosen = raw.get("profiles", list(profiles))
    if not isinstance(chosen, list) or not chosen or any(p not in profiles for p in chosen):
        raise entry.error("%s: 'profiles' must list some of the rule's profiles (%s)" % (where, ", ".join(profiles)))
    fact_name = raw.get("fact")
    if fact_name not in REGISTRY or REGISTRY[fact_name].per_gpu:
        raise entry.error("%s: 'fact' must name a system-wide fact%s" % (where, close_matches(str(fact_name), REGISTRY)),
                          hint="'preflight facts --list' shows every fact")
    fact = REGISTRY[fact_name]
    values = raw.get("in")
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise entry.error("%s: 'in' must be a list of the values of %s that make the failure only a warning"
                          % (where, fact_name))
    if fact.values and any(v not in fact.values for v in values):
        raise entry.error("%s: 'in' lists a value %s never takes (it takes: %s)" % (where, fact_name, ", ".join(fact.values)))
    message = raw.get("message")
    if not isinstance(message, str) or not message:
        raise entry.error("%s: 'message' must say why the failure is only a warning" % where)
    entry.check_placeholders([message], allowed | set(fact.details) | {"observed_fact"}, "warn_only message")
    return WarnOnly(tuple(chosen), fact, tuple(values), message)


# An example is the rule's expected behaviour on one machine, as data:
#   [[rule.examples]]
#   expect = "fail"                                   # pass | warn | fail | skip | error
#   profile = "train"                                 # default: the rule's first profile
#   facts = { "nvml.driver_version" = "525.147.05" }  # changes to the reference machine, by dotted path
#   unset = ["python.torch.cuda"]                     # keys to remove (TOML has no null)
#   workload = { id = "yolov9-c", batch = 64 }        # the run's context: the workload of --workload
#   expected_gpus = { count = 8, source = "Slurm Gres", scope = "machine" }  # and the GPUs expected
#   set = { expected = "yolov9" }                     # the rule's settings, as --set RULE.KEY=VALUE gives them
#   message = "525.147.05"                            # a fragment the message must contain
# The reference machine is tests/fixtures/reference-facts.json (an H200 node with a complete YOLOv9
# environment); tests/test_rule_examples.py replays every example through the evaluation code.
EXAMPLE_KEYS = {"expect", "profile", "facts", "unset", "workload", "expected_gpus", "message", "set"}
EXAMPLE_STATUSES = ("pass", "warn", "fail", "skip", "error")


def _examples(entry: EntryReader, profiles: Tuple[str, ...]) -> Tuple[Dict[str, Any], ...]:
    examples = []
    for index, reader in enumerate(entry.tables("examples")):
        entry, example, where = reader, reader.raw, "examples[%d]" % index
        entry.check_keys(EXAMPLE_KEYS, "[[rule.examples]]")
        if example.get("expect") not in EXAMPLE_STATUSES:
            raise entry.error("%s: 'expect' must be one of %s" % (where, ", ".join(EXAMPLE_STATUSES)))
        profile = example.get("profile", profiles[0])
        if profile not in profiles:
            raise entry.error("%s: profile %r is not one of the rule's profiles (%s)" % (where, profile, ", ".join(profiles)))
        facts, unset = example.get("facts", {}), example.get("unset", [])
        if not isinstance(facts, dict) or not isinstance(unset, list) or not all(isinstance(u, str) for u in unset):
            raise entry.error("%s: 'facts' must be a table of dotted path = value, 'unset' a list of paths" % where)
        if not isinstance(example.get("message", ""), str) or not all(
                isinstance(example.get(key, {}), dict) for key in ("workload", "expected_gpus", "set")):
            raise entry.error("%s: 'message' must be a string, 'workload', 'expected_gpus' and 'set' tables" % where)
        examples.append(dict(example, profile=profile))
    return tuple(examples)


def validate_params(rule: Rule, profile: Optional[str], error) -> None:
    """Parse and cross-check a rule's parameters for one profile; ``error(problem)`` builds the exception."""
    try:
        rule.resolve(profile)
    except ValueError as exc:
        where = " (profile %s)" % profile if profile and profile in rule.profile_params else ""
        raise error("%s%s" % (exc, where))


def _profile_overrides(entry: EntryReader, comparison) -> Dict[str, Dict[str, Any]]:
    raw = entry.raw.get("profile", {})
    if not isinstance(raw, dict):
        raise entry.error("'profile' must be a table of profile name = {overrides}")
    overrides = {}
    for profile, table in raw.items():
        if profile not in PROFILES:
            raise entry.error("[profile.%s]: unknown profile (profiles: %s)" % (profile, ", ".join(PROFILES)))
        if not isinstance(table, dict):
            raise entry.error("[profile.%s] must be a table" % profile)
        for key, value in table.items():
            if key == "severity":
                if value not in SEVERITIES:
                    raise entry.error("[profile.%s] severity %r is not one of %s" % (profile, value, ", ".join(SEVERITIES)))
            elif key not in comparison.params:
                raise entry.error("[profile.%s]: '%s' is not a parameter of comparison '%s' (parameters: %s)"
                                  % (profile, key, comparison.name, ", ".join(comparison.params) or "none"))
        overrides[profile] = dict(table)
    return overrides


def _check_values(entry: EntryReader, values: List[str], fact, key: str) -> None:
    if fact.kind == "enum":
        allowed: Tuple[str, ...] = fact.values
    elif fact.kind == "bool":
        allowed = ("true", "false")
    else:
        if values:
            raise entry.error("'%s' keyed by value needs a fact with fixed values; '%s' is a %s" % (key, fact.path, fact.kind))
        return
    unknown = [v for v in values if v not in allowed]
    if unknown:
        raise entry.error("'%s' names %s, which fact '%s' never takes (it takes: %s)"
                          % (key, ", ".join(repr(u) for u in unknown), fact.path, ", ".join(allowed)))
