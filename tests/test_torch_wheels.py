"""Which torch to install, from the wheel availability data; and no fix anywhere names a torch that does not exist."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from preflight.engine import loader
from preflight.knowledge import torch_wheels

Choice, NoChoice = torch_wheels.Choice, torch_wheels.NoChoice


@pytest.mark.parametrize("driver, cuda, ccs, python, tag, torch, runs", [
    # A current driver: the newest torch that has a torchvision (2.15 has none yet), fully supported.
    ("580.159.04", "13.0", ["9.0"], "3.12", "cu130", "2.14", "fully"),
    ("580.159.04", "13.0", ["12.0"], "3.12", "cu130", "2.14", "fully"),       # Blackwell
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
    (None, None, ["8.6"], "3.11", "cu130", "2.14", "fully"),
    # Volta on R570 (CUDA 12.8): cu126 2.14 under minor-version compatibility beats cu128 2.10 (sm_70 dropped in 2.11).
    ("570.195.03", "12.8", ["7.0"], "3.12", "cu126", "2.14", "fully"),
    # 1.13 has Python 3.11 wheels.
    ("470.82.01", "11.4", ["8.6"], "3.11", "cu118", "2.7", "minor_version_compat"),
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
    ("580.159.04", "13.0", ["9.0"], "3.7", "built for Python 3.7", "use Python 3.10 to 3.14"),
    ("580.159.04", "13.0", ["9.0"], "3.15", "built for Python 3.15", "use Python 3.10 to 3.14, for torch 2.14"),
    ("580.159.04", "13.0", ["9.0"], "3.12", "covers Linux x86_64", "pytorch.org/get-started/locally"),
    ("440.33.01", "10.2", ["8.6"], "3.8", "runs on driver 440.33.01 (CUDA 10.2)", "upgrade the NVIDIA driver"),
])
def test_when_nothing_can_run_it_says_why_and_the_way_out(driver, cuda, ccs, python, reason, way_out):
    platform = "linux_aarch64" if reason == "covers Linux x86_64" else None
    found = torch_wheels.choose(driver, cuda, ccs, python, platform)
    assert isinstance(found, NoChoice), found
    assert reason in found.reason and way_out in found.way_out, found
    values = torch_wheels.fix_values(driver, cuda, ccs, python, platform)
    assert values["index_url"] is None and values["torch_pins"] is None and values["no_wheel"]


def test_pins_pair_torchvision_and_notes_say_what_limits_the_choice():
    old_python = torch_wheels.choose("580.159.04", "13.0", ["9.0"], "3.8")
    assert old_python.pins() == "'torch==2.4.*' 'torchvision==0.19.*'"
    assert "torch 2.4 is the newest for Python 3.8" in old_python.notes[0]
    volta = torch_wheels.choose("580.159.04", "13.0", ["7.0"], "3.12")
    assert volta.pins() == "'torch==2.14.*' 'torchvision==0.29.*'"
    old_driver = torch_wheels.choose("525.60.13", "12.0", ["8.6"], "3.11")
    assert any("minor-version compatibility" in note for note in old_driver.notes)
    blackwell = torch_wheels.choose("550.54.15", "12.4", ["12.0"], "3.12")  # cu128 under minor-version compat
    assert (blackwell.variant.tag, blackwell.torch_text) == ("cu128", "2.11")
    assert "the driver (CUDA 12.4) limits torch to 2.11; driver 580 or newer runs torch 2.14" in blackwell.notes
    assert not any("last with kernels" in note for note in blackwell.notes)  # newer torch has them; the driver limits
    pascal = torch_wheels.choose("580.159.04", "13.0", ["6.1"], "3.12")
    assert pascal.torch_text == "2.14" and pascal.variant.tag == "cu126"
    unknown_python = torch_wheels.choose("580.159.04", "13.0", ["9.0"], None)
    assert any("has wheels for Python 3.10 to 3.14" in note for note in unknown_python.notes)
    assert any("torch 2.15 is newer, but no torchvision has been released for it yet" in note
               for note in unknown_python.notes)
    assert torch_wheels.choose("440.33.01", "10.2", ["7.0"], "3.8").pins() == "'torch==1.12.*' 'torchvision==0.13.*'"


def test_the_data_is_consistent():
    data = torch_wheels.catalog()
    for variant in data.variants:
        assert variant.releases == tuple(sorted(variant.releases)) and all(t in data.releases for t in variant.releases)
        assert variant.archs and variant.archs[0][0] == variant.releases[0], variant.tag
        assert variant.tag == "cu%d%d" % variant.cuda
    for torch, release in data.releases.items():
        assert release.pythons == tuple(sorted(release.pythons))
        assert any(torch in v.releases for v in data.variants), "no variant for torch %d.%d" % torch
    # Facts from the release matrix the data encodes: cu121 ends at 2.5, cu124 at 2.6; 2.9+ needs Python 3.10.
    assert torch_wheels.available("cu121", (2, 5), None) and not torch_wheels.available("cu121", (2, 6), None)
    assert torch_wheels.available("cu124", (2, 6), None) and not torch_wheels.available("cu124", (2, 7), None)
    assert not torch_wheels.available("cu126", (2, 5), None)  # no torch < 2.6 on cu126
    assert not torch_wheels.available("cu130", (2, 9), (3, 9))


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
