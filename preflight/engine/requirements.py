"""A project's requirements file (``check --requirements FILE``) as one more rule of the check.

YOLO's own start-up checks read the project's requirements.txt; so does this, before the run: each line is a PEP 508
requirement read with ``packaging`` (as pip reads it), ``-r other.txt`` includes are followed (relative to the file
that names them), comments and blank lines are skipped, and what a check cannot judge from installed metadata (pip
options such as ``--index-url``, ``-e`` editable installs, URLs and VCS links) is named in the rule's message as not
checked. Each requirement becomes a package of the ``present`` comparison, found by its distribution (a requirements
file names distributions, whose modules may be called anything), with its marker evaluated for the job's own
interpreter. The rule fails on what is missing or at a version the file excludes, and its fix installs exactly that
into the job's interpreter, every pin checked against the package index for its Python.
"""

from __future__ import annotations

import os
from typing import Dict, List, Tuple

from packaging.requirements import InvalidRequirement, Requirement

from preflight.errors import PreflightError
from preflight.files import input_files

RULE_ID = "python.requirements"
TORCH_BUILDS = ("torch", "torchvision", "torchaudio")
MAX_INCLUDES = 16


def read(path: str) -> Tuple[List[Requirement], List[str]]:
    """(the requirements, the lines not checked) of a requirements file and its includes; exit 2 for a file that
    cannot be read or a line that is no requirement, naming the file and line."""
    requirements: List[Requirement] = []
    skipped: List[str] = []
    _read(path, requirements, skipped, [])
    return requirements, skipped


def _read(path: str, requirements: List[Requirement], skipped: List[str], seen: List[str]) -> None:
    real = os.path.realpath(path)
    if real in seen or len(seen) >= MAX_INCLUDES:
        raise PreflightError("--requirements %s: includes go round in a circle or deeper than %d files"
                             % (path, MAX_INCLUDES))
    seen.append(real)
    data = input_files.read_bytes(path, "requirements file %s" % path, PreflightError, limit=1 << 20)
    text = data.decode("utf-8", "replace")
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        included = next((line[len(flag):].lstrip(" =") for flag in ("--requirement", "-r") if line.startswith(flag)),
                        None)
        if included:
            _read(os.path.join(os.path.dirname(path), included), requirements, skipped, seen)
            continue
        if line.startswith("-") or "://" in line or line.startswith((".", "/")):
            skipped.append(line)
            continue
        try:
            requirements.append(Requirement(line))
        except InvalidRequirement as exc:
            raise PreflightError("--requirements %s:%d: %r is not a requirement: %s" % (path, number, line,
                                                                                      str(exc).splitlines()[0]),
                                 "requirements files hold PEP 508 lines such as numpy>=1.18.5 or "
                                 "torch!=2.4.0; sys_platform == 'win32'")


def rule_entry(path: str) -> Dict[str, object]:
    """The requirements file as a ``[[rule]]`` table, read by the loader like any other."""
    requirements, skipped = read(path)
    if not requirements:
        raise PreflightError("--requirements %s names no package" % path)
    required, packages = [], {}
    for requirement in requirements:
        text = requirement.name + str(requirement.specifier)
        if text in required:
            continue
        required.append(text)
        table: Dict[str, object] = {"import": False, "pip": text}
        if requirement.name.lower() in TORCH_BUILDS:
            table["installed_by"] = "torch.cuda"  # a build for the driver, as a pair: never a plain PyPI install
        if requirement.marker is not None:
            table["marker"] = str(requirement.marker)
        packages[requirement.name] = table
    note = "; not checked: %s" % ", ".join(skipped) if skipped else ""
    return {
        "id": RULE_ID, "title": "The project's requirements are met (%s)" % os.path.basename(path),
        "severity": "error", "fact": "python.packages", "compare": "present", "required": required,
        "packages": packages, "message": "{observed}" + note, "pass_message": "{observed}" + note,
        "fix": "python-requirements", "fix_order": 117,
        "why": "The project's own requirements file says which distributions and versions its code needs; what is "
               "missing or excluded fails at the first import, or later where the code uses it.",
        "source": "%s (PEP 508 requirements, as pip reads them: https://pip.pypa.io/en/stable/reference/"
                  "requirements-file-format/)" % path,
    }
