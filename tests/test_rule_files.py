"""Rule files are data: user rules add, override and fail clearly."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from conftest import REPO, nvml_fixture, run_cli, run_json, status_of

H200 = nvml_fixture("h200-driver580.json")

GOOD_RULE = """
[[rule]]
id = "site.gpu_name"
title = "Only data-centre GPUs"
fact = "gpu.name"
compare = "pattern"
pattern = "(?i)H100|H200|A100"
fix = { title = "Use a data-centre GPU", steps = ["{gpu_name} is not one"], commands = ["nvidia-smi -L"] }
"""


def write(tmp_path: Path, text: str, name: str = "site.toml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_a_user_rule_is_added_and_evaluated(tmp_path):
    path = write(tmp_path, GOOD_RULE)
    report = run_json("check", "--rules", path, "--select", "site", "--nvml-fixture", H200)
    assert status_of(report, "site.gpu_name", "gpu0") == "pass"
    report = run_json("check", "--rules", path, "--select", "site", "--nvml-fixture",
                      nvml_fixture("rtx3060-12g-driver525.json"))
    result = report["results"][0]
    assert result["status"] == "fail"
    assert result["fix"]["steps"] == ["NVIDIA GeForce RTX 3060 is not one"]


def test_a_user_rule_overrides_a_default_and_keeps_its_place(tmp_path):
    path = write(tmp_path, """
        [[rule]]
        id = "driver.version"
        title = "Site driver policy"
        fact = "nvml.driver_version"
        compare = "version"
        min = "590"
        fix = "driver-upgrade"
    """)
    report = run_json("check", "--rules", path, "--nvml-fixture", H200)
    ids = [r["id"] for r in report["results"]]
    assert ids.index("driver.version") == ids.index("gpu.mig") + 1
    result = [r for r in report["results"] if r["id"] == "driver.version"][0]
    assert result["status"] == "fail" and result["expected"] == ">= 590"


def test_a_folder_of_rules_is_loaded(tmp_path):
    folder = tmp_path / "rules.d"
    folder.mkdir()
    write(folder, GOOD_RULE, "a.toml")
    write(folder, GOOD_RULE.replace("site.gpu_name", "site.other"), "b.toml")
    completed = run_cli("rules", "--rules", str(folder))
    assert "site.gpu_name" in completed.stdout and "site.other" in completed.stdout


BAD_FILES = [
    ("not toml", "[[rule]\nid = 1", "not valid TOML"),
    ("wrong type", '[[rule]]\nid = "x.y"\ntitle = 3\nfact = "gpu.name"\ncompare = "pattern"\npattern = "a"',
     "rule 'x.y': 'title' must be a non-empty string"),
    ("unknown comparison", '[[rule]]\nid = "x.y"\ntitle = "t"\nfact = "gpu.name"\ncompare = "regex"',
     "rule 'x.y': unknown comparison 'regex'"),
    ("unknown fact", '[[rule]]\nid = "x.y"\ntitle = "t"\nfact = "gpu.memory.totl"\ncompare = "bytes"\nmin = "1GB"',
     "rule 'x.y': unknown fact 'gpu.memory.totl' (did you mean gpu.memory.total"),
    ("comparison for another kind", '[[rule]]\nid = "x.y"\ntitle = "t"\nfact = "nvml.driver_version"\ncompare = "bytes"\nmin = "1GB"',
     "comparison 'bytes' does not apply to fact 'nvml.driver_version', which is a version"),
    ("bad threshold", '[[rule]]\nid = "x.y"\ntitle = "t"\nfact = "gpu.memory.total"\ncompare = "bytes"\nmin = "twelve"',
     "rule 'x.y': 'min': expected a size such as 12GB"),
    ("missing threshold", '[[rule]]\nid = "x.y"\ntitle = "t"\nfact = "gpu.memory.total"\ncompare = "bytes"',
     "needs at least one of 'min', 'recommended', 'max'"),
    ("recommended below min", '[[rule]]\nid = "x.y"\ntitle = "t"\nfact = "nvml.driver_version"\ncompare = "version"\nmin = "550"\nrecommended = "530"',
     "'recommended' (530) is below 'min' (550)"),
    ("duplicate id", GOOD_RULE + GOOD_RULE, "rule id 'site.gpu_name' is defined twice"),
    ("bad severity", '[[rule]]\nid = "x.y"\ntitle = "t"\nseverity = "fatal"\nfact = "gpu.name"\ncompare = "pattern"\npattern = "a"',
     "severity 'fatal' is not one of error, warning, info"),
    ("unknown profile", '[[rule]]\nid = "x.y"\ntitle = "t"\nprofiles = ["training"]\nfact = "gpu.name"\ncompare = "pattern"\npattern = "a"',
     "unknown profile 'training'"),
    ("unknown condition", '[[rule]]\nid = "x.y"\ntitle = "t"\nwhen = ["gpu"]\nfact = "gpu.name"\ncompare = "pattern"\npattern = "a"',
     "unknown condition 'gpu'"),
    ("enum value typo", '[[rule]]\nid = "x.y"\ntitle = "t"\nfact = "torch.build"\ncompare = "in"\nexpected = ["cudaa"]',
     "'expected' lists 'cudaa', which this fact never takes"),
    ("fix keyed by impossible value", '[[rule]]\nid = "x.y"\ntitle = "t"\nfact = "torch.build"\ncompare = "in"\nexpected = ["cuda"]\nfixes = { gpu = "torch-install" }',
     "'fixes' names 'gpu', which fact 'torch.build' never takes"),
    ("unknown fix", '[[rule]]\nid = "x.y"\ntitle = "t"\nfact = "gpu.name"\ncompare = "pattern"\npattern = "a"\nfix = "driver-upgrad"',
     "names fix 'driver-upgrad', which no rule file defines (did you mean driver-upgrade?)"),
    ("unknown placeholder", '[[rule]]\nid = "x.y"\ntitle = "t"\nfact = "gpu.name"\ncompare = "pattern"\npattern = "a"\nmessage = "{gpu_nam} bad"',
     "unknown placeholder(s) {gpu_nam}"),
    ("bad regex", '[[rule]]\nid = "x.y"\ntitle = "t"\nfact = "gpu.name"\ncompare = "pattern"\npattern = "("',
     "is not a valid regular expression"),
    ("bad id", '[[rule]]\nid = "X Y"\ntitle = "t"\nfact = "gpu.name"\ncompare = "pattern"\npattern = "a"',
     "rule id 'X Y' must be dotted lowercase words"),
    ("rule not an array", '[rule]\nid = "x.y"', "'rule' must be an array of tables: write [[rule]]"),
    ("per_gpu mismatch", '[[rule]]\nid = "x.y"\ntitle = "t"\nper_gpu = false\nfact = "gpu.name"\ncompare = "pattern"\npattern = "a"',
     "per_gpu = False, but fact 'gpu.name' is read per GPU"),
    ("bad profile override", '[[rule]]\nid = "x.y"\ntitle = "t"\nfact = "gpu.memory.total"\ncompare = "bytes"\nmin = "1GB"\n[rule.profile.train]\nmni = "2GB"',
     "[profile.train]: 'mni' is not a parameter of comparison 'bytes'"),
    ("warn_only per-GPU fact", '[[rule]]\nid = "x.y"\ntitle = "t"\nfact = "nvml.driver_version"\ncompare = "version"\nmin = "1"\n[rule.warn_only]\nfact = "gpu.name"\nin = ["a"]\nmessage = "m"',
     "warn_only: 'fact' must name a system-wide fact"),
    ("warn_only impossible value", '[[rule]]\nid = "x.y"\ntitle = "t"\nfact = "nvml.driver_version"\ncompare = "version"\nmin = "1"\n[rule.warn_only]\nfact = "cuda.compat"\nin = ["fine"]\nmessage = "m"',
     "warn_only: 'in' lists a value cuda.compat never takes"),
    ("warn_only profile", '[[rule]]\nid = "x.y"\ntitle = "t"\nprofiles = ["node"]\nfact = "nvml.driver_version"\ncompare = "version"\nmin = "1"\n[rule.warn_only]\nprofiles = ["train"]\nfact = "cuda.compat"\nin = ["ok"]\nmessage = "m"',
     "warn_only: 'profiles' must list some of the rule's profiles (node)"),
    ("warn_only placeholder", '[[rule]]\nid = "x.y"\ntitle = "t"\nfact = "nvml.driver_version"\ncompare = "version"\nmin = "1"\n[rule.warn_only]\nfact = "cuda.compat"\nin = ["ok"]\nmessage = "{torch_vers}"',
     "unknown placeholder(s) {torch_vers}"),
    ("package spec", '[[rule]]\nid = "x.y"\ntitle = "t"\nfact = "python.packages"\ncompare = "present"\nrequired = ["numpy>=>1"]',
     "is not a version specifier"),
]


@pytest.mark.parametrize("name, text, problem", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_bad_rule_file_exits_2_naming_file_rule_and_problem(tmp_path, name, text, problem):
    path = write(tmp_path, text)
    completed = run_cli("check", "--rules", path, "--nvml-fixture", H200)
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert path in completed.stderr
    assert problem in completed.stderr, completed.stderr
    assert "Traceback" not in completed.stderr


def test_an_unknown_key_is_an_error_naming_file_line_entry_and_the_key_meant(tmp_path):
    """One unknown-key policy for every TOML entry (rule files and the site configuration): a typo never passes."""
    path = write(tmp_path, GOOD_RULE.replace('compare = "pattern"', 'compare = "pattern"\nseverty = "warning"'))
    completed = run_cli("check", "--rules", path, "--select", "site", "--nvml-fixture", H200)
    assert completed.returncode == 2 and completed.stdout == ""
    assert "%s:7: rule 'site.gpu_name': unknown key 'severty' (did you mean severity?); a rule" % path \
        in completed.stderr, completed.stderr
    path = write(tmp_path, "extra = 1\n" + GOOD_RULE)
    completed = run_cli("check", "--rules", path, "--nvml-fixture", H200)
    assert completed.returncode == 2 and "%s:1: unknown key 'extra'" % path in completed.stderr, completed.stderr
    examples = GOOD_RULE + '\n[[rule.examples]]\nexpect = "pass"\n\n[[rule.examples]]\nexpect = "fail"\nfacs = {}\n'
    path = write(tmp_path, examples)
    completed = run_cli("check", "--rules", path, "--nvml-fixture", H200)
    assert "%s:15: rule 'site.gpu_name': unknown key 'facs' (did you mean facts?)" % path in completed.stderr, \
        completed.stderr


def test_key_lines_count_arrays_of_tables_and_pass_over_multiline_strings():
    from preflight.files.toml_entries import key_lines

    text = textwrap.dedent('''\
        schema = 1
        [[rule]]
        id = "a"
        why = """
        fake = "not a key"
        """
        [[rule.examples]]
        expect = "pass"
        [[rule]]
        id = "b"
        [rule.warn_only]
        fact = "x"
        [[rule.examples]]
        expect = "fail"
        "quoted key" = 1
        ''')
    lines = key_lines(text)
    assert lines[("schema",)] == 1 and lines[("rule", 0)] == 2 and lines[("rule", 0, "why")] == 4
    assert ("rule", 0, "fake") not in lines
    assert lines[("rule", 0, "examples", 0, "expect")] == 8
    assert lines[("rule", 1, "id")] == 10 and lines[("rule", 1, "warn_only", "fact")] == 12
    assert lines[("rule", 1, "examples", 0)] == 13 and lines[("rule", 1, "examples", 0, "quoted key")] == 15


def test_missing_rules_path_exits_2(tmp_path):
    completed = run_cli("check", "--rules", str(tmp_path / "nope.toml"))
    assert completed.returncode == 2 and "no such file or folder" in completed.stderr


def test_rule_files_are_never_executed(tmp_path):
    """Nothing in preflight can run code from a rule file: no eval/exec anywhere in the package."""
    for source in (REPO / "preflight").rglob("*.py"):
        code = source.read_text()
        assert not re.search(r"\b(eval|exec)\s*\(", code), source
    # A template cannot reach into objects either: only plain {names} are replaced.
    path = write(tmp_path, GOOD_RULE.replace('["nvidia-smi -L"]', '["{gpu_name.__class__}"]'))
    completed = run_cli("check", "--rules", path, "--select", "site", "--nvml-fixture",
                        nvml_fixture("rtx3060-12g-driver525.json"), "--format", "json")
    assert json.loads(completed.stdout)["results"][0]["fix"]["commands"] == ["{gpu_name.__class__}"]


def test_default_rules_have_why_source_and_fixes():
    report = json.loads(run_cli("rules", "--format", "json").stdout)
    for rule in report:
        assert rule["why"] and rule["source"], rule["id"]
        assert rule["fix"] or rule["fixes"], rule["id"]


FORBIDDEN_IN_FIXES = [
    (r"--amp\b", "train_dual.py has no --amp"),
    (r"--accumulate\b", "train_dual.py has no --accumulate"),
    (r"checkpoint_model", "torch.utils.checkpoint has no checkpoint_model"),
    (r"torch\.distributed\.launch --nproc", "launch with torchrun (the failure that explains --local-rank may name it)"),
    (r"--batch\s+\d", "write --batch-size, the real option name"),
    (r"pip install pynvml\b", "pynvml is deprecated: nvidia-ml-py"),
]


def test_no_fix_repeats_the_seed_guides_mistakes():
    text = "\n".join(p.read_text() for p in (REPO / "rules").rglob("*.toml"))  # checks, fixes and failures
    for pattern, why in FORBIDDEN_IN_FIXES:
        assert not re.search(pattern, text), why


def test_docs_rules_md_is_generated_from_the_rules():
    completed = run_cli("rules", "--format", "markdown")
    assert completed.returncode == 0
    assert (REPO / "docs" / "rules.md").read_text() == completed.stdout, \
        "docs/rules.md is stale: regenerate with  python -m preflight rules --format markdown > docs/rules.md"


def test_every_source_cites_a_public_document():
    from preflight.engine import loader as rule_loader

    ruleset = rule_loader.load(failures=True, capacity=True)
    entries = list(ruleset.rules.values()) + list(ruleset.failures.values()) + list(ruleset.clues.values())
    for entry in entries:
        assert entry.source, "%s has no source" % entry.id
        for internal in ("KNOWLEDGE.md", "seed guide", "fixtures/h200/"):
            assert internal not in entry.source.replace("tests/fixtures/h200-", ""), (entry.id, entry.source)
        assert "https://" in entry.source or "this repository" in entry.source or "/" in entry.source, \
            (entry.id, entry.source)


def test_every_default_rule_says_where_its_fix_goes_and_what_it_answers():
    """The fix order and "this fix also answers rule X" are the rules' own policy, in their files."""
    from preflight.engine import loader
    from preflight.files.input_files import parse_toml

    ruleset = loader.load()
    for path in sorted((REPO / "rules").glob("*.toml")):
        for raw in parse_toml(path.read_text(), "a rule file").get("rule", []):
            assert isinstance(raw.get("fix_order"), int), "%s: rule %s has no fix_order" % (path.name, raw["id"])
    orders = [rule.fix_order for rule in ruleset.rules.values()]
    assert len(set(orders)) == len(orders), "two default rules share a fix_order: the order between them is unsaid"
    assert ruleset.rules["nvml.init"].fix_order < ruleset.rules["driver.version"].fix_order \
        < ruleset.rules["torch.cuda"].fix_order < ruleset.rules["torch.arch"].fix_order
    assert ruleset.rules["driver.version"].answers == ("cuda.compat",)
    for rule in ruleset.rules.values():
        assert all(other in ruleset.rules for other in rule.answers), rule.id


def test_answers_must_name_a_rule(tmp_path):
    path = write(tmp_path, GOOD_RULE.replace('compare = "pattern"', 'compare = "pattern"\nanswers = ["gpu.cuont"]'))
    completed = run_cli("check", "--rules", path, "--nvml-fixture", H200)
    assert completed.returncode == 2
    assert "'answers' names 'gpu.cuont', which is not a rule (did you mean gpu.count?)" in completed.stderr


def test_writing_rules_names_every_condition():
    from preflight.facts.conditions import CONDITIONS
    text = (REPO / "docs" / "writing-rules.md").read_text()
    listed = text.split("- **Conditions** (`when = [...]`):", 1)[1].split("A rule whose condition", 1)[0]
    assert set(re.findall(r"`(\w+)`", listed)) == set(CONDITIONS)
