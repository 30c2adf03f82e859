"""Printed pip commands, checked against what exists before anyone sees them.

A fix may print ``python -m pip install 'Pillow<10'``; on Python 3.12 no Pillow older than 10 has a wheel, so pip
would try to build one from source and fail. ``review`` reads every pip install command of a rendered fix and,
for the job's Python, takes out each requirement that no release with a wheel for it satisfies
(rules/knowledge/package-index.json), drops a command left with nothing to install, and returns a step saying
why and what works instead (rules/knowledge/pins.toml). When the job's Python is not known, a pin that only some
Pythons can install is kept with a comment naming them. Commands that install from a PyTorch index are the wheel
chooser's (torch_wheels), which only picks what that index holds.
"""

from __future__ import annotations

import os
import shlex
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from packaging.version import Version

from preflight.knowledge import package_index

PINS_FILE = os.path.join("knowledge", "pins.toml")
# pip install options that take a value (the value is not a requirement).
VALUED = {"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-r", "--requirement", "-c", "--constraint",
           "-t", "--target", "--prefix", "--root", "--platform", "--python-version", "--implementation", "--abi",
           "--src", "--upgrade-strategy", "--progress-bar", "--cache-dir", "--log", "--timeout", "--retries",
           "--trusted-host", "--proxy", "--cert", "--client-cert", "--config-settings", "-C", "--global-option",
           "--no-binary", "--only-binary", "-e", "--editable"}
_GENERIC = ("No release satisfying {requirement} has a wheel for Python {python} (pip would try to build one from "
            "source, which usually fails); use {pythons}, or leave the pin out.")

_loaded: Optional[Dict[str, str]] = None


def _alternatives() -> Dict[str, str]:
    global _loaded
    if _loaded is None:
        from preflight.knowledge.shipped import knowledge

        data = knowledge(PINS_FILE, "pin knowledge")
        _loaded = {entry["requirement"]: entry["instead"] for entry in data.get("pin", [])}
    return _loaded


def short_python(version: Optional[str]) -> Optional[str]:
    """'3.12.1' -> '3.12'; None or nonsense -> None."""
    if not version:
        return None
    parts = str(version).strip().split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return "%d.%d" % (int(parts[0]), int(parts[1]))


class Install:
    """One ``pip install`` in a command: where it is, and its requirements."""

    def __init__(self, words: List[str], start: int) -> None:
        self.words = words
        self.start = start  # index of the first word after "install"
        self.requirements: List[int] = []  # indices of requirement words
        skip = False
        for index in range(start, len(words)):
            word = words[index]
            if skip:
                skip = False
                continue
            if word.startswith("-"):
                skip = word in VALUED  # "--index-url=URL" carries its value
                continue
            self.requirements.append(index)

    @property
    def pytorch_index(self) -> bool:
        return any("download.pytorch.org" in word for word in self.words)


def installs(command: str) -> List[Tuple[str, Optional[Install], str]]:
    """The command split at ``&&`` into (segment, its pip install or None, separator after it); a comment stays
    with the last segment."""
    body, hash_mark, comment = command.partition("  #")
    pieces = body.split("&&")
    found = []
    for number, piece in enumerate(pieces):
        try:
            words = shlex.split(piece)
        except ValueError:
            words = []
        install = None
        for index, word in enumerate(words[:-1]):
            if word == "install" and index > 0 and words[index - 1] in ("pip", "pip3") or \
                    (word == "install" and index > 1 and words[index - 1] == "pip" and words[index - 2] == "-m"):
                install = Install(words, index + 1)
                break
        found.append((piece, install, "&&" if number < len(pieces) - 1 else (hash_mark + comment)))
    return found


def review(commands: List[str], python: Optional[str], platform: Optional[str] = None) -> Tuple[List[str], List[str]]:
    """(commands as they can run, steps to add) for the job's Python (X.Y or X.Y.Z; None: not known)."""

    python = short_python(python)
    platform = platform or package_index.DEFAULT_PLATFORM
    kept: List[str] = []
    steps: List[str] = []
    for command in commands:
        if "install" not in command or "pip" not in command:
            kept.append(command)
            continue
        segments = installs(command)
        changed = False
        comments: List[str] = []
        out_segments: List[str] = []
        for piece, install, after in segments:
            if install is None or install.pytorch_index:
                out_segments.append(piece.strip())
                continue
            dropped = []
            for index in install.requirements:
                requirement = install.words[index]
                if not package_index.known(_name(requirement)):
                    continue  # not a package the snapshot covers (a path, a URL): judged by the tests, not here
                if python is not None:
                    if package_index.installable(requirement, python, platform) is None:
                        dropped.append(index)
                        steps.append(_instead(requirement, python, platform))
                else:
                    pythons = package_index.pythons_for(requirement, platform)
                    if pythons != list(package_index.PYTHONS):
                        comments.append("%s: %s only" % (requirement, package_index.span(pythons)))
            if dropped:
                changed = True
                words = [w for i, w in enumerate(install.words) if i not in dropped]
                if len(words) == len(install.words) - len(install.requirements):  # nothing left to install
                    out_segments.append("")
                    continue
                piece = " ".join(shlex.quote(word) for word in words)
            out_segments.append(piece.strip())
        if changed:
            remaining = [segment for segment in out_segments if segment]
            if not any(_install_of(segment) is not None for segment in remaining):
                continue  # it installed nothing else: no command is better than a half one
            comment = segments[-1][2].strip()
            kept.append(" && ".join(remaining) + ("  " + comment if comment else ""))
            continue
        if comments:
            command = command.rstrip() + ("  # " if "  #" not in command else "; ") + "; ".join(comments)
        kept.append(command)
    return kept, steps


