"""Run the active GPU test (smoke_worker.py) in the job's interpreter, within the deadline, and read its answer.

The worker runs in its own process group (probes/process.py): at the deadline the whole group is killed, the
ranks of its all-reduce included, and every process it started (preflight is their subreaper); the facts say it
did not finish rather than hang. Each test's result reaches preflight as it finishes, so whatever ends the worker
loses only the test it was running, and that test says what ended it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from preflight import units
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
    """The worker's answer. ``progress``: called with each line of progress ({test, device, status,
    seconds_left}, and a heartbeat's doing, seconds and resident_bytes). Whatever ends the worker before it answers
    (the deadline, a signal, a crash), the tests that finished are kept and the one that was running says what
    ended it."""
    if request is None:
        raise ProbeError("the active test was not asked for (preflight smoke, check --smoke)")
    interpreter = python or sys.executable
    watch = _Watch(progress)
    try:
        completed = process.run([interpreter, WORKER, json.dumps(request)], timeout, on_line=watch.line,
                                whole_tree=True)
    except process.CommandTimeout as exc:
        ended = ("the deadline (%.1f s) ended it: a GPU or collective that hangs, or a budget too small for it "
                 "(a longer --timeout, or fewer tests with --select, runs it)" % exc.seconds)
        answer = watch.ended(ended, "the deadline (%.1f s)" % exc.seconds)
        if answer is None:
            raise ProbeTimeout("the active test did not finish within %.1f s: a GPU or collective that hangs, or "
                               "a budget too small (--timeout)" % exc.seconds, exc.seconds)
        return _checked(answer, interpreter)
    except process.CommandFailed as exc:
        raise ProbeError(str(exc))
    if watch.answer is not None:
        return _checked(watch.answer, interpreter)
    ended = _ended_by(completed.returncode, completed.stderr, watch.resident)
    answer = watch.ended(ended, ended.split(":")[0])
    if answer is None:
        raise ProbeError("the active test in %s gave no answer: %s" % (interpreter, ended))
    return _checked(answer, interpreter)


class _Watch:
    """What the worker has said so far: its last results, the test it is running, its resident memory."""

    def __init__(self, progress: Optional[Callable[[Dict[str, Any]], None]]) -> None:
        self.progress = progress
        self.so_far: Optional[Dict[str, Any]] = None
        self.running: Optional[Dict[str, Any]] = None  # the test started and not finished
        self.resident: Optional[int] = None
        self.answer: Optional[Any] = None

    def line(self, line: str) -> None:
        if not line.startswith("{"):
            return
        try:
            message = json.loads(line)
        except ValueError:
            return  # a line cut short: the last whole one counts
        if not isinstance(message, dict):
            return
        step = message.get("progress")
        if not isinstance(step, dict):
            self.answer = message
            return
        if isinstance(message.get("so_far"), dict):
            self.so_far = message["so_far"]
        status = step.get("status")
        self.running = step if status in ("started", "running") else None
        if isinstance(step.get("resident_bytes"), int):
            self.resident = step["resident_bytes"]
        if self.progress is not None and status != "started":
            self.progress(step)

    def ended(self, how: str, what: str) -> Optional[Dict[str, Any]]:
        """The results so far, the running test's entry saying ``how`` it ended, and what it did not reach
        marked as cut by ``what``; None when no test had started."""
        if self.so_far is None:
            return None
        answer = self.so_far
        running = self.running or {}
        test, index = running.get("test"), running.get("device")
        if test in ("collective", "fit"):
            answer.setdefault("checks", {})[test] = {"error": how}
        elif test is not None:
            for device in answer.get("devices") or []:
                if isinstance(device, dict) and device.get("index") == index:
                    device[test] = {"error": how}
        answer["cut"] = "%s ended the active test%s; the tests it did not reach are unknown" % (
            what, " during %s" % _named(running) if test else "")
        return answer


def _named(step: Dict[str, Any]) -> str:
    device = step.get("device")
    return "%s%s" % (step.get("test"), "" if device is None else " on device %s" % device)


# What ends a process by each signal, in the words the user needs (signal(7)); by name: the numbers differ by system.
_SIGNALS = {getattr(signal, name): said for name, said in (
    ("SIGKILL", "the kernel's out-of-memory killer ends a process this way when the machine runs out of memory "
                "(journalctl -k | grep -i 'out of memory' says whether it did); so does kill -9"),
    ("SIGSEGV", "a crash in native code (torch, a CUDA library, the driver or an extension the checkout builds)"),
    ("SIGABRT", "a native library aborted (a failed assertion or an uncaught C++ exception: standard error says "
                "which)"),
    ("SIGBUS", "a memory-mapped file or shared memory ran out (a small /dev/shm: docker run --shm-size)"),
) if hasattr(signal, name)}


def _ended_by(returncode: int, stderr: str, resident: Optional[int]) -> str:
    """What ended a worker that gave no answer, and what to do about it."""
    said = process.ended_by(returncode)
    if returncode < 0:
        said += ": %s" % _SIGNALS.get(-returncode, "sent by another process")
        if returncode == -getattr(signal, "SIGKILL", 0):
            said += "; the machine has %s of memory%s. A smaller --batch or --img, or fewer other processes, " \
                    "leaves it room" % (_total_memory(), "" if resident is None else
                                        ", the worker held %s at its last report" % units.format_bytes(resident))
        return said
    last = (stderr.strip().splitlines() or ["no message"])[-1]
    return "it %s before answering: %s" % (said, last[:300])


def _total_memory() -> str:
    try:
        import psutil

        return units.format_bytes(psutil.virtual_memory().total)
    except Exception:  # psutil does not support this system
        return "an unknown amount"


def say_progress(step: Dict[str, Any]) -> None:
    """One line on standard error as each test finishes, and every few seconds while a long one runs: which, on
    which device, what it does, the time left."""
    from preflight.terminal import say

    if step.get("status") == "running":
        resident = step.get("resident_bytes")
        say("smoke: %s: %s (running for %s s%s, %s s left)" % (
            _named(step), step.get("doing") or "still running", step.get("seconds"),
            ", %s resident" % units.format_bytes(resident) if isinstance(resident, int) else "",
            step.get("seconds_left")))
        return
    say("smoke: %s: %s (%s s left)" % (_named(step), step.get("status"), step.get("seconds_left")))


def _checked(answer: Any, interpreter: str) -> Dict[str, Any]:
    from preflight.probes import shape

    problem = shape.problems(answer, shape.SMOKE)
    if problem:
        raise ProbeError("the active test's answer is not what preflight's worker writes: %s" % problem)
    answer["interpreter"] = interpreter
    return answer
