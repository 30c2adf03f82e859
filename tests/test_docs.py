"""The README and docs/ stay true to the code: every preflight command in them parses, every output they show is
what preflight prints, their tables name real rules and options, and the README's Quick start works verbatim from a
fresh copy of the repository."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, clean_env, nvml_fixture, run_cli
from test_help import parse

spec = importlib.util.spec_from_file_location("docs_examples", str(REPO / "scripts" / "docs_examples.py"))
docs_examples = importlib.util.module_from_spec(spec)
spec.loader.exec_module(docs_examples)

README = (REPO / "README.md").read_text()
PAGES = ["workstation", "capacity", "slurm", "kubernetes", "fleet", "configuration", "writing-rules", "rules",
         "architecture"]


def page(name: str) -> str:
    return (REPO / "docs" / ("%s.md" % name)).read_text()


EXAMPLES = [example for path in docs_examples.documents() for example in docs_examples.examples(path)]
INLINE = [example for path in docs_examples.documents() for example in docs_examples.inline_commands(path)]


def test_every_preflight_command_in_the_docs_parses():
    assert len(EXAMPLES) >= 20 and len(INLINE) >= 5, (len(EXAMPLES), len(INLINE))
    for example in EXAMPLES + INLINE:
        words = docs_examples.argv(example)
        if "..." in words:
            continue  # an elided command line ("train_dual.py ..."), shown as a shape, not to be run
        try:
            parse(words)
        except Exception as exc:  # a UsageError names what is wrong
            raise AssertionError("%s:%d: %s: %s" % (example.path, example.line, example.command, exc))
    names = {docs_examples.argv(e)[1] for e in EXAMPLES}
    assert {"check", "exec", "slurm", "diagnose", "plan", "fleet", "serve", "config", "facts"} <= names, names


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.output and not e.checked_by],
                         ids=lambda e: "%s:%d" % (e.path, e.line))
def test_every_output_the_docs_show_is_what_preflight_prints(example):
    printed = docs_examples.run(example)
    assert docs_examples.matches(example.output, printed), (
        "%s:%d shows output that preflight no longer prints; run python scripts/docs_examples.py\nprinted:\n%s"
        % (example.path, example.line, "\n".join(printed)))


def test_outputs_checked_elsewhere_name_a_test_that_exists():
    for example in [e for e in EXAMPLES if e.checked_by]:
        path, name = example.checked_by.split("::")
        assert re.search(r"^def %s\(" % name, (REPO / path).read_text(), re.M), example.checked_by


def test_the_readme_is_short_and_every_page_is_linked_from_it_and_from_help():
    assert len(README.splitlines()) < 250
    helped = run_cli("--help").stdout
    for name in PAGES:
        assert "(docs/%s.md)" % name in README, name
        assert "docs/%s.md" % name in helped, name
        assert (REPO / "docs" / ("%s.md" % name)).is_file()


def test_the_example_rule_works(tmp_path):
    block = re.search(r"```toml\n(\[\[rule\]\]\nid = \"site.gpu_model\".*?)```", page("writing-rules"), re.S).group(1)
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


def test_the_rule_table_lists_every_default_rule_with_its_severity_and_profiles():
    rows = {rule: (severity, profiles) for rule, severity, profiles in re.findall(
        r"^\| `([a-z_.]+)` \|.*\| (error|warning) \| ([a-z, ]+) \|$", page("writing-rules"), re.M)}
    rules = {r["id"]: r for r in json.loads(run_cli("rules", "--format", "json").stdout)}
    missing, extra = sorted(set(rules) - set(rows)), sorted(set(rows) - set(rules))
    assert not missing and not extra, "docs/writing-rules.md's rule table misses %s and lists %s, which is no rule" % (
        missing, extra)
    wrong = []
    for rule, (severity, profiles) in rows.items():
        shown = ["train", "inference", "node"] if profiles == "all" else profiles.split(", ")
        if severity != rules[rule]["severity"] or sorted(shown) != sorted(rules[rule]["profiles"]):
            wrong.append("%s: the table says %s, %s; the rule %s, %s" % (
                rule, severity, profiles, rules[rule]["severity"], ", ".join(rules[rule]["profiles"])))
    assert not wrong, "\n".join(wrong)


def test_the_documented_options_exist():
    documented = set(re.findall(r"^\| `(--[a-z-]+)", page("configuration"), re.M))
    help_text = run_cli("check", "--help").stdout
    assert len(documented) > 15
    for option in documented:
        assert option in help_text, option


def test_the_site_configuration_example(tmp_path):
    text = page("configuration")
    block = re.search(r"```toml\n(\[defaults\] .*?)```", text, re.S).group(1)
    (tmp_path / "site-rules").mkdir()
    (tmp_path / "site-rules" / "site.toml").write_text(
        '[[rule]]\nid = "site.cpus"\ntitle = "CPUs"\nseverity = "warning"\nprofiles = ["node"]\n'
        'fact = "host.cpu.count"\ncompare = "number"\nmin = 8\nwhy = "site"\nsource = "site"\n')
    config = tmp_path / "config.toml"
    config.write_text(block)
    shown = run_cli("config", "show", "--config", str(config), "--host", "gpu-a07", "--gpu", "NVIDIA H100 80GB HBM3")
    assert shown.returncode == 0, shown.stderr
    documented = re.search(r"\$ preflight config show --host gpu-a07 .*?\n(.*?)```", text, re.S).group(1)
    printed = shown.stdout.replace(str(config), "/etc/preflight/config.toml").replace(str(tmp_path),
                                                                                       "/etc/preflight")
    assert [line.split() for line in printed.splitlines()] == [line.split() for line in documented.splitlines()]


def test_the_capacity_table_is_the_scripts_output():
    completed = subprocess.run([sys.executable, str(REPO / "scripts" / "capacity_table.py")], capture_output=True,
                               text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    rows = completed.stdout.splitlines()[2:]
    assert len(rows) == 10
    for row in rows:
        assert row in page("capacity"), "the capacity table is stale: run scripts/capacity_table.py (%s)" % row


def test_the_readme_says_why_there_is_no_man_page():
    assert "man page" in README


# --- the Quick start, verbatim, in a fresh copy -----------------------------------------------------------

def quick_start():
    """The two command lines of the README's Quick start, as written."""
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)\n```", section, re.S)


def test_the_quick_start_is_two_commands_and_the_second_is_what_ci_runs():
    setup, tests = quick_start()
    assert "\n" not in setup and "\n" not in tests
    ci = (REPO / ".ci" / "run").read_text()
    assert 'pip install --quiet --disable-pip-version-check ".[test]"' in ci and "pytest -rs" in ci
    assert '.venv/bin/pip install ".[test]"' in tests and "pytest -rs" in tests
    assert 'PATH="$PWD/.venv/bin:$PATH:/usr/sbin:/sbin"' in tests and '"$venv/bin:$PATH:/usr/sbin:/sbin"' in ci


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("PREFLIGHT_IN_QUICK_START") == "1",
                    reason="this run is the Quick start's own test run: it does not start another")
def test_the_quick_start_runs_verbatim_from_a_fresh_copy(tmp_path):
    """Both lines, copied from the README, run in a copy of the repository (its tracked and new files, nothing
    built); the test line runs one test (PYTEST_ADDOPTS), so that the suite does not run itself again."""
    copy = tmp_path / "clone"
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=str(REPO),
                           capture_output=True, text=True, check=True).stdout.splitlines()
    for name in files:
        source = REPO / name
        if source.is_file():
            target = copy / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(str(source), str(target))
    setup, tests = quick_start()
    env = clean_env({"PREFLIGHT_CACHE_DIR": str(tmp_path / "cache"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    env.pop("VIRTUAL_ENV", None)
    first = subprocess.run(["bash", "-c", setup], cwd=str(copy), capture_output=True, text=True, env=env,
                           timeout=900)
    assert first.returncode in (0, 1), first.stdout[-2000:] + first.stderr[-3000:]
    assert "nvml.init" in first.stdout and ("OK (exit 0)" in first.stdout or "FAILED (exit 1)" in first.stdout)
    env.update(PYTEST_ADDOPTS="-q -p no:cacheprovider tests/test_cli.py -k test_help_and_version",
               PREFLIGHT_IN_QUICK_START="1")
    second = subprocess.run(["bash", "-c", tests], cwd=str(copy), capture_output=True, text=True, env=env,
                            timeout=900)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "1 passed" in second.stdout, second.stdout[-2000:]


def test_every_command_is_shown_on_a_page():
    from preflight.cli import COMMANDS

    shown = " ".join(path.read_text() for path in [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md")))
    missing = [name for name in COMMANDS if not re.search(r"[`$] ?preflight %s\b" % name, shown)]
    assert not missing, "commands no page of docs/ or README.md shows: %s" % missing
