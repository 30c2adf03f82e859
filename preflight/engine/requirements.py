"""A project's requirements file (``check --requirements FILE``) as one more rule of the check.

YOLO's own start-up checks read the project's requirements.txt; so does this, before the run, as pip reads it:
each file is parsed by pip-requirements-parser (pip's own parsing code, maintained apart from pip), so that line
continuations, comments, options, environment markers, byte-order marks and ``-r``/``-c`` includes mean what they
mean to pip. preflight reads the files itself (regular files only, size-capped, each line at most
``MAX_LINE`` characters after its runs of blanks are made one, so that parsing stays linear in the file's size),
follows each local include once (a file two others include is read once; a cycle ends there), and leaves unchecked
what a check cannot judge from installed metadata: pip options, ``-e`` editable installs, URL requirements, remote
includes. An error names the file and the line, never the line's text: an include may name any file.

Each requirement becomes a package of the ``present`` comparison, found by its distribution (a requirements file
names distributions, whose modules may be called anything), with its marker evaluated for the job's own
interpreter. The rule fails on what is missing or at a version the file excludes, and its fix installs exactly
that into the job's interpreter, every pin checked against the package index for its Python.
"""

from __future__ import annotations

import codecs
import os
import re
import tempfile
from typing import Dict, List, NamedTuple, Tuple

from preflight.errors import PreflightError
from preflight.files import input_files

RULE_ID = "python.requirements"
TORCH_BUILDS = ("torch", "torchvision", "torchaudio")
MAX_FILES = 1000  # local files one requirements file may bring in through -r and -c
MAX_BYTES = 1 << 20  # one requirements file
MAX_LINE = 64 << 10  # characters of one logical line: no requirement is that long
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
HINT = "requirements files hold PEP 508 lines such as numpy>=1.18.5 or torch!=2.4.0; sys_platform == 'win32', and pip options"


class Requirement(NamedTuple):
    """One requirement the file asks for: its distribution, version specifier and environment marker."""

    name: str
    specifier: str
    marker: str


def read(path: str) -> Tuple[List[Requirement], List[str]]:
    """(the requirements, what is not checked) of a requirements file and its local includes; exit 2 for a file
    that cannot be read or a line that is no requirement, naming the file and line."""
    requirements: List[Requirement] = []
    skipped: List[str] = []
    seen: Dict[Tuple[str, bool], bool] = {}
    pending = [(path, False)]
    while pending:
        name, constraints = pending.pop(0)
        real = (os.path.realpath(name), constraints)
        if real in seen:
            continue  # included twice (a diamond), or a cycle: read once (as requirements, and as constraints)
        seen[real] = True
        if len(seen) > MAX_FILES:
            raise PreflightError("--requirements %s brings in more than %d files through -r and -c" % (path, MAX_FILES),
                                 HINT)
        for kind, value, line in _parse(name):
            if kind == "requirement" and not constraints:
                requirements.append(value)
            elif kind in ("include", "constraints"):
                if "://" in value:
                    skipped.append("-%s %s (a remote file, not fetched)" % ("r" if kind == "include" else "c", value))
                else:
                    pending.append((os.path.join(os.path.dirname(name), value), kind == "constraints"))
            elif kind == "skipped" and not constraints:
                skipped.append(value)
    return requirements, skipped


def _parse(path: str):
    """(kind, value, line) for each line of one file: requirement, include, constraints or skipped."""
    import pip_requirements_parser as parser

    what = "requirements file %s" % path
    data = input_files.read_bytes(path, what, PreflightError, HINT, limit=MAX_BYTES)
    text = _decoded(data, what)
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", re.sub(r"[ \t]+", " ", raw)).strip()  # pip drops comments too
        if len(line) > MAX_LINE:
            raise PreflightError("--requirements: %s line %d is %d characters long; no requirement is" % (
                path, number, len(line)), HINT)
        lines.append(line)
    folder = tempfile.mkdtemp(prefix="preflight-requirements-")
    copy = os.path.join(folder, "requirements.txt")
    try:
        with open(copy, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
        parsed = parser.RequirementsFile.from_file(copy, include_nested=False)
    finally:
        for leftover in (copy, folder):
            try:
                (os.rmdir if leftover == folder else os.unlink)(leftover)
            except OSError:
                pass
    for invalid in parsed.invalid_lines:
        raise PreflightError("--requirements: %s line %d is not a requirement pip reads" % (path, invalid.line_number),
                             HINT)
    for option in parsed.options:
        values = option.options
        for kind, key in (("include", "requirements"), ("constraints", "constraints")):
            for value in values.get(key) or ():
                yield kind, value, option.line_number
        others = [key for key in values if key not in ("requirements", "constraints")]
        if others:
            yield "skipped", "--" + others[0].replace("_", "-"), option.line_number
    for requirement in parsed.requirements:
        if requirement.is_editable or requirement.link is not None or not requirement.name:
            yield "skipped", "%s (%s)" % (requirement.name or "line %d" % requirement.line_number,
                                          "editable" if requirement.is_editable else "a URL"), requirement.line_number
            continue
        marker = str(requirement.marker) if requirement.marker is not None else ""
        yield "requirement", Requirement(requirement.name, str(requirement.specifier or ""), marker), \
            requirement.line_number


def _decoded(data: bytes, what: str) -> str:
    """The file's text as pip decodes it: a byte-order mark says the encoding (UTF-8, 16 or 32), else UTF-8."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding).lstrip("\ufeff")
            except UnicodeDecodeError:
                break
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PreflightError("%s: not UTF-8 text (byte %d)" % (what, exc.start), HINT)


def rule_entry(path: str) -> Dict[str, object]:
    """The requirements file as a ``[[rule]]`` table, read by the loader like any other."""
    requirements, skipped = read(path)
    if not requirements:
        raise PreflightError("--requirements %s names no package" % path)
    required, packages = [], {}
    for requirement in requirements:
        text = requirement.name + requirement.specifier
        if text in required:
            continue
        required.append(text)
        table: Dict[str, object] = {"import": False, "pip": text}
        if requirement.name.lower() in TORCH_BUILDS:
            table["installed_by"] = "torch.cuda"  # a build for the driver, as a pair: never a plain PyPI install
        if requirement.marker:
            table["marker"] = requirement.marker
        packages[requirement.name] = table
    note = "; not checked: %s" % ", ".join(dict.fromkeys(skipped)) if skipped else ""
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
