"""Every printed pip command can succeed for the Python it targets: rendered, parsed and checked against data.
Every printed ``preflight`` command parses with the real command line.

Each fix `check` and `diagnose` can print is rendered here: `check` over NVML recordings x torch builds (none, CPU,
CUDA 11.8, 12.4, 13.0, ROCm) x Pythons 3.8 to 3.15 (interpreters that answer the probe as that Python) x profiles,
and `diagnose` for every catalog example with and without facts. Every pip command is parsed; each requirement
must have, for the Python the command targets, a release that satisfies it with a binary wheel for Linux x86_64
(PyPI's metadata, rules/knowledge/package-index.json), and a PyTorch index must hold the torch it pins, with the
torchvision the data pairs with it (rules/knowledge/pytorch-wheels.toml). A command whose target Python is not
known must work on some Python, and say which when not on all.
"""

from __future__ import annotations

import json
import re
import shlex
import stat
import sys
from pathlib import Path
from typing import List, Optional

import pytest
from conftest import nvml_fixture, preflight_command_problems, run_cli

from preflight.engine import loader
from preflight.knowledge import package_index, torch_wheels
from preflight.knowledge.pip_commands import installs, review

PYTHONS = package_index.PYTHONS  # 3.8 ... 3.15
_INDEX = re.compile(r"https://download\.pytorch\.org/whl/(?P<tag>[a-z0-9]+)")
_FORBIDDEN = [
    ("python=3.8", "no current torch supports Python 3.8"),
    ("nvidia/cuda:12.4.1-base", "its NVIDIA_REQUIRE_CUDA fails on working 530 and 545 drivers"),
    ("cdi generate", "a CDI spec alone changes nothing unless containers request CDI devices"),
    ("nvidia-driver-535", "end-of-life branch"), ("nvidia-driver-550", "end-of-life branch"),
    ("nvidia-driver-570", "end-of-life branch"),
    ("--amp", "train_dual.py has no --amp"), ("--accumulate", "train_dual.py has no --accumulate"),
]


def problems(command: str, python: Optional[str]) -> List[str]:
    """What makes ``command`` fail for ``python`` (X.Y; None: unknown); empty when it can succeed."""
    found = ["%s: %s" % (text, why) for text, why in _FORBIDDEN if text in command]
    found += preflight_command_problems(command)
    for segment, install, _ in installs(command):
        if install is None:
            continue
        index = _INDEX.search(" ".join(install.words))
        requirements = [install.words[i] for i in install.requirements]
        if index:
            found += _pytorch_index_problems(index.group("tag"), requirements, python)
            continue
        for requirement in requirements:
            name = re.split(r"[<>=!~\[; ]", requirement)[0]
            if not package_index.known(name):
                found.append("%s is not a package the knowledge covers (a guessed name?)" % requirement)
            elif python is not None and not package_index.installable(requirement, python):
                found.append("%s has no release with a wheel for Python %s" % (requirement, python))
            elif python is None:
                pythons = package_index.pythons_for(requirement)
                if not pythons:
                    found.append("%s has no release with a wheel for any Python" % requirement)
                elif len(pythons) < len(PYTHONS) and "%s: %s only" % (requirement, package_index.span(pythons)) \
                        not in command:
                    found.append("%s works on %s only and the command does not say so" % (
                        requirement, package_index.span(pythons)))
    return found


