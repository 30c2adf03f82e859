"""Which torch to install, from the wheel availability data; and no fix anywhere names a torch that does not exist."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from conftest import nvml_fixture, run_cli
from preflight import torch_wheels
from preflight.engine import loader

Choice, NoChoice = torch_wheels.Choice, torch_wheels.NoChoice


@pytest.mark.parametrize("driver, cuda, ccs, python, tag, torch, runs", [
    # A current driver: the newest torch, fully supported.
    ("580.159.04", "13.0", ["9.0"], "3.12", "cu130", "2.15", "fully"),
    ("580.159.04", "13.0", ["12.0"], "3.12", "cu130", "2.15", "fully"),       # Blackwell
    # Volta on a current driver: cu126 keeps sm_70 through 2.14 (cu128 dropped it in 2.11, CUDA 13 has none).
    ("580.159.04", "13.0", ["7.0"], "3.12", "cu126", "2.14", "fully"),
    ("580.159.04", "13.0", ["6.1"], "3.13", "cu126", "2.14", "fully"),        # Pascal
    # 12.x drivers: cu126 under minor-version compatibility (never cu121/cu124, which stop at 2.5.1/2.6.0).
    ("525.60.13", "12.0", ["8.6"], "3.11", "cu126", "2.14", "minor_version_compat"),
    ("550.54.15", "12.4", ["8.0"], "3.12", "cu126", "2.14", "minor_version_compat"),
    ("570.195.03", "12.8", ["12.0"], "3.12", "cu128", "2.11", "fully"),       # Blackwell on R570
    # An 11.x driver: cu118 (to 2.7) under minor-version compatibility.
    ("470.82.01", "11.4", ["8.6"], "3.10", "cu118", "2.7", "minor_version_compat"),
    # Python 3.8 (end of life): the last torch for it is 2.4; 3.9's is 2.8.
    ("580.159.04", "13.0", ["9.0"], "3.8", "cu124", "2.4", "fully"),
    ("580.159.04", "13.0", ["9.0"], "3.9", "cu129", "2.8", "fully"),
    # A CUDA 10.2 driver: the last wheels for it, torch 1.12.1+cu102.
    ("440.33.01", "10.2", ["7.0"], "3.8", "cu102", "1.12", "fully"),
    # Unknown driver (a log without a version): a current branch is assumed.
    (None, None, ["8.6"], "3.11", "cu130", "2.15", "fully"),
])
def test_the_newest_torch_that_runs_here(driver, cuda, ccs, python, tag, torch, runs):
    found = torch_wheels.choose(driver, cuda, ccs, python)
    assert isinstance(found, Choice), found
    assert (found.variant.tag, found.torch_text, found.runs) == (tag, torch, runs)
    major, minor = (int(p) for p in torch.split("."))
    assert torch_wheels.available(tag, (major, minor), tuple(int(p) for p in python.split(".")))


@pytest.mark.parametrize("driver, cuda, ccs, python, reason, way_out", [
    ("384.81", "9.0", ["7.0"], "3.10", "runs on driver 384.81 (CUDA 9.0)", "580 branch (the last branch for GPUs older than Turing)"),
    (None, "9.0", [], None, "a driver that supports CUDA 9.0 at most", "upgrade the NVIDIA driver"),
    ("580.159.04", "13.0", ["3.5"], "3.10", "no PyTorch wheel has kernels for compute capability 3.5", "or on the CPU"),
    ("580.159.04", "13.0", ["9.0"], "3.7", "built for Python 3.7", "use Python 3.10 to 3.15"),
    ("440.33.01", "10.2", ["8.6"], "3.8", "runs on driver 440.33.01 (CUDA 10.2)", "upgrade the NVIDIA driver"),
])
def test_when_nothing_can_run_it_says_why_and_the_way_out(driver, cuda, ccs, python, reason, way_out):
    found = torch_wheels.choose(driver, cuda, ccs, python)
    assert isinstance(found, NoChoice), found
    assert reason in found.reason and way_out in found.way_out, found
    values = torch_wheels.fix_values(driver, cuda, ccs, python)
    assert values["index_url"] is None and values["torch_pins"] is None and values["no_wheel"]


def test_pins_pair_torchvision_and_notes_say_what_limits_the_choice():
    old_python = torch_wheels.choose("580.159.04", "13.0", ["9.0"], "3.8")
    assert old_python.pins == "'torch==2.4.*' 'torchvision==0.19.*'"
    assert "torch 2.4 is the newest for Python 3.8" in old_python.notes[0]
    volta = torch_wheels.choose("580.159.04", "13.0", ["7.0"], "3.12")
    assert volta.pins == "'torch==2.14.*' 'torchvision==0.29.*'"
    assert any("last with kernels for compute capability 7.0" in note for note in volta.notes)
    old_driver = torch_wheels.choose("525.60.13", "12.0", ["8.6"], "3.11")
    assert any("minor-version compatibility" in note for note in old_driver.notes)
    assert any("driver 580 or newer runs torch 2.15" in note for note in old_driver.notes)
    unknown_python = torch_wheels.choose("580.159.04", "13.0", ["9.0"], None)
    assert any("has wheels for Python 3.10 to 3.15" in note for note in unknown_python.notes)
    assert torch_wheels.choose("440.33.01", "10.2", ["7.0"], "3.8").pins == "'torch==1.12.*' 'torchvision==0.13.*'"


def test_the_data_is_consistent():
    data = torch_wheels.catalog()
    for variant in data.variants:
        assert variant.first <= variant.last and variant.first in data.pythons and variant.last in data.pythons
        assert variant.archs and variant.archs[0][0] == variant.first, variant.tag
        assert variant.tag == "cu%d%d" % variant.cuda
    for torch, (low, high) in data.pythons.items():
        assert low <= high
        assert any(v.first <= torch <= v.last for v in data.variants), "no variant for torch %d.%d" % torch
    # Facts from the release matrix the data encodes: cu121 ends at 2.5, cu124 at 2.6; 2.9+ needs Python 3.10.
    assert torch_wheels.available("cu121", (2, 5), None) and not torch_wheels.available("cu121", (2, 6), None)
    assert torch_wheels.available("cu124", (2, 6), None) and not torch_wheels.available("cu124", (2, 7), None)
    assert not torch_wheels.available("cu126", (2, 5), None)  # no torch < 2.6 on cu126
    assert not torch_wheels.available("cu130", (2, 9), (3, 9))


# --- every fix, rendered, names only torch that exists ----------------------------------------------------

_INDEX = re.compile(r"--index-url\s+https://download\.pytorch\.org/whl/(?P<tag>[a-z0-9]+)")
_TORCH_PIN = re.compile(r"^torch==(\d+)\.(\d+)(?:\.\*)?$")
_FORBIDDEN = [
    ("torch<2.6", "no cu126+ index has torch older than 2.6"),
    ("python=3.8", "no current torch supports Python 3.8"),
    ("nvidia/cuda:12.4.1-base", "its NVIDIA_REQUIRE_CUDA fails on working 530 and 545 drivers"),
    ("cdi generate", "a CDI spec alone changes nothing unless containers request CDI devices"),
    ("nvidia-driver-535", "end-of-life branch"), ("nvidia-driver-550", "end-of-life branch"),
    ("nvidia-driver-570", "end-of-life branch"),
    ("--amp", "train_dual.py has no --amp"), ("--accumulate", "train_dual.py has no --accumulate"),
]


def check_commands(commands, python) -> int:
    """Each pip command with a PyTorch index pins a torch that index has for ``python`` (None: some Python);
    returns how many such commands there were."""
    checked = 0
    for command in commands:
        for text, why in _FORBIDDEN:
            assert text not in command, "%r: %s" % (command, why)
        if "apt-get install" in command and "nvidia-container-toolkit" in command:
            assert any("nvidia-container-toolkit.list" in c for c in commands), "the toolkit needs NVIDIA's repository"
        found = _INDEX.search(command)
        if not found or " pip install" not in command:
            continue
        words = shlex.split(command.split("#")[0])
        pins = [_TORCH_PIN.match(w) for w in words if w.startswith("torch==")]
        assert pins and pins[0], "%r installs torch from %s without a pin this test can check" % (command, found.group(0))
        torch = (int(pins[0].group(1)), int(pins[0].group(2)))
        assert torch_wheels.available(found.group("tag"), torch, python), \
            "%r: %s has no torch %d.%d for Python %s" % ((command, found.group("tag")) + torch + (python,))
        checked += 1
    return checked


TORCH_BUILDS = [None, ("2.5.1+cpu", None), ("2.7.1+cu118", "11.8"), ("2.6.0+cu124", "12.4"), ("2.11.0+cu130", "13.0"),
                ("2.4.1+rocm6.1", None)]
FIXTURES_NVML = ["h200-driver580.json", "2x-a100-40g-driver550-ecc.json", "rtx3060-12g-driver525.json",
                 "no-library.json", "driver-not-loaded.json"]


@pytest.mark.parametrize("fixture", FIXTURES_NVML)
def test_every_check_fix_names_only_torch_that_exists(fake_env, fixture):
    import sys

    python = tuple(sys.version_info[:2])  # the fake environments run this interpreter
    checked = 0
    for build in TORCH_BUILDS:
        env = fake_env("env-%s" % (build[0] if build else "none"))
        if build:
            version, cuda = build
            if "rocm" in version:
                env.add_torch(version=version, cuda=None, hip="6.1")
            else:
                env.add_torch(version=version, cuda=cuda)
        for profile in ("train", "inference", "node"):
            completed = run_cli("check", "--profile", profile, "--format", "json", "--nvml-fixture",
                                nvml_fixture(fixture), "--python", env.python)
            report = json.loads(completed.stdout)
            for result in report["results"]:
                if result.get("fix"):
                    checked += check_commands(result["fix"]["commands"], python)
    if fixture in ("h200-driver580.json", "rtx3060-12g-driver525.json"):
        assert checked >= 4  # missing, CPU, ROCm and too-new builds each get a pip command with an index

def test_every_diagnose_fix_names_only_torch_that_exists(tmp_path):
    ruleset = loader.load(failures=True)
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(run_cli("facts", "--nvml-fixture", nvml_fixture("rtx3060-12g-driver525.json")).stdout)
    texts = [example for failure in ruleset.failures.values() for example in failure.examples]
    assert len(texts) > 40
    checked = 0
    for text in texts:
        for args in (["--no-facts"], ["--facts", str(facts_file)]):
            completed = run_cli("diagnose", "-", "--format", "json", *args, stdin=text + "\n")
            for match in json.loads(completed.stdout)["matches"]:
                checked += check_commands(match["fix"]["commands"], None)
    assert checked >= 5


def test_every_diagnose_fix_keeps_its_main_step_without_facts():
    """With nothing known about the machine (a log read elsewhere), every fix still says what to do."""
    ruleset = loader.load(failures=True)
    for failure in ruleset.failures.values():
        completed = run_cli("diagnose", "-", "--format", "json", "--no-facts", stdin=failure.examples[0] + "\n")
        match = [m for m in json.loads(completed.stdout)["matches"] if m["id"] == failure.id][0]
        fix = match["fix"]
        assert fix["steps"] or fix["commands"], failure.id
        assert "{" not in fix["title"] and not any("{" in s.replace("{{", "") for s in fix["steps"]), failure.id
        # Each written step survives in some form, but for notes that only exist with facts.
        optional = {"{wheel_note}", "{no_wheel}"}
        written = [line for line in failure.fix.steps if not (isinstance(line, str) and line in optional)]
        shown_first = [line for line in written if isinstance(line, tuple) or "{" not in line]
        assert len(fix["steps"]) >= len(shown_first), (failure.id, fix["steps"])
