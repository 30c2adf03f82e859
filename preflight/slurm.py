"""Slurm node admission: drain a node that fails its checks, resume it when they pass again.

Used as slurmd's ``HealthCheckProgram`` (and as a ``Prolog``). Slurm runs it
as root with almost no environment: no PATH and no SLURM_CONF, only
SLURMD_NODENAME. Its exit status changes nothing by itself, so the program
must call ``scontrol`` to act, as LBNL NHC does:

It finds scontrol in PATH or the usual install folders (SEARCH_DIRS) and
slurm.conf through --slurm-conf, SLURM_CONF or the usual locations
(CONF_CANDIDATES).

- checks fail: ``scontrol update NodeName=N State=DRAIN Reason="preflight: <rule-id> <message>"``
  (the rule id first: ``sinfo -R`` cuts reasons short). A node already
  drained for another reason (by an administrator) keeps that reason.
- checks pass: ``State=RESUME``, but only if the node is drained and its
  reason starts with ``preflight:``; a node an administrator drained stays
  drained.

Every scontrol call has a timeout; a missing, failing or hanging scontrol is
reported (exit 4), never waited on forever.
"""

from __future__ import annotations

import os
import re
import socket
from typing import List, Optional, Tuple

from preflight.errors import PreflightError
from preflight.probes import process
from preflight.report import Report

REASON_PREFIX = "preflight:"
REASON_LIMIT = 200
# Where scontrol lives on common installations; Slurm gives a health program no PATH.
SEARCH_DIRS = ("/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin", "/opt/slurm/bin", "/opt/slurm/sbin")
EXIT_SLURM_FAILED = 4


class SlurmError(PreflightError):
    """scontrol is missing, fails or hangs."""

    exit_code = EXIT_SLURM_FAILED


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


def node_name(explicit: Optional[str], environ) -> str:
    return explicit or environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


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

    def node(self, name: str) -> Tuple[str, Optional[str]]:
        """(state, reason) of a node: ``IDLE+DRAIN``, ``preflight: gpu.health ...``."""
        text = self.run("show", "node", name, "--oneliner")
        state = re.search(r"\bState=(\S+)", text)
        if not state:
            raise SlurmError("scontrol show node %s printed no State: %r" % (name, text.strip()[:200]))
        reason = None
        found = re.search(r"\bReason=(.*)$", text.strip())
        if found:
            reason = re.sub(r"\s*\[[^\]]*@[^\]]*\]\s*$", "", found.group(1)).strip() or None
        return state.group(1), reason

    def drain(self, name: str, reason: str) -> None:
        self.run("update", "NodeName=%s" % name, "State=DRAIN", "Reason=%s" % reason)

    def resume(self, name: str) -> None:
        self.run("update", "NodeName=%s" % name, "State=RESUME")


def drain_reason(report: Report) -> str:
    """``preflight: <rule-id> <message>``, the first blocking result first."""
    blocking = report.blocking()
    first = blocking[0]
    more = " (+%d more)" % (len(blocking) - 1) if len(blocking) > 1 else ""
    subject = "" if first.subject == "system" else " %s" % first.subject
    text = "%s %s%s %s%s" % (REASON_PREFIX, first.id, subject, first.message, more)
    text = " ".join(text.replace('"', "'").split())  # one line, no quotes
    return text if len(text) <= REASON_LIMIT else text[:REASON_LIMIT - 3] + "..."


def is_drained(state: str) -> bool:
    return "DRAIN" in state.upper()


def admit(report: Report, scontrol: Scontrol, node: str) -> List[str]:
    """Drain or resume ``node`` as the report says; returns what was done, in words."""
    state, reason = scontrol.node(node)
    ours = (reason or "").startswith(REASON_PREFIX)
    if report.ok:
        if is_drained(state) and ours:
            scontrol.resume(node)
            return ["checks pass: resumed %s (it was drained by preflight: %s)" % (node, reason)]
        if is_drained(state):
            return ["checks pass; %s stays drained: its reason is not preflight's (%s)" % (node, reason)]
        return ["checks pass; %s is %s" % (node, state)]
    wanted = drain_reason(report)
    if is_drained(state) and reason and not ours:
        return ["checks fail (%s); %s is already drained for another reason, left as it is: %s" % (wanted, node, reason)]
    if is_drained(state) and reason == wanted:
        return ["checks fail; %s is already drained: %s" % (node, reason)]
    scontrol.drain(node, wanted)
    return ["checks fail: drained %s: %s" % (node, wanted)]

