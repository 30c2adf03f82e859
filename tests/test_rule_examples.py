"""Every default rule's examples (beside it in its TOML), replayed in-process through the evaluation code."""

from __future__ import annotations

import copy
import json
from typing import Any, Dict

import pytest
from conftest import FIXTURES

from preflight.commands import pipeline
from preflight.commands.options import WorkloadOptions
from preflight.engine import loader
from preflight.engine.evaluate import evaluate
from preflight.facts.view import Context

REFERENCE = json.loads((FIXTURES / "reference-facts.json").read_text())
RULESET = loader.load(capacity=True)
EXAMPLES = [(rule, index, example) for rule in RULESET.rules.values() for index, example in enumerate(rule.examples)]


def _step(key: str):
    return int(key) if key.isdigit() else key


def machine(example: Dict[str, Any]) -> Dict[str, Any]:
    """The reference machine with the example's changes: dotted paths, a number indexing a list."""
    snapshot = copy.deepcopy(REFERENCE)
    for path, value in example.get("facts", {}).items():
        *parents, last = [_step(k) for k in path.split(".")]
        target = snapshot
        for key in parents:
            target = target[key]
        target[last] = value
    for path in example.get("unset", []):
        *parents, last = [_step(k) for k in path.split(".")]
        target = snapshot
        for key in parents:
            target = target[key]
        del target[last]
    return snapshot


def context(example: Dict[str, Any], snapshot: Dict[str, Any]) -> Context:
    """The run's context an example gives: a workload (sized and split as check does), the GPUs expected."""
    workload = None
    if example.get("workload"):
        wanted = example["workload"]
        request = pipeline.workload_request(RULESET, WorkloadOptions(wanted["id"], wanted.get("task", "train"),
                                                                     wanted.get("batch"), wanted.get("img", 640)))
        workload = pipeline.split_workload(request, snapshot, RULESET)
    return Context(workload, example.get("expected_gpus"))


@pytest.mark.parametrize("rule, index, example", EXAMPLES,
                         ids=["%s[%d]-%s" % (rule.id, index, example["expect"]) for rule, index, example in EXAMPLES])
def test_rule_example(rule, index, example):
    settings = {key: str(value) for key, value in example.get("set", {}).items()}
    snapshot = machine(example)
    results = evaluate([rule.resolve(example["profile"], settings)], snapshot, context(example, snapshot))
    statuses = [r.status for r in results]
    assert example["expect"] in statuses, (statuses, [r.message for r in results])
    shown = [r for r in results if r.status == example["expect"]][0]
    assert example.get("message", "") in shown.message, shown.message
    if shown.status in ("fail", "warn") and shown.rule.rule.fix is not None:
        assert shown.fix and shown.fix["title"], "a failing example must come with its fix"


@pytest.mark.parametrize("rule", list(RULESET.rules.values()), ids=list(RULESET.rules))
def test_every_default_rule_has_a_passing_and_a_failing_example(rule):
    expected = {example["expect"] for example in rule.examples}
    assert "pass" in expected, "%s has no passing example" % rule.id
    assert expected & {"fail", "warn", "error"}, "%s has no failing or warning example" % rule.id


def test_the_reference_machine_passes_every_rule_that_applies():
    for profile in ("train", "inference", "node"):
        rules = [rule.resolve(profile) for rule in RULESET.rules.values() if profile in rule.profiles]
        assert {r.status for r in evaluate(rules, REFERENCE)} <= {"pass", "skip"}, profile


def test_bad_examples_are_rule_file_errors(tmp_path):
    from preflight.errors import RuleFileError

    path = tmp_path / "x.toml"
    path.write_text('[[rule]]\nid = "site.x"\ntitle = "x"\nfact = "visibility.count"\ncompare = "number"\nmin = 1\n'
                    '[[rule.examples]]\nexpect = "maybe"\n')
    with pytest.raises(RuleFileError, match="'expect' must be one of pass, warn, fail, skip, error"):
        loader.load([str(path)])
