"""The GPU catalog (rules/knowledge/gpus.toml): every GPU variant preflight knows, with what NVML calls it, its
memory and what a process can allocate of it, its compute capability and architecture, and NVIDIA's datasheet peaks
where NVIDIA publishes them.

``plan`` and ``check --workload`` size workloads against it, ``smoke`` judges measured throughput and bandwidth
against its peaks (found by the name NVML gives the GPU: compared without case and without a leading "NVIDIA ",
which older drivers leave out; a name the catalog does not list has no datasheet, and nothing is guessed from part
of a name: an "H100" could be the SXM or the PCIe card, whose figures differ), and fixes name each architecture with
the catalog's GPUs of it. ``[[gpu]]`` tables in a ``--rules`` file are read by ``build`` too.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Dict, List, NamedTuple, Optional, Tuple

from preflight.files.toml_entries import Entry
from preflight.knowledge import shipped

CATALOG = os.path.join("knowledge", "gpus.toml")
SEGMENTS = ("data-centre", "workstation", "consumer", "laptop", "embedded")
ECC_STATES = ("on", "off", "none")  # none: the card has no ECC (GeForce); HBM's ECC is always on and costs nothing
# What a process can allocate when no figure was reported: the T4's 14913 of 15360 MiB on current drivers is
# the lowest share seen (97.1%); others keep more (A100 98.9%, RTX 4090 98.6%, H200 99.6%).
ESTIMATED_USABLE = 0.97
GPU_KEYS = {"id", "name", "nvml_names", "segment", "memory_mib", "compute_capability", "ecc", "usable_mib",
            "usable_source", "source", "fp16_tflops", "memory_gbs", "peaks_source", "slurm_names"}
PEAK_KEYS = ("fp16_tflops", "memory_gbs")
ID_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
SLURM_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
CC_PATTERN = r"^\d+\.\d$"


class GpuModel(NamedTuple):
    id: str
    name: str
    memory_mib: int
    compute_capability: str
    source: str
    ecc: str = "none"
    usable_mib: Optional[int] = None  # the lowest of ``usable_figures``: what is judged with
    usable_source: str = ""
    usable_figures: Tuple[int, ...] = ()  # every figure reported (MiB), in the catalog's order
    nvml_names: Tuple[str, ...] = ()
    segment: str = ""
    fp16_tflops: Optional[float] = None  # NVIDIA's dense FP16 tensor-core peak (FP32 accumulation)
    memory_gbs: Optional[float] = None  # NVIDIA's peak memory bandwidth, GB/s
    peaks_source: str = ""
    slurm_names: Tuple[str, ...] = ()  # GPU types sites give it in Slurm, beyond its id and AutoDetect's name

    def slurm_types(self) -> Tuple[str, ...]:
        """Every Slurm GPU type that names this GPU: its id (also with "_" for "-"), AutoDetect=nvml's form of each
        NVML name (lower case, each space "_"), and the site spellings the catalog lists."""
        names = [self.id, self.id.replace("-", "_")] + [autodetect_name(n) for n in self.nvml_names]
        return tuple(dict.fromkeys(names + list(self.slurm_names)))

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * 2**20

    @property
    def usable_bytes(self) -> int:
        """What a job on this idle GPU can allocate: the reported figure, or the conservative estimate."""
        if self.usable_mib is not None:
            return self.usable_mib * 2**20
        return int(self.memory_bytes * ESTIMATED_USABLE)

    @property
    def usable_basis(self) -> str:
        return "reported" if self.usable_mib is not None else "estimated"


class Catalog(NamedTuple):
    gpus: Dict[str, GpuModel]  # id -> GPU, in the file's order
    by_name: Dict[str, GpuModel]  # plain NVML name -> GPU
    architectures: Dict[str, str]  # compute capability ("8.6") -> architecture ("Ampere")


def build(entry: Entry, gpu_id: str) -> GpuModel:
    """A ``[[gpu]]`` entry of the catalog or of a rule file, checked; errors through ``entry.error``."""
    entry.check_keys(GPU_KEYS, "a [[gpu]]")
    if not re.match(ID_PATTERN, gpu_id):
        raise entry.error("gpu id %r must be lowercase letters, digits, '.', '-' or '_'" % gpu_id, key="id")
    cc = entry.string("compute_capability", required=True)
    if not re.match(CC_PATTERN, cc):
        raise entry.error("'compute_capability' must look like 8.6, found %r" % cc, key="compute_capability")
    memory_mib = entry.integer("memory_mib", 1)
    ecc = entry.string("ecc", default="none")
    if ecc not in ECC_STATES:
        raise entry.error("'ecc' must be one of %s (the state memory_mib was seen in), found %r"
                          % (", ".join(ECC_STATES), ecc), key="ecc")
    segment = entry.string("segment")
    if segment and segment not in SEGMENTS:
        raise entry.error("'segment' must be one of %s, found %r" % (", ".join(SEGMENTS), segment), key="segment")
    # One figure, or every figure reported (they differ by driver and cloud image): the lowest is judged with.
    figures = entry.raw.get("usable_mib")
    if isinstance(figures, list):
        if not figures or not all(isinstance(f, int) and not isinstance(f, bool) and f >= 1 for f in figures):
            raise entry.error("'usable_mib' must be a MiB count or a list of them, found %r" % (figures,),
                              key="usable_mib")
        figures = tuple(figures)
    else:
        single = entry.integer("usable_mib", 1, required=False)
        figures = () if single is None else (single,)
    if figures and max(figures) > memory_mib:
        raise entry.error("'usable_mib' (%d) cannot be more than 'memory_mib' (%d)" % (max(figures), memory_mib),
                          key="usable_mib")
    usable_source = entry.string("usable_source")
    if figures and not usable_source:
        raise entry.error("'usable_mib' needs 'usable_source': where each figure was seen, on which driver")
    peaks = {}
    for key in PEAK_KEYS:
        value = entry.raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise entry.error("'%s' must be a positive number, found %r" % (key, value), key=key)
        peaks[key] = None if value is None else float(value)
    peaks_source = entry.string("peaks_source")
    if (peaks["fp16_tflops"] is None) != (peaks["memory_gbs"] is None) or bool(peaks["fp16_tflops"]) != bool(
            peaks_source):
        raise entry.error("datasheet peaks come together: fp16_tflops, memory_gbs and peaks_source (the datasheet)")
    slurm_names = tuple(entry.string_list("slurm_names"))
    for name in slurm_names:
        if not re.match(SLURM_NAME_PATTERN, name):
            raise entry.error("slurm_names: %r is not a Slurm GPU type as sites write it (lower case letters, digits, "
                              "'.', '-' or '_')" % name, key="slurm_names")
    return GpuModel(gpu_id, entry.string("name", required=True), memory_mib, cc, entry.string("source", required=True),
                    ecc, min(figures) if figures else None, usable_source, figures,
                    tuple(entry.string_list("nvml_names")), segment, peaks["fp16_tflops"], peaks["memory_gbs"],
                    peaks_source, slurm_names)


def autodetect_name(nvml_name: str) -> str:
    """The GPU type Slurm's AutoDetect=nvml gives a GPU: NVML's name lower-cased, each space made "_", nothing
    else changed (SchedMD/slurm src/plugins/gpu/common/gpu_common.c, gpu_common_underscorify_tolower)."""
    return nvml_name.lower().replace(" ", "_")


def slurm_types(gpus) -> Dict[str, Tuple[str, ...]]:
    """Slurm GPU type -> the ids of the catalog GPUs it may name (several: a name like a100 that fits more than one
    variant), for ``gpus`` (GpuModel values)."""
    found: Dict[str, List[str]] = {}
    for gpu in gpus:
        for name in gpu.slurm_types():
            if gpu.id not in found.setdefault(name, []):
                found[name].append(gpu.id)
    return {name: tuple(ids) for name, ids in found.items()}


def plain(name: str) -> str:
    """A GPU name as compared: case, repeated spaces and a leading "NVIDIA " ignored."""
    name = " ".join(name.split()).lower()
    return name[len("nvidia "):] if name.startswith("nvidia ") else name


@functools.lru_cache(maxsize=None)
def catalog() -> Catalog:
    """The shipped catalog, read and checked once."""
    data = shipped.knowledge(CATALOG, "GPU catalog")
    path = os.path.join(shipped.data_dir(), CATALOG)
    gpus: Dict[str, GpuModel] = {}
    by_name: Dict[str, GpuModel] = {}
    for index, raw in enumerate(data.get("gpu") or []):
        entry = Entry(raw, path, ("gpu", index), "[[gpu]] %d" % (index + 1))
        gpu = build(entry, entry.string("id", required=True))
        if gpu.id in gpus:
            raise entry.error("gpu id %r is listed twice" % gpu.id, key="id")
        for name in gpu.nvml_names:
            if plain(name) in by_name:
                raise entry.error("the NVML name %r is listed twice" % name, key="nvml_names")
            by_name[plain(name)] = gpu
        gpus[gpu.id] = gpu
    architectures: Dict[str, str] = {}
    for index, raw in enumerate(data.get("architecture") or []):
        entry = Entry(raw, path, ("architecture", index), "[[architecture]] %d" % (index + 1))
        entry.check_keys(("name", "compute_capabilities"), "an [[architecture]]")
        for cc in entry.string_list("compute_capabilities"):
            architectures[cc] = entry.string("name", required=True)
    return Catalog(gpus, by_name, architectures)


def by_nvml_name(name: Optional[str]) -> Optional[GpuModel]:
    """The catalog GPU NVML calls ``name``, or None when the catalog does not list the name."""
    return catalog().by_name.get(plain(name or ""))


@functools.lru_cache(maxsize=64)  # the catalog is fixed: a fleet asks it once per GPU model
def architectures_text(above: Optional[str] = None) -> str:
    """Each architecture newer than compute capability ``above`` (all without it), with its capabilities and the
    catalog's GPUs of it (laptops left out, memory sizes folded): "Ampere (8.0, 8.6, 8.7): A100 SXM4, A10, ...";
    what a fix names as the GPUs to move to."""
    def key(cc: str) -> Tuple[int, int]:
        major, minor = cc.split(".")
        return int(major), int(minor)

    known = catalog()
    parts: List[str] = []
    for name in dict.fromkeys(known.architectures.values()):
        capabilities = sorted((cc for cc, arch in known.architectures.items() if arch == name), key=key)
        if above and re.match(CC_PATTERN, above) and key(capabilities[0]) <= key(above):
            continue
        models = dict.fromkeys(re.sub(r"\s+\d+GB\b.*$", "", gpu.name) for gpu in known.gpus.values()
                               if known.architectures.get(gpu.compute_capability) == name and gpu.segment != "laptop")
        if models:
            parts.append("%s (%s): %s." % (name, ", ".join(capabilities), ", ".join(models)))
    return " ".join(parts)
