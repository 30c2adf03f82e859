"""Text output a person reads at a glance: fitted to the width, identical GPUs on one line, a "fix first" list."""

from __future__ import annotations

import pytest
from conftest import REPO, nvml_fixture, run_cli

H200 = nvml_fixture("h200-driver580.json")
HGX = nvml_fixture("8x-h100-hgx.json")
FAULTS = nvml_fixture("8x-h100-hgx-faults.json")
RTX3060 = nvml_fixture("rtx3060-12g-driver525.json")


def too_wide(text: str, columns: int):
    """Lines over the width that are not commands (commands are printed whole, to be copied)."""
    return [line for line in text.splitlines() if len(line) > columns and not line.lstrip().startswith("$ ")]


@pytest.mark.parametrize("columns", [80, 100])
def test_check_diagnose_and_plan_fit_the_width(columns):
    env = {"COLUMNS": str(columns)}
    outputs = [run_cli("check", "--nvml-fixture", fixture, *args, env=env).stdout
               for fixture, args in ((H200, ()), (RTX3060, ()), (FAULTS, ("--profile", "node")),
                                     (RTX3060, ("--workload", "yolov9-c", "--batch", "64")))]
    outputs += [run_cli("diagnose", str(log), "--no-facts", env=env).stdout
                for log in sorted((REPO / "tests" / "corpus").glob("*"))]
    outputs += [run_cli("plan", "--workload", workload, "--nvml-fixture", H200, env=env).stdout
                for workload in ("gelan-c", "yolov9-e")]
    outputs.append(run_cli("fleet", str(REPO / "preflight" / "recordings"), str(REPO / "tests" / "fixtures" /
                                                                                  "reference-facts.json"),
                           env=env).stdout)
    for text in outputs:
        assert text.strip()
        assert too_wide(text, columns) == [], too_wide(text, columns)[:3]
    wide = run_cli("check", "--nvml-fixture", RTX3060, env={"COLUMNS": "200"}).stdout
    assert any(len(line) > 100 for line in wide.splitlines())  # the width is COLUMNS's, not a fixed one


def test_commands_are_never_broken():
    # One of two A100s visible, a batch two of them hold: the fix's torchrun line spreads it over both.
    text = run_cli("check", "--nvml-fixture", nvml_fixture("2x-a100-40g-driver550-ecc.json"), "--workload",
                   "gelan-c", "--batch", "96", env={"COLUMNS": "80", "CUDA_VISIBLE_DEVICES": "0"}).stdout
    commands = [line for line in text.splitlines() if line.lstrip().startswith("$ ")]
    assert any("torchrun --nproc_per_node" in line and line.rstrip().endswith("--close-mosaic 15")
               for line in commands)


def test_identical_passing_gpus_share_one_line():
    text = run_cli("check", "--profile", "node", "--nvml-fixture", HGX, env={"COLUMNS": "200"}).stdout
    lines = text.splitlines()
    health = [line for line in lines if " gpu.health " in line]
    assert len(health) == 1 and " gpu0-7 " in health[0] and health[0].startswith("PASS")
    assert "(00000000:" not in [line for line in lines if " gpu.nvlink " in line][0]  # the PCI id is per GPU
    faulty = run_cli("check", "--profile", "node", "--nvml-fixture", FAULTS, env={"COLUMNS": "200"}).stdout
    pcie = [line.split()[:3] for line in faulty.splitlines() if " gpu.pcie " in line and line[:4] in ("PASS", "FAIL")]
    assert pcie == [["PASS", "gpu.pcie", "gpu0-1"], ["FAIL", "gpu.pcie", "gpu2"], ["PASS", "gpu.pcie", "gpu3-6"],
                    ["FAIL", "gpu.pcie", "gpu7"]]
    json_results = run_cli("check", "--profile", "node", "--nvml-fixture", HGX, "--format", "json").stdout
    assert json_results.count('"id": "gpu.health"') == 8  # the JSON keeps one result per GPU


def test_a_failing_report_ends_with_what_to_fix_first(tmp_path):
    # A driver too old for the environment's torch: driver.version and cuda.compat tell one story.
    text = run_cli("check", "--nvml-fixture", RTX3060, "--select", "driver,cuda,gpu.health",
                   env={"COLUMNS": "200"}).stdout
    assert "Fix first, in this order:" in text
    first = text.split("Fix first, in this order:")[1].strip().splitlines()
    assert first[0].startswith("1. Install a supported NVIDIA driver branch")
    faults = run_cli("check", "--profile", "node", "--nvml-fixture", FAULTS, env={"COLUMNS": "200"}).stdout
    steps = faults.split("Fix first, in this order:")[1].strip().splitlines()[:-2]
    assert steps[0].startswith("1. Start the NVLink fabric") and "(gpu.fabric on gpu4)" in steps[0]
    assert any("gpu.pcie on gpu2" in step for step in steps) and any("gpu.nvlink on gpu3" in step for step in steps)
    ok = run_cli("check", "--profile", "node", "--nvml-fixture", HGX).stdout
    assert "Fix first" not in ok


def test_facts_as_a_block_for_a_bug_report():
    text = run_cli("facts", "--format", "text", "--nvml-fixture", nvml_fixture("2x-a100-40g-driver550-ecc.json")).stdout
    lines = text.splitlines()
    assert lines[0].startswith("### preflight facts: ")
    assert "- NVIDIA driver: 550.54.15 (CUDA 12.4)" in lines
    assert "- GPU 1: NVIDIA A100-SXM4-40GB, 40.0 GiB, compute capability 8.0, PCI 00000000:37:00.0" in lines
    assert any(line.startswith("- Python: ") for line in lines) and any(line.startswith("- OS: ") for line in lines)
    assert any(line.startswith("- Packages: ") and "numpy" in line for line in lines)
    assert any(line.startswith("- torch: ") for line in lines)


def test_wrapping_keeps_every_word_and_every_line_in_the_width():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from preflight.render.blocks import wrap

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.text(alphabet="abcdef/:.=", min_size=1, max_size=40), max_size=30), st.integers(20, 120))
    def check(words, columns):
        text = " ".join(words)
        lines = wrap(text, columns, "  - ", "    ")
        assert all(len(line) <= columns for line in lines)
        assert "".join(line[4:].replace(" ", "") for line in lines) == text.replace(" ", "")

    check()
