"""From scan hits to findings: one per problem, root cause first, fixes made concrete.

- A failure that ``supersedes`` another explains it: "exited unexpectedly"
  after a bus error is one problem, reported once, with the follow-up named.
- Findings are ordered by ``priority`` (how likely the root cause), then by
  where they first appear.
- Template values come, weakest first, from: facts about this machine (the
  fact's value and details), the related check rules evaluated against those
  facts, the entry's ``set`` values, and the log line itself (named groups).
  Lines of the fix or the context that still name an unknown value are left
  out rather than shown with a hole; a fix title keeps generic words.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Tuple

from preflight import units
from preflight.diagnose.failures import Failure
from preflight.diagnose.scan import Hit, ScanResult
from preflight.diagnose.whose_facts import Decision
from preflight.engine import template
from preflight.engine.evaluate import Result, evaluate
from preflight.engine.loader import RuleSet
from preflight.engine.placeholders import RUN_PREFIX, fact_variable
from preflight.errors import ExitCode
from preflight.facts.registry import REGISTRY
from preflight.facts.view import SnapshotView, Unknown
from preflight.knowledge import nvidia

# Values every fix may rely on when nothing better is known. No wheel index is assumed here: which torch
# to install depends on the driver, the GPU and the Python (torch_wheels), known from facts or the log.
GENERIC_DEFAULTS = {
    "python_executable": "python",
}

# Words for a fix title when a value is unknown (titles cannot be left out).
TITLE_WORDS = {
    "gpu_sm": "this GPU", "gpu_index": "this GPU", "required_driver": "a supported version",
    "torch_cuda": "its CUDA version", "expected_first": "the expected", "recommended": "a recommended version",
    "min": "the minimum",
}


class Finding:
    def __init__(self, hit: Hit, explains: List[Hit]) -> None:
        self.failure: Failure = hit.failure
        self.hit = hit
        self.explains = explains  # superseded hits: follow-ups of this problem
        self.context: List[str] = []
        self.fix: Dict[str, Any] = {}
        self.checks: List[Result] = []

    @property
    def key(self) -> str:
        """The finding's id; a family finding's also names the row of its table: cuda.runtime_error/cudaErrorXyz."""
        return "%s/%s" % (self.failure.id, self.failure.key) if self.failure.family is not None else self.failure.id

    @property
    def confidence(self) -> str:
        """"known": a message the catalog has; "family": recognised by its structure, explained by a table."""
        return "known" if self.failure.family is None else "family"

    def to_json(self) -> Dict[str, Any]:
        family = self.failure.family
        return {
            "id": self.failure.id,
            "key": self.key,
            "confidence": self.confidence,
            "family": {"table": family.table.name, "row": self.failure.key,
                       "source": family.source} if family is not None else None,
            "undetermined": list(self.failure.undetermined),
            "title": self.failure.title,
            "line": self.hit.line,
            "count": self.hit.count,
            "excerpt": self.hit.excerpt,
            "cause": self.failure.cause,
            "context": self.context,
            "fix": self.fix,
            "rules": self.failure.rules,
            "checks": [{"id": r.id, "subject": r.subject, "status": r.status, "message": r.message} for r in self.checks],
            "explains": [{"id": h.failure.id, "line": h.line, "excerpt": h.excerpt} for h in self.explains],
        }


class Diagnosis:
    def __init__(self, source: str, scan: ScanResult, findings: List[Finding], facts_source: Optional[str],
                 notes: Optional[List[str]] = None, facts: Optional[Decision] = None) -> None:
        self.source = source
        self.scan = scan
        self.findings = findings
        self.facts_source = facts_source
        self.notes = notes or []  # where the values came from: the log's own run, this machine
        self.facts = facts or Decision(False, "facts: none", "")  # whose facts filled the fixes

    @property
    def exit_code(self) -> int:
        return ExitCode.FAILED if self.findings else ExitCode.OK

    def to_json(self) -> Dict[str, Any]:
        return {
            "schema": "preflight.diagnosis/1",
            "source": self.source,
            "lines": self.scan.lines,
            "bytes": self.scan.bytes,
            "recognised": bool(self.findings),
            "facts_source": self.facts_source,
            "facts": self.facts.to_json(),
            "from_log": dict(self.scan.values),
            "notes": self.notes,
            "matches": [finding.to_json() for finding in self.findings],
            "last_error_lines": [{"line": n, "text": t} for n, t in self.scan.error_lines()] if not self.findings else [],
        }


def findings(scan: ScanResult) -> List[Finding]:
    present = {hit.failure.id for hit in scan.hits.values()} | scan.clues
    hits = [hit for hit in scan.hits.values()
            if not hit.failure.only_with or any(other in present for other in hit.failure.only_with)]
    # A known failure on a family finding's line is the more specific explanation: the family finding goes,
    # unless the family supersedes that entry (a ModuleNotFoundError of a removed module over "a module is
    # missing").
    known_lines: Dict[int, set] = {}
    for hit in hits:
        if hit.failure.family is None:
            for line in (hit.line, hit.last_line):
                known_lines.setdefault(line, set()).add(hit.failure.id)
    hits = [hit for hit in hits if hit.failure.family is None
            or not known_lines.get(hit.line, set()) - set(hit.failure.supersedes)]
    ids = {hit.failure.id for hit in hits}
    explained = {other for hit in hits for other in hit.failure.supersedes if other in ids}
    result = [Finding(hit, [h for other in hit.failure.supersedes for h in hits if h.failure.id == other])
              for hit in hits if hit.failure.id not in explained]
    # Most likely cause first; a known failure before a family finding of the same likelihood; then the log's order.
    result.sort(key=lambda f: (-f.failure.priority, f.failure.family is not None, f.hit.line))
    return result


def probes_for(found: Iterable[Finding], ruleset: RuleSet) -> set:
    from preflight.engine.evaluate import probes_needed

    needed: set = set()
    for finding in found:
        rules = [ruleset.rules[r] for r in finding.failure.rules if r in ruleset.rules]
        needed |= probes_needed(rules)
        for path in finding.failure.facts:
            needed.update(REGISTRY[path].probes)
    return needed


def _text(value: Any, kind: str) -> Optional[str]:
    if value is None:
        return None
    if kind == "bytes":
        return units.format_gpu_memory(value)
    if isinstance(value, list):
        return "; ".join(str(v) for v in value) or "none"
    return str(value)


def _gpu_or_none(facts: SnapshotView, index: int) -> Optional[Dict[str, Any]]:
    try:
        return facts.gpu(index)
    except Unknown:
        return None


def _fact_values(failure: Failure, facts: SnapshotView, cuda_device: Optional[str]) -> List[Dict[str, Any]]:
    """One set of values for the system, or one per GPU the failure concerns."""
    system: Dict[str, Any] = {}
    per_gpu: Dict[int, Dict[str, Any]] = {}
    try:
        visible = facts.visible_indices()
    except Unknown:
        visible = []
    if cuda_device is not None and cuda_device.isdigit() and int(cuda_device) < len(visible):
        visible = [visible[int(cuda_device)]]  # the log names a CUDA index: the visible GPU at that position
    for path in failure.facts:
        fact = REGISTRY[path]
        subjects = [(i, _gpu_or_none(facts, i)) for i in visible] if fact.per_gpu else [(None, None)]
        for index, gpu in subjects:
            if index is not None and gpu is None:
                continue
            try:
                value, details = fact.read(facts, gpu)
            except Unknown:
                continue
            target = system if index is None else per_gpu.setdefault(index, {})
            target.update({k: v for k, v in details.items() if v is not None})
            shown = _text(value, fact.kind)
            if shown is not None:
                target[fact_variable(path)] = shown
    if not per_gpu:
        return [system]
    return [dict(system, **values) for _, values in sorted(per_gpu.items())]


# What a log's clues say, by the names fixes and context use for this machine's facts.
_RUN_AS_FACTS = {"torch_version": "torch_version", "driver_version": "driver_version", "driver_cuda": "driver_cuda",
                 "gpu_name": "gpu_name", "python": "python_version", "torch_cuda": "torch_cuda"}


def run_values(scan: ScanResult, ruleset: RuleSet) -> Dict[str, str]:
    """The log's own run (its clues) as template values: run_<name>, and the GPU's compute capability when
    the GPU catalog knows its name."""
    values = {RUN_PREFIX + name: value for name, value in scan.values.items()}
    local = str(scan.values.get("torch_version") or "").partition("+")[2]
    if local.startswith("cu") and local[2:].isdigit() and len(local) >= 4:  # +cu117: CUDA 11.7; +cu92: 9.2
        values[RUN_PREFIX + "torch_cuda"] = "%s.%s" % (local[2:-1], local[-1])
    gpu = _catalog_gpu(ruleset, scan.values.get("gpu_name"), scan.values.get("gpu_mib"))
    if gpu is not None:
        values["run_compute_capability"] = gpu.compute_capability
    return values


def _catalog_gpu(ruleset: RuleSet, name: Optional[str], mib: Optional[str]):
    """The catalog GPU a log's GPU name names ("NVIDIA GeForce RTX 3060" -> GeForce RTX 3060 12GB)."""
    if not name:
        return None
    words = set(name.lower().replace("nvidia", " ").replace("-", " ").split())
    found = []
    for gpu in ruleset.gpus.values():
        model = [w for w in gpu.name.lower().replace("-", " ").split() if not w.endswith("gb")]
        if model and set(model) <= words:
            found.append(gpu)
    if mib and mib.isdigit() and len(found) > 1:
        found.sort(key=lambda g: abs(g.memory_mib - int(mib)))
    return found[0] if found else None


