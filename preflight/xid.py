"""NVIDIA's Xid catalogue (rules/knowledge/xid.toml): what each Xid means for the node.

``kind`` is "node" (the node fails: reset, reboot or service), "watch" (a warning sign) or "application" (the
program's own fault: listed, never a node failure). Unknown Xids count as "watch".
"""

from __future__ import annotations

import os
from typing import Any, Dict, NamedTuple, Optional

DATA_FILE = os.path.join("knowledge", "xid.toml")
KINDS = ("node", "watch", "application")


class Xid(NamedTuple):
    id: int
    name: str
    kind: str
    action: str


_catalogue: Optional[Dict[int, Xid]] = None


def catalogue() -> Dict[int, Xid]:
    global _catalogue
    if _catalogue is None:
        _catalogue = _load()
    return _catalogue


def describe(xid: int) -> Xid:
    return catalogue().get(xid) or Xid(xid, "Xid %d (not in preflight's catalogue)" % xid, "watch",
                                       "Look it up in NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors).")


def _load() -> Dict[int, Xid]:
    from preflight import input_files
    from preflight.cache import parsed_toml
    from preflight.errors import PreflightError
    from preflight.shipped import data_dir

    path = os.path.join(data_dir(), DATA_FILE)
    data: Dict[str, Any] = parsed_toml(input_files.read_bytes(path, "Xid catalogue %s" % path, PreflightError),
                                       input_files.parse_toml)
    found = {}
    for entry in data.get("xid", []):
        if entry.get("kind") not in KINDS:
            raise PreflightError("Xid catalogue %s: Xid %s has kind %r, not one of %s"
                                 % (path, entry.get("id"), entry.get("kind"), ", ".join(KINDS)))
        found[int(entry["id"])] = Xid(int(entry["id"]), entry["name"], entry["kind"], entry["action"])
    return found
