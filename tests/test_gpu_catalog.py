"""The GPU catalog (rules/knowledge/gpus.toml): one entry per variant, found by the names NVML reports, read by plan,
check, smoke and the fixes that name architectures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import nvml_fixture, run_json
from preflight.engine import loader
from preflight.errors import PreflightError
from preflight.knowledge import gpus


def test_every_recorded_data_centre_model_is_one_variant_of_the_catalog():
    found = {gpus.by_nvml_name(name) for name in ("NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB",
                                                  "Tesla V100-SXM2-16GB")}
    assert None not in found and len(found) == 4
    for recording in ("h200-driver580.json", "8x-h100-hgx.json", "2x-a100-40g-driver550-ecc.json",
                      "v100-retired-pages.json"):
        recorded = json.loads(Path(nvml_fixture(recording)).read_text())
        names = re.findall(r'"nvmlDeviceGetName": \{"ok": "([^"]+)"', json.dumps(recorded))
        assert any(gpus.by_nvml_name(name) for name in names), recording
    assert gpus.by_nvml_name("A100-SXM4-40GB") == gpus.by_nvml_name("NVIDIA A100-SXM4-40GB")  # older drivers
    assert gpus.by_nvml_name("NVIDIA H100 PCIe").memory_gbs != gpus.by_nvml_name("NVIDIA H100 80GB HBM3").memory_gbs
    assert gpus.by_nvml_name("NVIDIA GeForce RTX 3060") is None and gpus.by_nvml_name(None) is None


def test_the_data_centre_gpus_without_datasheet_peaks_are_these():
    """NVIDIA publishes no dense FP16 peak with FP32 accumulation for these in a form the catalog can cite; a new
    data-centre GPU without peaks must be added here knowingly."""
    for gpu in gpus.catalog().gpus.values():
        assert gpu.segment, "%s: a catalog GPU needs its segment (%s)" % (gpu.id, ", ".join(gpus.SEGMENTS))
    lacking = sorted(g.id for g in gpus.catalog().gpus.values() if g.segment == "data-centre" and g.fp16_tflops is None)
    known = ["a40", "b200", "l40", "l40s"]
    assert lacking == known, "data-centre GPUs without datasheet peaks: %s new, %s now with them" % (
        sorted(set(lacking) - set(known)), sorted(set(known) - set(lacking)))
    for gpu in gpus.catalog().gpus.values():
        if gpu.fp16_tflops is not None:
            assert gpu.nvml_names and gpu.peaks_source.startswith(("http", "NVIDIA")), \
                "%s: datasheet peaks need the NVML names they apply to and their source" % gpu.id


def test_plan_reads_the_catalog_and_a_rule_file_adds_or_replaces_a_gpu(tmp_path):
    ruleset = loader.load(capacity=True)
    assert set(ruleset.gpus) == set(gpus.catalog().gpus)
    site = tmp_path / "site.toml"
    site.write_text('[[gpu]]\nid = "t4"\nname = "Our T4"\nmemory_mib = 15360\ncompute_capability = "7.5"\n'
                    'source = "ours"\n\n[[gpu]]\nid = "mi-x"\nname = "Lab card"\nmemory_mib = 20000\n'
                    'compute_capability = "8.6"\nsource = "ours"\n')
    mine = loader.load([str(site)], capacity=True)
    assert mine.gpus["t4"].name == "Our T4" and mine.gpus["mi-x"].memory_mib == 20000
    site.write_text('[[gpu]]\nid = "x"\nname = "X"\nmemory_mib = 1\ncompute_capability = "8.6"\nsource = "s"\n'
                    'fp16_tflops = 10\n')
    with pytest.raises(PreflightError, match="datasheet peaks come together"):
        loader.load([str(site)], capacity=True)


def test_a_bad_catalog_entry_is_refused_with_its_place(tmp_path, monkeypatch):
    (tmp_path / "knowledge").mkdir()
    (tmp_path / "knowledge" / "gpus.toml").write_text(
        '[[gpu]]\nid = "x"\nname = "X"\nmemory_mib = 1\ncompute_capability = "8.6"\nsource = "s"\n'
        'fp16_tflops = "fast"\nmemory_gbs = 1\npeaks_source = "s"\n')
    monkeypatch.setattr("preflight.knowledge.shipped.data_dir", lambda: str(tmp_path))
    gpus.catalog.cache_clear()
    try:
        with pytest.raises(PreflightError, match=r"gpus.toml:7: \[\[gpu\]\] 1: 'fp16_tflops' must be a positive "
                                                 r"number, found 'fast'"):
            gpus.catalog()
    finally:
        gpus.catalog.cache_clear()


def test_the_compute_capability_fix_names_newer_architectures_from_the_catalog():
    report = run_json("check", "--select", "gpu.compute_capability", "--nvml-fixture",
                      nvml_fixture("v100-retired-pages.json"), "--set", "gpu.compute_capability.min=7.5")
    result = report["results"][0]
    assert result["status"] == "fail"
    steps = " ".join(result["fix"]["steps"])
    assert "Turing (7.5): GeForce RTX 2080 Ti, Tesla T4." in steps and "Hopper (9.0): H100 SXM" in steps
    assert "Volta" not in steps.split("Newer architectures")[1]  # the GPU's own architecture is not newer
