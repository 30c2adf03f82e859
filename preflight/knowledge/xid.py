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
_unlisted: Dict[str, Any] = {}


def catalogue() -> Dict[int, Xid]:
    global _catalogue
    if _catalogue is None:
        _catalogue = _load()
    return _catalogue


def describe(xid: int) -> Xid:
    """The catalogue's entry, or the catalogue's words for an Xid it does not list (its [unlisted] table)."""
    known = catalogue().get(xid)
    if known is not None:
        return known
    return Xid(xid, _unlisted["name"].replace("{id}", str(xid)), _unlisted["kind"], _unlisted["action"])


def _load() -> Dict[int, Xid]:
    from preflight.errors import PreflightError
    from preflight.knowledge.shipped import data_dir, knowledge

    path = os.path.join(data_dir(), DATA_FILE)
    data: Dict[str, Any] = knowledge(DATA_FILE, "Xid catalogue")
    unlisted = data.get("unlisted")
    if not isinstance(unlisted, dict) or unlisted.get("kind") not in KINDS or not all(
            isinstance(unlisted.get(key), str) for key in ("name", "action")):
        raise PreflightError("Xid catalogue %s: [unlisted] needs name, action and a kind of %s"
                             % (path, ", ".join(KINDS)))
    _unlisted.update(unlisted)
    found = {}
    for entry in data.get("xid", []):
        if entry.get("kind") not in KINDS:
            raise PreflightError("Xid catalogue %s: Xid %s has kind %r, not one of %s"
                                 % (path, entry.get("id"), entry.get("kind"), ", ".join(KINDS)))
        found[int(entry["id"])] = Xid(int(entry["id"]), entry["name"], entry["kind"], entry["action"])
    return found
