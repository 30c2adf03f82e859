"""Which torch to install: computed from the wheel availability data (rules/knowledge/pytorch-wheels.toml).

For a driver, the GPUs' compute capabilities and a Python version, ``choose``
finds the newest torch that a PyTorch wheel index really holds for that
Python, that has a torchvision released for it (the pair is data, never
arithmetic), whose CUDA the driver runs (fully, or under minor-version
compatibility) and whose wheels carry compiled kernels for every GPU. When
nothing can run, it says why and what the way out is (upgrade the driver,
the last torch for an old GPU, a newer Python), instead of naming an index
that cannot work.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from packaging.version import InvalidVersion, Version

from preflight.knowledge import nvidia, package_index

Minor = Tuple[int, int]  # a release line as the data lists it: torch 2.14, CUDA 12.6, compute capability 8.6
INDEX = "https://download.pytorch.org/whl/"
CPU = "cpu"  # the CPU index, https://download.pytorch.org/whl/cpu: every release, every Python PyPI has
DATA_FILE = os.path.join("knowledge", "pytorch-wheels.toml")


PLATFORM = "linux_x86_64"  # the one platform the data records; fixes for others point to pytorch.org


class Variant(NamedTuple):
    tag: str  # cu126
    cuda: Minor
    releases: Tuple[Minor, ...]  # the torch minor releases the index holds, as listed in the data
    archs: Tuple[Tuple[Minor, Tuple[Minor, ...]], ...]  # (from release, compute capabilities compiled)

    def archs_for(self, torch: Minor) -> Tuple[Minor, ...]:
        chosen: Tuple[Minor, ...] = ()
        for start, archs in self.archs:
            if torch >= start:
                chosen = archs
        return chosen

    def covers(self, torch: Minor, ccs: Sequence[Minor]) -> bool:
        """Compiled kernels for every GPU: sm_XY runs on X.Z when Z >= Y (same major)."""
        archs = self.archs_for(torch)
        return all(any(arch[0] == cc[0] and arch[1] <= cc[1] for arch in archs) for cc in ccs)

    @property
    def index_url(self) -> str:
        return INDEX + self.tag


class Release(NamedTuple):
    torch: Minor
    torchvision: Optional[str]  # "0.29"; None while no torchvision is released for it
    pythons: Tuple[Minor, ...]  # CPython versions with Linux x86_64 wheels
    pypi_cuda: Optional[Minor] = None  # the CUDA of PyPI's own Linux x86_64 wheels of this release


class Archived(NamedTuple):
    """The newest build for an old CUDA release that no index holds any more (pytorch.org's previous versions)."""

    cuda: Minor
    torch: str  # 1.8.1+cu101
    torchvision: str
    pythons: Tuple[Minor, ...]
    find_links: str  # "": PyPI's own wheels

    @property
    def command(self) -> str:
        links = " -f %s" % self.find_links if self.find_links else ""
        return "python -m pip install torch==%s torchvision==%s%s" % (self.torch, self.torchvision, links)


class Catalog(NamedTuple):
    releases: Dict[Minor, Release]
    variants: Tuple[Variant, ...]
    archived: Tuple[Archived, ...] = ()

    @property
    def pythons(self) -> Dict[Minor, Tuple[Minor, Minor]]:
        """torch minor -> (oldest, newest Python with wheels)."""
        return {torch: (release.pythons[0], release.pythons[-1]) for torch, release in self.releases.items()}

    def installable(self, variant: Variant, python: Optional[Minor]) -> List[Minor]:
        """The torch minor releases ``variant``'s index has for this Python (all, when it is unknown) that can be
        pinned: a torchvision was released for them, with a wheel for this Python too (torchvision's Pythons are
        its own: 0.20 has no wheel for 3.13, though torch 2.5 has)."""
        return [torch for torch in variant.releases
                if self.releases[torch].torchvision is not None
                and (python is None or (python in self.releases[torch].pythons
                                        and companion_release("torchvision", torch, python) is not None))]

    def releases_of(self, variant: Variant, python: Optional[Minor]) -> List[Minor]:
        """Every torch minor release the index holds for this Python, with a torchvision or not."""
        return [torch for torch in variant.releases if python is None or python in self.releases[torch].pythons]


class Choice(NamedTuple):
    """A torch to install: the index that holds it, the release line, and the torchvision built for it."""

    variant: Variant
    torch: Minor
    torchvision: str
    runs: str  # "fully", or "minor_version_compat" (a newer CUDA 12.x/13.x than the driver's, reduced features)
    notes: Tuple[str, ...]

    @property
    def index_url(self) -> str:
        return self.variant.index_url

    @property
    def torch_text(self) -> str:
        return "%d.%d" % self.torch

    def pins(self, installed: Sequence["Installed"] = (), python: Optional[Minor] = None) -> str:
        """The pair (and torchaudio where it is installed) as pip requirements for this index: see ``pins``."""
        wanted = {"torch": self.torch_text, "torchvision": self.torchvision}
        for package in installed:
            if package.name == "torchaudio":
                release = companion_release("torchaudio", self.torch, python)
                if release is not None:
                    wanted["torchaudio"] = release
        return pins(wanted, self.variant.tag, installed)


class Installed(NamedTuple):
    """torch, torchvision or torchaudio as installed: its public version and its build (the index tag it is: cpu,
    cu130, rocm6.2; None when the files do not say and the platform's default is not known)."""

    name: str
    version: str
    build: Optional[str]


def pins(wanted: Dict[str, str], tag: str, installed: Sequence[Installed] = ()) -> str:
    """``{"torch": "2.14", "torchvision": "0.29"}`` as requirements for index ``tag``: each release line as
    ``'torch==2.14.*'`` (pip takes the newest patch the index holds), except for a package installed in that line
    as another build: a requirement its public version meets would leave it in place ("already satisfied"), so it
    is pinned to that version with the index's tag (``'torch==2.14.1+cu126'``), which only the new build meets. No
    uninstall is ever needed: pip resolves and downloads everything before it replaces anything."""
    have = {package.name: package for package in installed}
    words = []
    for name, line in wanted.items():
        package = have.get(name)
        if package is not None and package.build != tag and _in_line(package.version, line):
            words.append("'%s==%s+%s'" % (name, package.version, tag))
        else:
            words.append("'%s==%s.*'" % (name, line))
    return " ".join(words)


def _in_line(version: str, line: str) -> bool:
    """Whether public version ``version`` (2.14.1) is a release of line ``line`` (2.14)."""
    try:
        return Version(version).release[:2] == Version(line).release[:2]
    except InvalidVersion:
        return False


def pair_pins(torch: Minor, torchvision: str) -> str:
    """``'torch==2.14.*' 'torchvision==0.29.*'``: a torch minor release and the torchvision built for it, as pip
    requirements (any patch release of each), for an index none of them is installed from."""
    return pins({"torch": "%d.%d" % torch, "torchvision": torchvision}, "")


def local_tag(version: Optional[str]) -> Optional[str]:
    """The build a version's local part names: "2.13.0+cpu" -> "cpu", "0.28.0+cu130" -> "cu130"; None without one."""
    local = str(version or "").partition("+")[2].lower()
    return local or None


def default_build(torch: Optional[Minor], platform: Optional[str]) -> Optional[str]:
    """The build of a torch release's wheels on PyPI, which carry no local version tag: on Linux x86_64 the CUDA
    build the data names for that release (cu130 for 2.13), on Windows and macOS the CPU build; None where that is
    not known (another platform, a release the data does not list)."""
    if platform in ("windows", "darwin") or (platform or "").startswith("darwin"):
        return CPU
    if platform not in (None, PLATFORM) or torch is None:
        return None
    release = catalog().releases.get(torch)
    return "cu%d%d" % release.pypi_cuda if release is not None and release.pypi_cuda else None


class NoChoice(NamedTuple):
    """Nothing installable runs here: why, and the way out."""

    reason: str
    way_out: str


_catalog: Optional[Catalog] = None


def catalog() -> Catalog:
    global _catalog
    if _catalog is None:
        _catalog = _load()
    return _catalog


def _version(text: Any) -> Minor:
    parsed = nvidia.parse_major_minor(text)
    if parsed is None:
        raise ValueError("%r is not a version" % (text,))
    return parsed


def _load() -> Catalog:
    from preflight.knowledge.shipped import knowledge

    data = knowledge(DATA_FILE, "wheel data")
    releases = {}
    for entry in data["release"]:
        torch = _version(entry["torch"])
        torchvision = entry["torchvision"] if entry["torchvision"] != "none" else None
        releases[torch] = Release(torch, torchvision, tuple(_version(p) for p in entry["python"][PLATFORM]),
                                  _version(entry["pypi_cuda"]))
    variants = tuple(
        Variant(v["tag"], _version(v["cuda"]), tuple(_version(t) for t in v["torch"]),
                tuple((_version(a["from"]), tuple(_version(cc) for cc in a["sm"])) for a in v["archs"]))
        for v in data["variant"])
    archived = tuple(Archived(_version(a["cuda"]), a["torch"], a["torchvision"],
                              tuple(_version(p) for p in a["python"]), a["find_links"])
                     for a in data.get("archived", []))
    return Catalog(releases, variants, archived)


def driver_runs(variant: Variant, driver_version: Optional[str], driver_cuda: Optional[Minor]) -> Optional[str]:
    """"fully", "minor_version_compat" or None: whether a driver runs wheels built for ``variant.cuda``."""
    if driver_cuda is None:
        return None
    if driver_cuda >= variant.cuda:
        return "fully"
    floor = nvidia.MINOR_VERSION_COMPAT_DRIVER.get(variant.cuda[0])
    if floor and driver_cuda[0] == variant.cuda[0] and driver_version and _at_least(driver_version, floor):
        return "minor_version_compat"
    return None


def _at_least(version: str, floor: str) -> bool:
    try:
        return Version(version) >= Version(floor)
    except InvalidVersion:
        return False


CURRENT_DRIVER = ("580.65.06", (13, 0))  # a current branch (R580): what "upgrade the driver" gives


def _span(pythons: Sequence[Minor]) -> str:
    return "%d.%d to %d.%d" % (pythons[0] + pythons[-1]) if len(pythons) > 1 else "%d.%d" % pythons[0]


def choose(driver_version: Optional[str], driver_cuda: Optional[str], ccs: Sequence[Optional[str]] = (),
           python: Optional[str] = None, platform: Optional[str] = None, driver_known: bool = True,
           version_shown: bool = True) -> "Choice | NoChoice":
    """The newest torch that runs here and can be pinned with its torchvision. Unknown driver: a current branch
    (R580) is assumed. ``platform``: where the job runs (linux_x86_64 when unknown). ``driver_known``: False when
    the driver given stands in for one nobody knows, so no note speaks of the driver's limits. ``version_shown``:
    False when the driver version is only the oldest that reports ``driver_cuda`` (a log said the CUDA alone), so
    no text names it."""
    data = catalog()
    if platform not in (None, PLATFORM):
        return NoChoice("preflight's wheel data covers Linux x86_64, and this job runs on %s" % platform,
                        "choose the build for %s at https://pytorch.org/get-started/locally/" % platform)
    gpus = [cc for cc in (nvidia.parse_major_minor(c) for c in ccs) if cc]
    py = nvidia.parse_major_minor(python)
    have = nvidia.parse_major_minor(driver_cuda)
    if have is None:
        driver_version, have = CURRENT_DRIVER
    found = _search(data, driver_version, have, gpus, py)
    newer_driver = _search(data, CURRENT_DRIVER[0], CURRENT_DRIVER[1], gpus, py)
    any_python = _search(data, driver_version, have, gpus, None) if py is not None else None
    if found is None:
        return _nothing(data, driver_version if version_shown else None, have, gpus, py, newer_driver, any_python)
    variant, torch, runs = found
    notes = []
    if runs == "minor_version_compat" and driver_known:
        notes.append("cu%d%d runs on the driver (CUDA %d.%d) only under minor-version compatibility, with a reduced "
                     "feature set" % (variant.cuda + have))
    if newer_driver and newer_driver[1] > torch and driver_known:
        notes.append("the driver (CUDA %d.%d) limits torch to %d.%d; driver 580 or newer runs torch %d.%d"
                     % (have + torch + newer_driver[1]))
    if any_python and any_python[1] > torch:
        newest = data.releases[any_python[1]].pythons
        notes.append("torch %d.%d is the newest for Python %d.%d; torch %d.%d needs Python %s"
                     % (torch + py + any_python[1] + (_span(newest),)))
    if py is None:
        notes.append("torch %d.%d has wheels for Python %s" % (torch + (_span(data.releases[torch].pythons),)))
    without_gpu = _search(data, driver_version, have, [], py)
    if gpus and without_gpu and without_gpu[1] > torch and not (newer_driver and newer_driver[1] > torch):
        notes.append("torch %d.%d is the last with kernels for compute capability %s"
                     % (torch + (", ".join("%d.%d" % g for g in gpus),)))
    unpaired = [later for v in data.variants if driver_runs(v, driver_version, have)
                for later in data.releases_of(v, py)
                if later > torch and data.releases[later].torchvision is None and v.covers(later, gpus)]
    if unpaired:
        notes.append("torch %d.%d is newer, but no torchvision has been released for it yet" % max(unpaired))
    return Choice(variant, torch, data.releases[torch].torchvision, runs, tuple(notes))


def _search(data: Catalog, driver_version: Optional[str], have: Minor, gpus: List[Minor],
            python: Optional[Minor]) -> Optional[Tuple[Variant, Minor, str]]:
    """(variant, torch, how the driver runs it): the newest torch first, then full support, then the newer CUDA."""
    best: Optional[Tuple[Tuple[Minor, int, Minor], Tuple[Variant, Minor, str]]] = None
    for variant in data.variants:
        runs = driver_runs(variant, driver_version, have)
        if runs is None:
            continue
        for torch in reversed(data.installable(variant, python)):
            if variant.covers(torch, gpus):
                rank = (torch, 1 if runs == "fully" else 0, variant.cuda)
                if best is None or rank > best[0]:
                    best = (rank, (variant, torch, runs))
                break
    return best[1] if best else None


def _nothing(data: Catalog, driver_version: Optional[str], have: Minor, gpus: List[Minor],
             python: Optional[Minor], newer_driver, any_python) -> NoChoice:
    """Why no wheel runs, and the way out that would make one run."""
    shown = ("driver %s (CUDA %d.%d)" % ((driver_version,) + have) if driver_version
             else "a driver that supports CUDA %d.%d at most" % have)
    if newer_driver is not None:
        old_gpu = gpus and min(gpus) < (7, 5)
        which = " and ".join(w for w, known in (("this GPU", gpus), ("Python %s" % ".".join(map(str, python or ())),
                                                                  python)) if known)
        return NoChoice("no current PyTorch wheel%s runs on %s" % (" for " + which if which else "", shown),
                        "upgrade the NVIDIA driver to the 580 branch%s; then torch %d.%d (%s) runs"
                        % (" (the last branch for GPUs older than Turing)" if old_gpu else " or newer",
                           newer_driver[1][0], newer_driver[1][1], newer_driver[0].tag))
    if any_python is not None:
        needs = data.releases[any_python[1]].pythons
        return NoChoice("no torch wheel that runs here is built for Python %d.%d" % python,
                        "use Python %s, for torch %d.%d (%s)" % ((_span(needs),) + any_python[1] + (any_python[0].tag,)))
    for cc in gpus:
        if not any(v.covers(t, [cc]) for v in data.variants for t in data.installable(v, None)):
            return NoChoice("no PyTorch wheel has kernels for compute capability %d.%d" % cc,
                            "run on a GPU of compute capability 5.0 or newer, or on the CPU")
    current = _search(data, CURRENT_DRIVER[0], CURRENT_DRIVER[1], [], None)
    pythons = data.releases[current[1]].pythons if current else ()
    return NoChoice("no current PyTorch wheel runs on %s with this GPU and Python" % shown,
                    "upgrade the NVIDIA driver to the 580 branch and use Python %s" % _span(pythons)
                    if pythons else "upgrade the NVIDIA driver to the 580 branch")


def pythons_text() -> str:
    """'3.10 to 3.14': the Pythons of the newest torch that can be pinned (it has a torchvision)."""
    data = catalog()
    newest = max(torch for torch, release in data.releases.items() if release.torchvision is not None)
    return _span(data.releases[newest].pythons)


def available(tag: str, torch: Optional[Minor], python: Optional[Minor]) -> bool:
    """Whether index ``tag`` holds torch ``torch`` (a minor release; None: any) for ``python`` (None: any)."""
    data = catalog()
    if tag == CPU:
        return any(python is None or python in release.pythons
                   for minor, release in data.releases.items() if torch is None or minor == torch)
    for variant in data.variants:
        if variant.tag == tag:
            releases = data.releases_of(variant, python)
            return bool(releases) if torch is None else torch in releases
    return False


def torchvision_for(torch: Minor) -> Optional[str]:
    """The torchvision minor release built for a torch minor release; None when none is released (yet)."""
    release = catalog().releases.get(torch)
    return release.torchvision if release else None


def companion_release(name: str, torch: Minor, python: Optional[Minor]) -> Optional[str]:
    """The minor release of companion ``name`` (torchvision, torchaudio) built for torch minor release ``torch``
    that has a Linux x86_64 wheel for ``python`` (any when unknown), from the data: torchvision's pairing from the
    wheel data, torchaudio's from the torch its releases require on PyPI. None when there is none."""
    if name == "torchvision":
        minor = torchvision_for(torch)
        candidates = [minor] if minor else []
    else:  # the releases, newest first, whose torch requirement some patch release of this torch meets
        patches = ["%d.%d.%d" % (torch + (patch,)) for patch in range(10)]
        candidates = [".".join(version.split(".")[:2])
                      for version, record in reversed(list(package_index.releases(name).items()))
                      if record.get("requires_torch") and any(
                          package_index.satisfies(record["requires_torch"], patch) for patch in patches)]
    for minor in dict.fromkeys(candidates):
        pin = "%s==%s.*" % (name, minor)
        if python is None and package_index.pythons_for(pin) or \
                python is not None and package_index.installable(pin, "%d.%d" % python):
            return minor
    return None


def companions_for(torch_version: Optional[str], torch_build: Optional[str], names: Sequence[str],
                   python: Optional[str] = None, installed: Sequence[Installed] = ()) -> Dict[str, Optional[str]]:
    """What installs companions ``names`` (torchvision, torchaudio) built for the installed torch (``2.13.0+cpu``
    of build ``cpu``, or ``2.11.0+cu130`` of ``cu130``): {companion_pins, companion_index_url} from that torch's own
    index, or {companion_unpaired} saying why no command can be given. torch is pinned beside them to its installed
    release and build, which it meets: pip keeps that torch, and cannot resolve a companion built for another; a
    companion installed as another build of the right release is pinned with the index's tag (``pins``)."""
    torch = nvidia.parse_major_minor((torch_version or "").split("+")[0])
    py = nvidia.parse_major_minor(python)
    tag = torch_build if torch_build == CPU or (torch_build or "").startswith("cu") else None
    wanted: Dict[str, str] = {}
    missing = []
    if torch and tag and available(tag, torch, py):
        wanted["torch"] = "%d.%d" % torch
        for name in names:
            release = companion_release(name, torch, py)
            if release is None:
                missing.append(name)
            else:
                wanted[name] = release
    if wanted and not missing:
        return {"companion_pins": pins(wanted, tag, installed), "companion_index_url": INDEX + tag,
                "companion_unpaired": None}
    elsewhere = []  # the release built for this torch, on Pythons other than this one
    for name in missing:
        release = companion_release(name, torch, None) if torch else None
        if release is not None:
            elsewhere.append("%s %s, built for torch %d.%d, has wheels for %s only" % (
                (name, release) + torch + (package_index.span(package_index.pythons_for("%s==%s.*" % (name, release))),)))
    return {"companion_pins": None, "companion_index_url": None,
            "companion_unpaired": "; ".join(elsewhere) + ": use one of those Pythons, or a newer torch with its "
                                  "pair" if elsewhere else
                                  "preflight's wheel data holds no %s for torch %s (%s build) with a wheel for %s: "
                                  "install the release PyTorch pairs with it "
                                  "(https://pytorch.org/get-started/previous-versions/)"
                                  % (" and ".join(missing or names), torch_version or "?", torch_build or "unknown",
                                     "Python %s" % python if python else "this Python")}


def archived_for(driver_cuda: Optional[str], python: Optional[str] = None) -> Optional[Archived]:
    """The newest archived build a driver that supports CUDA ``driver_cuda`` at most runs, for ``python`` (any
    when unknown); None when an index above holds one (choose() names it) or nothing fits."""
    have = nvidia.parse_major_minor(driver_cuda)
    py = nvidia.parse_major_minor(python)
    data = catalog()
    if have is None or any(driver_runs(v, None, have) for v in data.variants):
        return None
    fitting = [a for a in data.archived if a.cuda <= have and (py is None or py in a.pythons)]
    return max(fitting, key=lambda a: Version(a.torch), default=None)


# With no driver known, a build is chosen for the oldest driver that runs a current one: a CUDA 12.x driver at the
# minor-version compatibility floor (NVIDIA's CUDA compatibility guide), which runs every cu12x build.
UNKNOWN_DRIVER = (nvidia.MINOR_VERSION_COMPAT_DRIVER[12], (12, 0))


def fix_values(driver_version: Optional[str], driver_cuda: Optional[str], ccs: Sequence[Optional[str]] = (),
               python: Optional[str] = None, platform: Optional[str] = None,
               run_cuda: Optional[str] = None, installed: Sequence[Installed] = ()) -> Dict[str, Optional[str]]:
    """See ``_fix_values``; a fresh dict each time, so a caller may change its copy."""
    return dict(_fix_values(driver_version, driver_cuda, tuple(ccs), python, platform, run_cuda, tuple(installed)))


@functools.lru_cache(maxsize=1024)  # a pure function of the wheel data: a fleet asks it once per kind of node
def _fix_values(driver_version: Optional[str], driver_cuda: Optional[str], ccs: Tuple[Optional[str], ...],
                python: Optional[str], platform: Optional[str], run_cuda: Optional[str],
                installed: Tuple[Installed, ...]) -> Dict[str, Optional[str]]:
    """The values fixes use to name a torch to install ({torch_pins}, {index_url}, {wheel_basis}, ...), or, when
    nothing can run here, {no_wheel} with the way out and None for the rest (so no fix names an index that cannot
    work). The driver decides the build: with no driver known, the CUDA a run's own torch was built for
    (``run_cuda``: that driver ran it) stands in for it, else the oldest driver a current build runs on; the fix
    then names the driver each build needs instead of assuming one. ``installed``: torch and its companions as
    they are (a torchaudio there is replaced with the pair; one of the chosen release but another build is pinned
    with the index's tag, so that pip replaces it)."""
    cuda = nvidia.parse_major_minor(driver_cuda)
    version_shown = driver_version is not None
    if driver_version is None and cuda in nvidia.CUDA_MIN_DRIVER:
        # Only the CUDA version is known (a log's "found version 11040"): the oldest driver that reports it.
        driver_version = nvidia.CUDA_MIN_DRIVER[cuda]
    basis = "the newest the driver, the GPU and Python here run"
    if cuda is None:
        ran = nvidia.parse_major_minor(run_cuda)
        if ran is not None and ran in nvidia.CUDA_MIN_DRIVER:
            driver_version, driver_cuda = nvidia.CUDA_MIN_DRIVER[ran], "%d.%d" % ran
            basis = ("the newest for a driver that runs CUDA %d.%d, as the run's own torch needed (the driver is not "
                     "known)" % ran)
        else:
            driver_version, driver_cuda = UNKNOWN_DRIVER[0], "%d.%d" % UNKNOWN_DRIVER[1]
            basis = "the driver is not known: this build runs on any driver from %s" % UNKNOWN_DRIVER[0]
    found = choose(driver_version, driver_cuda, ccs, python, platform, driver_known=cuda is not None,
                   version_shown=version_shown)
    if isinstance(found, NoChoice):
        old = archived_for(driver_cuda, python)
        archived = None
        if old is not None:
            archived = ("If the driver cannot be upgraded, the newest torch built for a CUDA it runs is torch %s with "
                        "torchvision %s (CUDA %d.%d, Python %s, from pytorch.org's previous versions): %s; code "
                        "written for a current torch may not run on it"
                        % ((old.torch, old.torchvision) + old.cuda + (_span(old.pythons), old.command)))
        return {"no_wheel": "%s: %s." % (found.reason[0].upper() + found.reason[1:], found.way_out),
                "archived_torch": archived, "wheel_basis": None,
                "index_url": None, "arch_index_url": None, "torch_pins": None, "wheel_cuda": None,
                "wheel_torch": None, "wheel_tag": None, "wheel_runs": None, "wheel_note": None}
    notes = list(found.notes)
    if cuda is None:
        notes.append("%s needs driver %s or newer (or %s under minor-version compatibility); nvidia-smi's header "
                     "shows the CUDA the driver runs" % (found.variant.tag, nvidia.CUDA_MIN_DRIVER.get(
                         found.variant.cuda, "?"), nvidia.MINOR_VERSION_COMPAT_DRIVER.get(found.variant.cuda[0], "?")))
        newest = choose(CURRENT_DRIVER[0], "%d.%d" % CURRENT_DRIVER[1], ccs, python, platform)
        if isinstance(newest, Choice) and (newest.torch, newest.variant.cuda) > (found.torch, found.variant.cuda):
            notes.append("with driver %s or newer, torch %s (%s) is newer"
                         % (nvidia.CUDA_MIN_DRIVER.get(newest.variant.cuda, CURRENT_DRIVER[0]), newest.torch_text,
                            newest.variant.tag))
    return {
        "no_wheel": None, "archived_torch": None, "index_url": found.index_url, "arch_index_url": found.index_url,
        "torch_pins": found.pins(installed, nvidia.parse_major_minor(python)), "wheel_cuda": "%d.%d" % found.variant.cuda, "wheel_torch": found.torch_text,
        "wheel_tag": found.variant.tag, "wheel_basis": basis,
        "wheel_runs": "fully" if found.runs == "fully" else "under minor-version compatibility",
        "wheel_note": "; ".join(notes) + "." if notes else None,
    }
