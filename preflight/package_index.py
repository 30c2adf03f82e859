"""What pip can install: PyPI's releases of every package a fix can pin, as recorded on one date.

The data is rules/knowledge/package-index.json, written by scripts/refresh_knowledge.py from PyPI's own index:
each release's Requires-Python and the CPython versions its binary wheels serve per platform (or that it is
pure Python), and the torch each torchvision requires. A pin is installable for a Python when some release
satisfies it, admits that Python, and has a wheel for it: without a wheel pip falls back to building from source,
which usually fails (no compiler, no headers). The file is read only when a printed command names a pin.

``as_of()`` (``preflight.shipped``) is the date the knowledge was taken (rules/knowledge/as-of.txt).
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from preflight.shipped import as_of  # the knowledge's date lives with the shipped data: every check reads it

INDEX_FILE = os.path.join("knowledge", "package-index.json")
DEFAULT_PLATFORM = "linux_x86_64"
# The CPython versions a printed command is judged for when the target Python is not known.
PYTHONS = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "3.15")

_index: Optional[Dict[str, Tuple[Tuple[str, ...], Tuple[bytes, ...]]]] = None


def _data_path(name: str) -> str:
    from preflight.shipped import data_dir

    return os.path.join(data_dir(), name)


STALE_AFTER_DAYS = 180


def now() -> float:
    """The clock the staleness note reads (a function, so that a test can set the date)."""
    import time

    return time.time()


def _days_since_epoch(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a date (the civil-from-days inverse; no time module parsing: start-up time)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def stale_note() -> Optional[str]:
    """One line when the knowledge is more than STALE_AFTER_DAYS old: newer releases may exist. Never a failure."""
    taken = as_of()
    if taken is None:
        return None
    year, month, day = (int(part) for part in taken.split("-"))
    age = int(now() // 86400) - _days_since_epoch(year, month, day)
    if age <= STALE_AFTER_DAYS:
        return None
    return ("preflight's knowledge of torch, driver and package releases is from %s (%d days ago): newer releases "
            "may exist that its fixes do not name; update preflight (pip install -U gpu-preflight, or git pull "
            "and pip install . in its checkout)" % (taken, age))


def _packages() -> Dict[str, Tuple[Tuple[str, ...], Tuple[bytes, ...]]]:
    """Canonical name -> (its versions oldest first, each release's record marshalled on its own): a question reads
    a few of the newest releases, so only those are unpacked (``_unpack``)."""
    global _index
    if _index is None:
        from preflight import cache, input_files
        from preflight.errors import PreflightError

        path = _data_path(INDEX_FILE)
        what, hint = "package index %s" % path, "reinstall preflight: the file ships with it"
        data = input_files.read_bytes(path, what, PreflightError, hint)
        _index = cache.parsed(data, lambda raw: _pack(input_files.parse_json(raw.decode("utf-8"), what,
                                                                             PreflightError, hint)), "package-index")
    return _index


def _pack(data: Any) -> Dict[str, Tuple[Tuple[str, ...], Tuple[bytes, ...]]]:
    """The index's JSON as the cache keeps it: canonical name -> (versions, each record marshalled)."""
    import marshal

    return {canonical(name): (tuple(releases), tuple(marshal.dumps(record) for record in releases.values()))
            for name, releases in ((data or {}).get("packages") or {}).items()}


@functools.lru_cache(maxsize=None)
def _unpack(packed: bytes) -> Dict[str, Any]:
    import marshal

    return marshal.loads(packed)


def canonical(name: str) -> str:
    """PEP 503's normalised name: Pillow, pillow and PIL-low are one project on the index (each run of '-', '_'
    and '.' one '-', lower case; in string operations: a regular expression costs start-up time to compile)."""
    name = name.replace("_", "-").replace(".", "-")
    while "--" in name:
        name = name.replace("--", "-")
    return name.lower()


def known(package: str) -> bool:
    return canonical(package) in _packages()


@functools.lru_cache(maxsize=None)
def _version(text: str):
    from preflight import versions

    try:
        return versions.parse(text)
    except versions.InvalidVersion:
        return None


@functools.lru_cache(maxsize=None)
def _specifier(text: str):
    """A Requires-Python or pin specifier, parsed once (plain clauses without packaging.specifiers' cost)."""
    from preflight.requirement import parse

    try:
        return parse(text)
    except ValueError:
        return None


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
    """(version, its text, its record marshalled), newest first: the file lists each package's releases oldest
    first (the refresh script sorts them), so only as many versions are parsed as a question needs."""
    versions, packed = _packages().get(canonical(package)) or ((), ())
    for position in range(len(versions) - 1, -1, -1):
        version = _version(versions[position])
        if version is not None:
            yield version, versions[position], packed[position]


def installable(requirement: str, python: str, platform: str = DEFAULT_PLATFORM) -> Optional[str]:
    """The newest release that satisfies ``requirement`` (``'Pillow<10'``) and has a wheel for ``python``; None when
    there is none (or the package is not in the snapshot)."""
    from preflight.requirement import split

    try:
        name, specifier = split(requirement)
    except (ValueError, Exception):
        return None
    for version, text, packed in _newest_first(name):
        if version.is_prerelease or not specifier.contains(version):
            continue
        if has_wheel(_unpack(packed), python, platform):
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
    versions, packed = _packages().get(canonical(package)) or ((), ())
    return {text: _unpack(record) for text, record in zip(versions, packed)}
