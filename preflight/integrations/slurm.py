"""Slurm node admission: drain a node that fails its checks, resume it when they pass again.

Used as slurmd's ``HealthCheckProgram`` (and as a ``Prolog``). Slurm runs it
as root with almost no environment: no PATH and no SLURM_CONF, only
SLURMD_NODENAME. Its exit status changes nothing by itself, so the program
must call ``scontrol`` to act, as LBNL NHC does:

It finds scontrol in PATH or the usual install folders (SEARCH_DIRS) and
slurm.conf through --slurm-conf, SLURM_CONF or the usual locations
(CONF_CANDIDATES).

- checks fail: ``scontrol update NodeName=N State=DRAIN Reason="preflight: <rule-id> <message>"``
  (the rule id first: ``sinfo -R`` cuts reasons short).
- checks pass: ``State=RESUME``, but only if the node is drained (not DOWN,
  FAIL or MAINT) with exactly the reason preflight recorded setting
  (``DrainRecord``, in the cache folder).
- a node whose reason is anyone else's (an administrator's DOWN, FAIL, MAINT
  or DRAIN, even with a reason that starts with ``preflight:``; Slurm's own) is
  never drained over and never resumed.
- checks that could not finish (a probe timed out) change nothing: the
  verdict is unknown (exit 5), as NHC does.

Every scontrol call has a timeout; a missing, failing or hanging scontrol is
reported (exit 4), never waited on forever.
"""

from __future__ import annotations

import os
import re
import socket
import time
from typing import List, NamedTuple, Optional, Tuple

from preflight.engine.evaluate import Result
from preflight.errors import ExitCode, PreflightError
from preflight.probes import process
from preflight.report import Report, one_line

REASON_PREFIX = "preflight:"
REASON_LIMIT = 200
# Where scontrol lives on common installations; Slurm gives a health program no PATH.
SEARCH_DIRS = ("/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin", "/opt/slurm/bin", "/opt/slurm/sbin")


class SlurmError(PreflightError):
    """scontrol is missing, fails or hangs."""

    exit_code = ExitCode.SLURM_FAILED


def require_job_interpreter(profile: str, python: Optional[str], where: str = "") -> None:
    """Admitting a node with a job profile means probing the job's interpreter: preflight's own is not it."""
    if profile != "node" and not python:
        raise PreflightError(
            "--profile %s%s checks a job's Python environment, and preflight's own is not the job's: give the "
            "training interpreter with --python PATH, or admit nodes with --profile node (the default)"
            % (profile, where), "the node profile checks the hardware and the driver, which is what admission needs")


def find_scontrol(explicit: Optional[str], environ) -> str:
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise SlurmError("--scontrol %s: no such executable" % explicit)
        return explicit
    folders = [d for d in (environ.get("PATH") or "").split(os.pathsep) if d] + list(SEARCH_DIRS)
    for folder in folders:
        candidate = os.path.join(folder, "scontrol")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise SlurmError("cannot find scontrol in PATH or %s" % ", ".join(SEARCH_DIRS),
                     "give its path: preflight slurm --scontrol /path/to/scontrol")


# Where slurm.conf lives on common installations, for when neither --slurm-conf nor SLURM_CONF says.
CONF_CANDIDATES = ("/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf", "/usr/local/etc/slurm.conf",
                   "/opt/slurm/etc/slurm.conf")


def find_slurm_conf(explicit: Optional[str], environ) -> Optional[str]:
    """--slurm-conf, else SLURM_CONF, else the first usual location that exists; None leaves scontrol's own default."""
    if explicit:
        if not os.path.isfile(explicit):
            raise SlurmError("--slurm-conf %s: no such file" % explicit)
        return explicit
    if environ.get("SLURM_CONF"):
        return environ["SLURM_CONF"]
    return next((path for path in CONF_CANDIDATES if os.path.isfile(path)), None)


def scheduler_node_name(environ) -> Optional[str]:
    """The node as Slurm names it, where slurmd's environment says (health program, prolog, a job); else None."""
    return environ.get("SLURMD_NODENAME") or None


def node_name(explicit: Optional[str], environ) -> str:
    return explicit or scheduler_node_name(environ) or socket.gethostname().split(".")[0]


