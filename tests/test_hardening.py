"""Regressions from the red-team run: hostile or broken input never executes code, crashes or lies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import nvml_fixture, run_cli

H200 = nvml_fixture("h200-driver580.json")


def _rule_file(tmp_path: Path, body: str, name: str = "site.toml") -> str:
    path = tmp_path / name
    path.write_text(body)
    return str(path)


def _packages_rule(required: str) -> str:
    return ('[[rule]]\nid = "site.pkg"\ntitle = "site package"\nfact = "python.packages"\ncompare = "present"\n'
            'required = %s\nprofiles = ["train"]\n' % required)


# --- a rule file never makes preflight import or run code ---------------------------------------

def _sneaky_package(root: Path, marker: Path) -> None:
    package = root / "sneaky"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("open(%r, 'w').write('imported')\nprint('SNEAKY RAN')\n" % str(marker))
    (package / "sub.py").write_text("")


def test_a_dotted_requirement_does_not_import_its_parent_in_process(tmp_path):
    marker = tmp_path / "imported"
    _sneaky_package(tmp_path / "site", marker)
    rules = _rule_file(tmp_path, _packages_rule('["sneaky.sub", "sneaky.nothere", "this.x"]'))
    completed = run_cli("check", "--rules", rules, "--select", "site", "--format", "json",
                        env={"PYTHONPATH": str(tmp_path / "site")})
    report = json.loads(completed.stdout)  # nothing printed by an imported module spoils the JSON
    assert not marker.exists() and "SNEAKY RAN" not in completed.stdout
    assert "Beautiful is better than ugly" not in completed.stdout + completed.stderr  # `this` was not imported
    message = report["results"][0]["message"]
    assert "sneaky.nothere is missing" in message and "this.x is missing" in message
    assert "sneaky.sub is missing" not in message


def test_a_dotted_requirement_does_not_import_its_parent_under_python(tmp_path, fake_env):
    env = fake_env()
    marker = tmp_path / "imported"
    _sneaky_package(env.site, marker)
    rules = _rule_file(tmp_path, _packages_rule('["sneaky.sub", "this.x"]'))
    completed = run_cli("check", "--rules", rules, "--select", "site", "--python", env.python, "--format", "json")
    report = json.loads(completed.stdout)
    assert not marker.exists()
    assert report["results"][0]["message"].startswith("this.x is missing;")


def test_a_module_name_that_is_not_one_is_refused_when_the_rules_load(tmp_path):
    rules = _rule_file(tmp_path, _packages_rule('["x"]') + '[rule.packages.x]\nimport = "os; import this"\n')
    completed = run_cli("check", "--rules", rules, "--select", "site")
    assert completed.returncode == 2 and "is not a Python module name" in completed.stderr


# --- thresholds that would silently give a wrong verdict --------------------------------------

@pytest.mark.parametrize("setting, problem", [
    ("gpu.count.min=nan", "expected a finite number, got 'nan'"),
    ("gpu.count.min=inf", "expected a finite number, got 'inf'"),
    ("gpu.count.min=-inf", "expected a finite number"),
    ("gpu.memory.min=24", "a size needs a unit, got '24': write it as 24GB"),
    ("gpu.memory.min=24.5", "a size needs a unit"),
    ("driver.version.min=nan", "'nan' is not a version"),
])
def test_set_rejects_thresholds_that_cannot_mean_what_was_meant(setting, problem):
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--set", setting)
    assert completed.returncode == 2 and problem in completed.stderr, completed.stderr


@pytest.mark.parametrize("threshold, problem", [
    ("min = nan", "expected a finite number"),
    ("min = inf", "expected a finite number"),
    ("min = 1e400", "expected a finite number"),
])
def test_rule_files_reject_non_finite_thresholds(tmp_path, threshold, problem):
    rules = _rule_file(tmp_path, '[[rule]]\nid = "gpu.count"\ntitle = "GPUs"\nfact = "visibility.count"\n'
                                 'compare = "number"\n%s\nprofiles = ["node"]\n' % threshold)
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--rules", rules)
    assert completed.returncode == 2 and problem in completed.stderr, completed.stderr


def test_rule_files_need_a_unit_on_sizes(tmp_path):
    rules = _rule_file(tmp_path, '[[rule]]\nid = "gpu.memory"\ntitle = "memory"\nfact = "gpu.memory.total"\n'
                                 'compare = "bytes"\nmin = 24\nprofiles = ["node"]\n')
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--rules", rules)
    assert completed.returncode == 2 and "a size needs a unit, got 24" in completed.stderr, completed.stderr
    assert run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--set", "gpu.memory.min=0").returncode == 0
