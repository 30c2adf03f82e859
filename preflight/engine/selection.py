"""Choosing rules (--select/--ignore) and changing their thresholds (--set).

A selector is a rule id or a dotted prefix of ids: ``gpu`` matches
``gpu.count`` and ``gpu.memory`` but not ``gpus.x``. When both lists match a
rule, the more specific (longer) selector wins; on a tie, --ignore wins.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional

from preflight.engine.fields import suggestions
from preflight.engine.loader import RuleSet, validate_params
from preflight.engine.model import SEVERITIES, Rule
from preflight.errors import SelectionError


def matches(rule_id: str, selector: str) -> bool:
    return rule_id == selector or rule_id.startswith(selector + ".")


def _best(rule_id: str, selectors: Iterable[str]) -> int:
    lengths = [len(s) for s in selectors if matches(rule_id, s)]
    return max(lengths) if lengths else -1


def _check_selectors(ruleset: RuleSet, selectors: List[str], option: str) -> None:
    for selector in selectors:
        if not any(matches(rule_id, selector) for rule_id in ruleset.rules):
            close = suggestions(selector, ruleset.rules)
            raise SelectionError("%s %s: no rule id is or starts with '%s'" % (option, selector, selector),
                                 "did you mean %s?" % " or ".join(close) if close else "'preflight rules' lists every rule id")


def choose(ruleset: RuleSet, profile: Optional[str], select: List[str], ignore: List[str]) -> List[Rule]:
    """The rules to evaluate, in rule-file order."""
    _check_selectors(ruleset, select, "--select")
    _check_selectors(ruleset, ignore, "--ignore")
    chosen = []
    for rule in ruleset.rules.values():
        if profile is not None and profile not in rule.profiles:
            continue
        selected = _best(rule.id, select) if select else 0
        if selected >= 0 and selected > _best(rule.id, ignore):
            chosen.append(rule)
    return chosen


def apply_settings(ruleset: RuleSet, settings: List[str], profile: Optional[str]) -> None:
    """Apply ``RULE.KEY=VALUE`` overrides, checking each as strictly as a rule file."""
    for item in settings:
        target, equals, value = item.partition("=")
        rule_id, dot, key = target.strip().rpartition(".")
        if not equals or not dot or not rule_id or not key:
            raise SelectionError("--set %s: expected RULE.KEY=VALUE" % item, "for example: --set driver.version.min=535")
        if rule_id not in ruleset.rules:
            ruleset.get(rule_id)  # raises with suggestions
        rule = ruleset.rules[rule_id]
        settable = [k for k in rule.comparison.params if k != "packages"] + ["severity"]
        if key not in settable:
            raise SelectionError("--set %s: rule '%s' has no setting '%s'" % (item, rule_id, key),
                                 "settings of %s: %s" % (rule_id, ", ".join(settable)))
        value = value.strip()
        if key == "severity":
            if value not in SEVERITIES:
                raise SelectionError("--set %s: severity must be one of %s" % (item, ", ".join(SEVERITIES)))
        rule.settings[key] = value
        validate_params(rule, profile, lambda problem, item=item: SelectionError("--set %s: %s" % (item, problem)))


def required_packages(rules: Iterable[Rule], profile: Optional[str]) -> List[Dict[str, object]]:
    """What the Python probe must look up for these rules' package lists (all profiles when ``profile`` is None)."""
    requests: Dict[str, Dict[str, object]] = {}
    for rule in rules:
        if rule.comparison.name != "present":
            continue
        for one_profile in ([profile] if profile else list(rule.profiles)):
            params, _ = rule.params_for(one_profile)
            for spec in rule.comparison.specs(params):
                requests.setdefault(spec.name, spec.probe_request())
    return list(requests.values())
