"""Byte sizes as people write them, and as they should be shown.

``GB`` means 10**9 bytes and ``GiB`` means 2**30. GPU vendors sell cards in
decimal gigabytes while NVML reports what is usable, so a card sold as 16 GB
that reports 16376 MiB (RTX A4000) or 15360 MiB (T4) still meets a ``16GB``
threshold: both are above 16 * 10**9 bytes.
"""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3, "kb": 10**3, "kib": 2**10,
    "m": 10**6, "mb": 10**6, "mib": 2**20,
    "g": 10**9, "gb": 10**9, "gib": 2**30,
    "t": 10**12, "tb": 10**12, "tib": 2**40,
}
_SIZE = r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$"


def parse_bytes(text) -> int:
    """``"12GB"`` -> 12000000000, ``"16GiB"`` -> 17179869184, ``1024`` -> 1024.

    Raises ValueError with a message that says what is accepted.
    """
    if isinstance(text, bool):
        raise ValueError("expected a size such as 12GB or 16GiB, got %r" % (text,))
    if isinstance(text, int):
        if text < 0:
            raise ValueError("a size cannot be negative: %r" % (text,))
        return text
    match = re.match(_SIZE, str(text))
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError("expected a size such as 12GB, 16GiB or 512MiB, got %r" % (text,))
    number, unit = match.groups()
    return int(round(float(number) * _UNITS[unit.lower()]))


def parse_size_threshold(text) -> int:
    """A size a person wrote as a threshold: a number needs a unit (``24GB``), since ``24`` would mean 24 bytes."""
    match = re.match(_SIZE, text) if isinstance(text, str) else None
    if match and match.group(2):
        return parse_bytes(text)
    if text in (0, "0"):
        return 0
    if match or (isinstance(text, (int, float)) and not isinstance(text, bool)):
        raise ValueError("a size needs a unit, got %r: write it as 24GB (10^9 bytes), 24GiB (2^30 bytes), 512MiB "
                         "or 1024B" % (text,))
    return parse_bytes(text)  # raises with the forms it accepts


def uses_binary_units(text) -> bool:
    """True when a size was written in binary units (GiB, MiB, ...)."""
    return isinstance(text, str) and "i" in text.lower()


def format_bytes(value: int, binary: bool = True) -> str:
    """Show a size the way the threshold was written: ``12.0 GiB`` or ``12.9 GB``."""
    step, names = (1024.0, ["B", "KiB", "MiB", "GiB", "TiB"]) if binary else (1000.0, ["B", "kB", "MB", "GB", "TB"])
    amount = float(value)
    for name in names:
        if abs(amount) < step or name == names[-1]:
            return ("%d %s" % (amount, name)) if name == "B" else ("%.1f %s" % (amount, name))
        amount /= step
    return "%d B" % value  # pragma: no cover - loop always returns


def format_gpu_memory(value: int) -> str:
    """GPU memory as nvidia-smi users know it: GiB with the MiB count."""
    return "%s (%d MiB)" % (format_bytes(value), value // 2**20)


MAX_DURATION = 7 * 86400.0


def parse_duration(text) -> float:
    """``"30s"``, ``"5m"``, ``"1h"``, ``"250ms"`` or plain seconds -> seconds (at most a week)."""
    match = re.match(_SIZE, str(text))
    per_unit = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "": 1}
    if not match or match.group(2) not in per_unit:
        raise ValueError("expected a duration such as 30s, 5m or 1h, got %r" % (text,))
    number, unit = match.groups()
    seconds = float(number) * per_unit[unit]
    if seconds > MAX_DURATION:
        raise ValueError("%r is longer than a week; give a shorter duration" % (text,))
    return seconds


MAX_GPU_COUNT = 1024


def quoted(value, limit: int = 60) -> str:
    """``repr(value)`` for a message, cut when absurdly long (a 5,000-digit "number" is not echoed whole)."""
    text = repr(value)
    return text if len(text) <= limit else "%s... (%d characters)" % (text[:limit], len(str(value)))


def parse_gpu_count(text) -> str:
    """``auto`` or a GPU count (``"8"``), normalised; ValueError for anything else (``-1``, ``two``, ``1.5``)."""
    value = str(text).strip().lower()
    if value == "auto":
        return value
    if value.isascii() and value.isdigit() and len(value) <= 6 and int(value) <= MAX_GPU_COUNT:
        return str(int(value))
    raise ValueError("must be a GPU count (0 to %d) or 'auto', got %s" % (MAX_GPU_COUNT, quoted(text)))
