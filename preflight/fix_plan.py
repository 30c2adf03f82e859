"""Every finding's fix as one plan: ordered steps that agree with each other, the plan ``preflight fix`` applies.

Each failing rule has a fix of its own; followed one after another they must reach a passing check. The plan:

- orders the fixes as the rules say (``fix_order``); a fix that answers another failing rule (``answers``) tells
  both, and one fix shared by several GPUs or rules is one step;
- turns the pip commands that install into the job's interpreter into transactions: the lines from PyPI of every
  step are one ``pip install`` (requirements merged per distribution, so no package appears twice and no second
  distribution of one module is added), the ``--no-deps`` lines one more after it, and each PyTorch index's line
  stays its own, once; pip resolves and downloads a transaction before it replaces anything;
- says which driver the torch it pins is for when a step before it changes the driver;
- marks what ``preflight fix`` runs (pip installs into the job's interpreter) and what is left to the user (sudo,
  drivers, system packages, conda, Slurm, the kernel: anything else a fix prints).

Pure: it reads the rendered fixes, never the machine.
"""

from __future__ import annotations

import shlex
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from preflight.knowledge import pip_commands

PYTORCH_INDEX = "download.pytorch.org"


class Finding(NamedTuple):
    """One failing rule (or diagnosed failure) with its rendered fix."""

    rule: str
    where: str  # "torch.cuda", "gpu.health on gpu1"
    fix: Dict[str, Any]  # title, steps, commands (rendered)
    order: int  # the rule's fix_order
    answers: Tuple[str, ...] = ()  # rules this fix also answers when they fail too
    changes_driver: bool = False  # the fix installs another driver branch


class Step(NamedTuple):
    """One thing to do: a fix's title, the findings it settles, and the pip commands preflight fix runs for it."""

    number: int
    title: str
    where: List[str]
    run: List[str]  # pip commands for the job's interpreter, merged across the plan (empty: none of its own)
    installed_by: Optional[int]  # the earlier step whose transaction installs this one's packages
    notes: List[str]

    @property
    def yours(self) -> bool:
        """Left to the user: nothing for pip here, nor in the transaction of an earlier step."""
        return not self.run and self.installed_by is None

    def to_json(self) -> Dict[str, Any]:
        return {"number": self.number, "title": self.title, "where": list(self.where), "run": list(self.run),
                "installed_by": self.installed_by, "yours": self.yours, "notes": list(self.notes)}


class Driver(NamedTuple):
    """What the torch steps were chosen for, and what a driver step would change: the driver as it is, the GPUs'
    compute capabilities and the job's Python and platform."""

    version: Optional[str] = None
    cuda: Optional[str] = None
    ccs: Tuple[str, ...] = ()
    python: Optional[str] = None
    platform: Optional[str] = None


class FixPlan(NamedTuple):
    interpreter: Optional[str]  # the job's interpreter: the one preflight fix installs into
    steps: List[Step]

    @property
    def pip_steps(self) -> List[Step]:
        return [step for step in self.steps if step.run]

    @property
    def yours(self) -> List[Step]:
        return [step for step in self.steps if step.yours]

    def commands(self) -> List[str]:
        """Every pip command preflight fix runs, in order."""
        return [command for step in self.steps for command in step.run]

    def to_json(self) -> Dict[str, Any]:
        return {"interpreter": self.interpreter, "steps": [step.to_json() for step in self.steps]}


def json_schema() -> Dict[str, Any]:
    from preflight.files.json_schema import BOOL, INT, STR, nullable, obj, strings

    step = obj(["number", "title", "where", "run", "installed_by", "yours", "notes"], {
        "number": INT, "title": STR, "where": strings(), "run": strings(), "installed_by": nullable(INT),
        "yours": BOOL, "notes": strings()})
    return obj(["interpreter", "steps"], {"interpreter": nullable(STR), "steps": {"type": "array", "items": step}})