class Scontrol:
    def __init__(self, path: str, slurm_conf: Optional[str], timeout: float, environ) -> None:
        self.path = path
        self.timeout = timeout
        self.env = {"PATH": os.pathsep.join(SEARCH_DIRS)}
        for name in ("SLURM_CONF", "HOME", "LANG"):
            if environ.get(name):
                self.env[name] = environ[name]
        if slurm_conf:
            self.env["SLURM_CONF"] = slurm_conf

    def run(self, *args: str) -> str:
        argv = [self.path] + list(args)
        try:
            completed = process.run(argv, self.timeout, env=self.env)
        except process.CommandTimeout:
            raise SlurmError("scontrol %s did not answer within %.0f s" % (" ".join(args), self.timeout),
                             "is slurmctld running and reachable? (--scontrol-timeout)")
        except process.CommandFailed as exc:
            raise SlurmError(str(exc))
        if completed.returncode != 0:
            detail = (completed.stderr.strip() or completed.stdout.strip() or "exit status %d" % completed.returncode)
            raise SlurmError("scontrol %s failed: %s" % (" ".join(args), detail.splitlines()[-1]),
                             "is slurmctld reachable, is this node in slurm.conf (--node), and is --slurm-conf right?")
        return completed.stdout

    def node(self, name: str) -> "NodeInfo":
        """What Slurm says of a node: its state (``IDLE+DRAIN``), reason, GPUs in its Gres, partitions, features."""
        text = self.run("show", "node", name, "--oneliner")
        return parse_node(name, text)

    def drain(self, name: str, reason: str) -> None:
        self.run("update", "NodeName=%s" % name, "State=DRAIN", "Reason=%s" % reason)

    def resume(self, name: str) -> None:
        self.run("update", "NodeName=%s" % name, "State=RESUME")


class NodeInfo(NamedTuple):
    """One node as ``scontrol show node`` describes it."""

    name: str
    state: str
    reason: Optional[str]
    gres_gpus: Optional[int]  # None: the Gres lists no GPU
    gres: str
    partitions: Tuple[str, ...]
    features: Tuple[str, ...]


def _field(line: str, name: str) -> Optional[str]:
    found = re.search(r"(?:^|\s)%s=(\S*)" % re.escape(name), line)
    value = found.group(1) if found else None
    return None if value in (None, "", "(null)") else value


def parse_node(name: str, text: str) -> NodeInfo:
    line = " ".join(text.split())
    state = _field(line, "State")
    if not state:
        raise SlurmError("scontrol show node %s printed no State: %r" % (name, text.strip()[:200]))
    gres = _field(line, "Gres") or ""
    features = _field(line, "ActiveFeatures") or _field(line, "AvailableFeatures") or ""
    return NodeInfo(name, state, parse_reason(text), gres_gpu_count(gres), gres,
                    tuple(p for p in (_field(line, "Partitions") or "").split(",") if p),
                    tuple(f for f in features.split(",") if f))


def gres_gpu_count(gres: str) -> Optional[int]:
    """How many GPUs a node's Gres lists: ``gpu:8``, ``gpu:h100:8``, ``gpu:a100:4(S:0-1)``, ``gpu:h100:4,gpu:a100:2``.

    None when no entry is a GPU (``(null)``, ``shard:8`` alone). ``gpu`` with no count is one GPU, as in
    slurm.conf; ``gpu:0`` is zero.
    """
    total: Optional[int] = None
    for entry in re.split(r",(?![^(]*\))", gres):  # commas inside (S:0-1,3) are not separators
        parts = entry.split("(")[0].strip().split(":")
        if parts[0].strip().lower() != "gpu":
            continue
        count = 1
        if len(parts) > 1:
            last = parts[-1].strip()
            multiplier = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}.get(last[-1:].lower(), 1)
            digits = last[:-1] if multiplier > 1 else last
            if digits.isdigit():
                count = int(digits) * multiplier
        total = (total or 0) + count
    return total


def drain_reason(blocking: List[Result]) -> str:
    """``preflight: <rule-id> <message>``, the first blocking result first."""
    return "%s %s" % (REASON_PREFIX, one_line(blocking, REASON_LIMIT - len(REASON_PREFIX) - 1))


# Slurm ends a reason with "[user@time]", and --oneliner prints more fields after it
# (Comment=, Extra=, ...): the reason is what lies between "Reason=" and that stamp.
_REASON_STAMPED = re.compile(r"(?:^|\s)Reason=(.*?) \[[^\]\s]*@[^\]\s]*\](?=\s|$)")
# Without a stamp, the reason runs to the next field Slurm prints after it.
_REASON_TO_NEXT_FIELD = re.compile(r"(?:^|\s)Reason=(.*?)(?=\s+(?:Comment|Extra|ExtSensors\w*|Energy\w*|"
                                   r"Power\w*|ResumeAfterTime|InstanceId|InstanceType|Partitions|"
                                   r"NextState|LastBusyTime)=|\s*$)")


