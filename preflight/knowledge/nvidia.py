"""Reference tables from NVIDIA's and PyTorch's documentation.

Each table names its source. Derived facts (``preflight.facts``) use them;
rules never need to repeat them.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

# Minimum Linux driver for each CUDA toolkit release.
# Source: NVIDIA CUDA Toolkit release notes, "CUDA Toolkit and Corresponding Driver Versions" (table 3), each
# release's own notes: https://docs.nvidia.com/cuda/archive/12.9.0/cuda-toolkit-release-notes/index.html for
# 12.x and older; https://docs.nvidia.com/cuda/archive/13.0.0/cuda-toolkit-release-notes/index.html (13.0,
# 580.65.06), https://docs.nvidia.com/cuda/archive/13.1.0/cuda-toolkit-release-notes/index.html (13.1,
# 590.44.01), https://docs.nvidia.com/cuda/archive/13.2.0/cuda-toolkit-release-notes/index.html (13.2,
# 595.45.04), https://docs.nvidia.com/cuda/archive/13.3.0/cuda-toolkit-release-notes/index.html (13.3,
# 610.43.02). There is no CUDA 12.7.
CUDA_MIN_DRIVER: Dict[Tuple[int, int], str] = {
    (10, 0): "410.48",
    (10, 1): "418.39",
    (10, 2): "440.33",
    (11, 0): "450.51.06",
    (11, 1): "455.23",
    (11, 2): "460.27.03",
    (11, 3): "465.19.01",
    (11, 4): "470.42.01",
    (11, 5): "495.29.05",
    (11, 6): "510.39.01",
    (11, 7): "515.43.04",
    (11, 8): "520.61.05",
    (12, 0): "525.60.13",
    (12, 1): "530.30.02",
    (12, 2): "535.54.03",
    (12, 3): "545.23.06",
    (12, 4): "550.54.14",
    (12, 5): "555.42.02",
    (12, 6): "560.28.03",
    (12, 8): "570.26",
    (12, 9): "575.51.03",
    (13, 0): "580.65.06",
    (13, 1): "590.44.01",
    (13, 2): "595.45.04",
    (13, 3): "610.43.02",
}

# CUDA minor-version compatibility: an application built with any CUDA X.y
# runs on a driver of at least this version (reduced feature set; the GPU's
# architecture must be in the binary as compiled code, since an older driver
# cannot JIT-compile newer PTX). CUDA 10.x has no such compatibility.
# Source: NVIDIA CUDA Compatibility guide, "Minor Version Compatibility"
# (https://docs.nvidia.com/deploy/cuda-compatibility/).
MINOR_VERSION_COMPAT_DRIVER: Dict[int, str] = {
    11: "450.80.02",
    12: "525.60.13",
    13: "580",
}

# Which torch wheels exist (variants, releases, Pythons, architectures) is data:
# rules/knowledge/pytorch-wheels.toml, read by preflight.knowledge.torch_wheels.

# NVIDIA driver branches in late 2026. R580 is long-term support to mid-2028 and the last branch for
# Maxwell, Pascal and Volta GPUs (compute capability below 7.5); R595 is a production branch to early 2027;
# R620 is long-term support to 2029. R535, R550 and R570 are end of life. Blackwell needs R570 or newer.
# Source: https://docs.nvidia.com/datacenter/tesla/drivers/ (driver lifecycle, supported branches).
SUPPORTED_BRANCHES = ("580", "595", "620")
END_OF_LIFE_BRANCHES = ("535", "550", "570")
LAST_BRANCH_BEFORE_TURING = "580"
BLACKWELL_MIN_BRANCH = "570"


def driver_branch_advice(ccs) -> str:
    """Which branch to install for GPUs of these compute capabilities (strings such as "7.0")."""
    parsed = [cc for cc in (parse_major_minor(c) for c in ccs) if cc]
    if any(cc < (7, 5) for cc in parsed):
        return ("install the %s branch: it is the last that supports GPUs older than Turing (this node has compute "
                "capability %s); newer branches drop them" % (LAST_BRANCH_BEFORE_TURING,
                                                               ", ".join("%d.%d" % cc for cc in sorted(set(parsed)))))
    return ("install a supported branch: %s (long-term support), %s or %s; %s are end of life%s"
            % (SUPPORTED_BRANCHES + (", ".join(END_OF_LIFE_BRANCHES),
               "; Blackwell GPUs need %s or newer" % BLACKWELL_MIN_BRANCH if any(cc >= (10, 0) for cc in parsed)
               else "")))


# NVLink bandwidth per link and per direction, GB/s, by the GPU's compute capability major version: NVLink 2
# (Volta: six links, 300 GB/s in all), NVLink 3 (Ampere A100: twelve links, 600 GB/s) and NVLink 4 (Hopper:
# eighteen links, 900 GB/s) each carry 25 GB/s per link and direction; NVLink 5 (Blackwell: eighteen links,
# 1.8 TB/s) 50 GB/s. Sources: NVIDIA Tesla V100 GPU Architecture whitepaper (NVLink 2.0); NVIDIA A100 Tensor Core
# GPU Architecture whitepaper (third-generation NVLink); NVIDIA H100 Tensor Core GPU Architecture whitepaper
# (fourth-generation NVLink); https://www.nvidia.com/en-us/data-center/nvlink/ (fifth generation, per GPU).
NVLINK_GBS_PER_LINK: Dict[int, float] = {7: 25.0, 8: 25.0, 9: 25.0, 10: 50.0, 12: 50.0}

# PCIe bandwidth per lane and per direction, GB/s, by generation: the transfer rate (2.5, 5, 8, 16, 32, 64 GT/s)
# times the encoding's share (8b/10b for Gen1-2, 128b/130b for Gen3-5; Gen6's FLIT mode is counted at its raw
# rate) over 8 bits. Source: PCI-SIG, https://pcisig.com/specifications (per-generation rates).
PCIE_GBS_PER_LANE: Dict[int, float] = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 8.0}

# nvmlDeviceGetBrand values as the container toolkit spells them in
# NVIDIA_REQUIRE_* terms (brand=tesla, brand=nvidiartx, ...).
BRAND_NAMES: Dict[int, str] = {
    0: "unknown", 1: "quadro", 2: "tesla", 3: "nvs", 4: "grid", 5: "geforce",
    6: "titan", 7: "vapps", 8: "vpc", 9: "vcs", 10: "vws", 11: "cloudgaming",
    12: "quadrortx", 13: "nvidiartx", 14: "nvidia", 15: "geforcertx",
    16: "titanrtx",
}

# nvmlDeviceGetArchitecture values.
ARCHITECTURE_NAMES: Dict[int, str] = {
    2: "kepler", 3: "maxwell", 4: "pascal", 5: "volta", 6: "turing",
    7: "ampere", 8: "ada", 9: "hopper", 10: "blackwell",
}

# nvmlDeviceGetCurrentClocksEventReasons bits (formerly "throttle reasons").
CLOCK_EVENT_REASONS: Dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def parse_major_minor(text) -> Optional[Tuple[int, int]]:
    """``"12.4"`` / ``"12.4.1"`` / ``"13"`` -> (12, 4) / (12, 4) / (13, 0); None if not a version."""
    if text is None:
        return None
    parts = str(text).strip().split(".")
    try:
        major = int(parts[0])
        minor = int(parts[1]) if len(parts) > 1 and parts[1] != "" else 0
    except ValueError:
        return None
    return major, minor


def cuda_from_nvml(encoded: int) -> str:
    """nvmlSystemGetCudaDriverVersion's 1000*major + 10*minor -> ``"13.0"``."""
    return "%d.%d" % (encoded // 1000, (encoded % 1000) // 10)


def min_driver_for_cuda(cuda: Tuple[int, int]) -> Optional[str]:
    """The oldest driver that fully supports CUDA ``cuda``; None if newer than the table."""
    if cuda in CUDA_MIN_DRIVER:
        return CUDA_MIN_DRIVER[cuda]
    newer = [v for v in sorted(CUDA_MIN_DRIVER) if v >= cuda]
    return CUDA_MIN_DRIVER[newer[0]] if newer else None


def clock_event_names(mask: int) -> List[str]:
    return [name for bit, name in sorted(CLOCK_EVENT_REASONS.items()) if mask & bit]


# Node-health limits. Source: NVIDIA DCGM's hardware limits (github.com/NVIDIA/DCGM,
# dcgm_gpu_hardware_limits.h, used by its health watches and dcgmi diag): more than 8 PCIe replays a minute;
# 60 retired pages (single- and double-bit together; 63 in later releases, which follow the field
# diagnostic); any rise of the NVLink replay or recovery counters, and NVLink CRC errors at 100 a second.
PCIE_REPLAYS_PER_MINUTE = 8
RETIRED_PAGES_LIMIT = 60
NVLINK_CRC_ERRORS_PER_SECOND = 100
# A PCIe link lowers its generation at idle to save power; under load it should run at its top speed.
# At this GPU utilization (percent) a lower generation is a degraded link, not power saving.
PCIE_BUSY_UTILIZATION = 50
# How old a counter reading may be and still give a rate (the previous check on this machine).
COUNTER_HISTORY_MAX_AGE = 7 * 86400
