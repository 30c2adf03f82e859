"""Choosing rules (--select/--ignore) and their thresholds (--set), resolved once for the run.

A selector is a rule id or a dotted prefix of ids: ``gpu`` matches
``gpu.count`` and ``gpu.memory`` but not ``gpus.x``. When both lists match a
rule, the more specific (longer) selector wins; on a tie, --ignore wins.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional

from preflight.engine import lifecycle
from preflight.engine.loader import RuleSet
from preflight.engine.model import SEVERITIES, ResolvedRule
from preflight.errors import PreflightError, SelectionError, suggestions


Warn = Optional[Callable[[str], None]]
_SKIPPED = ": it is skipped; remove it"  # said of a retired id (engine/lifecycle.py)


def matches(rule_id: str, selector: str) -> bool:
    return rule_id == selector or rule_id.startswith(selector + ".")


def _best(rule_id: str, selectors: Iterable[str]) -> int:
    lengths = [len(s) for s in selectors if matches(rule_id, s)]
    return max(lengths) if lengths else -1


def check_selectors(ruleset: RuleSet, selectors: List[str], said_as: str, warn: Warn = None) -> List[str]:
    """The selectors as current ids: a renamed rule's old id becomes its new one, a retired id stays and matches
    nothing (engine/lifecycle.py), each said through ``warn``; an id nothing knows is an error. ``said_as`` names
    a selector in those messages: ``"--select %s"``, or a configuration file's place and the selector."""
    current = []
    for selector in selectors:
        if not any(matches(rule_id, selector) for rule_id in ruleset.rules):
            now, note = lifecycle.resolve(ruleset, selector)
            if note:
                if warn is not None:
                    warn("%s: %s%s" % (said_as % selector, note, _SKIPPED if now is None else ""))
                current.append(now if now is not None else selector)
                continue
            close = suggestions(selector, ruleset.rules)
            raise SelectionError("%s: no rule id is or starts with '%s'" % (said_as % selector, selector),
                                 "did you mean %s?" % " or ".join(close) if close else "'preflight rules' lists every rule id")
        current.append(selector)
    return current


def choose(ruleset: RuleSet, profile: Optional[str], select: List[str], ignore: List[str],
           settings: Optional[Dict[str, Dict[str, str]]] = None, warn: Warn = None) -> List[ResolvedRule]:
    """The rules to evaluate, in rule-file order, each resolved for ``profile`` with its ``--set`` settings."""
    select = check_selectors(ruleset, select, "--select %s", warn)
    ignore = check_selectors(ruleset, ignore, "--ignore %s", warn)
    chosen = []
    for rule in ruleset.rules.values():
        if profile is not None and profile not in rule.profiles:
            continue
        selected = _best(rule.id, select) if select else 0
        if selected >= 0 and selected > _best(rule.id, ignore):
            chosen.append(rule.resolve(profile, (settings or {}).get(rule.id)))
    return chosen


def parse_settings(ruleset: RuleSet, settings: List[str], profile: Optional[str],
                   warn: Warn = None, said_as: str = "--set %s") -> Dict[str, Dict[str, str]]:
    """``RULE.KEY=VALUE`` overrides by rule id, each checked as strictly as a rule file. The rules stay as loaded.
    A renamed rule's old id sets its new one, a retired rule's setting is skipped, each said through ``warn``.
    ``said_as`` names an item in those messages: ``--set ITEM``, or a configuration file's place and the item."""
    parsed: Dict[str, Dict[str, str]] = {}
    for item in settings:
        target, equals, value = item.partition("=")
        shown = said_as % (item if len(item) <= 120 else "%s... (%d characters)" % (item[:120], len(item)))
        rule_id, dot, key = target.strip().rpartition(".")
        if not equals or not dot or not rule_id or not key:
            raise SelectionError("%s: expected RULE.KEY=VALUE" % shown, "for example: --set driver.version.min=535")
        if rule_id not in ruleset.rules:
            now, note = lifecycle.resolve(ruleset, rule_id)
            if note and warn is not None:
                warn("%s: %s%s" % (shown, note, _SKIPPED if now is None else ""))
            if now is None:
                continue
            rule_id = now
        try:
            rule = ruleset.get(rule_id)
        except PreflightError as exc:  # said with the item, like every other problem of one
            raise SelectionError("%s: %s" % (shown, exc.message), exc.hint)
        settable = [k for k in rule.comparison.params if k != "packages"] + ["severity"]
        if key not in settable:
            raise SelectionError("%s: rule '%s' has no setting '%s'" % (shown, rule_id, key),
                                 "settings of %s: %s" % (rule_id, ", ".join(settable)))
        value = value.strip()
        if key == "severity" and value not in SEVERITIES:
            raise SelectionError("%s: severity must be one of %s" % (shown, ", ".join(SEVERITIES)))
        merged = dict(parsed.get(rule_id, {}), **{key: value})
        for one_profile in ([profile] if profile else [None]):
            try:
                rule.resolve(one_profile, merged)
            except ValueError as exc:
                raise SelectionError("%s: %s" % (shown, exc))
        parsed[rule_id] = merged
    return parsed


def required_packages(rules: Iterable[ResolvedRule]) -> List[Dict[str, object]]:
    """What the Python probe must look up for these rules' package lists."""
    requests: Dict[str, Dict[str, object]] = {}
    for rule in rules:
        if rule.comparison.name != "present":
            continue
        for spec in rule.params["required_specs"] + rule.params["recommended_specs"]:
            requests.setdefault(spec.name, spec.probe_request())
    return list(requests.values())
