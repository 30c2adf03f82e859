"""Run the active GPU test (smoke_worker.py) in the job's interpreter, within the deadline, and read its answer.

The worker runs in its own process group (probes/process.py): at the deadline the whole group is killed, the
ranks of its all-reduce included, and the facts say it did not finish rather than hang.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from preflight.errors import ProbeError, ProbeTimeout
from preflight.probes import process

# The worker is a script the job's interpreter runs (torch and the standard library only); it is not imported here.
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "smoke_worker.py")
# Which of the worker's tests each smoke rule judges: --select and --ignore over smoke's rules choose what runs.
TEST_OF_RULE = {
    "smoke.memory": "memory", "smoke.matmul.fp32": "matmul", "smoke.matmul.tf32": "matmul",
    "smoke.matmul.fp16": "matmul", "smoke.matmul.bf16": "matmul", "smoke.throughput": "throughput",
    "smoke.throughput.datasheet": "throughput", "smoke.bandwidth.datasheet": "throughput",
    "smoke.train_step": "train_step", "smoke.allreduce": "collective", "smoke.allreduce.bandwidth": "collective",
    "smoke.fit": "fit",
}


# --level: what each runs (tests: () all; the memory test's share of free memory; each per-GPU test's repetitions).
# What they cost is in the README (measured on the CPU build; on GPUs each test is bounded by the budget).
LEVELS = {
    "quick": {"tests": ("memory", "matmul", "train_step"), "memory_share": 0.1, "iterations": 1},
    "standard": {"tests": (), "memory_share": 0.5, "iterations": 1},
    "long": {"tests": (), "memory_share": 0.9, "iterations": 3},
}


def _names(rule: str, patterns: Sequence[str]) -> bool:
    """Whether a --select/--ignore list names ``rule``: its id, or a prefix of ids such as smoke.matmul."""
    return any(rule == pattern or rule.startswith(pattern + ".") for pattern in patterns)


def not_smoke(select: Sequence[str]) -> List[str]:
    """The entries of ``select`` that name no smoke rule (smoke runs only its own)."""
    return [pattern for pattern in select
            if not any(_names(rule, [pattern]) for rule in ("smoke.torch",) + tuple(TEST_OF_RULE))]


def rules_for(select: Sequence[str], ignore: Sequence[str], tests: Sequence[str] = ()) -> Tuple[str, ...]:
    """The smoke rules chosen, among those of ``tests`` (the worker's tests a level runs; () all)."""
    return tuple(rule for rule, test in TEST_OF_RULE.items()
                 if _names(rule, select) and not _names(rule, ignore) and (not tests or test in tests))


def tests_for(rules: Sequence[str]) -> Tuple[str, ...]:
    """The worker's tests those rules judge, each once."""
    return tuple(dict.fromkeys(TEST_OF_RULE[rule] for rule in rules))


def probe(request: Optional[Dict[str, Any]], python: Optional[str], timeout: float,
          progress: Optional[Callable[[Dict[str, Any]], None]] = None) -> Dict[str, Any]:
    """The worker's answer. ``progress``: called with each test as it finishes ({test, device, status,
    seconds_left}). At the deadline the tests that finished are kept: the answer says which one was cut."""
    if request is None:
        raise ProbeError("the active test was not asked for (preflight smoke, check --smoke)")
    interpreter = python or sys.executable

    def on_line(line: str) -> None:
        if progress is not None and line.startswith('{"progress"'):
            try:
                progress(json.loads(line)["progress"])
            except (ValueError, KeyError, TypeError):
                pass  # a line it could not read is no progress; the answer decides

    try:
        completed = process.run([interpreter, WORKER, json.dumps(request)], timeout, on_line=on_line)
    except process.CommandTimeout as exc:
        answer = _so_far(exc.stdout)
        if answer is None:
            raise ProbeTimeout("the active test did not finish within %.1f s: a GPU or collective that hangs, or "
                               "a budget too small (--timeout)" % exc.seconds, exc.seconds)
        answer["cut"] = ("the deadline (%.1f s) ended the active test before it finished; the tests that finished "
                         "are judged, those it did not reach are unknown (a longer --timeout, or fewer tests with "
                         "--select, runs them)" % exc.seconds)
        return _checked(answer, interpreter)
    except process.CommandFailed as exc:
        raise ProbeError(str(exc))
    lines = [line for line in completed.stdout.splitlines() if line.startswith("{") and not
             line.startswith('{"progress"')]
    if not lines:
        detail = (completed.stderr.strip().splitlines() or ["exit status %d" % completed.returncode])[-1]
        raise ProbeError("the active test in %s gave no answer: %s" % (interpreter, detail[:300]))
    try:
        answer = json.loads(lines[-1])
    except ValueError as exc:
        raise ProbeError("the active test's answer is not JSON: %s" % exc)
    return _checked(answer, interpreter)


def say_progress(step: Dict[str, Any]) -> None:
    """One line on standard error as each test finishes: which, on which device, how it ended, the time left."""
    from preflight.terminal import say

    device = step.get("device")
    say("smoke: %s%s: %s (%s s left)" % (step.get("test"), "" if device is None else " on device %s" % device,
                                         step.get("status"), step.get("seconds_left")))


def _so_far(stdout: str) -> Optional[Dict[str, Any]]:
    """The results of the tests that finished before the deadline: the last progress line's, or None."""
    for line in reversed(stdout.splitlines()):
        if line.startswith('{"progress"'):
            try:
                so_far = json.loads(line)["so_far"]
            except (ValueError, KeyError, TypeError):
                continue  # cut in the middle of its line
            return so_far if isinstance(so_far, dict) else None
    return None


def _checked(answer: Any, interpreter: str) -> Dict[str, Any]:
    from preflight.probes import shape

    problem = shape.problems(answer, shape.SMOKE)
    if problem:
        raise ProbeError("the active test's answer is not what preflight's worker writes: %s" % problem)
    answer["interpreter"] = interpreter
    return answer
