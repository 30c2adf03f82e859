"""Distributions a pip line must know more of than their names (rules/knowledge/distributions.toml).

``same_module``: the distributions that install one import package (opencv-python, opencv-python-headless and
the contrib builds all install ``cv2``): an installed one meets a requirement for another, and a fix installs
only the group's chosen one, never a second. ``torch_only``: distributions whose one requirement is torch (thop),
which a fix installs with ``--no-deps`` so that a missing torch is never pulled from PyPI behind its back.
``pin_with``: a pin an installed release imposes on another package (numpy<2 beside a torch older than 2.3).
"""

from __future__ import annotations

import functools
import os
from typing import Dict, List, NamedTuple, Optional, Tuple

from preflight.knowledge import package_index

DATA_FILE = os.path.join("knowledge", "distributions.toml")


class SameModule(NamedTuple):
    """Distributions that install one import package, and the one a fix installs."""

    module: str
    dists: Tuple[str, ...]
    install: str
    why: str


class PinWith(NamedTuple):
    """A pin that an installed release of another distribution imposes (numpy<2 beside torch<2.3)."""

    installed: str  # a requirement: "torch<2.3"
    pin: str  # "numpy<2"
    why: str


class Knowledge(NamedTuple):
    groups: Dict[str, SameModule]  # canonical distribution name -> its group
    torch_only: Tuple[str, ...]  # canonical names
    pins_with: Tuple[PinWith, ...]


@functools.lru_cache(maxsize=None)
def _load() -> Knowledge:
    from preflight.errors import PreflightError
    from preflight.knowledge.shipped import knowledge

    data = knowledge(DATA_FILE, "distribution knowledge")
    groups: Dict[str, SameModule] = {}
    for entry in data.get("same_module", []):
        group = SameModule(entry["import"], tuple(entry["dists"]), entry["install"], entry["why"])
        if package_index.canonical(group.install) not in {package_index.canonical(d) for d in group.dists}:
            raise PreflightError("%s: install = %r is not among its dists" % (DATA_FILE, group.install))
        for dist in group.dists:
            groups[package_index.canonical(dist)] = group
    torch_only = tuple(package_index.canonical(entry["dist"]) for entry in data.get("torch_only", []))
    pins_with = tuple(PinWith(entry["installed"], entry["pin"], entry["why"]) for entry in data.get("pin_with", []))
    return Knowledge(groups, torch_only, pins_with)


def same_module(dist: str) -> Optional[SameModule]:
    """The group ``dist`` belongs to; None when it installs a module of its own."""
    return _load().groups.get(package_index.canonical(dist))


def torch_only(dist: str) -> bool:
    """Whether torch is ``dist``'s one requirement (a fix installs it with --no-deps)."""
    return package_index.canonical(dist) in _load().torch_only


def pins_with(dist: str, installed: Dict[str, str]) -> List[PinWith]:
    """The pins on ``dist`` that the installed distributions impose (``installed``: canonical name -> version)."""
    found = []
    for rule in _load().pins_with:
        pinned = package_index.split_requirement(rule.pin)[0]
        if package_index.canonical(pinned) != package_index.canonical(dist):
            continue
        name, _, specifier = package_index.split_requirement(rule.installed)
        version = installed.get(package_index.canonical(name))
        if version and package_index.satisfies(str(specifier), version.split("+")[0]):
            found.append(rule)
    return found
