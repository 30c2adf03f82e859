"""Where the data that ships with preflight lives: the default rules, fixes, failure catalog and knowledge files."""

from __future__ import annotations

import os
from typing import Optional

from preflight.errors import PreflightError


def data_dir() -> str:
    """rules/ of a source tree, or the installed copy (the package preflight.default_rules)."""
    package = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(package, "default_rules")
    if os.path.isdir(installed):
        return installed
    checkout = os.path.join(os.path.dirname(package), "rules")  # running from a source tree
    if os.path.isdir(checkout):
        return checkout
    raise PreflightError("the default rules are missing from this installation (%s)" % installed,
                         "reinstall preflight: pip install --force-reinstall preflight")


RECORDINGS = "recordings"  # NVML recordings of real and synthetic machines, shipped for --nvml-fixture NAME


def recordings_dir() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), RECORDINGS)


def recording_names() -> list:
    try:
        return sorted(name[:-len(".json")] for name in os.listdir(recordings_dir()) if name.endswith(".json"))
    except OSError:
        return []


def recording(name_or_path: str) -> str:
    """The file ``--nvml-fixture`` names: a path as given, else a shipped recording by its name or a unique part of
    it (``h200`` is h200-driver580); exit 2 with the names when it is neither."""
    if os.sep in name_or_path or os.path.exists(name_or_path) or name_or_path.endswith(".json"):
        return name_or_path
    names = recording_names()
    found = [n for n in names if n == name_or_path] or [n for n in names if name_or_path.lower() in n.lower()]
    if len(found) == 1:
        return os.path.join(recordings_dir(), found[0] + ".json")
    from preflight.errors import FixtureError

    raise FixtureError("--nvml-fixture %s: %s" % (
        name_or_path, "no such file, and no shipped recording is named like it" if not found else
        "more than one shipped recording is named like it (%s)" % ", ".join(found)),
        "give a recording file, or one of the shipped ones: %s" % ", ".join(names))


def as_of() -> Optional[str]:
    """YYYY-MM-DD: when the package and driver knowledge (rules/knowledge/) was last taken; None when the file is
    missing. Read on every run (the snapshot and the report carry it)."""
    try:
        with open(os.path.join(data_dir(), "knowledge", "as-of.txt"), "rb") as handle:
            text = handle.read(64).decode("ascii").strip()  # not open(encoding=): that imports the codec's module
    except (OSError, ValueError, PreflightError):
        return None
    parts = text.split("-")
    ok = [len(part) for part in parts] == [4, 2, 2] and all(part.isdigit() and part.isascii() for part in parts)
    return text if ok else None
