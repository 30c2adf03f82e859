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
        if not isinstance(data.get("results"), list):
            return Unreadable(path, "a preflight.report/1 without a results list")
        return Document(path, "report", data)
    if schema == "preflight.facts/1":
        return Document(path, "facts", data)
    return Unreadable(path, "neither a preflight report nor a facts snapshot (schema %r)" % (schema,))
