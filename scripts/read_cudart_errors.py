#!/usr/bin/env python3
"""Read the CUDA runtime's own error texts, and the driver API's names, into rules/knowledge/cuda-runtime-errors.toml.

The texts a log shows after "CUDA error: " are what cudaGetErrorString returns; they live in libcudart, not in
any document. This script downloads NVIDIA's runtime wheels from PyPI (nvidia-cuda-runtime-cu11, -cu12 and the
CUDA 13 nvidia-cuda-runtime), loads each libcudart with ctypes and asks it for the text of every code in the
table. cudaGetErrorString needs no GPU and no driver. A row whose text changed between releases lists every
wording, oldest release first; texts a row already lists (read from logs of releases not on PyPI) are kept.

The same wheels hold cuda.h, whose CUresult enum names the driver API's errors (CUDA_ERROR_NO_DEVICE, as
TensorFlow, JAX, CuPy and Numba print them). Since CUDA 10.1 a driver error and the runtime error of the same
meaning share their number, so each row gets the driver's name of its code (driver_name).

    python scripts/read_cudart_errors.py            # writes the texts, prints what changed
    python scripts/read_cudart_errors.py --check    # prints what changed, writes nothing (exit 1 when anything did)

Linux x86_64 only (the wheels' libcudart.so); needs pip and network access to PyPI.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from typing import Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "rules", "knowledge", "cuda-runtime-errors.toml")

# One runtime per CUDA major release on PyPI, oldest first (the order a row lists its wordings in).
RUNTIMES = [
    "nvidia-cuda-runtime-cu11==11.7.99",
    "nvidia-cuda-runtime-cu11==11.8.89",
    "nvidia-cuda-runtime-cu12==12.9.79",
    "nvidia-cuda-runtime==13.5.37",
]

ROW = re.compile(r"^\[\[error\]\]\n", re.M)
CODE = re.compile(r"^code = (\d+)$", re.M)
TEXT = re.compile(r"^text = (.+)$", re.M)
DRIVER_NAME = re.compile(r"^driver_name = .+\n", re.M)
CURESULT = re.compile(r"\b(CUDA_ERROR_[A-Z0-9_]+)\s*=\s*(\d+)")


def runtime_texts(requirement: str, workdir: str) -> Tuple[Dict[int, str], Dict[int, str]]:
    """cudaGetErrorString for codes 0-1000 of one runtime wheel (codes it does not know are left out), and the
    driver API's error names by code from the wheel's cuda.h."""
    target = os.path.join(workdir, requirement.replace("==", "-"))
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                    "--platform", "manylinux2014_x86_64", "-d", target, requirement], check=True)
    (wheel,) = glob.glob(os.path.join(target, "*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    (library,) = glob.glob(os.path.join(target, "nvidia", "**", "libcudart.so.*"), recursive=True)
    cudart = ctypes.CDLL(library)
    cudart.cudaGetErrorName.restype = ctypes.c_char_p
    cudart.cudaGetErrorString.restype = ctypes.c_char_p
    texts = {}
    for code in range(1, 1001):
        name = cudart.cudaGetErrorName(code).decode()
        if name.startswith("cudaError"):
            texts[code] = cudart.cudaGetErrorString(code).decode()
    (header,) = glob.glob(os.path.join(target, "nvidia", "**", "include", "cuda.h"), recursive=True)
    with open(header, encoding="utf-8") as handle:
        enum = handle.read().split("typedef enum cudaError_enum", 1)[1].split("} CUresult;", 1)[0]
    driver_names = {int(code): name for name, code in CURESULT.findall(enum)}
    return texts, driver_names


def toml_string(value: str) -> str:
    return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"')


def merged_text_line(existing: List[str], read: List[str]) -> str:
    texts = list(dict.fromkeys(read + existing))
    if len(texts) == 1:
        return "text = %s" % toml_string(texts[0])
    return "text = [%s]" % ", ".join(toml_string(t) for t in texts)


def existing_texts(block: str) -> List[str]:
    found = TEXT.search(block)
    if not found:
        return []
    value = found.group(1).strip()
    return re.findall(r'"((?:[^"\\]|\\.)*)"', value)


def updated_table(content: str, read: Dict[int, List[str]], driver_names: Dict[int, str]) -> str:
    head, *blocks = ROW.split(content)
    out = [head]
    for block in blocks:
        code = int(CODE.search(block).group(1))
        block = DRIVER_NAME.sub("", block)
        if code in driver_names:
            block = re.sub(r"^(name = .+\n)", lambda m: m.group(1) + 'driver_name = "%s"\n' % driver_names[code],
                           block, count=1, flags=re.M)
        wordings = read.get(code)
        if wordings:
            line = merged_text_line(existing_texts(block), wordings)
            if TEXT.search(block):
                block = TEXT.sub(lambda _: line, block, count=1)
            else:
                block = re.sub(r"^(code = \d+\n)", lambda m: m.group(1) + line + "\n", block, count=1, flags=re.M)
        out.append(block)
    return "[[error]]\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="print what would change, write nothing")
    args = parser.parse_args()
    read: Dict[int, List[str]] = {}
    driver_names: Dict[int, str] = {}
    with tempfile.TemporaryDirectory() as workdir:
        for requirement in RUNTIMES:
            texts, names = runtime_texts(requirement, workdir)
            for code, text in texts.items():
                if text not in read.setdefault(code, []):
                    read[code].append(text)
            driver_names.update(names)  # the newest release's name for a code
    with open(TABLE, encoding="utf-8") as handle:
        content = handle.read()
    table_codes = {int(c) for c in CODE.findall(content)}
    for code in sorted(set(read) - table_codes):
        print("not in the table: code %d %r" % (code, read[code]))
    for code in sorted(set(driver_names) - table_codes):
        print("a driver error with no runtime row: code %d %s" % (code, driver_names[code]))
    new = updated_table(content, read, driver_names)
    changed = new != content
    if changed:
        before, after = content.splitlines(), new.splitlines()
        for line in sorted(set(after) - set(before)):
            print("+ " + line)
    if changed and not args.check:
        with open(TABLE, "w", encoding="utf-8") as handle:
            handle.write(new)
    return 1 if (changed and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