def compose(findings: Sequence[Finding], interpreter: Optional[str], driver: Driver = Driver()) -> FixPlan:
    """The plan for ``findings`` (the blocking ones, in the order they were found)."""
    shown = _shown(findings)
    failing = {finding.rule for finding in findings}
    grouped: Dict[str, List[Any]] = {}  # fix title -> [(order, position), where, findings]
    for position, finding in enumerate(findings):
        if finding.rule not in shown:
            continue  # told with the fix that answers it
        title = finding.fix["title"]
        entry = grouped.setdefault(title, [(finding.order, position), [], []])
        entry[1].append(finding.where)
        entry[1].extend(rule for rule in finding.answers if rule in failing and rule not in shown
                        and rule not in entry[1])
        entry[2].append(finding)
    ordered = sorted(grouped.items(), key=lambda item: item[1][0])
    transactions = _Transactions(interpreter)
    steps: List[Step] = []
    driver_step: Optional[int] = None
    for number, (title, (_, where, members)) in enumerate(ordered, 1):
        for finding in members:
            for command in finding.fix.get("commands") or []:
                transactions.add(number, command)
        if driver_step is None and any(finding.changes_driver for finding in members):
            driver_step = number
        steps.append(Step(number, title, where, [], None, []))
    steps = transactions.place(steps)
    if driver_step is not None:
        steps = [_after_driver(step, driver_step, driver) if step.number > driver_step else step for step in steps]
    return FixPlan(interpreter, steps)


def _shown(findings: Sequence[Finding]) -> set:
    """The rules whose fixes are steps: all but those a shown fix answers (in fix order: a fix answered by another
    answers nothing itself, so the driver's step, answering cuda.compat, does not answer what cuda.compat would)."""
    shown: set = set()
    hidden: set = set()
    ordered = sorted(findings, key=lambda finding: finding.order)
    for finding in ordered:
        answerers = [other for other in ordered if other.rule != finding.rule and finding.rule in other.answers]
        if any(other.rule not in hidden for other in answerers):
            hidden.add(finding.rule)
        else:
            shown.add(finding.rule)
    return shown - hidden


def findings_of(results) -> List[Finding]:
    """The plan's findings from a check's blocking results (engine.evaluate.Result) that have a fix."""
    found = []
    for result in results:
        if not result.fix:
            continue
        chosen = result.rule.rule.fix_for(result.observed)
        where = result.id if result.subject == "system" else "%s on %s" % (result.id, result.subject)
        found.append(Finding(result.id, where, result.fix, result.rule.rule.fix_order, tuple(result.rule.rule.answers),
                             getattr(chosen, "changes", "") == "driver"))
    return found


def driver_of(snapshot: Dict[str, Any]) -> Driver:
    """The driver, GPUs, Python and platform a snapshot shows, for what a driver step changes."""
    from preflight.facts import readers
    from preflight.facts.view import SnapshotView, Unknown

    facts = SnapshotView(snapshot)
    nvml = snapshot.get("nvml") if isinstance(snapshot.get("nvml"), dict) else {}
    try:
        ccs = tuple(str(gpu.get("compute_capability")) for gpu in facts.visible_gpus() if gpu.get("compute_capability"))
    except Unknown:
        ccs = ()
    python = snapshot.get("python") if isinstance(snapshot.get("python"), dict) else {}
    return Driver(nvml.get("driver_version"), nvml.get("cuda_driver_version"), ccs, python.get("version"),
                  readers.platform(facts))


def interpreter_of(snapshot: Dict[str, Any]) -> Optional[str]:
    """The job's interpreter the snapshot's Python facts are of (where preflight fix installs)."""
    python = snapshot.get("python") if isinstance(snapshot.get("python"), dict) else {}
    executable = python.get("executable")
    return executable if isinstance(executable, str) and executable else None


