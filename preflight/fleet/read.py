"""Reading a fleet's files one at a time: reports (preflight.report/1) and facts snapshots (preflight.facts/1).

Paths are files or folders (walked, in name order); ``.json`` and ``.json.gz`` files are read, others in a
folder are passed over, a file named on the command line is always tried. Each file is read, judged and
dropped before the next (``entries`` is a generator), so memory does not grow with the files' sizes.
A file that cannot be read, is not JSON, or is neither kind is an ``Unreadable`` entry, never an exception.
"""

from __future__ import annotations

import gzip
import json
import os
import stat
from typing import Any, Dict, Iterator, NamedTuple, Sequence, Union

MAX_FILE_BYTES = 64 << 20  # a facts snapshot is tens of kilobytes; anything this large is not one


class Document(NamedTuple):
    path: str
    kind: str  # "report" or "facts"
    data: Dict[str, Any]


class Unreadable(NamedTuple):
    path: str
    reason: str


def _files(paths: Sequence[str]) -> Iterator[str]:
    for path in paths:
        if os.path.isdir(path):
            for folder, subfolders, names in os.walk(path):
                subfolders.sort()
                for name in sorted(names):
                    if name.endswith((".json", ".json.gz")):
                        yield os.path.join(folder, name)
        else:
            yield path


def entries(paths: Sequence[str]) -> Iterator[Union[Document, Unreadable]]:
    for path in _files(paths):
        yield read(path)


def read(path: str) -> Union[Document, Unreadable]:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a device or pipe could be endless or never answer
            return Unreadable(path, "not a regular file (a device, pipe or socket): give report or snapshot files")
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as handle:
                raw = handle.read(MAX_FILE_BYTES + 1)
        else:
            with open(path, "rb") as handle:
                raw = handle.read(MAX_FILE_BYTES + 1)
    except (OSError, EOFError) as exc:  # gzip raises OSError (BadGzipFile) or EOFError on a damaged file
        return Unreadable(path, getattr(exc, "strerror", None) or str(exc) or type(exc).__name__)
    if len(raw) > MAX_FILE_BYTES:
        return Unreadable(path, "larger than %d MiB: not a preflight report or snapshot" % (MAX_FILE_BYTES >> 20))
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return Unreadable(path, "not JSON (%s)" % str(exc).split(":")[0])
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema == "preflight.report/1":
        problem = report_problem(data)
        if problem:
            return Unreadable(path, "a preflight.report/1 of the wrong shape: %s" % problem)
        return Document(path, "report", data)
    if schema == "preflight.facts/1":
        return Document(path, "facts", data)
    return Unreadable(path, "neither a preflight report nor a facts snapshot (schema %r)" % (schema,))


_STATUSES = ("pass", "fail", "warn", "skip", "error")
_SEVERITIES = ("error", "warning", "info")


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def report_problem(data: Dict[str, Any]) -> str:
    """What is wrong with a report read from disk, in the parts the fleet uses ("" when nothing): a file another
    tool or an older preflight wrote, or one damaged by hand, is listed as unreadable, never a crash."""
    if not isinstance(data.get("ok"), bool):
        return "'ok' must be true or false"
    for key in ("host", "collected_at"):
        if data.get(key) is not None and not isinstance(data.get(key), str):
            return "'%s' must be a string" % key
    if data.get("inventory") is not None and not isinstance(data.get("inventory"), dict):
        return "'inventory' must be an object"
    results = data.get("results")
    if not isinstance(results, list):
        return "'results' must be a list"
    for index, result in enumerate(results):
        where = "results[%d]" % index
        if not isinstance(result, dict):
            return "%s must be an object" % where
        for key in ("id", "subject", "message"):
            if not isinstance(result.get(key), str) or (key == "id" and not result[key]):
                return "%s.%s must be a string" % (where, key)
        if result.get("title") is not None and not isinstance(result.get("title"), str):
            return "%s.title must be a string" % where
        if result.get("status") not in _STATUSES:
            return "%s.status must be one of %s, found %r" % (where, ", ".join(_STATUSES), result.get("status"))
        if result.get("severity") not in _SEVERITIES:
            return "%s.severity must be one of %s, found %r" % (where, ", ".join(_SEVERITIES), result.get("severity"))
        fix = result.get("fix")
        if fix is not None and not (isinstance(fix, dict) and isinstance(fix.get("title"), str)
                                    and _strings(fix.get("steps", [])) and _strings(fix.get("commands", []))):
            return "%s.fix must be null or an object with a title, steps and commands (strings)" % where
    return ""