def _install_of(segment: str) -> Optional[Install]:
    return installs(segment)[0][1] if segment else None


def _name(requirement: str) -> str:
    try:
        return package_index.split_requirement(requirement)[0]
    except ValueError:
        return requirement


def _instead(requirement: str, python: str, platform: str) -> str:

    text = _alternatives().get(requirement)
    pythons = package_index.span(package_index.pythons_for(requirement, platform))
    if text is None:
        text = _GENERIC
    else:
        text = "No release satisfying %s has a wheel for Python %s (pip would try to build it from source, which " \
               "usually fails). %s" % (requirement, python, text)
    for name, value in (("requirement", requirement), ("python", python), ("pythons", pythons)):
        text = text.replace("{%s}" % name, value)
    return text


class Wanted(NamedTuple):
    """A requirement a fix wants installed: the pip requirement (``'Pillow<10'``), whether it is only recommended
    (its pin may be left out where no release meeting it has a wheel), and why it is pinned ("" when it is not)."""

    requirement: str
    optional: bool = False
    why: str = ""


class Line(NamedTuple):
    """What one fix installs, as pip lines can take it: ``install`` in one transaction, ``no_deps`` (packages whose
    one requirement is torch) with --no-deps after it, and the reasons for the pins the lines keep, once each."""

    install: List[str]
    no_deps: List[str]
    reasons: List[str]


def install_line(wanted: Sequence[Wanted], python: Optional[str], platform: Optional[str] = None) -> Line:
    """The requirements of ``wanted`` merged per distribution (``Pillow`` and ``Pillow<10`` are one ``Pillow<10``;
    pip would otherwise be given the package twice), for the job's Python where it is known: an optional pin that
    leaves no release with a wheel for it is dropped with its reason (the package itself is still installed)."""
    from preflight.knowledge import distributions

    python = short_python(python)
    platform = platform or package_index.DEFAULT_PLATFORM
    by_name: Dict[str, List[Wanted]] = {}
    for item in wanted:
        by_name.setdefault(package_index.canonical(_name(item.requirement)), []).append(item)
    install: List[str] = []
    no_deps: List[str] = []
    reasons: List[str] = []
    for items in by_name.values():
        name = _name(items[0].requirement)
        kept = _merged(name, items)
        if python is not None and package_index.installable(kept, python, platform) is None:
            required = [item for item in items if not item.optional]
            if required:
                kept, items = _merged(name, required), required
        (no_deps if distributions.torch_only(name) else install).append(kept)
        if _specifier(kept):
            for item in items:
                reason = "%s: %s" % (item.requirement, item.why) if item.why and _specifier(item.requirement) else ""
                if reason and reason not in reasons:
                    reasons.append(reason)
    return Line(install, no_deps, reasons)


def _specifier(requirement: str) -> str:
    try:
        return str(package_index.split_requirement(requirement)[2])
    except ValueError:
        return ""


def _merged(name: str, items: Sequence[Wanted]) -> str:
    """``name`` with every specifier of ``items`` (pip requires all of them), a bound that another of the same
    direction implies left out (``numpy<2`` and ``numpy<2.4`` are ``numpy<2``)."""
    from packaging.specifiers import Specifier, SpecifierSet

    kept: Dict[str, Specifier] = {}
    others = []
    for item in items:
        try:
            specifiers = package_index.split_requirement(item.requirement)[2]
        except ValueError:
            return item.requirement
        for specifier in specifiers:
            tightest = {"<": min, "<=": min, ">": max, ">=": max}.get(specifier.operator)
            if tightest is None or "*" in specifier.version or "+" in specifier.version:
                others.append(specifier)
                continue
            held = kept.get(specifier.operator)
            kept[specifier.operator] = specifier if held is None else \
                tightest(held, specifier, key=lambda s: Version(s.version))
    combined = SpecifierSet(",".join(str(s) for s in list(kept.values()) + others))
    return name + str(combined)


def merge_requirements(requirements: Sequence[str]) -> List[str]:
    """Requirements for one pip install: each distribution once (and of distributions that install one module,
    the first named), with every specifier given for it; in the order first named."""
    from preflight.knowledge import distributions

    groups: Dict[str, Tuple[str, List[Wanted]]] = {}
    for requirement in requirements:
        name = _name(requirement)
        group = distributions.same_module(name)
        key = "module " + group.module if group else package_index.canonical(name)
        groups.setdefault(key, (name, []))[1].append(Wanted(requirement))
    return [_merged(name, items) for name, items in groups.values()]


TORCH_BUILDS = ("torch", "torchvision", "torchaudio")


def known_without_torch(requirement: str) -> bool:
    """Whether pip can install ``requirement`` from PyPI without pulling torch: a distribution the package knowledge
    covers that is not torch, one of its companions, or one whose one requirement is torch."""
    from preflight.knowledge import distributions

    name = _name(requirement)
    return package_index.known(name) and package_index.canonical(name) not in TORCH_BUILDS \
        and not distributions.torch_only(name)