class _Transactions:
    """The pip commands of the plan's steps for one interpreter, merged into transactions, and where each runs:

    - ``early``: requirements from PyPI the package knowledge covers (none of them needs torch): one transaction at
      the first step that has any, before any torch line, so that a torch line finds them installed and leaves them
      as the plan pinned them (torchvision would otherwise take the newest numpy);
    - each PyTorch index's line, once, at its own step;
    - ``late``: requirements the knowledge does not cover (their own requirements are unknown: one may need torch),
      after every torch line, so that pip finds the plan's torch there;
    - ``no_deps``: packages whose one requirement is torch, with --no-deps, last.
    """

    def __init__(self, interpreter: Optional[str]) -> None:
        self.interpreter = interpreter
        self.early: List[Tuple[int, str]] = []  # (step, requirement)
        self.late: List[Tuple[int, str]] = []
        self.no_deps: List[Tuple[int, str]] = []
        self.indexes: List[Tuple[int, str]] = []  # (step, command) for each PyTorch-index line, once

    def add(self, step: int, command: str) -> None:
        words = self._pip_install(command)
        if words is None:
            return
        options = [w for w in words if w.startswith("-")]
        requirements = [w for w in words if not w.startswith("-")]
        if any(PYTORCH_INDEX in word for word in words) or set(options) - {"--no-deps"}:
            if command not in [c for _, c in self.indexes]:
                self.indexes.append((step, command))
            return
        for requirement in requirements:
            if options == ["--no-deps"]:
                self.no_deps.append((step, requirement))
            elif pip_commands.known_without_torch(requirement):
                self.early.append((step, requirement))
            else:
                self.late.append((step, requirement))

    def _pip_install(self, command: str) -> Optional[List[str]]:
        """The words after ``install`` of ``<interpreter> -m pip install ...`` (one command, no shell operators, an
        option's value joined to it); None for anything else."""
        if self.interpreter is None or "  #" in command:
            return None
        try:
            words = shlex.split(command)
        except ValueError:
            return None
        if words[:4] != [self.interpreter, "-m", "pip", "install"] or \
                any(w in ("&&", "||", ";", "|") for w in words):
            return None
        rest = words[4:]
        for index, word in enumerate(rest):
            if word in pip_commands.VALUED and index + 1 < len(rest):
                rest[index] = "%s=%s" % (word, rest[index + 1])
                rest[index + 1] = ""
        return [w for w in rest if w]

    def _command(self, requirements: List[str], options: Sequence[str] = ()) -> str:
        merged = pip_commands.merge_requirements(requirements)
        return " ".join([shlex.quote(self.interpreter or "python"), "-m", "pip", "install"] + list(options)
                        + [shlex.quote(r) for r in merged])

    def place(self, steps: List[Step]) -> List[Step]:
        runs: Dict[int, List[str]] = {}
        installed_in: Dict[int, List[Tuple[int, str]]] = {}  # step -> (the step installing its packages, why there)
        last_index = max([step for step, _ in self.indexes] + [0])
        at = 0
        for part, options, after, why in (
                (self.early, (), 0, "one transaction"), (None, (), 0, ""),
                (self.late, (), last_index, "after torch: what they need is not known here, and pip would take "
                                            "torch from PyPI for one that needs it"),
                (self.no_deps, ("--no-deps",), last_index, "with --no-deps, after torch: torch is their one "
                                                           "requirement")):
            if part is None:  # the PyTorch index lines, each at its own step
                for step, command in self.indexes:
                    runs.setdefault(step, []).append(command)
                continue
            if not part:
                continue
            at = max(part[0][0], after, at if options else 0)
            runs.setdefault(at, []).append(self._command([r for _, r in part], options))
            for step, _ in part:
                if step != at and (at, why) not in installed_in.setdefault(step, []):
                    installed_in[step].append((at, why))
        placed = []
        for step in steps:
            notes = list(step.notes)
            targets = installed_in.get(step.number, [])
            own = runs.get(step.number, [])
            for target, why in targets:
                notes.append("%s packages are in step %d's pip install (%s)" % (
                    "its" if len(targets) == 1 and not own else "some of its", target, why))
            placed.append(step._replace(run=own, installed_by=targets[0][0] if targets and not own else None,
                                        notes=notes))
        return placed


