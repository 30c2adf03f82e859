#!/usr/bin/env python3
"""Refresh rules/knowledge/package-index.json from PyPI: what a printed pip command can install.

For every package a fix can pin, records each final (not yanked) release: its Requires-Python, and the CPython
versions its binary wheels serve on Linux x86_64 (manylinux), Linux aarch64 and Windows (win_amd64), or that it
is pure Python (a py3-none-any wheel). For torchvision and torchaudio it also records the torch each release requires (from the
wheel's own METADATA, read with HTTP range requests: only the zip's directory and that file are fetched). The date
the index was read goes to rules/knowledge/as-of.txt ("knowledge as of", shown by preflight --version).

It reads PyPI's simple API (PEP 691 JSON) and parses file names and requirements with ``packaging``, the library
pip itself uses for them; download.pytorch.org is not read (it may be unreachable where this runs): what the
PyTorch CUDA indexes hold stays in rules/knowledge/pytorch-wheels.toml, kept by hand with its public sources.

    python scripts/refresh_knowledge.py            # writes the files, prints what changed
    python scripts/refresh_knowledge.py --check    # prints what changed, writes nothing (exit 1 when anything did)
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
import urllib.request
import zipfile
from typing import Any, Dict, List, Optional

from packaging.requirements import Requirement
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(ROOT, "rules", "knowledge", "package-index.json")
AS_OF = os.path.join(ROOT, "rules", "knowledge", "as-of.txt")
INDEX = "https://pypi.org/simple/%s/"
FORMAT = "preflight.package-index/1"

# Every distribution a rule or fix names for pip: the python.packages rule's packages and the fixes' pins.
PACKAGES = ("torch", "torchvision", "torchaudio", "numpy", "Pillow", "opencv-python", "opencv-python-headless",
            "opencv-contrib-python", "opencv-contrib-python-headless", "setuptools", "thop", "ipython", "PyYAML",
            "matplotlib", "pandas", "seaborn", "tqdm", "requests", "psutil", "scipy", "tensorboard", "nvidia-ml-py",
            "typing_extensions", "huggingface_hub", "pynvml", "protobuf", "ninja", "bitsandbytes", "onnxruntime",
            "onnxruntime-gpu", "jax", "torchmetrics", "pytorch-lightning")
# Platforms as preflight names them -> how a wheel's platform tag says it.
PLATFORMS = {"linux_x86_64": ("manylinux", "x86_64"), "linux_aarch64": ("manylinux", "aarch64"),
             "windows": ("win_amd64", "")}


def fetch(url: str, accept: str = "application/vnd.pypi.simple.v1+json", byte_range: Optional[str] = None) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": accept, "User-Agent": "preflight-refresh-knowledge"})
    if byte_range:
        request.add_header("Range", "bytes=%s" % byte_range)
    for attempt in range(4):
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.read()
        except OSError:
            if attempt == 3:
                raise
            time.sleep(2 ** attempt)
    raise AssertionError("unreachable")


class RemoteZip(io.RawIOBase):
    """A wheel on the index as a seekable file: zipfile reads its directory and one member through range requests."""

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.position = url, size, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.position = {0: offset, 1: self.position + offset, 2: self.size + offset}[whence]
        return self.position

    def tell(self) -> int:
        return self.position

    def readinto(self, buffer) -> int:
        if self.position >= self.size:
            return 0
        end = min(self.size, self.position + len(buffer)) - 1
        data = fetch(self.url, "*/*", "%d-%d" % (self.position, end))
        buffer[:len(data)] = data
        self.position += len(data)
        return len(data)


def wheel_metadata(url: str, size: int) -> str:
    remote = io.BufferedReader(RemoteZip(url, size), buffer_size=1 << 16)
    with zipfile.ZipFile(remote) as wheel:
        name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        return wheel.read(name).decode("utf-8", "replace")


def python_of(interpreter: str) -> Optional[str]:
    """cp310 -> 3.10, cp39 -> 3.9; None for anything else (pp, cp314t is handled by its abi)."""
    if not interpreter.startswith("cp") or not interpreter[2:].isdigit() or len(interpreter) < 4:
        return None
    digits = interpreter[2:]
    return "%s.%s" % (digits[0], digits[1:])


def platform_of(tag: str) -> Optional[str]:
    for name, (family, machine) in PLATFORMS.items():
        if family in tag and tag.endswith(machine):
            return name
    return None


def release_files(files: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    releases: Dict[str, Dict[str, Any]] = {}
    for file in files:
        if file.get("yanked"):
            continue
        filename = file["filename"]
        if not filename.endswith(".whl"):
            continue
        try:
            _, version, _, tags = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            continue
        if version.is_prerelease or version.is_devrelease or version.local:
            continue
        entry = releases.setdefault(str(version), {"requires_python": file.get("requires-python") or None,
                                                   "pure": False, "wheels": {}, "_files": []})
        entry["_files"].append(file)
        if file.get("requires-python") and not entry["requires_python"]:
            entry["requires_python"] = file["requires-python"]
        for tag in tags:
            if tag.abi == "none" and tag.platform == "any" and tag.interpreter.startswith("py3"):
                entry["pure"] = True
                continue
            platform = platform_of(tag.platform)
            if platform is None:
                continue
            if tag.abi == "abi3":  # one wheel for this CPython and every newer one
                python = python_of(tag.interpreter)
                if python:
                    entry["wheels"].setdefault(platform, set()).add(python + "+")
                continue
            if tag.abi.endswith("t") or tag.abi.endswith("d"):  # free-threaded and debug builds: not a plain CPython
                continue
            if tag.abi == "none" and tag.interpreter.startswith("py3"):
                entry["wheels"].setdefault(platform, set()).add("py3")
                continue
            python = python_of(tag.interpreter)
            if python:
                entry["wheels"].setdefault(platform, set()).add(python)
    return releases


def _sorted_pythons(values) -> List[str]:
    def key(text: str):
        if text == "py3":
            return (0, 0)
        major, minor = text.rstrip("+").split(".")
        return (int(major), int(minor))
    return sorted(values, key=key)


def read_package(name: str) -> Dict[str, Any]:
    data = json.loads(fetch(INDEX % name.lower()))
    releases = release_files(data["files"])
    out: Dict[str, Any] = {}
    for version in sorted(releases, key=Version):
        entry = releases[version]
        record: Dict[str, Any] = {"requires_python": entry["requires_python"]}
        if entry["pure"]:
            record["pure"] = True
        wheels = {platform: _sorted_pythons(pythons) for platform, pythons in sorted(entry["wheels"].items())}
        if wheels:
            record["wheels"] = wheels
        if (name, Version(version) >= Version("0.10")) in (("torchvision", True), ("torchaudio", True)):
            record["requires_torch"] = _torch_requirement(entry["_files"])
        out[version] = record
    return out


def _torch_requirement(files: List[Dict[str, Any]]) -> Optional[str]:
    linux = [f for f in files if "manylinux" in f["filename"] and "x86_64" in f["filename"]] or files
    chosen = min(linux, key=lambda f: f.get("size") or 0)
    metadata = wheel_metadata(chosen["url"], chosen["size"])
    for line in metadata.splitlines():
        if line.lower().startswith("requires-dist:"):
            try:
                requirement = Requirement(line.split(":", 1)[1].strip())
            except Exception:
                continue
            if requirement.name.lower() == "torch":
                return str(requirement.specifier) or None
    return None


def dumps(packages: Dict[str, Any]) -> str:
    """The snapshot as JSON with one release per line: small, and a refresh shows in a diff as the lines it adds."""
    compact = {"separators": (",", ":"), "sort_keys": True}
    lines = ['{"format": %s,' % json.dumps(FORMAT),
             ' "source": %s,' % json.dumps("https://pypi.org/simple/ (PEP 691 JSON), read by scripts/refresh_knowledge.py"),
             ' "platforms": %s,' % json.dumps(sorted(PLATFORMS)),
             ' "packages": {']
    for number, (name, releases) in enumerate(packages.items()):
        lines.append('  %s: {' % json.dumps(name))
        items = ['   %s: %s' % (json.dumps(version), json.dumps(record, **compact)) for version, record in releases.items()]
        lines.append(",\n".join(items))
        lines.append("  }" + ("," if number < len(packages) - 1 else ""))
    lines.append(" }}")
    return "\n".join(lines) + "\n"


def changes(old: Dict[str, Any], new: Dict[str, Any]) -> List[str]:
    lines = []
    for name in sorted(set(old) | set(new), key=str.lower):
        before, after = set(old.get(name, {})), set(new.get(name, {}))
        added, removed = sorted(after - before, key=Version), sorted(before - after, key=Version)
        if added:
            lines.append("%s: new %s" % (name, ", ".join(added)))
        if removed:
            lines.append("%s: gone (yanked or deleted) %s" % (name, ", ".join(removed)))
        changed = [v for v in sorted(before & after, key=Version) if old[name][v] != new[name][v]]
        if changed:
            lines.append("%s: wheels or requirements changed for %s" % (name, ", ".join(changed)))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="say what changed; write nothing")
    parser.add_argument("--date", default=time.strftime("%Y-%m-%d", time.gmtime()), help="the date the index was read")
    args = parser.parse_args()
    packages = {}
    for name in PACKAGES:
        print("reading %s ..." % name, file=sys.stderr)
        packages[name] = read_package(name)
    try:
        with open(OUTPUT, encoding="utf-8") as handle:
            old = json.load(handle).get("packages", {})
    except (OSError, ValueError):
        old = {}
    diff = changes(old, packages)
    print("\n".join(diff) if diff else "no change since the last snapshot")
    if args.check:
        return 1 if diff else 0
    with open(OUTPUT, "w", encoding="utf-8") as out:
        out.write(dumps(packages))
    with open(AS_OF, "w", encoding="utf-8") as out:
        out.write(args.date + "\n")
    print("wrote %s (%d packages, %d releases) and %s (%s)" % (
        os.path.relpath(OUTPUT, ROOT), len(packages), sum(len(v) for v in packages.values()),
        os.path.relpath(AS_OF, ROOT), args.date))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except InvalidVersion as exc:
        sys.exit("refresh_knowledge: %s" % exc)