def _pytorch_index_problems(tag: str, requirements: List[str], python: Optional[str]) -> List[str]:
    pins = {}
    found = []
    for requirement in requirements:
        match = re.match(r"^(torch|torchvision|torchaudio)==(\d+)\.(\d+)(?:\.\*|(\.\d+)\+([a-z0-9.]+))?$", requirement)
        if not match:
            return ["%s from the %s index: not a pin this check can judge" % (requirement, tag)]
        pins[match.group(1)] = (int(match.group(2)), int(match.group(3)))
        if match.group(5) is not None:  # an exact release with the index's tag: that release, of this index's build
            release = "%s.%s%s" % (match.group(2), match.group(3), match.group(4))
            record = package_index.releases(match.group(1)).get(release)
            if match.group(5) != tag:
                found.append("%s: the local tag is not the %s index's" % (requirement, tag))
            elif record is None:
                found.append("%s: %s %s was never released" % (requirement, match.group(1), release))
            elif python is not None and not package_index.has_wheel(record, python):
                found.append("%s has no wheel for Python %s" % (requirement, python))
    if "torch" not in pins:
        return ["installs from %s without pinning torch" % tag]
    torch = pins["torch"]
    py = tuple(int(p) for p in python.split(".")) if python else None
    if not torch_wheels.available(tag, torch, py):
        found.append("%s has no torch %d.%d for Python %s" % ((tag,) + torch + (python,)))
    paired = torch_wheels.torchvision_for(torch)
    if paired is None:
        found.append("no torchvision was released for torch %d.%d" % torch)
    elif "torchvision" in pins and "%d.%d" % pins["torchvision"] != paired:
        found.append("torchvision %d.%d is not the one built for torch %d.%d (%s)" % (pins["torchvision"] + torch +
                                                                                      (paired,)))
    elif "torchvision" in pins and not package_index.releases("torchvision").get("%s.0" % paired):
        found.append("torchvision %s was never released" % paired)
    for companion in ("torchvision", "torchaudio"):  # their Pythons are their own, not torch's
        if companion in pins and torch_wheels.companion_release(companion, torch, py) != "%d.%d" % pins[companion]:
            found.append("%s %d.%d is not built for torch %d.%d with a wheel for Python %s"
                         % ((companion,) + pins[companion] + torch + (python,)))
    return found


# --- the checker itself catches what the field found ------------------------------------------------------

@pytest.mark.parametrize("command, python, problem", [
    ("python -m pip install 'torch==2.15.*' 'torchvision==0.30.*' --index-url https://download.pytorch.org/whl/cu130",
     "3.12", "no torchvision was released for torch 2.15"),
    ("python -m pip install 'Pillow<10'", "3.12", "Pillow<10 has no release with a wheel for Python 3.12"),
    ("python -m pip install 'numpy<1.24'", "3.12", "numpy<1.24 has no release with a wheel for Python 3.12"),
    ("python -m pip install 'numpy<2.4'", "3.15", "numpy<2.4 has no release with a wheel for Python 3.15"),
    ("python -m pip install models", "3.12", "models is not a package the knowledge covers"),
    ("python -m pip install 'numpy<2'", None, "works on Python 3.8 to 3.12 only"),
    ("python -m pip install 'torch==2.14.*' 'torchvision==0.29.*' --index-url https://download.pytorch.org/whl/cu130",
     "3.15", "cu130 has no torch 2.14 for Python 3.15"),
])
def test_the_command_check_fails_on_what_fails_in_the_field(command, python, problem):
    assert any(problem in found for found in problems(command, python)), problems(command, python)


def test_review_takes_out_only_what_cannot_install_and_says_what_works_instead():
    commands = ["/env/bin/python -m pip install 'numpy<2.4' 'Pillow<10' IPython"]
    kept, steps = review(commands, "3.12.4")
    assert kept == ["/env/bin/python -m pip install 'numpy<2.4' IPython"]
    assert len(steps) == 1 and "Pillow<10 has a wheel for Python 3.12" in steps[0]
    assert "getbbox" in steps[0] and "or use Python 3.8 to 3.11" in steps[0]
    kept, steps = review(["python -m pip install 'Pillow<10'"], "3.13")
    assert kept == [] and steps
    kept, _ = review(["python -m pip install 'Pillow<10'"], None)
    assert kept == ["python -m pip install 'Pillow<10'  # Pillow<10: Python 3.8 to 3.11 only"]
    assert review(commands, "3.11") == (commands, [])


# --- every check fix --------------------------------------------------------------------------------------

TORCH_BUILDS = [None, ("2.5.1+cpu", None), ("2.7.1+cu118", "11.8"), ("2.6.0+cu124", "12.4"), ("2.11.0+cu130", "13.0"),
                ("2.4.1+rocm6.1", None), ("2.14.1+cpu", None)]  # the last: of the chosen release, another build
