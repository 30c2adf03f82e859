"""Read rule files: TOML data, checked against the fact catalog and the comparisons.

Nothing in a rule file is executed. A file that cannot be used stops the run
with exit code 2 and a message naming the file, the rule and the problem;
keys nobody reads only warn (a typo must not pass silently).

Layers: the default rules first, then each ``--rules PATH`` in order. A rule
or fix in a later layer replaces the one with the same id (and keeps its place
in the report); the same id twice within one layer is an error.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Dict, List, Optional, Tuple

from preflight.engine import template
from preflight.engine.compare import COMPARISONS
from preflight.engine.model import PROFILES, SEVERITIES, Fix, Rule
from preflight.errors import PreflightError, RuleFileError
from preflight.facts.catalog import CONDITIONS, FACTS

_ID = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")
_FIX_ID = re.compile(r"^[a-z][a-z0-9_.-]*$")
_RULE_KEYS = {"id", "title", "severity", "profiles", "when", "fact", "compare", "per_gpu", "message", "pass_message",
              "labels",
              "fix", "fixes", "why", "source", "profile"}
_FIX_KEYS = {"id", "title", "steps", "commands"}
BASE_PLACEHOLDERS = {"observed", "expected", "subject", "profile", "rule_id", "title"}


def all_placeholders() -> set:
    names = set(BASE_PLACEHOLDERS)
    for fact in FACTS.values():
        names.update(fact.details)
    for comparison in COMPARISONS.values():
        names.update(comparison.details)
        names.update(comparison.params)
    return names


class RuleSet:
    def __init__(self) -> None:
        self.rules: Dict[str, Rule] = {}
        self.fixes: Dict[str, Fix] = {}
        self.warnings: List[str] = []
        self.files: List[str] = []

    def get(self, rule_id: str) -> Rule:
        if rule_id not in self.rules:
            import difflib

            close = difflib.get_close_matches(rule_id, list(self.rules), n=3)
            hint = "did you mean %s?" % " or ".join(close) if close else "'preflight rules' lists every rule id"
            raise PreflightError("unknown rule id '%s'" % rule_id, hint)
        return self.rules[rule_id]


def default_rules_dir() -> str:
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    installed = os.path.join(package, "default_rules")
    if os.path.isdir(installed):
        return installed
    checkout = os.path.join(os.path.dirname(package), "rules")  # running from a source tree
    if os.path.isdir(checkout):
        return checkout
    raise PreflightError("the default rules are missing from this installation (%s)" % installed,
                         "reinstall preflight: pip install --force-reinstall preflight")


def rule_files(path: str) -> List[str]:
    if os.path.isdir(path):
        files = sorted(os.path.join(path, name) for name in os.listdir(path) if name.endswith(".toml"))
        if not files:
            raise RuleFileError(path, "the folder holds no .toml rule files")
        return files
    if os.path.isfile(path):
        return [path]
    raise RuleFileError(path, "no such file or folder", hint="--rules takes a .toml file or a folder of them")


def load(paths: Optional[List[str]] = None, include_defaults: bool = True) -> RuleSet:
    layers: List[List[str]] = []
    if include_defaults:
        layers.append(rule_files(default_rules_dir()))
    for path in paths or []:
        layers.append(rule_files(path))

    ruleset = RuleSet()
    parsed_layers = [[(path, _read_toml(path, ruleset)) for path in files] for files in layers]

    # Fixes first: rules in any layer may name a fix from any layer.
    for layer in parsed_layers:
        seen: Dict[str, str] = {}
        for path, data in layer:
            for raw in _tables(data, "fix", path):
                fix = _build_fix(raw, path, ruleset)
                if fix.id in seen:
                    raise RuleFileError(path, "fix id '%s' is defined twice (also in %s)" % (fix.id, seen[fix.id]))
                seen[fix.id] = path
                ruleset.fixes[fix.id] = fix

    for layer in parsed_layers:
        seen = {}
        for path, data in layer:
            ruleset.files.append(path)
            for raw in _tables(data, "rule", path):
                rule = _build_rule(raw, path, ruleset)
                if rule.id in seen:
                    raise RuleFileError(path, "rule id '%s' is defined twice (also in %s)" % (rule.id, seen[rule.id]),
                                        rule_id=rule.id)
                seen[rule.id] = path
                ruleset.rules[rule.id] = rule
    return ruleset


def _read_toml(path: str, ruleset: RuleSet) -> Dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise RuleFileError(path, "cannot read it: %s" % (exc.strerror or exc))
    except UnicodeDecodeError as exc:
        raise RuleFileError(path, "not UTF-8 text: %s" % exc)
    except tomllib.TOMLDecodeError as exc:
        raise RuleFileError(path, "not valid TOML: %s" % exc)
    for key in data:
        if key not in ("rule", "fix", "schema"):
            ruleset.warnings.append("%s: unknown top-level key '%s' (ignored; rules go in [[rule]], fixes in [[fix]])" % (path, key))
    return data


def _tables(data: Dict[str, Any], key: str, path: str) -> List[Dict[str, Any]]:
    tables = data.get(key, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise RuleFileError(path, "'%s' must be an array of tables: write [[%s]]" % (key, key))
    return tables


def _string(raw: Dict[str, Any], key: str, path: str, rule_id: str = "", required: bool = False,
            default: str = "") -> str:
    if key not in raw:
        if required:
            raise RuleFileError(path, "missing required key '%s'" % key, rule_id)
        return default
    value = raw[key]
    if not isinstance(value, str) or (required and not value.strip()):
        raise RuleFileError(path, "'%s' must be a non-empty string, found %r" % (key, value), rule_id)
    return value


def _string_list(raw: Dict[str, Any], key: str, path: str, rule_id: str = "") -> List[str]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise RuleFileError(path, "'%s' must be a list of strings, found %r" % (key, value), rule_id)
    return value


def _check_placeholders(texts: List[str], allowed: set, path: str, rule_id: str, what: str) -> None:
    for text in texts:
        unknown = sorted(template.placeholders(text) - allowed)
        if unknown:
            raise RuleFileError(path, "%s uses unknown placeholder(s) %s in %r (known here: %s)"
                                % (what, ", ".join("{%s}" % u for u in unknown), text, ", ".join(sorted(allowed))),
                                rule_id)


def _build_fix(raw: Dict[str, Any], path: str, ruleset: RuleSet, fix_id: str = "", rule_id: str = "",
               allowed: Optional[set] = None) -> Fix:
    fix_id = fix_id or _string(raw, "id", path, required=True)
    if not _FIX_ID.match(fix_id):
        raise RuleFileError(path, "fix id %r must be lowercase letters, digits, '-', '_' or '.'" % fix_id, rule_id)
    where = "fix '%s'" % fix_id
    for key in raw:
        if key not in _FIX_KEYS:
            ruleset.warnings.append("%s: %s: unknown key '%s' (ignored)" % (path, where, key))
    title = _string(raw, "title", path, rule_id, required=True)
    fix = Fix(fix_id, title, _string_list(raw, "steps", path, rule_id), _string_list(raw, "commands", path, rule_id),
              path)
    _check_placeholders(fix.texts(), allowed or all_placeholders(), path, rule_id, where)
    return fix


def _resolve_fix(value: Any, path: str, rule_id: str, ruleset: RuleSet, name: str, allowed: set) -> Fix:
    if isinstance(value, str):
        if value not in ruleset.fixes:
            import difflib

            close = difflib.get_close_matches(value, list(ruleset.fixes), n=3)
            raise RuleFileError(path, "%s names fix '%s', which no rule file defines%s"
                                % (name, value, " (did you mean %s?)" % " or ".join(close) if close else ""), rule_id)
        return ruleset.fixes[value]
    if isinstance(value, dict):
        return _build_fix(value, path, ruleset, fix_id="%s.%s" % (rule_id, name.replace("fixes.", "")),
                          rule_id=rule_id, allowed=allowed)
    raise RuleFileError(path, "%s must be a fix id or a table with title, steps and commands" % name, rule_id)


def _build_rule(raw: Dict[str, Any], path: str, ruleset: RuleSet) -> Rule:
    rule_id = _string(raw, "id", path, required=True)
    if not _ID.match(rule_id):
        raise RuleFileError(path, "rule id %r must be dotted lowercase words, e.g. 'gpu.memory'" % rule_id)
    for key in raw:
        comparison_keys = COMPARISONS[raw["compare"]].params if raw.get("compare") in COMPARISONS else {}
        if key not in _RULE_KEYS and key not in comparison_keys:
            ruleset.warnings.append("%s: rule '%s': unknown key '%s' (ignored)" % (path, rule_id, key))

    title = _string(raw, "title", path, rule_id, required=True)
    severity = _string(raw, "severity", path, rule_id, default="error")
    if severity not in SEVERITIES:
        raise RuleFileError(path, "severity %r is not one of %s" % (severity, ", ".join(SEVERITIES)), rule_id)
    profiles = tuple(_string_list(raw, "profiles", path, rule_id) or PROFILES)
    for profile in profiles:
        if profile not in PROFILES:
            raise RuleFileError(path, "unknown profile %r (profiles: %s)" % (profile, ", ".join(PROFILES)), rule_id)
    when = tuple(_string_list(raw, "when", path, rule_id))
    for condition in when:
        if condition not in CONDITIONS:
            raise RuleFileError(path, "unknown condition %r in 'when' (conditions: %s)"
                                % (condition, ", ".join(CONDITIONS)), rule_id)

    fact_name = _string(raw, "fact", path, rule_id, required=True)
    if fact_name not in FACTS:
        import difflib

        close = difflib.get_close_matches(fact_name, list(FACTS), n=3)
        raise RuleFileError(path, "unknown fact '%s'%s" % (fact_name, " (did you mean %s?)" % " or ".join(close) if close else ""),
                            rule_id, hint="'preflight facts --list' shows every fact a rule can read")
    fact = FACTS[fact_name]
    compare_name = _string(raw, "compare", path, rule_id, required=True)
    if compare_name not in COMPARISONS:
        raise RuleFileError(path, "unknown comparison '%s' (comparisons: %s)" % (compare_name, ", ".join(COMPARISONS)),
                            rule_id)
    comparison = COMPARISONS[compare_name]
    if fact.kind not in comparison.kinds:
        raise RuleFileError(path, "comparison '%s' does not apply to fact '%s', which is a %s (use one of: %s)"
                            % (compare_name, fact_name, fact.kind,
                               ", ".join(c.name for c in COMPARISONS.values() if fact.kind in c.kinds)), rule_id)
    if "per_gpu" in raw and raw["per_gpu"] is not fact.per_gpu:
        raise RuleFileError(path, "per_gpu = %r, but fact '%s' is %s" % (raw["per_gpu"], fact_name,
                                                                        "read per GPU" if fact.per_gpu else "system-wide"),
                            rule_id)

    raw_params = {key: raw[key] for key in comparison.params if key in raw}
    profile_params = _profile_overrides(raw.get("profile", {}), comparison, path, rule_id)

    labels = raw.get("labels", {})
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise RuleFileError(path, "'labels' must be a table of value = \"text\"", rule_id)
    _check_values(list(labels), fact, path, rule_id, "labels")

    allowed = BASE_PLACEHOLDERS | set(fact.details) | set(comparison.details) | set(comparison.params)
    message = _string(raw, "message", path, rule_id) or None
    pass_message = _string(raw, "pass_message", path, rule_id) or None
    _check_placeholders([m for m in (message, pass_message) if m] + list(labels.values()), allowed, path, rule_id,
                        "message")

    fix = _resolve_fix(raw["fix"], path, rule_id, ruleset, "fix", allowed) if "fix" in raw else None
    fixes_raw = raw.get("fixes", {})
    if not isinstance(fixes_raw, dict):
        raise RuleFileError(path, "'fixes' must be a table of observed value = fix", rule_id)
    _check_values(list(fixes_raw), fact, path, rule_id, "fixes")
    fixes_by_value = {value: _resolve_fix(f, path, rule_id, ruleset, "fixes.%s" % value, allowed)
                      for value, f in fixes_raw.items()}

    rule = Rule(rule_id, title, severity, profiles, when, fact, comparison, raw_params, profile_params, message,
                pass_message, labels, fix, fixes_by_value, _string(raw, "why", path, rule_id), _string(raw, "source", path, rule_id),
                path)
    for profile in (None,) + profiles:
        validate_params(rule, profile, lambda problem: RuleFileError(path, problem, rule_id))
    return rule


def validate_params(rule: Rule, profile: Optional[str], error) -> None:
    """Parse and cross-check a rule's parameters for one profile; ``error(problem)`` builds the exception."""
    try:
        parsed, _ = rule.params_for(profile)
    except ValueError as exc:
        raise error(str(exc))
    try:
        rule.comparison.check(parsed, rule.fact.values)
    except ValueError as exc:
        where = " (profile %s)" % profile if profile and profile in rule.profile_params else ""
        raise error("%s%s" % (exc, where))


