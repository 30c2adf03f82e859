"""The README stays true to the code: its example rule runs, its tables name real rules and options."""

from __future__ import annotations

import json
import re

from conftest import REPO, nvml_fixture, run_cli

README = (REPO / "README.md").read_text()


def test_the_readme_example_rule_works(tmp_path):
    block = re.search(r"```toml\n(\[\[rule\]\]\nid = \"site.gpu_model\".*?)```", README, re.S).group(1)
    path = tmp_path / "site.toml"
    path.write_text(block)
    passing = json.loads(run_cli("check", "--rules", str(path), "--select", "site", "--format", "json",
                                 "--nvml-fixture", nvml_fixture("h200-driver580.json")).stdout)
    assert [r["status"] for r in passing["results"]] == ["pass"]
    failing = json.loads(run_cli("check", "--rules", str(path), "--select", "site", "--format", "json",
                                 "--nvml-fixture", nvml_fixture("rtx3060-12g-driver525.json")).stdout)
    result = failing["results"][0]
    assert result["status"] == "fail" and result["message"] == "NVIDIA GeForce RTX 3060 is not a data-centre GPU"
    assert result["fix"]["commands"] == ["sbatch --partition=gpu-large train.sh"]


def test_the_readme_rule_table_lists_every_default_rule():
    documented = set(re.findall(r"^\| `([a-z_.]+)` \|", README, re.M))
    rules = {r["id"] for r in json.loads(run_cli("rules", "--format", "json").stdout)}
    assert documented == rules


def test_the_readme_options_exist():
    documented = set(re.findall(r"^\| `(--[a-z-]+)", README, re.M))
    help_text = run_cli("check", "--help").stdout
    for option in documented:
        assert option in help_text, option


def test_the_readme_test_command_is_what_ci_runs():
    assert "pip install -e \".[test]\"\npytest -rs\n" in README
    assert "pytest -rs)" in (REPO / ".ci" / "run").read_text()


def test_the_readme_site_configuration_is_what_config_show_prints(tmp_path):
    block = re.search(r"```toml\n(\[defaults\] .*?)```", README, re.S).group(1)
    (tmp_path / "site-rules").mkdir()
    (tmp_path / "site-rules" / "site.toml").write_text(
        '[[rule]]\nid = "site.cpus"\ntitle = "CPUs"\nseverity = "warning"\nprofiles = ["node"]\n'
        'fact = "host.cpu.count"\ncompare = "number"\nmin = 8\nwhy = "site"\nsource = "site"\n')
    config = tmp_path / "config.toml"
    config.write_text(block)
    shown = run_cli("config", "show", "--config", str(config), "--host", "gpu-a07", "--gpu", "NVIDIA H100 80GB HBM3")
    assert shown.returncode == 0, shown.stderr
    documented = re.search(r"\$ preflight config show --host gpu-a07 .*?\n(.*?)```", README, re.S).group(1)
    printed = shown.stdout.replace(str(config), "/etc/preflight/config.toml").replace(str(tmp_path),
                                                                                       "/etc/preflight")
    assert [line.split() for line in printed.splitlines()] == [line.split() for line in documented.splitlines()]
