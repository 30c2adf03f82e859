"""Domain judgements computed from plain facts: pure functions, no probing.

These answer the questions a single threshold cannot: does the driver run
this torch's CUDA build, does torch have kernels for this GPU, is this GPU
healthy, does the host meet the image's NVIDIA_REQUIRE_* terms. Each returns
a value a rule can compare plus the details its message and fix can quote.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from packaging.version import InvalidVersion, Version

from preflight.knowledge import nvidia, torch_wheels


def _version(text) -> Optional[Version]:
    try:
        return Version(str(text).strip())
    except InvalidVersion:
        return None


# --- torch build and wheels ---------------------------------------------------

def torch_build(torch: Dict[str, Any]) -> str:
    """``cuda``, ``cpu``, ``rocm`` or ``missing``: which torch the environment has."""
    if not torch.get("installed"):
        return "missing"
    if torch.get("cuda"):
        return "cuda"
    if torch.get("hip"):
        return "rocm"
    return "cpu"


def _tag_cuda(tag: Optional[str]) -> Optional[Tuple[int, int]]:
    """"cu130" -> (13, 0), "cu118" -> (11, 8); None for any other tag."""
    digits = (tag or "")[2:]
    if not (tag or "").startswith("cu") or not digits.isdigit() or len(digits) < 2:
        return None
    return int(digits[:-1]), int(digits[-1])


def torch_tag(torch: Dict[str, Any]) -> Optional[str]:
    """The index tag of the installed torch's build (cu130, cpu, rocm6.2), from what its version.py states."""
    build = torch_build(torch)
    cuda = nvidia.parse_major_minor(torch.get("cuda"))
    if build == "cuda" and cuda:
        return "cu%d%d" % cuda
    if build == "cpu":
        return "cpu"
    return torch_wheels.local_tag(torch.get("version")) if build == "rocm" else None


