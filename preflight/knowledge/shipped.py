"""The data that ships with preflight: where it lives (the default rules, fixes, failure catalog and knowledge
files), its parse, and its date.

Parsing TOML is pure Python and was most of a check's start-up; a fresh container has no cache to remember a parse
in. So every shipped TOML file is parsed when preflight is released: ``scripts/make_parsed_rules.py`` writes
one file per TOML file under ``rules/parsed/`` (its length and CRC-32, and its tables; ``failures/known.toml``'s
in ``parsed/failures/known.json``), which ship beside the files, and a test keeps them equal to them. One parse per
file, so that a check reads the parse of the files it needs and not the failure catalog's. (A checksum, not a cryptographic hash: it tells an edited file from the one parsed; the
installed package's folder is what others cannot write.) A file whose bytes are not the ones parsed then (a checkout being edited) is parsed as it is now; any
other TOML file (``--rules``, the site configuration) is always parsed when it is read.
"""

from __future__ import annotations

import functools
import json
import os
import zlib
from typing import Any, Callable, Dict, Optional

from preflight.errors import PreflightError
from preflight.files import input_files

PARSED = "parsed"  # the folder of release-time parses under the data folder
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the preflight package's folder


def data_dir() -> str:
    """rules/ of a source tree, or the installed copy (the package preflight.default_rules)."""
    package = PACKAGE
    installed = os.path.join(package, "default_rules")
    if os.path.isdir(installed):
        return installed
    checkout = os.path.join(os.path.dirname(package), "rules")  # running from a source tree
    if os.path.isdir(checkout):
        return checkout
    raise PreflightError("the default rules are missing from this installation (%s)" % installed,
                         "reinstall preflight: pip install --force-reinstall preflight")


def parse_path(relative: str) -> str:
    """Where the release-time parse of the shipped file ``relative`` (e.g. failures/known.toml) is kept."""
    return os.path.join(PARSED, *(relative[:-len(".toml")] + ".json").split("/"))


@functools.lru_cache(maxsize=None)
def _parsed(relative: str) -> Optional[Dict[str, Any]]:
    """The release-time parse of the shipped file ``relative``: {"key": of its bytes, "data": its tables}; None when
    it is missing or damaged (the file is then parsed when read). Callers never change what it holds."""
    try:
        with open(os.path.join(data_dir(), parse_path(relative)), "rb") as handle:
            entry = json.loads(handle.read())
    except (OSError, ValueError, PreflightError):
        return None
    return entry if isinstance(entry, dict) else None


def content_key(data: bytes) -> str:
    """What tells these bytes from others: their length and CRC-32."""
    return "%d-%08x" % (len(data), zlib.crc32(data))


def read_toml(path: str, what: str, error: Callable[..., PreflightError], kind: str = "a TOML file",
              limit: int = input_files.MAX_BYTES) -> Dict[str, Any]:
    """The tables of the TOML file at ``path``: a shipped file's from its release-time parse when its bytes are the
    ones parsed, else parsed now. ``error(message, hint)`` makes the exception for a file that cannot be read;
    ValueError says why one is not TOML (``kind`` names what it should be)."""
    raw = input_files.read_bytes(path, what, error, limit=limit)
    relative = os.path.relpath(os.path.abspath(path), data_dir()).replace(os.sep, "/")
    shipped = _parsed(relative) if relative.endswith(".toml") and not relative.startswith("../") else None
    if shipped is not None and shipped.get("key") == content_key(raw):
        return shipped["data"]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError("not UTF-8 text (%s)" % exc)
    return input_files.parse_toml(text, kind)


def knowledge(name: str, what: str) -> Dict[str, Any]:
    """A shipped knowledge file's tables (``name`` under the data folder, e.g. knowledge/xid.toml); a missing or
    broken one is exit 2 with the advice to reinstall."""
    path = os.path.join(data_dir(), name)
    hint = "reinstall preflight: the file ships with it"
    try:
        return read_toml(path, "%s %s" % (what, path), PreflightError)
    except ValueError as exc:
        raise PreflightError("%s %s: %s" % (what, path, exc), hint)


def parse_all() -> Dict[str, Any]:
    """What ``rules/parsed/`` holds: every TOML file under the data folder, parsed now, by its path there."""
    folder = data_dir()
    files = {}
    for root, _, names in sorted(os.walk(folder)):
        for name in sorted(names):
            if name.endswith(".toml"):
                path = os.path.join(root, name)
                with open(path, "rb") as handle:
                    raw = handle.read()
                files[os.path.relpath(path, folder).replace(os.sep, "/")] = {
                    "key": content_key(raw),
                    "data": input_files.parse_toml(raw.decode("utf-8"), path)}
    return {"format": 1, "files": files}


RECORDINGS = "recordings"  # NVML recordings of real and synthetic machines, shipped for --nvml-fixture NAME


def recordings_dir() -> str:
    return os.path.join(PACKAGE, RECORDINGS)


def recording_names() -> list:
    try:
        return sorted(name[:-len(".json")] for name in os.listdir(recordings_dir()) if name.endswith(".json"))
    except OSError:
        return []


def recording(name_or_path: str) -> str:
    """The file ``--nvml-fixture`` names: a path as given, else a shipped recording by its file name, its name or a
    unique part of it (``h200`` is h200-driver580); exit 2 with the names when it is neither."""
    if os.sep in name_or_path or os.path.exists(name_or_path):
        return name_or_path
    if name_or_path.endswith(".json"):  # a file name: here, else a shipped recording's (h200-driver580.json)
        shipped = name_or_path[:-len(".json")] in recording_names()
        return os.path.join(recordings_dir(), name_or_path) if shipped else name_or_path
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
        with open(os.path.join(data_dir(), "knowledge", "as-of.txt"), encoding="ascii") as handle:
            text = handle.read(64).strip()
    except (OSError, ValueError, PreflightError):
        return None
    parts = text.split("-")
    ok = [len(part) for part in parts] == [4, 2, 2] and all(part.isdigit() and part.isascii() for part in parts)
    return text if ok else None
