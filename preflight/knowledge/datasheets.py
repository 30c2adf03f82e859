"""NVIDIA's datasheet figures per GPU model (rules/knowledge/gpu-datasheets.toml): what the active test's
measured throughput and bandwidth are judged against.

A model is found by the name NVML gives it, compared without case and without a leading "NVIDIA " (older drivers
leave it out); a name the file does not list has no datasheet here, and nothing is guessed from part of a name
(an "H100" could be the SXM or the PCIe card, whose figures differ).
"""

from __future__ import annotations

import os
from typing import Dict, NamedTuple, Optional

DATA_FILE = os.path.join("knowledge", "gpu-datasheets.toml")
KEYS = ("model", "names", "fp16_tflops", "memory_gbs", "source")


class Datasheet(NamedTuple):
    model: str
    fp16_tflops: float
    memory_gbs: float
    source: str


_by_name: Optional[Dict[str, Datasheet]] = None


def plain(name: str) -> str:
    name = " ".join(name.split()).lower()
    return name[len("nvidia "):] if name.startswith("nvidia ") else name


def lookup(name: Optional[str]) -> Optional[Datasheet]:
    """The datasheet of the GPU model NVML calls ``name``, or None when the file does not list it."""
    global _by_name
    if _by_name is None:
        _by_name = _load()
    return _by_name.get(plain(name or ""))


def _load() -> Dict[str, Datasheet]:
    from preflight.files.toml_entries import Entry
    from preflight.knowledge.shipped import data_dir, knowledge

    path = os.path.join(data_dir(), DATA_FILE)
    data = knowledge(DATA_FILE, "GPU datasheets")
    found: Dict[str, Datasheet] = {}
    for index, raw in enumerate(data.get("gpu", [])):
        entry = Entry(raw, path, ("gpu", index), "[[gpu]] %d" % (index + 1))
        entry.check_keys(KEYS, "a [[gpu]] of the datasheets")
        figures = {}
        for key in ("fp16_tflops", "memory_gbs"):
            value = raw.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise entry.error("'%s' must be a positive number, found %r" % (key, value), key=key)
            figures[key] = float(value)
        sheet = Datasheet(entry.string("model", required=True), figures["fp16_tflops"], figures["memory_gbs"],
                          entry.string("source", required=True))
        names = entry.string_list("names")
        if not names:
            raise entry.error("'names' must list the names NVML gives this model", key="names")
        for name in names:
            if plain(name) in found:
                raise entry.error("the name %r is listed twice" % name, key="names")
            found[plain(name)] = sheet
    return found