def parse_reason(text: str) -> Optional[str]:
    """The node's reason exactly as set, from ``scontrol show node --oneliner`` output."""
    line = " ".join(text.split())
    found = _REASON_STAMPED.search(line) or _REASON_TO_NEXT_FIELD.search(line)
    if not found:
        return None
    reason = found.group(1).strip()
    return reason if reason and reason != "(null)" else None


def verdict(report: Report) -> Tuple[List[Result], List[Result]]:
    """(failures that speak about the node, results left unknown because preflight itself was too slow)."""
    undetermined = report.undetermined()
    return [r for r in report.blocking() if r not in undetermined], undetermined


def is_drained(state: str) -> bool:
    return "DRAIN" in state.upper()


# Node states and flags in which a node is out of service; whoever put it there (its reason) owns it.
_OUT_OF_SERVICE = {"DRAIN", "DRAINING", "DRAINED", "DOWN", "FAIL", "FAILING", "MAINT", "REBOOT", "REBOOT_REQUESTED",
                   "REBOOT_ISSUED", "POWER_DOWN", "POWERED_DOWN", "POWERING_DOWN", "INVAL", "NOT_RESPONDING",
                   "FUTURE"}
_DRAIN_FLAGS = {"DRAIN", "DRAINING", "DRAINED"}


def _flags(state: str) -> set:
    return {word.strip("*~#!%$@^-") for word in state.upper().split("+")}


def out_of_service(state: str) -> bool:
    return bool(_flags(state) & _OUT_OF_SERVICE)


def drained_only(state: str) -> bool:
    """Drained, and out of service for no other reason: the state preflight's own drain leaves (IDLE+DRAIN,
    MIXED+DRAIN), not DOWN, FAIL or MAINT that someone set on top of it."""
    flags = _flags(state)
    return bool(flags & _DRAIN_FLAGS) and not (flags - _DRAIN_FLAGS) & _OUT_OF_SERVICE


def looks_like_ours(reason: Optional[str]) -> bool:
    """A reason in preflight's form (``preflight: ...``); only a recorded one is preflight's to lift."""
    return (reason or "").startswith(REASON_PREFIX)