def _profile_overrides(raw: Any, comparison, path: str, rule_id: str) -> Dict[str, Dict[str, Any]]:
    if not isinstance(raw, dict):
        raise RuleFileError(path, "'profile' must be a table of profile name = {overrides}", rule_id)
    overrides = {}
    for profile, table in raw.items():
        if profile not in PROFILES:
            raise RuleFileError(path, "[profile.%s]: unknown profile (profiles: %s)" % (profile, ", ".join(PROFILES)),
                                rule_id)
        if not isinstance(table, dict):
            raise RuleFileError(path, "[profile.%s] must be a table" % profile, rule_id)
        for key, value in table.items():
            if key == "severity":
                if value not in SEVERITIES:
                    raise RuleFileError(path, "[profile.%s] severity %r is not one of %s"
                                        % (profile, value, ", ".join(SEVERITIES)), rule_id)
            elif key not in comparison.params:
                raise RuleFileError(path, "[profile.%s]: '%s' is not a parameter of comparison '%s' (parameters: %s)"
                                    % (profile, key, comparison.name, ", ".join(comparison.params) or "none"), rule_id)
        overrides[profile] = dict(table)
    return overrides


def _check_values(values: List[str], fact, path: str, rule_id: str, key: str) -> None:
    if fact.kind == "enum":
        allowed: Tuple[str, ...] = fact.values
    elif fact.kind == "bool":
        allowed = ("true", "false")
    else:
        if values:
            raise RuleFileError(path, "'%s' keyed by value needs a fact with fixed values; '%s' is a %s"
                                % (key, fact.path, fact.kind), rule_id)
        return
    unknown = [v for v in values if v not in allowed]
    if unknown:
        raise RuleFileError(path, "'%s' names %s, which fact '%s' never takes (it takes: %s)"
                            % (key, ", ".join(repr(u) for u in unknown), fact.path, ", ".join(allowed)), rule_id)
