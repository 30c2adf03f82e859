"""Node lists in Slurm's compressed form (``gpu-b[001-040,044]``), what admins paste into scontrol and pdsh.

Folded by ClusterShell's NodeSet (the library behind clush and nodeset(1)), so the form is the one those
tools and Slurm read back. Only plain host names are folded; a name with other characters (a file's name,
``gpu01 #2`` for a second file of one host) is listed as it is, after the folded ones.
"""

from __future__ import annotations

import re
from typing import Iterable, List

_PLAIN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


def fold(names: Iterable[str], limit: int = 0) -> str:
    """The names as one comma-separated list with numbered runs folded; ``limit``: at most that many unfolded
    names are listed (the rest counted)."""
    names = list(names)
    plain = [name for name in names if re.match(_PLAIN, name)]
    others = [name for name in names if not re.match(_PLAIN, name)]
    parts: List[str] = []
    if plain:
        from ClusterShell.NodeSet import NodeSet, NodeSetException
        from ClusterShell.RangeSet import RangeSetException

        try:
            parts.append(str(NodeSet.fromlist(plain)))
        except (NodeSetException, RangeSetException):  # names it cannot fold are listed, never lost
            others = plain + others
    if limit and len(others) > limit:
        parts += others[:limit] + ["and %d more" % (len(others) - limit)]
    else:
        parts += others
    return ",".join(parts)


def expand(folded: str) -> List[str]:
    """The names a folded list stands for (tests and readers of fleet's output)."""
    from ClusterShell.NodeSet import NodeSet

    return list(NodeSet(folded))
