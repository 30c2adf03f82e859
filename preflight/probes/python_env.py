"""Probe the Python environment: this interpreter in-process, another one in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any, Dict, List, Optional

from preflight.errors import PreflightError, ProbeError
from preflight.probes import interpreter_script


def resolve_interpreter(python: str) -> str:
    """``--python`` accepts a path or a command name; exit 2 if it names nothing runnable."""
    found = python if os.sep in python else shutil.which(python)
    if not found or not os.path.isfile(found):
        raise PreflightError("--python %s: no such interpreter" % python,
                             "give the path of the training environment's python, e.g. --python ~/miniconda3/envs/yolov9/bin/python")
    if not os.access(found, os.X_OK):
        raise PreflightError("--python %s: not executable" % python)
    return os.path.abspath(found)


def probe(packages: List[Dict[str, Any]], python: Optional[str] = None, timeout: float = 10.0) -> Dict[str, Any]:
    if python is None:
        return interpreter_script.probe(packages)

    from preflight.probes import process

    try:
        completed = process.run([python, interpreter_script.__file__, json.dumps({"packages": packages})], timeout)
    except process.CommandTimeout as exc:
        raise ProbeError("%s gave no answer within %.1f s" % (python, exc.seconds))
    except process.CommandFailed as exc:
        raise ProbeError(str(exc))
    lines = [line for line in completed.stdout.splitlines() if line.strip()]
    if completed.returncode != 0 or not lines:
        detail = (completed.stderr.strip().splitlines() or ["exit status %d" % completed.returncode])[-1]
        raise ProbeError("%s could not run the environment probe (is it Python 3.6 or newer?): %s" % (python, detail))
    from preflight.files.input_files import parse_json
    from preflight.probes import shape

    try:
        answer = parse_json(lines[-1], "the answer", PreflightError)
    except PreflightError:
        raise ProbeError("%s printed something that is not the probe's answer: %r" % (python, lines[-1][:200]))
    problem = shape.problems(answer, shape.PYTHON) if isinstance(answer, dict) else "expected an object"
    if problem:
        raise ProbeError("%s answered in the wrong shape (%s): is it a Python that runs preflight's probe script?"
                         % (python, problem))
    return answer
