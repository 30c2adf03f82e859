"""Versions, ordered as PEP 440 orders them (535.104.05 > 535 > 530.30.02; 12.0 == 12).

Plain release numbers (a driver's 580.95.05, a CUDA 12.4, Python's 3.11.7) are compared here; anything else
(2.5.1+cu124, 1.0rc1) is handed to ``packaging.version``, whose import alone costs about 4 ms of a check's
start-up, and a node check compares only plain numbers. ``Release`` and ``packaging.version.Version`` compare
with each other, so either side may be either.
"""

from __future__ import annotations

from typing import Any, Tuple


class InvalidVersion(ValueError):
    """Not a version PEP 440 can read."""


class Release:
    """A plain release number: digits separated by dots."""

    __slots__ = ("parts",)

    def __init__(self, parts: Tuple[int, ...]) -> None:
        self.parts = parts

    @property
    def _key(self) -> Tuple[int, ...]:
        parts = self.parts
        while len(parts) > 1 and parts[-1] == 0:  # PEP 440: trailing zeros do not count
            parts = parts[:-1]
        return parts

    def _pair(self, other: Any):
        if isinstance(other, Release):
            return self._key, other._key
        if type(other).__module__ == "packaging.version":  # packaging is imported already: a Version exists
            from packaging.version import Version

            return Version(str(self)), other
        return None

    def __lt__(self, other: Any) -> bool:
        pair = self._pair(other)
        return NotImplemented if pair is None else pair[0] < pair[1]

    def __le__(self, other: Any) -> bool:
        pair = self._pair(other)
        return NotImplemented if pair is None else pair[0] <= pair[1]

    def __gt__(self, other: Any) -> bool:
        pair = self._pair(other)
        return NotImplemented if pair is None else pair[0] > pair[1]

    def __ge__(self, other: Any) -> bool:
        pair = self._pair(other)
        return NotImplemented if pair is None else pair[0] >= pair[1]

    def __eq__(self, other: Any) -> bool:
        pair = self._pair(other)
        return NotImplemented if pair is None else pair[0] == pair[1]

    def __hash__(self) -> int:
        return hash(self._key)

    def __str__(self) -> str:
        return ".".join(str(part) for part in self.parts)  # as packaging writes it: 535.104.05 -> 535.104.5

    def __repr__(self) -> str:
        return "<Version('%s')>" % self


def parse(text: Any):
    """A comparable version; InvalidVersion when PEP 440 cannot read ``text``."""
    text = str(text).strip()
    parts = text.split(".")
    if 0 < len(parts) <= 16 and all(part.isascii() and part.isdigit() and len(part) <= 18 for part in parts):
        return Release(tuple(int(part) for part in parts))
    from packaging.version import InvalidVersion as PackagingInvalid, Version

    try:
        return Version(text)
    except PackagingInvalid:
        raise InvalidVersion(text)
