"""preflight rules and preflight explain: the rules (and the failure catalog) as a list, a reference page, or one in full."""

from __future__ import annotations

from typing import List, Optional

from preflight.commands import common
from preflight.errors import ExitCode
from preflight.output import emit


def _in_profile(ruleset, profile: Optional[str]):
    return [rule for rule in ruleset.rules.values() if profile is None or profile in rule.profiles]


def list_rules(rules_paths: List[str], profile: Optional[str], output_format: str, warn: common.Warn = None) -> int:
    from preflight.render import rules_doc

    if output_format == "markdown":  # the reference page: rules, facts, and the failure catalog
        ruleset = common.load_rules(rules_paths, warn, failures=True)
        emit(rules_doc.markdown(_in_profile(ruleset, profile))
             + rules_doc.failures_markdown(list(ruleset.failures.values())))
        return ExitCode.OK
    ruleset = common.load_rules(rules_paths, warn)
    rules = _in_profile(ruleset, profile)
    emit(rules_doc.list_text(rules) if output_format == "text" else rules_doc.list_json(rules))
    return ExitCode.OK


def explain(rule_id: str, rules_paths: List[str], warn: common.Warn = None) -> int:
    from preflight.render import rules_doc

    ruleset = common.load_rules(rules_paths, warn, failures=True)
    if rule_id in ruleset.failures:
        emit(rules_doc.explain_failure(ruleset.failures[rule_id]))
    else:
        emit(rules_doc.explain(ruleset.get(rule_id, also=ruleset.failures)))
    return ExitCode.OK


def list_failures(rules_paths: List[str], warn: common.Warn = None) -> int:
    from preflight.render import rules_doc

    ruleset = common.load_rules(rules_paths, warn, failures=True)
    emit(rules_doc.failures_text(list(ruleset.failures.values())))
    return ExitCode.OK
