"""Domain judgements: CUDA compatibility, torch kernels, GPU health, container requirements, visibility."""

from __future__ import annotations

import pytest

from preflight.facts import derived
from preflight.knowledge import nvidia
from preflight.probes import visibility

# --- driver and CUDA -------------------------------------------------------------

@pytest.mark.parametrize("driver, driver_cuda, torch_cuda, status", [
    ("580.159.04", "13.0", "13.0", "ok"),
    ("580.159.04", "13.0", "11.3", "ok"),                      # new drivers run old CUDA
    ("525.60.13", "12.0", "12.1", "minor_version_compat"),
    ("525.60.13", "12.0", "13.0", "driver_too_old"),
    ("520.61.05", "11.8", "12.1", "driver_too_old"),           # another major release
    ("470.42.01", "11.4", "11.8", "minor_version_compat"),     # 11.x on >= 450.80.02
    ("450.51.06", "11.0", "11.3", "driver_too_old"),           # below the 11.x floor
    ("440.33", "10.2", "10.2", "ok"),
    ("418.39", "10.1", "10.2", "driver_too_old"),              # CUDA 10 has no minor-version compatibility
])
def test_cuda_compat(driver, driver_cuda, torch_cuda, status):
    assert derived.cuda_compat(driver, driver_cuda, torch_cuda)[0] == status


def test_cuda_compat_details_name_the_minimum_driver_and_a_wheel():
    _, details = derived.cuda_compat("525.60.13", "12.0", "13.0")
    assert details["required_driver"] == "580.65.06"
    assert derived.cuda_compat("550.54.15", "12.4", "12.8")[1]["required_driver"] == "570.26"


def test_driver_table_matches_knowledge():
    assert nvidia.min_driver_for_cuda((12, 7)) == "570.26"  # no 12.7: the next release's driver
    assert nvidia.min_driver_for_cuda((14, 0)) is None
    assert nvidia.cuda_from_nvml(13000) == "13.0"
    assert nvidia.cuda_from_nvml(12040) == "12.4"


# --- torch kernels -------------------------------------------------------------------

CU130 = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120".split()
CU113 = "sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86".split()
CU124 = "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90".split()


@pytest.mark.parametrize("flags, cc, status", [
    (CU130, "9.0", "sass"), (CU130, "12.0", "sass"), (CU130, "6.1", "none"),
    (CU113, "8.9", "sass"),        # RTX 4090 through sm_86
    (CU113, "9.0", "none"),        # H100
    (CU124, "12.0", "none"),       # RTX 5090: "no kernel image is available"
    (CU124 + ["compute_90"], "12.0", "ptx"),
    (["sm_90a"], "9.0", "sass"), (["sm_90a"], "9.1", "none"),
    (["compute_100"], "9.0", "none"),  # PTX newer than the GPU does not help
    (["sm_87"], "8.6", "none"),        # compiled for a newer minor of the same major
])
def test_torch_kernels(flags, cc, status):
    assert derived.torch_kernels(flags, cc)[0] == status


def test_ptx_under_minor_version_compat_cannot_jit():
    assert derived.torch_kernels(["sm_80", "compute_80"], "9.0", minor_version_compat=True)[0] == "ptx_needs_newer_driver"
    assert derived.parse_arch_flag("sm_100a") == ("sm", (10, 0), "a")
    assert derived.parse_arch_flag("gfx90a") is None


# --- health and MIG ----------------------------------------------------------------------

def test_health_problems():
    assert derived.health_problems({"ecc_uncorrected_volatile": 0, "remapped_rows": {"pending": False}}) == []
    assert derived.health_problems({"ecc_uncorrected_volatile": None, "remapped_rows": None}) == []  # not supported
    problems = derived.health_problems({"lost": True, "ecc_uncorrected_volatile": 3, "retired_pages_pending": True,
                                        "remapped_rows": {"pending": True, "failure": True}})
    assert len(problems) == 5