class DrainRecord:
    """The reasons preflight set, by node, kept in the cache folder (slurm-drains.json).

    A reason that merely starts with ``preflight:`` proves nothing: an administrator may write one, or set DOWN and
    keep it. preflight lifts only a drain it recorded setting, with exactly the reason it set; a lost record (a
    cleared cache) leaves the node to the administrator, never resumes it by guess.
    """

    FILE = "slurm-drains.json"

    def __init__(self) -> None:
        from preflight.files import cache

        self.kept = cache.usable()  # else a drain set now cannot be recorded
        data = cache.read_json(self.FILE) if self.kept else None
        self.drains = {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}

    def reason(self, node: str) -> Optional[str]:
        reason = self.drains.get(node, {}).get("reason")
        return reason if isinstance(reason, str) else None

    def set(self, node: str, reason: Optional[str]) -> None:
        from preflight.files import cache

        if reason is None:
            self.drains.pop(node, None)
        else:
            self.drains[node] = {"reason": reason, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        cache.write_json(self.FILE, self.drains)


class Decision(NamedTuple):
    """What to do to a node (``resume``, ``drain`` with ``reason``, or ``none``), as done and as planned."""

    action: str
    reason: Optional[str]
    done: str
    planned: str


def decide(failures: List[Result], node: str, state: str, reason: Optional[str],
           recorded: Optional[str] = None) -> Decision:
    """Drain ``node`` for ``failures``, or resume it when there are none and the drain is preflight's own.

    Preflight's own drain: the node is only drained (not DOWN, FAIL, MAINT) and its reason is exactly the one
    preflight ``recorded`` setting. Any other reason (an administrator's, even one starting with ``preflight:``;
    Slurm's own "Not responding") is never drained over and never resumed.
    """
    ours = reason is not None and reason == recorded and drained_only(state)
    foreign = reason is not None and not ours
    if not failures:
        if ours:
            return Decision("resume", None, "checks pass: resumed %s (its reason was %s)" % (node, reason),
                            "checks pass: would resume %s (its reason is %s)" % (node, reason))
        if foreign or out_of_service(state):
            why = "its reason is not preflight's (%s)" % (reason or "no reason given")
            if looks_like_ours(reason) and reason == recorded:
                why = "it is %s, not only drained: someone else set that state (reason: %s)" % (state, reason)
            elif looks_like_ours(reason):
                why = ("its reason looks like preflight's, but preflight has no record of setting it here (an "
                       "administrator's, or set before preflight kept records): %s; resume it with scontrol update "
                       "NodeName=%s State=RESUME" % (reason, node))
            words = "checks pass; %s stays %s: %s" % (node, state, why)
            return Decision("none", None, words, words)
        words = "checks pass; %s is %s" % (node, state)
        return Decision("none", None, words, words)
    wanted = drain_reason(failures)
    if foreign:
        words = "checks fail (%s); %s is %s for another reason, left as it is: %s" % (wanted, node, state, reason)
        return Decision("none", None, words, words)
    if ours and reason == wanted:
        words = "checks fail; %s is already drained: %s" % (node, reason)
        return Decision("none", None, words, words)
    if not ours and out_of_service(state):
        words = "checks fail (%s); %s is %s (no reason given), left as it is" % (wanted, node, state)
        return Decision("none", None, words, words)
    return Decision("drain", wanted, "checks fail: drained %s: %s" % (node, wanted),
                    "checks fail: would drain %s: %s" % (node, wanted))


def admit(failures: List[Result], scontrol: Scontrol, node: str, dry_run: bool = False) -> List[str]:
    """Decide from the node's current state and reason, then act (unless ``dry_run``); returns what happened."""
    info = scontrol.node(node)
    record = DrainRecord()
    decision = decide(failures, node, info.state, info.reason, record.reason(node))
    if dry_run:
        return ["dry run, nothing changed: %s" % decision.planned]
    if decision.action == "resume":
        scontrol.resume(node)
        record.set(node, None)
    elif decision.action == "drain":
        record.set(node, decision.reason)  # first: a drain must never be left without its record
        scontrol.drain(node, decision.reason)
    lines = [decision.done]
    if decision.action == "drain" and not record.kept:
        lines.append("the cache folder is off, so this drain is not recorded: preflight will not resume %s itself "
                     "(scontrol update NodeName=%s State=RESUME)" % (node, node))
    return lines


# --- the prolog: the job's GPUs, from the environment Slurm gives it ------------------------------------------

JOB_GPU_VARIABLES = ("SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES")


def job_gpus(environ) -> Tuple[Optional[Tuple[int, ...]], str]:
    """(the node-level indices of the job's GPUs, the variable that said so); (None, why) when the job has none.

    Slurm gives a prolog SLURM_JOB_GPUS ("0,1") and, with GPU Gres, CUDA_VISIBLE_DEVICES: both number the
    node's GPUs as gres.conf does, which with AutoDetect=nvml is NVML's order (by PCI bus id)."""
    unread = []
    for variable in JOB_GPU_VARIABLES:
        text = (environ.get(variable) or "").strip()
        if not text:
            continue
        unread.append(variable)
        indices: List[int] = []
        for part in text[:4096].split(","):
            first, dash, last = part.strip().partition("-")
            if not (_index(first) is not None and (not dash or _index(last) is not None)):
                break  # UUIDs or MIG names: not indices preflight can map without NVML
            low, high = _index(first), _index(last) if dash else _index(first)
            if high < low or high - low >= MAX_GPU_INDEX:
                break
            indices.extend(range(low, high + 1))
        else:
            return tuple(sorted(set(indices))), variable
    if unread:
        return None, "%s names no GPU index of this node (UUIDs, MIG names or values out of range)" % " nor ".join(
            unread)
    return None, "neither %s is set: the job has no GPU" % " nor ".join(JOB_GPU_VARIABLES)


MAX_GPU_INDEX = 1024  # far more GPUs than a node has: a larger index is no GPU of this node, never a range to walk


def _index(text: str) -> Optional[int]:
    """A GPU index as Slurm writes it (ASCII digits); None for anything else (a UUID, '²', a 5,000-digit number)."""
    text = text.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 4) or int(text) >= MAX_GPU_INDEX:
        return None
    return int(text)


def subject_gpu(subject: str) -> Optional[int]:
    """The GPU index of a result's subject (``gpu3`` -> 3); None for ``system``."""
    return int(subject[3:]) if subject.startswith("gpu") and subject[3:].isdigit() else None


class whole_machine:
    """Within it, CUDA_VISIBLE_DEVICES is unset, so the probes see every GPU of the node, not only the job's."""

    def __init__(self, environ) -> None:
        self.environ = environ
        self.saved: Optional[str] = None

    def __enter__(self) -> None:
        self.saved = self.environ.pop("CUDA_VISIBLE_DEVICES", None)

    def __exit__(self, *exc) -> None:
        if self.saved is not None:
            self.environ["CUDA_VISIBLE_DEVICES"] = self.saved