def _derived(groups: Dict[str, str], ruleset: RuleSet, run: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """Values the log implies: the driver's CUDA, the torch that fits it and the GPU, a module's pip name."""
    from preflight.facts import derived
    from preflight.knowledge import torch_wheels

    run = run or {}
    values: Dict[str, str] = {}
    code = groups.get("driver_cuda_code")
    driver_cuda = nvidia.cuda_from_nvml(int(code)) if code and code.isdigit() else run.get("run_driver_cuda")
    sm = derived.parse_arch_flag(groups.get("gpu_sm", ""))
    cc = "%d.%d" % sm[1] if sm else run.get("run_compute_capability")
    if driver_cuda or cc:
        wheel = torch_wheels.fix_values(run.get("run_driver_version"), driver_cuda, [cc] if cc else [],
                                        run.get("run_python"), run_cuda=run.get("run_torch_cuda"))
        values.update((k, v) for k, v in wheel.items() if v is not None)
        if driver_cuda:
            values.update(driver_cuda=driver_cuda, run_driver_cuda=driver_cuda)
    values.update(_oom_values(ruleset, run))
    oldest = _oldest_listed_if_newer(groups.get("requirement", ""), groups.get("pip_versions", ""))
    if oldest:
        values["pip_oldest_listed"] = oldest
    return values


def _oldest_listed_if_newer(requirement: str, listed: str) -> Optional[str]:
    """The oldest version in pip's "(from versions: ...)" when every one is newer than the version pinned
    (name==X or name===X): the interpreter is newer than release X supports, or the index starts later."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    try:
        pins = [Version(spec.version).release for spec in Requirement(requirement).specifier
                if spec.operator in ("==", "===")]
        versions = sorted(Version(v.strip()) for v in listed.split(",") if v.strip())
    except (InvalidRequirement, InvalidVersion):
        return None
    if len(pins) != 1 or not versions or any(v.release <= pins[0] for v in versions):
        return None
    return str(versions[0])


# What a related check says of this machine's other packages: a fix for one missing module does not speak of them.
_OTHER_PACKAGES = ("optional", "mismatched", "installed_by", "companion_pins", "companion_index_url",
                   "companion_unpaired", "torch_not_running", "missing_no_deps", "pins_why", "stand_ins", "met_by")


def _from_the_line(groups: Dict[str, str], ruleset: RuleSet, facts: Optional[SnapshotView] = None,
                   run: Optional[Dict[str, str]] = None) -> Dict[str, Optional[str]]:
    """What the failing line itself asks for, which no check of this machine may widen: the module that was
    missing, as pip installs it ({missing_pip}), or why no pip command is printed ({pip_unknown}); torchvision and
    torchaudio as the pair of the installed torch, from its build's index ({companion_pins})."""
    module = groups.get("missing")
    if not module:
        return {}
    if module.split(".")[0] in COMPANIONS:
        return _companion_values(module.split(".")[0], facts, run or {})
    pip = _pip_name(module.split(".")[0], ruleset)
    if pip:
        from preflight.knowledge import distributions

        if distributions.torch_only(shlex.split(pip)[0]):  # torch is its one requirement: never pulled for it
            return {"missing_pip": None, "missing_no_deps": pip}
        return {"missing_pip": pip}
    return {"pip_unknown": (
        "preflight does not know which package provides the module '%s', so it prints no pip command: find the "
        "package in the project's requirements.txt or documentation (a package named like a module can be someone "
        "else's); a module of the project itself, in a folder or git submodule of the repository, is installed from "
        "that folder: git submodule update --init --recursive fetches a submodule, and pip is given the folder's path"
        % module.split(".")[0])}


COMPANIONS = ("torchvision", "torchaudio")  # built for one torch release and build: never a plain pip install


def _companion_values(name: str, facts: Optional[SnapshotView], run: Dict[str, str]) -> Dict[str, Optional[str]]:
    """{companion_pins, companion_index_url} that install companion ``name`` for the torch this machine has (or,
    without its facts, the torch the log's run printed), from that torch's own index; {companion_unpaired} when
    no command can be given."""
    from preflight.facts import derived, readers
    from preflight.knowledge import torch_wheels

    torch: Dict[str, Any] = {}
    installed: Tuple[torch_wheels.Installed, ...] = ()
    python = run.get(RUN_PREFIX + "python")
    if facts is not None:
        try:
            torch = facts.torch()
            python = facts.section("python").get("version") or python
            installed = derived.installed_builds(torch, readers.companions(facts), readers.platform(facts))
        except Unknown:
            torch = {}
    version, tag = None, None
    if torch.get("installed"):
        version, tag = torch.get("version"), derived.torch_tag(torch)
    elif run.get(RUN_PREFIX + "torch_version"):
        version = run[RUN_PREFIX + "torch_version"]
        tag = torch_wheels.local_tag(version)
    values: Dict[str, Optional[str]] = {"missing_pip": None, "companion_pins": None, "companion_index_url": None,
                                        "companion_unpaired": None}
    if version and tag:
        values.update(torch_wheels.companions_for(version, tag, [name], python, installed))
    else:
        values["companion_unpaired"] = (
            "which torch the run had is not known here: the %s built for it comes from the index of its build "
            "(python -c 'import torch; print(torch.__version__)' shows it: +cpu, +cu126, ...); "
            "https://pytorch.org/get-started/previous-versions/ gives the pair's command" % name)
    return values


_PLAIN_PATH = re.compile(r"[\w./\\:+~-]{1,400}")


def run_interpreter(run: Dict[str, str]) -> Optional[str]:
    """The interpreter the log's run used, from the site-packages folder its traceback shows
    (.../envs/yolo/lib/python3.10/site-packages -> .../envs/yolo/bin/python; on Windows ...\\Lib\\site-packages ->
    ...\\python.exe); None when the log shows none."""
    folder = run.get(RUN_PREFIX + "site_packages") or ""
    if not _PLAIN_PATH.fullmatch(folder):
        return None  # printed commands start with it: a path with spaces or shell syntax is not pasted as one
    windows = "\\" in folder and "/" not in folder
    parts = folder.replace("\\", "/").rstrip("/").split("/")
    if len(parts) < 3 or parts[-1] not in ("site-packages", "dist-packages"):
        return None
    if windows and parts[-2].lower() == "lib":
        return "\\".join(parts[:-2] + ["python.exe"])
    if not windows and len(parts) >= 4 and parts[-3] == "lib" and parts[-2].startswith("python"):
        prefix = "/".join(parts[:-3])
        return (prefix or "") + "/bin/python" if not prefix.startswith("/usr") else None
    return None


def _with_machine(run: Dict[str, str], facts: Optional[SnapshotView]) -> Dict[str, str]:
    """The run's values, with what this machine's facts know where the log does not say: the first visible
    GPU's memory (the capacity model then sizes the run for the GPU it ran on) and the Python (the torch to
    install must have wheels for it). Only called with facts that are that machine's."""
    if facts is None:
        return run
    run = dict(run)
    if RUN_PREFIX + "python" not in run:
        try:
            version = facts.section("python").get("version")
        except Unknown:
            version = None
        if version:
            run[RUN_PREFIX + "python"] = str(version)
    if RUN_PREFIX + "gpu_mib" in run:
        return run
    try:
        visible = facts.visible_indices()
        total = (facts.gpu(visible[0]).get("memory") or {}).get("total") if visible else None
    except Unknown:
        return run
    if not total:
        return run
    from preflight.knowledge.gpus import ESTIMATED_USABLE

    # NVML's total is more than a process gets; the log's banner (when there is one) prints the usable figure
    return dict(run, **{RUN_PREFIX + "gpu_mib": str(int(int(total) * ESTIMATED_USABLE) // (1 << 20))})


def _oom_values(ruleset: RuleSet, run: Dict[str, str]) -> Dict[str, str]:
    """For an out-of-memory run whose log names its model, batch and GPU: the largest batch that fits, from the
    capacity model ({fit_batch}, {fit_workload}, ...), and a torchrun line only where the run had several GPUs."""
    from preflight.capacity import estimate

    values: Dict[str, str] = {}
    cfg, mib = run.get("run_cfg"), run.get("run_gpu_mib")
    workload = os.path.splitext(os.path.basename(cfg))[0] if cfg else None
    if not workload or workload not in ruleset.workloads or not (mib and mib.isdigit()):
        return values
    imgsz = int(run.get("run_imgsz") or 640)
    try:
        request = estimate.make_request(ruleset.workloads, workload, "train", "amp", None, imgsz)
    except Exception:  # an image size or workload the model cannot size: no number rather than a wrong one
        return values
    available = int(mib) * (1 << 20)  # the banner prints PyTorch's total_memory: what the process could allocate
    fit = estimate.max_batch(request, available)
    values.update(fit_workload=workload, fit_imgsz=str(request["imgsz"]), fit_gpu_mib=mib)
    if fit >= 1:
        values["fit_batch"] = str(fit)
    return values


def gpu_values(run: Dict[str, str], facts: Optional[SnapshotView]) -> Dict[str, str]:
    """How many GPUs a launch line should name, from the log's run (its --device list, the GPUs its banner shows),
    else this machine's visible GPUs: {gpu_count}, {device_list} and {ddp_batch} (a total the GPUs share evenly)
    for torchrun over two or more; {single_gpu} for one, where torchrun has nothing to spread. Nothing when
    neither says: a fix then prints no launch line with a guessed count."""
    from preflight.capacity import estimate

    devices = [d.strip() for d in (run.get(RUN_PREFIX + "device") or "").split(",") if d.strip().isdigit()]
    count = len(devices)
    if not count and str(run.get(RUN_PREFIX + "gpu_count", "")).isdigit():
        count = int(run[RUN_PREFIX + "gpu_count"])
    if not count and facts is not None:
        try:
            count = len(facts.visible_indices())
        except Unknown:
            count = 0
    if count == 1:
        return {"single_gpu": devices[0] if devices else "0"}
    if count < 2:
        return {}
    asked = run.get(RUN_PREFIX + "batch", "")
    batch = int(asked) if asked.isdigit() and int(asked) > 0 else estimate.DEFAULT_BATCH["train"]
    return {"gpu_count": str(count), "device_list": ",".join(devices) if len(devices) == count else
            ",".join(str(i) for i in range(count)), "ddp_batch": str(estimate.ddp_batch(batch, count))}


def _pip_name(module: str, ruleset: RuleSet) -> Optional[str]:
    """What to pip-install for an import name, only where it is known: the package tables of the loaded rules, or a
    package the index knowledge has under the module's own name. Never a guess: None."""
    from preflight.knowledge import package_index

    for rule in ruleset.rules.values():
        table = rule.raw_params.get("packages") if rule.comparison.name == "present" else None
        for name, info in (table or {}).items():
            if info.get("import", name) == module and not info.get("installed_by"):
                return shlex.quote(info.get("pip") or name)
    return shlex.quote(module) if package_index.known(module) else None


def _related_checks(failure: Failure, ruleset: RuleSet, snapshot, resolve) -> List[Result]:
    rules = [resolve(r) for r in failure.rules if r in ruleset.rules]
    return [r for r in evaluate(rules, snapshot) if r.status != "skip"]


class Completion(NamedTuple):
    notes: List[str]  # where the values came from: the log's own run, and why this machine's facts were not used
    facts: Decision  # whose facts filled the fixes


def complete(found: List[Finding], ruleset: RuleSet, snapshot: Optional[Dict[str, Any]], resolve=None,
             scan: Optional[ScanResult] = None, mode: str = "auto", label: str = "this machine",
             job_python: Optional[str] = None) -> Completion:
    """Fill in each finding's context, fix and related check results.
    ``resolve`` gives a related rule as the run resolves it (its profile and settings); by default, as written
    for the train profile. ``mode``: whose facts (preflight.diagnose.whose_facts).

    The log's own run (its clues) fills what this machine's facts do not know; this machine's facts are used
    only where the log does not contradict them (another host, OS, Python, torch, GPU or driver): a log is often
    read far from where it ran.
    """
    from preflight.diagnose import whose_facts
    from preflight.facts import platform

    if resolve is None:
        def resolve(rule_id: str):
            return ruleset.rules[rule_id].resolve("train")
    facts = SnapshotView(snapshot) if snapshot is not None else None
    clues = dict(scan.values) if scan is not None else {}
    for finding in found:  # a failing line that says which CUDA the run's driver supports speaks for that run
        code = finding.hit.groups.get("driver_cuda_code")
        if code and code.isdigit():
            clues.setdefault("driver_cuda", nvidia.cuda_from_nvml(int(code)))
    decision = whose_facts.decide(mode, clues, facts, label)
    run = run_values(scan, ruleset) if scan is not None else {}
    notes = _notes(run)
    if decision.why:
        notes.append(decision.why)
    if not decision.use:
        facts = None  # not where the log ran: its facts would mislead
        for finding in found:
            finding.checks = []
    run = _with_machine(run, facts)
    markers = platform.conditions(clues, facts, from_log=True)
    # Whose interpreter a pip command installs into: the log's run's, --python's, else it is a guess (this one's).
    interpreter = run_interpreter(run)
    where = {"python_executable": interpreter} if interpreter else {}
    if not interpreter and not job_python:
        markers = dict(markers, when_interpreter_guessed="")
    run_plain = {plain: run[RUN_PREFIX + name] for name, plain in _RUN_AS_FACTS.items() if RUN_PREFIX + name in run}
    for finding in found:
        failure = finding.failure
        groups = {name: _as_said(value) for name, value in finding.hit.groups.items()}
        value_sets: List[Dict[str, Any]] = [dict(run_plain)]
        if facts is not None:
            value_sets = [dict(run_plain, **values) for values in _fact_values(failure, facts, groups.get("cuda_device"))]
            finding.checks = _related_checks(failure, ruleset, snapshot, resolve)
        from_checks: Dict[str, Any] = {}
        for result in sorted(finding.checks, key=lambda r: r.status == "pass"):  # failing checks speak first
            for key, value in result.variables.items():
                from_checks.setdefault(key, value)
        # Weakest first: generic defaults, what the log implies, this machine's facts, the related
        # checks, the entry's fixed values, and what the log line says; the platform markers last.
        base = dict(GENERIC_DEFAULTS, **failure.defaults)
        if "{torch_pythons}" in " ".join(failure.fix.texts()):
            from preflight.knowledge import torch_wheels

            base["torch_pythons"] = torch_wheels.pythons_text()
        base.update(_derived(groups, ruleset, run))
        base.update(gpu_values(run, facts))
        base.update(run)
        from_log = dict(groups)
        from_log.update((RUN_PREFIX + name, value) for name, value in groups.items())
        from_log.update(_from_the_line(groups, ruleset, facts, run))
        from_log.update(where)
        merged_sets = []
        for values in value_sets:
            merged = dict(base)
            for layer in (values, from_checks, failure.values):
                merged.update(layer)
            if "missing" in groups:  # what a check says of this machine's other packages is not this line's fix
                for name in _OTHER_PACKAGES:
                    merged.pop(name, None)
            for layer in (from_log, markers):
                merged.update(layer)
            if _larger_than_the_gpu(groups):
                merged.pop("when_request_may_fit", None)
                merged["when_request_exceeds_gpu"] = ""
            merged_sets.append(merged)
        context: List[str] = []
        for values in merged_sets:
            for line in template.render_known(failure.context, values):
                if line not in context:
                    context.append(line)
        finding.context = context
        finding.fix = failure.fix.render(merged_sets[0], TITLE_WORDS)
    return Completion(notes, decision)


def _larger_than_the_gpu(groups: Dict[str, str]) -> bool:
    """Whether an out-of-memory message asked for more in one allocation than the whole GPU has: then no batch
    size or freed memory helps, and the fix says so instead."""
    try:
        return units.parse_bytes(groups["requested"]) > units.parse_bytes(groups["capacity"])
    except (KeyError, ValueError):
        return False


def _as_said(value: str) -> str:
    """A value captured from a log as the user would type it: no escapes that came from a repr or a JSON string
    (\\' \\" \\n), no quotes or end punctuation around it."""
    for escaped, plain in (("\\'", "'"), ('\\"', '"'), ("\\n", " "), ("\\t", " ")):
        value = value.replace(escaped, plain)
    return value.strip().strip("'\"`").rstrip(".,;:")


def _notes(run: Dict[str, str]) -> List[str]:
    said = []
    for name, words in (("torch_version", "torch %s"), ("python", "Python %s"), ("gpu_name", "%s"),
                        ("gpu_mib", "(%s MiB)"), ("driver_version", "driver %s"), ("driver_cuda", "(CUDA %s)"),
                        ("cfg", "cfg %s"), ("batch", "batch %s"), ("imgsz", "img %s"), ("device", "device %s")):
        if RUN_PREFIX + name in run:
            said.append(words % run[RUN_PREFIX + name])
    return ["the log's run: %s" % " ".join(said)] if said else []


def json_schema() -> Dict[str, Any]:
    """``Diagnosis.to_json`` (diagnose --format json) as JSON Schema."""
    from preflight.engine import fix
    from preflight.files.json_schema import BOOL, INT, STR, nullable, obj, strings

    family = obj(["table", "row", "source"], {"table": STR, "row": nullable(STR), "source": STR})
    match = obj(["id", "key", "confidence", "title", "line", "count", "excerpt", "cause", "fix"], {
        "id": STR, "key": STR, "confidence": {"enum": ["known", "family"]}, "family": nullable(family),
        "undetermined": strings(), "title": STR, "line": {"type": "integer", "minimum": 1}, "count": {"type": "integer", "minimum": 1},
        "excerpt": STR, "cause": STR, "context": strings(), "fix": fix.json_schema(),
        "rules": strings(), "checks": {"type": "array", "items": obj(["id", "subject", "status", "message"], {
            "id": STR, "subject": STR, "status": STR, "message": STR})},
        "explains": {"type": "array", "items": obj(["id"], {"id": STR, "line": INT, "excerpt": STR})}})
    return obj(["schema", "source", "lines", "recognised", "matches"], {
        "schema": {"const": "preflight.diagnosis/1"}, "source": STR, "lines": INT, "bytes": INT,
        "recognised": BOOL, "facts_source": nullable(STR), "from_log": {"type": "object"},
        "facts": obj(["whose", "header", "why"], {"whose": {"enum": ["machine", "log", "none"]},
                                                  "header": STR, "why": STR}),
        "notes": strings(), "matches": {"type": "array", "items": match},
        "last_error_lines": {"type": "array"}})
