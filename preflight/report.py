"""A check's results and what they add up to: the summary and the exit code.

The exit code belongs to the report, never to an output format:
0 when no error-severity rule failed or errored (warnings allowed),
1 otherwise; with ``strict``, warnings and failures of warning-severity
rules count too (``info`` rules never do).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from preflight.engine.evaluate import STATUSES, Result
from preflight.errors import ExitCode, NpdCode
from preflight.facts.view import NO_CONTEXT, Context

if TYPE_CHECKING:
    from preflight.fix_plan import FixPlan

SCHEMA = "preflight.report/1"


def blocks(status: str, severity: str, strict: bool = False) -> bool:
    """Whether a result with this status and severity makes a check fail: the one verdict policy, used by every
    command, renderer and the fleet alike. An error-severity rule that fails or cannot be evaluated blocks; with
    ``strict``, so does any warning and any failure of a warning-severity rule; an ``info`` rule never blocks."""
    if severity == "info":
        return False
    if strict:
        return status in ("fail", "warn", "error")
    return status in ("fail", "error") and severity == "error"


def one_line(results: List[Result], limit: int = 200) -> str:
    """The first result as ``<rule-id> [<subject>] <message> (+N more)``, one line, no double quotes, at most
    ``limit`` characters: for a drain reason or a termination message, where only a line fits."""
    if not results:
        return ""
    first = results[0]
    more = " (+%d more)" % (len(results) - 1) if len(results) > 1 else ""
    subject = "" if first.subject == "system" else " %s" % first.subject
    text = " ".join(("%s%s %s%s" % (first.id, subject, first.message, more)).replace('"', "'").split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


class Report:
    def __init__(self, profile: str, results: List[Result], strict: bool = False,
                 facts_source: str = "live", seconds: float = 0.0, facts: Optional[Dict[str, Any]] = None,
                 context: Context = NO_CONTEXT) -> None:
        self.profile = profile
        self.results = results
        self.strict = strict
        self.facts_source = facts_source
        self.seconds = seconds
        self.facts = facts or {}  # the snapshot the results came from (GPU facts for NFD and Prometheus)
        self.context = context  # what the run asked of it (the workload, the GPUs expected)
        self.finished_at = time.time()
        self.notes: List[str] = []  # lines for the reader that change no verdict (knowledge that may be stale)
        self.fits: List[Dict[str, Any]] = []  # --fit-label: the largest batch per GPU of each workload (no verdict)
        self._plan: Optional["FixPlan"] = None

    @property
    def plan(self) -> "FixPlan":
        """The blocking results' fixes as one ordered plan (fix_plan): what "Fix first" shows, preflight fix runs."""
        if self._plan is None:
            from preflight import fix_plan

            self._plan = fix_plan.compose(fix_plan.findings_of(self.blocking()), fix_plan.interpreter_of(self.facts),
                                          fix_plan.driver_of(self.facts))
        return self._plan

    def blocking(self) -> List[Result]:
        """The results that make the check fail (``blocks``)."""
        return [r for r in self.results if blocks(r.status, r.severity, self.strict)]

    def reason(self, limit: int = 200) -> str:
        """Why the check fails, in one line (see ``one_line``)."""
        return one_line(self.blocking(), limit)

    def timed_out_probes(self) -> List[str]:
        """Probes that gave no answer before the deadline (their facts are unknown)."""
        probes = self.facts.get("probes") if isinstance(self.facts.get("probes"), dict) else {}
        return sorted(name for name, status in probes.items()
                      if isinstance(status, dict) and status.get("status") == "timeout")

    def undetermined(self, node_faults=("nvml",)) -> List[Result]:
        """Blocking results that are errors only because a probe other than ``node_faults`` timed out.

        Such a result says nothing about the node: preflight itself was too
        slow (a cold ``import torch``, a ``--python`` that does not answer).
        A hung NVML is different: a GPU or driver that hangs NVML is a node fault.
        """
        slow = set(self.timed_out_probes()) - set(node_faults)
        if not slow:
            return []
        from preflight.engine.evaluate import probes_needed

        return [r for r in self.blocking() if r.status == "error" and probes_needed([r.rule]) & slow]

    @property
    def ok(self) -> bool:
        return not self.blocking()

    @property
    def exit_code(self) -> int:
        return ExitCode.OK if self.ok else ExitCode.FAILED

    @property
    def npd_exit_code(self) -> int:
        """node-problem-detector's plugin protocol: 0 OK, 1 a problem, 2 unknown (only undeterminable results block)."""
        blocking = self.blocking()
        if not blocking:
            return NpdCode.OK
        return NpdCode.UNKNOWN if all(r.status == "error" for r in blocking) else NpdCode.PROBLEM

    def counts(self) -> Dict[str, int]:
        counts = {status: 0 for status in STATUSES}
        for result in self.results:
            counts[result.status] += 1
        return counts

    @property
    def host(self) -> Optional[str]:
        host = self.facts.get("hostname")
        return host if isinstance(host, str) else None

    def summary_line(self) -> str:
        """``OK: 14 passed, 1 warning (node profile) in 0.31 s on gpu01``: the verdict in one line, for logs."""
        counts = self.counts()
        words = (("pass", "passed", "passed"), ("fail", "failed", "failed"), ("warn", "warning", "warnings"),
                 ("error", "unknown", "unknown"), ("skip", "skipped", "skipped"))
        said = ", ".join("%d %s" % (counts[key], one if counts[key] == 1 else many)
                         for key, one, many in words if counts[key] or key == "pass")
        return "%s: %s (%s profile%s) in %.2f s on %s" % (
            "OK" if self.ok else "FAILED", said, self.profile, ", strict" if self.strict else "", self.seconds,
            self.host or "unknown host")

    def coverage(self) -> Dict[str, Dict[str, Any]]:
        """What the checks could see, where it can be missing without failing anything: ``xid`` (the kernel log;
        in a container without /dev/kmsg the Xid rules are skipped). Only parts the snapshot probed."""
        log = self.facts.get("kernel_log")
        if not isinstance(log, dict):
            return {}
        return {"xid": {"covered": bool(log.get("readable")), "why": "" if log.get("readable") else
                        str(log.get("reason") or "the kernel log cannot be read")}}

    def inventory(self) -> Dict[str, Any]:
        from preflight import inventory

        return inventory.of(self.facts)

    def to_json(self) -> Dict[str, Any]:
        from preflight import __version__
        from preflight.knowledge.shipped import as_of

        collected = self.facts.get("collected_at")
        return {
            "schema": SCHEMA,
            "host": self.host,
            "collected_at": collected if isinstance(collected, str) else
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.finished_at)),
            "preflight_version": __version__,
            "knowledge_as_of": as_of(),
            "inventory": self.inventory(),
            "ok": self.ok,
            "profile": self.profile,
            "strict": self.strict,
            "exit_code": self.exit_code,
            "summary": self.counts(),
            "facts_source": self.facts_source,
            "seconds": round(self.seconds, 4),
            "results": [result.to_json() for result in self.results],
            "plan": self.plan.to_json(),
            "notes": list(self.notes),
        }


