"""Versions, ordered as PEP 440 orders them (535.104.05 > 535 > 530.30.02; 12.0 == 12; 1.0 < 1.0.post1 < 1.0.1).

Plain release numbers (a driver's 580.95.05, a CUDA 12.4, Python's 3.11.7, a package's 2.3.1), and post-releases
of them written as PyPI lists them (0.1.1.post2209072238), are compared here; anything else (2.5.1+cu124, 1.0rc1,
1.0-1) is handed to ``packaging.version``, whose import alone costs about 4 ms of a check's start-up (a tenth of
what preflight adds to its two libraries' import), and a check of installed packages mostly meets plain numbers.
``Release`` and ``packaging.version.Version`` compare with each other, so either side may be either, and a
Release answers the questions ``preflight.requirement`` asks of a version (is it a pre- or post-release, its
public and base versions).
"""

from __future__ import annotations

from typing import Any, Optional, Tuple


class InvalidVersion(ValueError):
    """Not a version PEP 440 can read."""


class Release:
    """A plain release number (digits separated by dots), or a post-release of one (``.postN``)."""

    __slots__ = ("parts", "post")

    is_prerelease = False
    is_devrelease = False
    local = None

    def __init__(self, parts: Tuple[int, ...], post: Optional[int] = None) -> None:
        self.parts = parts
        self.post = post

    @property
    def _key(self) -> Tuple[Tuple[int, ...], int]:
        parts = self.parts
        while len(parts) > 1 and parts[-1] == 0:  # PEP 440: trailing zeros do not count
            parts = parts[:-1]
        return parts, -1 if self.post is None else self.post  # a post-release sorts after its release

    @property
    def is_postrelease(self) -> bool:
        return self.post is not None

    @property
    def base_version(self) -> str:
        return ".".join(str(part) for part in self.parts)

    @property
    def public(self) -> str:
        return str(self)

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

    def __str__(self) -> str:  # as packaging writes it: 535.104.05 -> 535.104.5
        return self.base_version if self.post is None else "%s.post%d" % (self.base_version, self.post)

    def __repr__(self) -> str:
        return "<Version('%s')>" % self


def parse(text: Any):
    """A comparable version; InvalidVersion when PEP 440 cannot read ``text``."""
    text = str(text).strip()
    release, post = text, None
    head, marker, tail = text.rpartition(".post")
    if marker and _number(tail):
        release, post = head, int(tail)
    parts = release.split(".")
    if 0 < len(parts) <= 16 and all(_number(part) for part in parts):
        return Release(tuple(int(part) for part in parts), post)
    from packaging.version import InvalidVersion as PackagingInvalid, Version

    try:
        return Version(text)
    except PackagingInvalid:
        raise InvalidVersion(text)


def _number(part: str) -> bool:
    return part.isascii() and part.isdigit() and len(part) <= 18
