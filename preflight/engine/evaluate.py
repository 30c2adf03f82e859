"""Evaluate chosen rules against a facts snapshot: pure code, no probing."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Set

from preflight.engine import template
from preflight.engine.compare import ERROR, FAIL, PASS, WARN, value_text
from preflight.engine.model import ResolvedRule
from preflight.facts.conditions import CONDITIONS
from preflight.facts.view import NO_CONTEXT, Context, SnapshotView, Unknown

SKIP = "skip"
STATUSES = (PASS, FAIL, WARN, SKIP, ERROR)


class Result(NamedTuple):
    """One rule's verdict on one subject (the system, or one GPU), with its message and fix."""

    rule: ResolvedRule
    status: str
    severity: str
    subject: str
    observed: Any
    expected: str
    message: str
    fix: Optional[Dict[str, Any]]
    variables: Mapping[str, Any] = MappingProxyType({})  # the template values behind message and fix

    @property
    def id(self) -> str:
        return self.rule.id

    def to_json(self) -> Dict[str, Any]:
        return {
            "id": self.id, "title": self.rule.title, "status": self.status, "severity": self.severity,
            "subject": self.subject, "observed": self.observed, "expected": self.expected,
            "message": self.message, "fix": self.fix,
        }


def probes_needed(rules) -> Set[str]:
    """The probes these rules (loaded or resolved) need for their facts and conditions."""
    needed: Set[str] = set()
    for rule in rules:
        needed.update(rule.fact.probes)
        for condition in rule.conditions():
            needed.update(CONDITIONS[condition].probes)
        relaxed = rule.warn_only  # a resolved rule's only where its profile is listed
        if relaxed is not None:
            needed.update(relaxed.fact.probes)
            for condition in relaxed.fact.implies:
                needed.update(CONDITIONS[condition].probes)
    return needed


def evaluate(rules: List[ResolvedRule], snapshot: Dict[str, Any], context: Context = NO_CONTEXT) -> List[Result]:
    """Each rule's results on this snapshot (what the probes saw) in this context (what the run asked for)."""
    facts = SnapshotView(snapshot, context)
    results: List[Result] = []
    for rule in rules:
        results.extend(_evaluate_rule(rule, facts))
    return results


def _evaluate_rule(rule: ResolvedRule, facts: SnapshotView) -> List[Result]:
    severity, expected, profile, labels = rule.severity, rule.expected, rule.profile, rule.rule.labels
    texts = rule.texts()

    def result(status: str, subject: str, message: str, observed: Any = None, fix=None, variables=None) -> Result:
        shown_severity = "warning" if status == WARN else severity
        return Result(rule, status, shown_severity, subject, observed, expected, message, fix, variables or {})

    for name in rule.conditions():
        condition = CONDITIONS[name]
        try:
            reason = condition.check(facts)
        except Unknown as unknown:
            return [result(ERROR, "system", "cannot tell whether %s: %s" % (condition.description, unknown))]
        if reason:
            return [result(SKIP, "system", reason)]

    subjects: List[Any] = [("system", None)]
    if rule.per_gpu:
        try:
            subjects = [("gpu%d" % index, facts.gpu(index)) for index in facts.visible_indices()]
        except Unknown as unknown:
            return [result(ERROR, "system", "cannot tell which GPUs are visible: %s" % unknown)]

    results = []
    for subject, gpu in subjects:
        try:
            value, details = rule.fact.read(facts, gpu)
        except Unknown as unknown:
            results.append(result(ERROR, subject, "%s is unknown: %s" % (rule.fact.path, unknown)))
            continue
        verdict = rule.comparison.evaluate(value, rule.params, labels)
        variables: Dict[str, Any] = {k: v for k, v in texts.items() if k != "expected"}
        variables["python_executable"] = _job_interpreter(facts)  # every command runs the job's own interpreter
        variables.update(details)
        variables.update(verdict.details)
        variables.update(expected=expected, subject=subject, profile=profile or "", rule_id=rule.id, title=rule.title)
        observed = template.render(verdict.observed, variables)  # labels may name details
        variables["observed"] = observed
        if verdict.status == ERROR:
            message = "cannot compare %s: %s" % (rule.fact.path, verdict.details.get("problem", observed))
        elif verdict.status == PASS and rule.rule.pass_message:
            message = template.render(rule.rule.pass_message, variables)
        elif rule.rule.message:
            message = template.render(rule.rule.message, variables)
        elif verdict.status == PASS:
            message = observed
        else:
            message = "%s; expected %s" % (observed, expected)
        status = verdict.status
        if status == FAIL and rule.warn_only is not None:
            relaxed = _relaxed(rule.warn_only, facts, variables)
            if relaxed is not None:
                status, message = WARN, relaxed
        fix = None
        if status in (FAIL, WARN):
            chosen = rule.rule.fix_for(value)
            if chosen is not None:
                from preflight.facts import (
                    platform,  # the fix's lines that fit this machine's OS and driver
                )

                fix = chosen.render(dict(platform.conditions({}, facts), **variables))
        results.append(result(status, subject, message, value, fix, variables))
    return results


def _job_interpreter(facts: SnapshotView) -> str:
    from preflight.facts.readers import python_executable

    return python_executable(facts)


def _relaxed(warn_only, facts: SnapshotView, variables: Dict[str, Any]) -> Optional[str]:
    """The warning that replaces a failure while ``warn_only``'s fact says the job still runs; None otherwise."""
    for name in warn_only.fact.implies:
        try:
            if CONDITIONS[name].check(facts):
                return None
        except Unknown:
            return None
    try:
        value, details = warn_only.fact.read(facts)
    except Unknown:
        return None
    if value_text(value) not in warn_only.values:
        return None
    variables.update(details)
    variables["observed_fact"] = value_text(value)
    return template.render(warn_only.message, variables)


def result_json_schema() -> Dict[str, Any]:
    """``Result.to_json`` as JSON Schema."""
    from preflight.engine import fix
    from preflight.files.json_schema import SEVERITY, STATUS, STR, nullable, obj

    return obj(["id", "title", "status", "severity", "subject", "observed", "expected", "message", "fix"], {
        "id": STR, "title": STR, "status": STATUS, "severity": SEVERITY,
        "subject": {"type": "string", "pattern": "^(system|gpu[0-9]+)$"},
        "observed": {}, "expected": nullable(STR), "message": STR, "fix": fix.json_schema()})