def _after_driver(step: Step, driver_step: int, driver: Driver) -> Step:
    """A torch step after a step that changes the driver says which driver its pins are for, and what changes."""
    index = next((word for command in step.run for word in command.split() if PYTORCH_INDEX in word), None)
    if index is None or not driver.version:
        return step
    from preflight.knowledge import torch_wheels

    tag = index.rstrip("/").rpartition("/")[2]
    note = ("the torch here is chosen for the driver as it is now (%s): it runs before step %d and keeps running "
            "after it" % (driver.version, driver_step))
    newer = torch_wheels.choose(torch_wheels.CURRENT_DRIVER[0], "%d.%d" % torch_wheels.CURRENT_DRIVER[1],
                                driver.ccs, driver.python, driver.platform)
    if isinstance(newer, torch_wheels.Choice) and newer.variant.tag != tag:
        note += "; with driver %s or newer, torch %s from %s is newer: check again after step %d to see its " \
                "command" % (torch_wheels.CURRENT_DRIVER[0].split(".")[0], newer.torch_text, newer.variant.tag,
                             driver_step)
    return step._replace(notes=step.notes + [note])


# --- what preflight fix did ------------------------------------------------------------------------------------

SCHEMA = "preflight.fix/1"


class Ran(NamedTuple):
    """One pip command preflight fix ran: its step, how it ended (exit status; None when it did not finish) and why
    it failed, in words ("" when it succeeded)."""

    step: int
    command: str
    exit_code: Optional[int]
    seconds: float
    failure: str = ""


class Change(NamedTuple):
    """A result before and after: rule, subject, status then and now."""

    rule: str
    subject: str
    before: str
    after: str


class Outcome(NamedTuple):
    """What ``preflight fix`` found, did and found afterwards (the document its formats render)."""

    interpreter: Optional[str]
    plan: FixPlan  # before
    applied: bool  # False: --dry-run, nothing to run, or not confirmed
    why_not: str  # why nothing ran ("" when it did)
    ran: List[Ran]
    log: Optional[str]  # the file pip's output went to
    changes: List[Change]
    after: Optional[FixPlan]  # the re-check's plan (what is left)
    exit_code: int
    summary: str  # the last check's summary line

    @property
    def stopped(self) -> Optional[Ran]:
        return next((ran for ran in self.ran if ran.failure), None)

    def to_json(self) -> Dict[str, Any]:
        return {
            "schema": SCHEMA, "interpreter": self.interpreter, "plan": self.plan.to_json(), "applied": self.applied,
            "why_not": self.why_not or None,
            "ran": [{"step": r.step, "command": r.command, "exit_code": r.exit_code, "seconds": round(r.seconds, 2),
                     "failure": r.failure or None} for r in self.ran],
            "log": self.log,
            "changes": [{"rule": c.rule, "subject": c.subject, "before": c.before, "after": c.after}
                        for c in self.changes],
            "after": self.after.to_json() if self.after is not None else None,
            "exit_code": self.exit_code, "summary": self.summary,
        }


def outcome_json_schema() -> Dict[str, Any]:
    from preflight.files.json_schema import BOOL, NUM, STATUS, STR, nullable, obj

    ran = obj(["step", "command", "exit_code", "seconds", "failure"], {
        "step": {"type": "integer"}, "command": STR, "exit_code": nullable({"type": "integer"}), "seconds": NUM,
        "failure": nullable(STR)})
    change = obj(["rule", "subject", "before", "after"], {"rule": STR, "subject": STR, "before": STATUS,
                                                         "after": STATUS})
    return obj(["schema", "interpreter", "plan", "applied", "why_not", "ran", "log", "changes", "after", "exit_code",
                "summary"], {
        "schema": {"const": SCHEMA}, "interpreter": nullable(STR), "plan": json_schema(), "applied": BOOL,
        "why_not": nullable(STR), "ran": {"type": "array", "items": ran}, "log": nullable(STR),
        "changes": {"type": "array", "items": change}, "after": nullable(json_schema()),
        "exit_code": {"type": "integer"}, "summary": STR})


def changes(before, after) -> List[Change]:
    """Results whose status differs between two checks' results (engine.evaluate.Result), by rule and subject."""
    was = {(r.id, r.subject): r.status for r in before}
    now = {(r.id, r.subject): r.status for r in after}
    keys = list(dict.fromkeys(list(was) + list(now)))
    return [Change(rule, subject, was.get((rule, subject), "skip"), now.get((rule, subject), "skip"))
            for rule, subject in keys if was.get((rule, subject)) != now.get((rule, subject))]
