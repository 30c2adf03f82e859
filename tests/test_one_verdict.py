"""One node, one set of options, one verdict: check, and fleet over check's report or over the same snapshot.

Every command judges by one policy (``report.blocks``); these tests hold the commands to it through the real
command line, with rule files of every severity and --strict on and off.
"""

from __future__ import annotations

import copy
import json
import shutil

from conftest import FIXTURES, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflight.report import blocks

REFERENCE = json.loads((FIXTURES / "reference-facts.json").read_text())

INFO_RULE = """
[[rule]]
id = "site.shm"
title = "A /dev/shm no machine has"
severity = "info"
fact = "host.shm.total"
compare = "bytes"
min = "100TB"
"""


def _verdicts(tmp_path, rules_text: str, snapshot: dict, check_strict: bool, fleet_strict: bool, select: str):
    """(check's exit code and report, fleet's over that report, fleet's over the snapshot), all with the same rules."""
    rules = tmp_path / "rules.toml"
    rules.write_text(rules_text)
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(snapshot))
    common = ["--rules", str(rules), "--select", select]
    check = run_cli("check", "--facts", str(facts), "--format", "json", *common, *(["--strict"] if check_strict else []))
    assert check.returncode in (0, 1), check.stderr
    report = json.loads(check.stdout)
    verdicts = {}
    for kind, document in (("report", check.stdout), ("snapshot", json.dumps(snapshot))):
        folder = tmp_path / kind
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        (folder / "node.json").write_text(document)
        fleet = run_cli("fleet", str(folder), "--format", "json", *common, *(["--strict"] if fleet_strict else []))
        assert fleet.returncode in (0, 1), fleet.stderr
        states = [node["state"] for node in json.loads(fleet.stdout)["nodes"]]
        verdicts[kind] = (fleet.returncode, states)
    return check.returncode, report, verdicts


def test_an_info_rule_under_strict_gives_one_verdict_everywhere(tmp_path):
    """The reproduction from the design review: check said OK, fleet over its report said failing."""
    code, report, fleet = _verdicts(tmp_path, INFO_RULE, REFERENCE, True, True, "site")
    assert code == 0 and report["ok"] is True
    assert [r["status"] for r in report["results"]] == ["fail"]  # it fails, and info never blocks
    assert fleet["report"] == (0, ["warnings"])
    assert fleet["snapshot"] == (0, ["warnings"])


def test_a_report_judged_strictly_stays_strict_in_the_fleet(tmp_path):
    rules = INFO_RULE.replace('severity = "info"', 'severity = "warning"')
    code, report, fleet = _verdicts(tmp_path, rules, REFERENCE, True, False, "site")
    assert code == 1 and report["ok"] is False and report["strict"] is True
    assert fleet["report"] == (1, ["failing"])


# --- the property: random rule sets, severities and --strict --------------------------------------------------

# (fact, comparison, thresholds that pass on the reference machine, thresholds that fail there)
FACTS = [
    ("host.cpu.count", "number", "1", "100000"),
    ("host.shm.total", "bytes", '"1GB"', '"100TB"'),
    ("python.version", "version", '"3.0"', '"99.0"'),
    ("gpu.memory.total", "bytes", '"1GB"', '"10TB"'),
]


@st.composite
def rule_sets(draw):
    rules = []
    for number in range(draw(st.integers(1, 4))):
        fact, comparison, low, high = draw(st.sampled_from(FACTS))
        severity = draw(st.sampled_from(["error", "warning", "info"]))
        outcome = draw(st.sampled_from(["pass", "warn", "fail"]))
        if outcome == "pass":
            thresholds = "min = %s" % low
        elif outcome == "warn":
            thresholds = "min = %s\nrecommended = %s" % (low, high)
        else:
            thresholds = "min = %s" % high
        rules.append('[[rule]]\nid = "prop.r%d"\ntitle = "rule %d"\nseverity = "%s"\nfact = "%s"\ncompare = "%s"\n%s\n'
                     % (number, number, severity, fact, comparison, thresholds))
    return "\n".join(rules)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rules=rule_sets(), strict=st.booleans(), no_host=st.booleans())
def test_check_and_fleet_agree_on_every_rule_set(tmp_path, rules, strict, no_host):
    snapshot = copy.deepcopy(REFERENCE)
    if no_host:  # the host facts unknown: their rules error instead of passing or failing
        del snapshot["host"]
        snapshot["probes"]["host"] = {"status": "error", "seconds": 0.0, "error": "the host probe failed"}
    code, report, fleet = _verdicts(tmp_path, rules, snapshot, strict, strict, "prop")
    expected_ok = not any(blocks(r["status"], r["severity"], strict) for r in report["results"])
    assert report["ok"] is expected_ok and code == (0 if expected_ok else 1)
    for kind in ("report", "snapshot"):
        fleet_code, states = fleet[kind]
        assert fleet_code == code, (kind, rules, strict, report["results"])
        assert (states == ["failing"]) == (not expected_ok), (kind, states)
