"""Where a failure's message is written: the project, the source file, and the releases that print each wording.

A ``[[failure]]`` or ``[[family]]`` entry may list them, read from the emitter's own source, one per wording::

    emitted = [
      { project = "pip", file = "src/pip/_internal/exceptions.py", versions = ">=25.1",
        says = "error: resolution-too-deep" },
      { project = "pip", file = "src/pip/_vendor/resolvelib/resolvers.py", versions = ">=20.3,<25.1",
        says = "pip._vendor.resolvelib.resolvers.ResolutionTooDeep: 2000000" },
    ]

``versions`` is a PEP 440 specifier of the project's releases that print ``says``; ``says`` is the message as
they print it, and the entry must recognise it: it is one of the entry's examples (checked when a family loads, and
by tests/test_diagnose.py for every failure). A new release that words the message differently is then one more
row, and a wording the entry misses is a failing test, not a silent miss.
"""

from __future__ import annotations

from typing import Any, List, NamedTuple

KEYS = {"project", "file", "versions", "says"}


class Emitter(NamedTuple):
    project: str  # as its package index or repository names it: numpy, pip, containerd, nccl
    file: str  # the source file that writes the message, in the project's repository
    versions: str  # the releases that print ``says`` (a PEP 440 specifier)
    says: str  # the message as those releases print it

    def label(self) -> str:
        """``pip >=25.1: src/pip/_internal/exceptions.py``"""
        return "%s %s: %s" % (self.project, self.versions, self.file)


def read(entry, raw: Any) -> List[Emitter]:
    """The entry's ``emitted`` list; an entry error says what is wrong with one."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if raw is None:
        return []
    if not isinstance(raw, list):
        raise entry.error("'emitted' must be a list of {project, file, versions, says} tables", key="emitted")
    emitters = []
    for index, item in enumerate(raw):
        where = "emitted[%d]" % index
        if not isinstance(item, dict) or set(item) != KEYS or not all(isinstance(v, str) and v.strip()
                                                                       for v in item.values()):
            raise entry.error("%s must have exactly project, file, versions and says, each a non-empty string"
                              % where, key="emitted")
        try:
            SpecifierSet(item["versions"])
        except InvalidSpecifier:
            raise entry.error("%s: versions %r is not a version specifier (such as '>=20.3,<25.1')"
                              % (where, item["versions"]), key="emitted")
        emitters.append(Emitter(item["project"], item["file"], item["versions"], item["says"]))
    return emitters
