"""What pip can install: PyPI's releases of every package a fix can pin, as recorded on one date.

The data is rules/knowledge/package-index.json, written by scripts/refresh_knowledge.py from PyPI's own index:
each release's Requires-Python and the CPython versions its binary wheels serve per platform (or that it is
pure Python), and the torch each torchvision requires. A pin is installable for a Python when some release
satisfies it, admits that Python, and has a wheel for it: without a wheel pip falls back to building from source,
which usually fails (no compiler, no headers). The file is read only when a printed command names a pin.

``as_of()`` (``preflight.knowledge.shipped``) is the date the knowledge was taken (rules/knowledge/as-of.txt).
"""

from __future__ import annotations

import datetime
import functools
import os
import re
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from preflight.knowledge.shipped import as_of, data_dir

INDEX_FILE = os.path.join("knowledge", "package-index.json")
DEFAULT_PLATFORM = "linux_x86_64"
# The CPython versions a printed command is judged for when the target Python is not known.
PYTHONS = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "3.15")

STALE_AFTER_DAYS = 180


def now() -> float:
    """The clock the staleness note reads (a function, so that a test can set the date)."""
    return time.time()


def stale_note() -> Optional[str]:
    """One line when the knowledge is more than STALE_AFTER_DAYS old: newer releases may exist. Never a failure."""
    taken = as_of()
    if taken is None:
        return None
    age = (datetime.datetime.fromtimestamp(now(), datetime.timezone.utc).date() - datetime.date.fromisoformat(taken)).days
    if age <= STALE_AFTER_DAYS:
        return None
    return ("preflight's knowledge of torch, driver and package releases is from %s (%d days ago): newer releases "
            "may exist that its fixes do not name; update preflight (pip install -U gpu-preflight, or git pull "
            "and pip install . in its checkout)" % (taken, age))


@functools.lru_cache(maxsize=None)
def _packages() -> Dict[str, Dict[str, Dict[str, Any]]]:
    """Canonical name -> {version: release record}, oldest first (the refresh script sorts them)."""
    from preflight.errors import PreflightError
    from preflight.files import input_files

    path = os.path.join(data_dir(), INDEX_FILE)
    what, hint = "package index %s" % path, "reinstall preflight: the file ships with it"
    data = input_files.parse_json(input_files.read_bytes(path, what, PreflightError, hint).decode("utf-8"), what,
                                  PreflightError, hint)
    return {canonical(name): releases for name, releases in ((data or {}).get("packages") or {}).items()}


def canonical(name: str) -> str:
    """PEP 503's normalised name: Pillow, pillow and PIL-low are one project on the index."""
    return re.sub(r"[-_.]+", "-", name).lower()


# A requirement as rule files and fixes write one: a PEP 508 name, extras, a version specifier (no URL, no marker:
# packaging.requirements reads those too, at the cost of importing its marker and platform-tag machinery).
_REQUIREMENT = r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(\[[^\]]*\])?\s*(.*?)\s*$"


def split_requirement(text: str) -> Tuple[str, str, SpecifierSet]:
    """``'opencv-python[ffmpeg]>=4'`` -> ("opencv-python", "[ffmpeg]", SpecifierSet(">=4")); ValueError says what is
    not a requirement."""
    match = re.match(_REQUIREMENT, text)
    if not match:
        raise ValueError("%r is not a package name (optionally with a version such as numpy>=1.18)" % (text,))
    name, extras, specifier = match.groups()
    try:
        return name, extras or "", SpecifierSet(specifier)
    except InvalidSpecifier:
        raise ValueError("%r: %r is not a version specifier (such as >=1.18 or <2.4)" % (text, specifier))


def known(package: str) -> bool:
    return canonical(package) in _packages()


@functools.lru_cache(maxsize=None)
def _version(text: str) -> Optional[Version]:
    try:
        return Version(text)
    except InvalidVersion:
        return None


@functools.lru_cache(maxsize=None)
def _specifier(text: str) -> Optional[SpecifierSet]:
    """A Requires-Python or pin specifier, parsed once."""
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        return None


def satisfies(specifier: str, version: str) -> bool:
    """Whether ``version`` meets ``specifier`` (``'>=2.11'``, ``'==2.9.1'``); False when either cannot be read."""
    parsed, wanted = _specifier(specifier), _version(version)
    return parsed is not None and wanted is not None and parsed.contains(wanted, prereleases=True)


def has_wheel(record: Dict[str, Any], python: str, platform: str = DEFAULT_PLATFORM) -> bool:
    """Whether a release has a wheel pip would take on CPython ``python`` (X.Y) on ``platform``."""
    requires = record.get("requires_python")
    if requires:
        specifier = _specifier(requires)
        if specifier is not None and not specifier.contains(_version(python)):
            return False
    if record.get("pure"):
        return True
    for tag in (record.get("wheels") or {}).get(platform) or ():
        if tag == "py3" or tag == python:
            return True
        if tag.endswith("+") and _version(tag[:-1]) <= _version(python):  # abi3: this and newer
            return True
    return False


def _newest_first(package: str):
    """(version, its text, its record), newest first."""
    releases = _packages().get(canonical(package)) or {}
    for text in reversed(list(releases)):
        version = _version(text)
        if version is not None:
            yield version, text, releases[text]


@functools.lru_cache(maxsize=4096)  # the snapshot is fixed: fleet asks the same few questions for every node
def installable(requirement: str, python: str, platform: str = DEFAULT_PLATFORM) -> Optional[str]:
    """The newest release that satisfies ``requirement`` (``'Pillow<10'``) and has a wheel for ``python``; None when
    there is none (or the package is not in the snapshot)."""
    try:
        name, _, specifier = split_requirement(requirement)
    except ValueError:
        return None
    for version, text, record in _newest_first(name):
        if version.is_prerelease or not specifier.contains(version, prereleases=True):
            continue
        if has_wheel(record, python, platform):
            return text
    return None


def pythons_for(requirement: str, platform: str = DEFAULT_PLATFORM, pythons: Sequence[str] = PYTHONS) -> List[str]:
    """The Pythons among ``pythons`` that ``requirement`` can be installed on."""
    return [python for python in pythons if installable(requirement, python, platform)]


def span(pythons: Sequence[str]) -> str:
    """['3.8', '3.9', '3.10'] -> 'Python 3.8 to 3.10'; one -> 'Python 3.8'; none -> 'no Python'."""
    if not pythons:
        return "no Python"
    return "Python %s" % pythons[0] if len(pythons) == 1 else "Python %s to %s" % (pythons[0], pythons[-1])


def requires_torch(torchvision: str) -> Optional[str]:
    """The torch requirement of a torchvision release (``'==2.14.0'``), as its wheel's metadata says."""
    return releases("torchvision").get(torchvision, {}).get("requires_torch")


def releases(package: str) -> Dict[str, Any]:
    """Version -> record of every release of ``package``, oldest first (empty when it is not in the snapshot)."""
    return dict(_packages().get(canonical(package)) or {})