RECORDINGS = ["h200-driver580.json", "2x-a100-40g-driver550-ecc.json", "rtx3060-12g-driver525.json",
              "v100-retired-pages.json", "8x-h100-hgx.json", "no-library.json", "driver-not-loaded.json"]
_AS = r"""import json, sys
for line in sys.stdin:
    try:
        answer = json.loads(line)
    except ValueError:
        answer = None
    if isinstance(answer, dict) and "executable" in answer and "version" in answer:
        answer["version"] = sys.argv[1]
        line = json.dumps(answer) + "\n"
    sys.stdout.write(line)
"""


def as_python(folder: Path, real: str, version: str) -> str:
    """An interpreter that answers preflight's probe as Python ``version`` (the real one does the work)."""
    rewrite = folder / "as_python.py"
    rewrite.write_text(_AS)
    script = folder / ("python%s" % version)
    script.write_text('#!/bin/sh\n"%s" "$@" | "%s" "%s" "%s.0"\n' % (real, sys.executable, rewrite, version))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


@pytest.fixture(scope="module")
def environments(tmp_path_factory):
    """One fake job environment per torch build, each with the packages YOLOv9 needs at versions it cannot use
    (numpy 2.4.1, Pillow 11) and two missing (IPython, thop), so that every package fix is printed."""
    from conftest import FakeEnvironment

    made = []
    for build in TORCH_BUILDS:
        env = FakeEnvironment(tmp_path_factory.mktemp("env") / "venv")
        env.add_yolov9_packages(skip=("numpy", "Pillow", "IPython", "thop"))
        env.add_package("numpy", "2.4.1")
        env.add_package("Pillow", "11.0.0", "PIL")
        if build and "rocm" in build[0]:
            env.add_torch(version=build[0], cuda=None, hip="6.1")
        elif build:
            env.add_torch(version=build[0], cuda=build[1], arch_flags="sm_50 sm_60 sm_70 sm_75 sm_80 sm_86")
        made.append(env)
    return made


@pytest.mark.slow
@pytest.mark.parametrize("recording", RECORDINGS)
def test_every_check_fix_prints_commands_that_can_succeed(tmp_path, environments, recording):
    checked, printed_pins = 0, set()
    failures = []
    for env in environments:
        for python in PYTHONS:
            interpreter = as_python(tmp_path, env.python, python)
            for profile in ("train", "inference"):
                completed = run_cli("check", "--profile", profile, "--format", "json", "--nvml-fixture",
                                    nvml_fixture(recording), "--python", interpreter)
                report = json.loads(completed.stdout)
                plan = {"id": "the plan", "fix": {"commands": [c for s in report["plan"]["steps"] for c in s["run"]]}}
                for result in report["results"] + [plan]:
                    for command in (result.get("fix") or {}).get("commands") or []:
                        if "pip" not in command and "preflight " not in command:
                            continue
                        checked += 1
                        printed_pins.update(w for w in shlex.split(command.split("  #")[0]) if "<" in w or "==" in w)
                        for problem in problems(command, python):
                            failures.append("%s, %s, Python %s, %s: %r: %s" % (
                                recording, env.root.name, python, result["id"], command, problem))
    node = json.loads(run_cli("check", "--profile", "node", "--format", "json", "--nvml-fixture",
                              nvml_fixture(recording)).stdout)
    for result in node["results"]:
        for command in (result.get("fix") or {}).get("commands") or []:
            checked += 1
            failures += ["node profile: %r: %s" % (command, p) for p in problems(command, None)]
    assert not failures, "\n".join(failures[:20])
    assert checked >= 50, checked
    print("%s: %d pip commands rendered and checked" % (recording, checked))  # for the record (pytest -s)


