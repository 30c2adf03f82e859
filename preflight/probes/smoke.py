"""Run the active GPU test (smoke_worker.py) in the job's interpreter, within the deadline, and read its answer.

The worker runs in its own process group (probes/process.py): at the deadline the whole group is killed, the
ranks of its all-reduce included, and the facts say it did not finish rather than hang.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, Optional

from preflight.errors import ProbeError, ProbeTimeout
from preflight.probes import process

# The worker is a script the job's interpreter runs (torch and the standard library only); it is not imported here.
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "smoke_worker.py")


def probe(request: Optional[Dict[str, Any]], python: Optional[str], timeout: float) -> Dict[str, Any]:
    if request is None:
        raise ProbeError("the active test was not asked for (preflight smoke, check --smoke)")
    interpreter = python or sys.executable
    try:
        completed = process.run([interpreter, WORKER, json.dumps(request)], timeout)
    except process.CommandTimeout as exc:
        raise ProbeTimeout("the active test did not finish within %.1f s: a GPU or collective that hangs, or a "
                           "budget too small (--timeout)" % exc.seconds, exc.seconds)
    except process.CommandFailed as exc:
        raise ProbeError(str(exc))
    lines = [line for line in completed.stdout.splitlines() if line.startswith("{")]
    if not lines:
        detail = (completed.stderr.strip().splitlines() or ["exit status %d" % completed.returncode])[-1]
        raise ProbeError("the active test in %s gave no answer: %s" % (interpreter, detail[:300]))
    try:
        answer = json.loads(lines[-1])
    except ValueError as exc:
        raise ProbeError("the active test's answer is not JSON: %s" % exc)
    from preflight.probes import shape

    problem = shape.problems(answer, shape.SMOKE)
    if problem:
        raise ProbeError("the active test's answer is not what preflight's worker writes: %s" % problem)
    answer["interpreter"] = interpreter
    return answer
