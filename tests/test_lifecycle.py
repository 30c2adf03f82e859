"""Rule ids that change: a renamed id leads to its new rule with a warning, a retired one is skipped with a warning,
in --select, --ignore, --set, the site configuration and explain alike (preflight/engine/lifecycle.py)."""

from __future__ import annotations

import json

from conftest import nvml_fixture, run_cli

H200 = nvml_fixture("h200-driver580.json")

SITE_RULES = """
[[rule]]
id = "site.driver"
title = "The site's driver floor"
fact = "nvml.driver_version"
compare = "version"
min = "500"
profiles = ["node"]

[[renamed]]
id = "site.driver_floor"
now = "site.driver"
since = "site rules 2"

[[renamed]]
id = "site.floor"
now = "site.driver_floor"
since = "site rules 1"

[[retired]]
id = "site.pcie_legacy"
since = "site rules 2"
why = "gpu.pcie covers it"
"""


def _rules(tmp_path, text=SITE_RULES):
    path = tmp_path / "site.toml"
    path.write_text(text)
    return str(path)


def _check(*args):
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--format", "json", *args)
    return completed, (json.loads(completed.stdout) if completed.stdout.strip() else None)


def test_a_renamed_id_selects_its_new_rule_and_says_so(tmp_path):
    rules = _rules(tmp_path)
    completed, report = _check("--rules", rules, "--select", "site.driver_floor")
    assert completed.returncode == 0, completed.stderr
    assert [r["id"] for r in report["results"]] == ["site.driver"]
    assert "--select site.driver_floor: 'site.driver_floor' is now 'site.driver' (renamed in site rules 2): write " \
           "the new id" in completed.stderr
    # A chain of renames ends at the newest id.
    completed, report = _check("--rules", rules, "--select", "site.floor")
    assert [r["id"] for r in report["results"]] == ["site.driver"] and "'site.floor' is now 'site.driver'" in \
        completed.stderr


def test_a_renamed_id_is_ignored_and_set_through_its_new_rule(tmp_path):
    rules = _rules(tmp_path)
    completed, report = _check("--rules", rules, "--select", "site", "--set", "site.driver_floor.min=900")
    assert completed.returncode == 1, completed.stderr
    assert [r["status"] for r in report["results"]] == ["fail"] and "--set site.driver_floor.min=900:" in completed.stderr
    completed, report = _check("--rules", rules, "--ignore", "site.driver_floor")
    assert completed.returncode == 0 and "site.driver" not in [r["id"] for r in report["results"]]


def test_a_retired_id_is_skipped_with_a_warning_and_selects_nothing(tmp_path):
    rules = _rules(tmp_path)
    completed, report = _check("--rules", rules, "--ignore", "site.pcie_legacy", "--set", "site.pcie_legacy.min=1")
    assert completed.returncode == 0, completed.stderr
    assert "--ignore site.pcie_legacy: 'site.pcie_legacy' was retired in site rules 2 (gpu.pcie covers it): it is " \
           "skipped; remove it" in completed.stderr and "--set site.pcie_legacy.min=1: 'site.pcie_legacy' was " \
           "retired" in completed.stderr
    # Selecting only a retired rule selects nothing, never everything.
    completed, _ = _check("--rules", rules, "--select", "site.pcie_legacy")
    assert completed.returncode == 2 and "was retired" in completed.stderr and "no rule" in completed.stderr.lower()


def test_an_unknown_id_is_still_an_error(tmp_path):
    completed, _ = _check("--rules", _rules(tmp_path), "--select", "site.drivr")
    assert completed.returncode == 2 and "did you mean site.driver?" in completed.stderr


def test_the_site_configuration_may_name_old_ids(tmp_path):
    rules = _rules(tmp_path)
    config = tmp_path / "config.toml"
    config.write_text('[defaults]\nrules = ["%s"]\nprofile = "node"\nselect = ["site.driver_floor"]\n'
                      'set = ["site.driver_floor.min=900"]\nignore = ["site.pcie_legacy"]\n' % rules)
    validated = run_cli("config", "validate", str(config))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "config.toml:4: [defaults]: select: site.driver_floor: 'site.driver_floor' is now 'site.driver'" in \
        validated.stderr
    assert "config.toml:6: [defaults]: ignore: site.pcie_legacy: 'site.pcie_legacy' was retired" in validated.stderr
    completed = run_cli("check", "--config", str(config), "--nvml-fixture", H200, "--format", "json")
    assert completed.returncode == 1, completed.stderr
    assert [r["id"] for r in json.loads(completed.stdout)["results"]] == ["site.driver"]


def test_explain_follows_a_rename_and_names_a_retired_id(tmp_path):
    rules = _rules(tmp_path)
    completed = run_cli("explain", "site.floor", "--rules", rules)
    assert completed.returncode == 0 and "site.driver" in completed.stdout and "is now 'site.driver'" in completed.stderr
    completed = run_cli("explain", "site.pcie_legacy", "--rules", rules)
    assert completed.returncode == 2 and "'site.pcie_legacy' was retired in site rules 2 (gpu.pcie covers it)" in \
        completed.stderr


def test_lifecycle_tables_that_contradict_the_rules_are_refused(tmp_path):
    still_there = SITE_RULES + '\n[[retired]]\nid = "site.driver"\nsince = "3"\nwhy = "x"\n'
    completed = run_cli("rules", "--rules", _rules(tmp_path, still_there))
    assert completed.returncode == 2 and "'site.driver' is listed as renamed or retired, but a loaded entry still " \
                                         "has it" in completed.stderr
    nowhere = SITE_RULES + '\n[[renamed]]\nid = "site.old"\nnow = "site.nothing"\nsince = "3"\n'
    completed = run_cli("explain", "site.driver", "--rules", _rules(tmp_path, nowhere))
    assert completed.returncode == 2 and "'now' names 'site.nothing', which nothing loaded here has" in completed.stderr
    loop = SITE_RULES + '\n[[renamed]]\nid = "site.a"\nnow = "site.b"\nsince = "3"\n' \
                        '\n[[renamed]]\nid = "site.b"\nnow = "site.a"\nsince = "3"\n'
    completed = run_cli("rules", "--rules", _rules(tmp_path, loop))
    assert completed.returncode == 2 and "form a loop" in completed.stderr


def test_the_shipped_lifecycle_tables_load_with_every_entry():
    from preflight.engine import lifecycle, loader

    ruleset = loader.load(failures=True, capacity=True, smoke=True)
    lifecycle.check(ruleset)  # the shipped renames point at loaded ids, the retired ids are gone
    assert not set(ruleset.renamed) & set(ruleset.rules)