def test_mig_state():
    assert derived.mig_state({"index": 0, "mig_mode": None}, []) == "not_supported"
    assert derived.mig_state({"index": 0, "mig_mode": {"current": False}}, []) == "disabled"
    assert derived.mig_state({"index": 0, "mig_mode": {"current": True}}, []) == "no_instance"
    assert derived.mig_state({"index": 0, "mig_mode": {"current": True}, "mig_devices": ["MIG-a"]}, []) == "instances"
    assert derived.mig_state({"index": 0, "mig_mode": {"current": True}}, [0]) == "instance_selected"


# --- container requirements ---------------------------------------------------------------

HOST_580 = {"cuda": "13.0", "driver": "580.159.04", "arch": "9.0", "brand": "nvidia"}
HOST_535_TESLA = {"cuda": "12.2", "driver": "535.104.05", "arch": "8.0", "brand": "tesla"}


@pytest.mark.parametrize("value, host, satisfied", [
    ("cuda>=13.0", HOST_580, True),
    ("cuda>=13.0", HOST_535_TESLA, False),
    ("cuda>=13.0 brand=tesla,driver>=535,driver<536", HOST_535_TESLA, True),   # OR of alternatives
    ("cuda>=13.0 brand=tesla,driver>=550,driver<551", HOST_535_TESLA, False),  # AND within one
    ("arch>=8.0", HOST_535_TESLA, True), ("arch>=9.0", HOST_535_TESLA, False),
    ("brand=TESLA", HOST_535_TESLA, True), ("brand!=tesla", HOST_535_TESLA, False),
    ("future>=1", HOST_535_TESLA, True),                                        # unknown properties are ignored
    ("driver=535.104.05", HOST_535_TESLA, True),
    ("CUDA>=12.0", HOST_535_TESLA, True), ("Arch>=9.0", HOST_535_TESLA, False),  # property names: any case
    ("BRAND=Tesla,Driver>=535", HOST_535_TESLA, True),
])
def test_requirement_semantics(value, host, satisfied):
    failed = derived.unsatisfied_requirements({"requirements": {"NVIDIA_REQUIRE_CUDA": value}}, [host])
    assert (failed == []) is satisfied


def test_every_require_variable_must_hold_and_cuda_version_implies_one():
    container = {"requirements": {"NVIDIA_REQUIRE_CUDA": "cuda>=12.0", "NVIDIA_REQUIRE_ARCH": "arch>=9.0"}}
    assert derived.unsatisfied_requirements(container, [HOST_535_TESLA]) == ["NVIDIA_REQUIRE_ARCH=arch>=9.0"]
    implied = {"requirements": {}, "CUDA_VERSION": "12.8.1"}
    assert derived.unsatisfied_requirements(implied, [HOST_535_TESLA]) == ["NVIDIA_REQUIRE_CUDA=cuda>=12.8"]
    assert derived.requirements_apply({"NVIDIA_DISABLE_REQUIRE": "1", "CUDA_VERSION": "12.8"}) is not None
    assert derived.requirements_apply({"requirements": {}}) is not None


@pytest.mark.parametrize("value, disabled", [
    ("1", True), ("t", True), ("T", True), ("TRUE", True), ("true", True), ("True", True),
    ("yes", False), ("on", False), ("tRUE", False), (" true", False), ("0", False), ("false", False), ("", False),
])
def test_disable_require_is_read_as_gos_parsebool_reads_it(value, disabled):
    container = {"NVIDIA_DISABLE_REQUIRE": value, "CUDA_VERSION": "12.8"}
    assert (derived.requirements_apply(container) is not None) is disabled