def test_the_rendered_commands_cover_the_pins_users_meet(tmp_path, environments):
    """The python.packages fix on Python 3.12 drops 'Pillow<10' and says what works instead; on 3.11 it keeps it."""
    env = environments[4]  # torch 2.11+cu130
    for python, pillow in (("3.12", False), ("3.11", True)):
        interpreter = as_python(tmp_path, env.python, python)
        report = json.loads(run_cli("check", "--format", "json", "--nvml-fixture", nvml_fixture("h200-driver580.json"),
                                    "--python", interpreter, "--select", "python.packages").stdout)
        fix = report["results"][0]["fix"]
        command = fix["commands"][0]
        assert ("'Pillow<10'" in command) is pillow, command
        assert "'numpy<2.4'" in command and "ipython" in command and "torch" not in command.split("install", 1)[1]
        steps = " ".join(fix["steps"])
        assert "At a version YOLOv9 cannot use: numpy 2.4.1 does not satisfy <2.4; Pillow 11.0.0" in steps
        assert "Missing from" in steps and "Pillow" not in steps.split("Missing from")[1].split(".")[1]
        assert ("getbbox" in steps) is (not pillow)


def test_a_missing_torchvision_next_to_a_cuda_torch_gets_the_one_built_for_it(tmp_path):
    """torch.cuda passes (its fix, which installs the pair, is not shown), so python.packages names the torchvision
    built for the installed torch, from that torch's index, on every Python: a command that can succeed, or why
    there is none; never a pointer to a fix that is not printed."""
    from conftest import FakeEnvironment

    commands = 0
    for version, cuda in [build for build in TORCH_BUILDS if build and build[1]]:
        env = FakeEnvironment(tmp_path / version / "venv")
        env.add_yolov9_packages(skip=("torchvision",))
        env.add_torch(version=version, cuda=cuda, arch_flags="sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90")
        tag = "cu" + cuda.replace(".", "")
        for python in PYTHONS:
            report = json.loads(run_cli("check", "--format", "json", "--nvml-fixture", nvml_fixture("h200-driver580.json"),
                                        "--python", as_python(tmp_path, env.python, python),
                                        "--select", "python.packages,torch.cuda").stdout)
            results = {result["id"]: result for result in report["results"]}
            assert results["torch.cuda"]["status"] == "pass"
            fix = results["python.packages"]["fix"]
            steps = " ".join(fix["steps"])
            assert "the fix of torch.cuda" not in steps, steps
            paired = [c for c in fix["commands"] if "torchvision" in c]
            if paired:
                commands += 1
                assert paired[0].endswith("--index-url https://download.pytorch.org/whl/%s" % tag), paired
                assert not problems(paired[0], python), (version, python, paired[0], problems(paired[0], python))
            else:
                assert "holds no torchvision for torch %s" % version in steps, steps
    assert commands >= 10, commands


@pytest.mark.parametrize("recording, arch_flags, why", [
    ("rtx3060-12g-driver525.json", "sm_80 sm_86 sm_90", "built for a newer CUDA than this driver runs"),
    ("h200-driver580.json", "sm_50 sm_60 sm_70", "has no kernels that run on NVIDIA H200"),
])
def test_no_torchvision_is_pinned_to_a_torch_that_cannot_run_here(tmp_path, recording, arch_flags, why):
    """A torchvision pinned to the installed torch would undo the fix that replaces that torch (cuda.compat's or
    torch.arch's installs the pair): python.packages says so instead of printing its own torchvision command."""
    from conftest import FakeEnvironment

    env = FakeEnvironment(tmp_path / "venv")
    env.add_yolov9_packages(skip=("torchvision",))
    env.add_torch(version="2.11.0+cu130", cuda="13.0", arch_flags=arch_flags)
    report = json.loads(run_cli("check", "--format", "json", "--nvml-fixture", nvml_fixture(recording),
                                "--python", env.python).stdout)
    results = {result["id"]: result for result in report["results"]}
    assert "fail" in (results["cuda.compat"]["status"], results["torch.arch"]["status"])
    fix = results["python.packages"]["fix"]
    assert not [command for command in fix["commands"] if "torchvision" in command], fix["commands"]
    assert any(why in step and "replaces it with a pair" in step for step in fix["steps"]), fix["steps"]