def _required_line(requires_torch: Optional[str]) -> Optional[Tuple[int, int]]:
    """The torch release line a companion's metadata requires ("==2.13.0" or ">=2.14.0" -> (2, 14))."""
    match = re.search(r"(\d+)\.(\d+)", requires_torch or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def companion_build(found: Dict[str, Any], platform: Optional[str]) -> Tuple[Optional[str], str]:
    """(the index tag of a companion's build, how that is known). version.py's local part states it; PyPI's wheels
    carry none where the files were retagged, and are then the default build of their platform and release
    (Linux x86_64: the CUDA build the wheel data names; Windows, macOS: CPU). None when neither says."""
    tag = torch_wheels.local_tag(found.get("version"))
    if tag:
        return tag, ""
    default = torch_wheels.default_build(_required_line(found.get("requires_torch")), platform)
    if default is None:
        return None, ""
    return default, " (no local version tag: PyPI's %s build for %s)" % (
        "CPU" if default == "cpu" else "CUDA %d.%d" % _tag_cuda(default), platform or "this platform")


def installed_builds(torch: Dict[str, Any], companions: Dict[str, Dict[str, Any]],
                     platform: Optional[str]) -> Tuple[torch_wheels.Installed, ...]:
    """torch and its companions as installed (public version and build), for the pins that replace them."""
    found = []
    if torch.get("installed") and torch.get("version"):
        found.append(torch_wheels.Installed("torch", str(torch["version"]).split("+")[0], torch_tag(torch)))
    for name, facts in sorted((companions or {}).items()):
        if facts.get("version"):
            found.append(torch_wheels.Installed(name, str(facts["version"]).split("+")[0],
                                                companion_build(facts, platform)[0]))
    return tuple(found)


def companion_problems(torch: Dict[str, Any], companions: Dict[str, Dict[str, Any]],
                       platform: Optional[str] = None) -> List[str]:
    """Why torchvision or torchaudio, as installed, cannot load beside the installed torch: built for another torch
    release (their metadata requires one exactly), or for another build (a CUDA build beside a CPU torch fails
    with "operator torchvision::nms does not exist"; CUDA majors must match, as torchvision checks at import)."""
    if not torch.get("installed"):
        return []
    from preflight.knowledge import package_index

    torch_version = str(torch.get("version") or "")
    public = torch_version.split("+")[0]
    torch_cuda = nvidia.parse_major_minor(torch.get("cuda"))
    torch_words = "torch %s (%s)" % (torch_version or "?", "CUDA %d.%d" % torch_cuda if torch_cuda else
                                     "ROCm" if torch.get("hip") else "no CUDA")
    problems = []
    for name, found in sorted(companions.items()):
        version = found.get("version")
        required = found.get("requires_torch")
        if public and required and not package_index.satisfies(required, public):
            problems.append("%s %s requires torch %s, and %s is installed: importing it fails"
                            % (name, version or "?", required, torch_words))
            continue
        tag, how = companion_build(found, platform)
        cuda = _tag_cuda(tag)
        if cuda and not torch_cuda:
            problems.append("%s %s is a CUDA %d.%d build%s beside %s: importing it fails (\"operator "
                            "torchvision::nms does not exist\")" % ((name, version) + cuda + (how, torch_words)))
        elif cuda and torch_cuda and cuda[0] != torch_cuda[0]:
            problems.append("%s %s is built for CUDA %d.%d%s and %s for CUDA %d.%d: torchvision refuses to load "
                            "beside another CUDA major release" % ((name, version) + cuda + (how, torch_words) + torch_cuda))
        elif tag == "cpu" and torch_cuda:
            operators = "its operators (nms, roi_align) do not run on the GPU" if name == "torchvision" else \
                "its compiled operators do not run on the GPU"
            problems.append("%s %s is a CPU build%s beside %s: %s" % (name, version, how, torch_words, operators))
    return problems


# --- driver and CUDA ----------------------------------------------------------

def cuda_compat(driver_version: Optional[str], driver_cuda: Optional[str], torch_cuda: Optional[str]):
    """Can this driver run a torch built for ``torch_cuda``?

    ``ok``: the driver supports that CUDA release or newer.
    ``minor_version_compat``: same major release, driver above the family's
    minor-version-compatibility floor: runs, with a reduced feature set, and
    only through compiled kernels (no PTX JIT).
    ``driver_too_old``: it will fail ("CUDA driver version is insufficient").
    """
    need = nvidia.parse_major_minor(torch_cuda)
    have = nvidia.parse_major_minor(driver_cuda)
    required = nvidia.min_driver_for_cuda(need) if need else None
    details = {
        "torch_cuda": torch_cuda, "driver_cuda": driver_cuda, "driver_version": driver_version,
        "required_driver": required or "a driver newer than this table knows (see NVIDIA's CUDA release notes)",
        "compat_driver": nvidia.MINOR_VERSION_COMPAT_DRIVER.get(need[0]) if need else None,
    }
    if need is None or have is None:
        return "unknown", details
    if have >= need:
        return "ok", details
    floor = nvidia.MINOR_VERSION_COMPAT_DRIVER.get(need[0])
    driver = _version(driver_version)
    if have[0] == need[0] and floor and driver is not None and driver >= Version(floor):
        return "minor_version_compat", details
    return "driver_too_old", details


# --- torch kernels for a GPU --------------------------------------------------

_ARCH = r"^(sm|compute)_(\d+)(\d)([af]?)$"


def parse_arch_flag(flag: str):
    """``sm_86`` -> ("sm", (8, 6), ""); ``compute_90`` -> ("compute", (9, 0), ""); ``sm_100a`` -> ("sm", (10, 0), "a")."""
    match = re.match(_ARCH, flag.strip())
    if not match:
        return None
    kind, major, minor, suffix = match.groups()
    return kind, (int(major), int(minor)), suffix


def torch_kernels(arch_flags: Sequence[str], compute_capability: str, minor_version_compat: bool = False):
    """Does torch have code that runs on a GPU of this compute capability?

    Compiled ``sm_XY`` runs on X.Z when Z >= Y (same major; an ``a`` suffix
    only on exactly X.Y). Otherwise a ``compute_XY`` PTX entry no newer than
    the GPU works through JIT compilation by the driver, which a driver that
    runs this CUDA only under minor-version compatibility cannot do.
    """
    cc = nvidia.parse_major_minor(compute_capability)
    gpu_sm = "sm_%d%d" % cc if cc else "sm_?"
    details = {"torch_archs": " ".join(arch_flags) or "(none)", "gpu_sm": gpu_sm}
    if cc is None:
        return "unknown", details
    sass = ptx = False
    for flag in arch_flags:
        parsed = parse_arch_flag(flag)
        if not parsed:
            continue
        kind, (major, minor), suffix = parsed
        if kind == "sm":
            if suffix == "a":
                sass = sass or (major, minor) == cc
            else:
                sass = sass or (major == cc[0] and minor <= cc[1])
        elif (major, minor) <= cc:
            ptx = True
    if sass:
        return "sass", details
    if ptx:
        return ("ptx_needs_newer_driver" if minor_version_compat else "ptx"), details
    return "none", details


# --- GPU health and MIG -------------------------------------------------------

def health_problems(gpu: Dict[str, Any]) -> List[str]:
    """What makes this GPU unfit to run on; an empty list is healthy."""
    problems = []
    if gpu.get("lost"):
        problems.append("the GPU is lost (fell off the bus; see XID 79 in the kernel log)")
    ecc = gpu.get("ecc_uncorrected_volatile")
    if ecc:
        problems.append("%d uncorrected ECC error(s) since the driver loaded" % ecc)
    rows = gpu.get("remapped_rows") or {}
    if rows.get("failure"):
        problems.append("a row remapping failed (the GPU needs service)")
    if rows.get("pending"):
        problems.append("a row remapping is pending (reset the GPU to apply it)")
    if gpu.get("retired_pages_pending"):
        problems.append("retired pages are pending (reset the GPU to retire them)")
    return problems


def mig_state(gpu: Dict[str, Any], mig_selected: Sequence[int]) -> str:
    """not_supported, disabled, instance_selected (CUDA_VISIBLE_DEVICES names one), instances (MIG devices
    exist: CUDA enumerates them, as it does a slice handed to a container) or no_instance (nothing can run)."""
    mode = gpu.get("mig_mode")
    if mode is None:
        return "not_supported"
    if not mode.get("current"):
        return "disabled"
    if gpu.get("index") in mig_selected:
        return "instance_selected"
    return "instances" if gpu.get("mig_devices") else "no_instance"


# --- container requirements ---------------------------------------------------

_TERM = r"^([A-Za-z]+)(<=|>=|!=|=|<|>)(.+)$"
# What Go's strconv.ParseBool reads as true, exactly (the toolkit reads NVIDIA_DISABLE_REQUIRE with it):
# no trimming, no "yes" or "on"; anything it cannot parse leaves the checks on.
GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")


def requirements_apply(container: Dict[str, Any]) -> Optional[str]:
    """None when the image states requirements to check, else why not."""
    if container.get("NVIDIA_DISABLE_REQUIRE") in GO_TRUE:
        return "NVIDIA_DISABLE_REQUIRE=%s turns the requirement checks off" % container["NVIDIA_DISABLE_REQUIRE"]
    if not container.get("requirements") and not container.get("CUDA_VERSION"):
        return "the environment states no NVIDIA_REQUIRE_* or CUDA_VERSION"
    return None


def effective_requirements(container: Dict[str, Any]) -> Dict[str, str]:
    """The NVIDIA_REQUIRE_* variables, plus the ``cuda>=X.Y`` that CUDA_VERSION implies without NVIDIA_REQUIRE_CUDA."""
    requirements = dict(container.get("requirements") or {})
    cuda = nvidia.parse_major_minor(container.get("CUDA_VERSION"))
    if "NVIDIA_REQUIRE_CUDA" not in requirements and cuda:
        requirements["NVIDIA_REQUIRE_CUDA"] = "cuda>=%d.%d" % cuda
    return requirements


def _term_holds(term: str, host: Dict[str, Optional[str]]) -> bool:
    match = re.match(_TERM, term.strip())
    if not match:
        raise ValueError("cannot read the term %r (expected property, operator, value)" % term)
    prop, op, wanted = match.groups()
    prop = prop.lower()  # the toolkit reads property names case-insensitively
    if prop not in ("cuda", "driver", "arch", "brand"):
        return True  # the toolkit ignores properties it does not know
    have = host.get(prop)
    if have is None:
        return False
    if prop == "brand":
        left, right = have.lower(), wanted.strip().lower()
        if op not in ("=", "!="):
            raise ValueError("brand compares only with = or != in %r" % term)
    else:
        left, right = _version(have), _version(wanted.strip())
        if left is None or right is None:
            raise ValueError("%r is not a version in %r" % (wanted, term))
    return {
        "=": left == right, "!=": left != right, "<": left < right,
        "<=": left <= right, ">": left > right, ">=": left >= right,
    }[op]


def unsatisfied_requirements(container: Dict[str, Any], hosts: Sequence[Dict[str, Optional[str]]]) -> List[str]:
    """Each NVIDIA_REQUIRE_* variable some GPU given to the container fails.

    Inside one value, space-separated alternatives are ORed and the
    comma-separated terms of an alternative are ANDed (nvidia-container-toolkit).
    Each of ``hosts`` is one GPU as the toolkit sees it: ``cuda`` (the
    driver's CUDA), ``driver``, ``arch`` (its compute capability), ``brand``
    (lowercase) and ``name``; every requirement must hold for every GPU.
    """
    failed = []
    for name, value in sorted(effective_requirements(container).items()):
        alternatives = value.split()
        failing: List[str] = []
        try:
            for host in hosts:
                if alternatives and not any(all(_term_holds(term, host) for term in alternative.split(",") if term)
                                            for alternative in alternatives):
                    failing.append(host.get("name") or "?")
        except ValueError as exc:
            failed.append("%s: %s" % (name, exc))
            continue
        if failing:
            shown = value if len(value) <= 60 else alternatives[0] + " ..."
            which = "" if len(hosts) <= 1 else " (%s of %d GPUs: %s)" % (len(failing), len(hosts), ", ".join(
                sorted(set(failing))))
            failed.append("%s=%s%s" % (name, shown, which))
    return failed


def _capabilities(capabilities: Optional[str]) -> Optional[set]:
    """The capability names given, or None for unset or empty (the toolkit's default, utility and compute)."""
    if capabilities is None or not capabilities.strip():
        return None
    return {word.strip().lower() for word in capabilities.split(",") if word.strip()}


def gives_compute_devices(capabilities: Optional[str]) -> bool:
    """Whether the toolkit gives the container the compute device nodes (nvidia-uvm, nvidia-uvm-tools): only
    with the compute libraries, which compute, video (it implies compute) and all select, as does the default."""
    given = _capabilities(capabilities)
    return given is None or bool(given & {"compute", "video", "all"})


# The device nodes CUDA opens besides the GPUs' own (/dev/nvidiaN): the control device, and the unified
# memory device every CUDA context needs. nvidia-uvm-tools comes with nvidia-uvm; only tools read it.
CUDA_DEVICE_NODES = ("nvidiactl", "nvidia-uvm")
TOOLS_DEVICE_NODES = ("nvidia-uvm-tools",)


def missing_device_nodes(device_files: Sequence[str], wanted: Sequence[str]) -> List[str]:
    present = set(device_files)
    return ["/dev/" + name for name in wanted if name not in present]


def missing_capabilities(capabilities: Optional[str]) -> List[str]:
    """The driver capabilities a CUDA job needs that NVIDIA_DRIVER_CAPABILITIES leaves out (unset or empty:
    the toolkit's default, utility and compute)."""
    given = _capabilities(capabilities)
    if given is None or "all" in given:
        return []
    return [needed for needed in ("compute", "utility") if needed not in given]