def test_requirements_hold_for_every_gpu_given_to_the_container():
    a100 = dict(HOST_580, arch="8.0", name="GPU 1 (NVIDIA A100)")
    h200 = dict(HOST_580, name="GPU 0 (NVIDIA H200)")
    container = {"requirements": {"NVIDIA_REQUIRE_ARCH": "arch>=9.0"}}
    assert derived.unsatisfied_requirements(container, [h200]) == []
    assert derived.unsatisfied_requirements(container, [h200, a100]) == [
        "NVIDIA_REQUIRE_ARCH=arch>=9.0 (1 of 2 GPUs: GPU 1 (NVIDIA A100))"]


def test_empty_driver_capabilities_mean_the_default():
    assert derived.missing_capabilities("") == [] and derived.missing_capabilities("  ") == []
    assert derived.missing_capabilities(None) == []
    assert derived.missing_capabilities("utility") == ["compute"]


def test_malformed_requirement_is_reported_not_crashed():
    failed = derived.unsatisfied_requirements({"requirements": {"NVIDIA_REQUIRE_CUDA": "cuda>>12"}}, [HOST_580])
    assert len(failed) == 1 and "NVIDIA_REQUIRE_CUDA" in failed[0]


def test_missing_capabilities():
    assert derived.missing_capabilities("compute,utility,video") == []
    assert derived.missing_capabilities("all") == []
    assert derived.missing_capabilities("graphics") == ["compute", "utility"]
    assert derived.missing_capabilities(None) == []


# --- visibility --------------------------------------------------------------------------------

GPUS = [
    {"index": 0, "uuid": "GPU-aaaa1111-0000", "pci_bus_id": "00000000:17:00.0", "compute_capability": "8.6"},
    {"index": 1, "uuid": "GPU-bbbb2222-0000", "pci_bus_id": "00000000:65:00.0", "compute_capability": "9.0"},
    {"index": 2, "uuid": "GPU-bbbb3333-0000", "pci_bus_id": "00000000:ca:00.0", "compute_capability": "9.0"},
]


@pytest.mark.parametrize("value, order, visible", [
    (None, "PCI_BUS_ID", [0, 1, 2]),
    ("", None, []),
    ("0,2", "PCI_BUS_ID", [0, 2]),
    ("2,0", "PCI_BUS_ID", [2, 0]),
    ("0,7,1", "PCI_BUS_ID", [0]),              # stops at the first entry that names no GPU
    ("0,-1,1", "PCI_BUS_ID", [0]),
    ("GPU-bbbb3,0", "PCI_BUS_ID", [2, 0]),     # a unique UUID prefix
    ("GPU-bbbb,0", "PCI_BUS_ID", []),          # an ambiguous prefix names nothing
    ("0", None, [1]),                          # FASTEST_FIRST: a 9.0 GPU comes before the 8.6
    ("0,0", "PCI_BUS_ID", [0]),
    (" 1 , 2 ", "PCI_BUS_ID", [1, 2]),
])
def test_cuda_visible_devices(value, order, visible):
    assert visibility.resolve(GPUS, value, order)["visible"] == visible


def test_visibility_notes_explain_what_was_ignored():
    result = visibility.resolve(GPUS, "0,7,1", "PCI_BUS_ID")
    assert "'7'" in result["notes"][0] and "'7,1'" in result["notes"][0]
    assert "empty" in visibility.resolve(GPUS, "", None)["notes"][0]


def test_mig_uuids_select_their_parent():
    gpus = [dict(GPUS[0], mig_mode={"current": True}, mig_devices=["MIG-1111"]), dict(GPUS[1], mig_mode={"current": False})]
    result = visibility.resolve(gpus, "MIG-1111", "PCI_BUS_ID")
    assert result["visible"] == [0] and result["mig_selected"] == [0]
    legacy = visibility.resolve(gpus, "MIG-GPU-aaaa1111-0000/1/0", "PCI_BUS_ID")
    assert legacy["mig_selected"] == [0]
    assert visibility.resolve([GPUS[1]], "MIG-9999", "PCI_BUS_ID")["visible"] == []  # no MIG GPU at all