def json_schema() -> Dict[str, Any]:
    """``Report.to_json`` (check --format json) as JSON Schema; ``served`` is what serve's /report adds."""
    from preflight import fix_plan, inventory
    from preflight.engine.evaluate import result_json_schema
    from preflight.files.json_schema import BOOL, INT, NUM, STR, nullable, obj, strings

    counts = obj(STATUSES, {s: {"type": "integer", "minimum": 0} for s in STATUSES}, False)
    return obj(["schema", "host", "collected_at", "preflight_version", "knowledge_as_of", "inventory", "ok", "profile",
                "strict", "exit_code", "summary", "facts_source", "seconds", "results", "plan", "notes"], {
        "schema": {"const": SCHEMA}, "host": nullable(STR),
        "node": STR,  # only in a kept report (--report-dir): the node as the scheduler names it
        "collected_at": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"},
        "preflight_version": STR,
        "knowledge_as_of": nullable({"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}),
        "inventory": inventory.json_schema(), "ok": BOOL, "notes": strings(),
        "profile": {"enum": ["train", "inference", "node"]}, "strict": BOOL, "exit_code": {"enum": [0, 1]},
        "summary": counts, "facts_source": STR, "seconds": {"type": "number", "minimum": 0},
        "results": {"type": "array", "items": result_json_schema()},
        "plan": fix_plan.json_schema(),
        "served": obj(["age_seconds", "checks"], {"age_seconds": NUM, "checks": INT, "last_error": nullable(STR)}),
    })