def test_an_installed_by_naming_no_rule_is_refused(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('''[[rule]]
id = "site.packages"
title = "packages"
severity = "error"
profiles = ["train"]
fact = "python.packages"
compare = "present"
required = ["torchvision"]
fix = "python-packages"
why = "w"
source = "s"

[rule.packages.torchvision]
installed_by = "torch.build"
''')
    completed = run_cli("rules", "--rules", str(rules))
    assert completed.returncode == 2 and "packages.torchvision.installed_by names 'torch.build', which is not a rule" \
        in completed.stderr, completed.stderr


# --- every diagnose fix -----------------------------------------------------------------------------------

@pytest.mark.slow
def test_every_diagnose_fix_prints_commands_that_can_succeed(tmp_path):
    ruleset = loader.load(failures=True)
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(run_cli("facts", "--nvml-fixture", nvml_fixture("rtx3060-12g-driver525.json")).stdout)
    this_python = "%d.%d" % sys.version_info[:2]  # the facts were probed with this interpreter
    texts = [example for entry in list(ruleset.failures.values()) + list(ruleset.families.values())
             for example in entry.examples]
    checked, failures = 0, []
    for text in texts:
        for args, python in ((["--no-facts"], None), (["--facts", str(facts_file)], this_python)):
            completed = run_cli("diagnose", "-", "--format", "json", *args, stdin=text + "\n")
            diagnosis = json.loads(completed.stdout)
            if diagnosis["facts"]["whose"] != "machine":  # the log names another machine: its Python is unknown
                python = None
            for match in diagnosis["matches"]:
                for command in match["fix"]["commands"]:
                    if "pip" in command or "conda create" in command:
                        checked += 1
                    failures += ["%s (%s): %r: %s" % (match["id"], args[0], command, p)
                                 for p in problems(command, python)]
    assert not failures, "\n".join(failures[:20])
    assert checked >= 20, checked
    print("diagnose: %d pip and conda commands rendered and checked" % checked)



def test_every_family_row_prints_commands_that_can_succeed():
    """A family's fix is rendered per table row, and most rows appear in no catalog example: each row's pins (the
    API-removals table's, for one) are checked here as diagnose prints them for a log that names no Python."""
    from preflight.diagnose.diagnosis import GENERIC_DEFAULTS
    from preflight.engine import template

    ruleset = loader.load(failures=True)
    checked, failures = 0, []
    for family in ruleset.families.values():
        for row in family.table.rows:
            entry = family.entry({}, row)
            values = dict(GENERIC_DEFAULTS, **dict(family.defaults, **entry.values))
            rendered = [command for line in entry.fix.commands
                        for command in template.render_known([line] if isinstance(line, str) else list(line), values)]
            for command in review(rendered, None)[0]:  # as diagnose prints them for a log that names no Python
                checked += "pip" in command
                failures += ["%s (%s): %r: %s" % (family.id, entry.key, command, p) for p in problems(command, None)]
    assert not failures, "\n".join(failures[:20])
    assert checked >= 20, checked

def test_conda_create_names_a_python_current_torch_has_wheels_for():
    data = torch_wheels.catalog()
    newest = max(t for t, r in data.releases.items() if r.torchvision)
    for path in Path(loader.default_rules_dir()).rglob("*.toml"):
        for found in re.finditer(r"conda create [^\"]*python=(\d+)\.(\d+)", path.read_text()):
            assert (int(found.group(1)), int(found.group(2))) in data.releases[newest].pythons, (path, found.group(0))


# --- the knowledge data agrees with PyPI's own metadata ---------------------------------------------------

def test_the_wheel_data_agrees_with_the_package_index():
    from packaging.version import Version

    data = torch_wheels.catalog()
    torch = package_index.releases("torch")
    torchvision = package_index.releases("torchvision")
    for release, entry in data.releases.items():
        minor = "%d.%d" % release
        on_pypi = sorted({p for v, r in torch.items() if re.match(r"^%s\.\d+$" % re.escape(minor), v)
                          for p in (r.get("wheels") or {}).get("linux_x86_64", [])}, key=Version)
        assert ["%d.%d" % p for p in entry.pythons] == on_pypi, (minor, on_pypi)
        made_for = sorted({v.rsplit(".", 1)[0] for v, r in torchvision.items()
                           if (r.get("requires_torch") or "").lstrip("=>").startswith(minor + ".")})
        if entry.torchvision is None:
            assert not [v for v in made_for if (torchvision.get(v + ".0") or {}).get("requires_torch", "").startswith(
                "==")], (minor, made_for)
        else:
            assert entry.torchvision in made_for, (minor, entry.torchvision, made_for)


def test_the_package_index_snapshot_is_dated_and_covers_every_pin_the_rules_name():
    assert re.match(r"^\d{4}-\d{2}-\d{2}$", package_index.as_of() or "")
    ruleset = loader.load(failures=True)
    names = set()
    for rule in ruleset.rules.values():
        if rule.comparison.name == "present":
            params = rule.resolve(None).params
            names |= {spec.pip for spec in params["required_specs"] + params["recommended_specs"]
                      if not spec.installed_by}
    for fix in list(ruleset.fixes.values()) + [f.fix for f in ruleset.failures.values()]:
        for line in fix.commands:
            for command in ([line] if isinstance(line, str) else line):
                for _, install, _ in installs(command):
                    if install and not install.pytorch_index:
                        names |= {install.words[i] for i in install.requirements if "{" not in install.words[i]}
    for requirement in names:
        name = re.split(r"[<>=!~\[; ]", requirement)[0]
        assert package_index.known(name), "%s is named by a rule or fix but not in the package index" % name


# --- dated knowledge --------------------------------------------------------------------------------------

def test_version_report_and_facts_say_when_the_knowledge_was_taken():
    as_of = package_index.as_of()
    assert run_cli("--version").stdout.strip().endswith("(knowledge as of %s)" % as_of)
    report = json.loads(run_cli("check", "--profile", "node", "--nvml-fixture", nvml_fixture("h200-driver580.json"),
                                "--format", "json").stdout)
    assert report["knowledge_as_of"] == as_of and report["notes"] == []
    assert json.loads(run_cli("facts", "--nvml-fixture", nvml_fixture("h200-driver580.json")).stdout)[
        "knowledge_as_of"] == as_of


@pytest.mark.parametrize("days, noted", [(180, False), (181, True), (400, True)])
def test_old_knowledge_adds_one_line_and_never_fails(monkeypatch, days, noted):
    import calendar
    import time

    taken = calendar.timegm(time.strptime(package_index.as_of(), "%Y-%m-%d"))
    monkeypatch.setattr(package_index, "now", lambda: taken + days * 86400 + 3600)
    text = run_cli("check", "--profile", "node", "--nvml-fixture", nvml_fixture("h200-driver580.json"))
    assert text.returncode == 0
    lines = [line for line in text.stdout.splitlines() if line.startswith("note: preflight's knowledge")]
    assert len(lines) == (1 if noted else 0), text.stdout
    if noted:
        assert "(%d days ago)" % days in text.stdout and "update preflight" in " ".join(text.stdout.split())
    report = json.loads(run_cli("check", "--profile", "node", "--nvml-fixture", nvml_fixture("h200-driver580.json"),
                                "--format", "json").stdout)
    assert report["ok"] is True and len(report["notes"]) == (1 if noted else 0)


def test_the_package_index_lists_releases_oldest_first():
    """package_index reads a package's releases newest first by walking the file backwards."""
    from packaging.version import Version

    for name in ("torch", "numpy", "setuptools", "Pillow", "thop"):
        versions = list(package_index.releases(name))
        assert versions == sorted(versions, key=Version), name


def test_printed_preflight_commands_are_parsed_by_the_real_command_line():
    assert preflight_command_problems("preflight check --profile node --select gpu") == []
    assert preflight_command_problems("sudo dmesg -T | grep -i xid && preflight config show --host gpu01") == []
    assert preflight_command_problems("preflight plan --workload gelan-c --task train --img 640 --batch 16 --gpus 2") \
        == []
    assert preflight_command_problems("preflight check --no-such-option")
    assert preflight_command_problems("preflight check --profile nodes")  # a value the option does not take
    assert preflight_command_problems("preflight chek")
    assert preflight_command_problems("echo ok; preflight config shwo")
