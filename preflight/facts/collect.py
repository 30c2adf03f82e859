"""Run the probes a check needs, under one deadline, into one facts snapshot.

Each probe runs in its own daemon thread. The run waits for a probe only as
long as the deadline allows; a probe that has not answered by then is
abandoned (a hung ``nvmlInit`` cannot be interrupted, but it no longer holds
anything up) and its facts are recorded as unknown, with the reason. Helper
processes (``--python``, torch's architecture list) get the time that is left
and are killed when it runs out.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

from preflight import __version__, inventory
from preflight.errors import ProbeError, ProbeTimeout
from preflight.facts import history
from preflight.facts.snapshot import SCHEMA
from preflight.files import cache
from preflight.knowledge.shipped import as_of
from preflight.probes import (
    container,
    host,
    kernel_log,
    python_env,
    smoke,
    torch_arch,
    visibility,
)
from preflight.probes import nvml as nvml_probe

# Not a probe of its own: the NVML probe also reads what node-health rules need (PCIe, NVLink, limits, InfoROM).
NVML_HEALTH = "nvml_health"

_abandoned: List[threading.Thread] = []


def abandoned_probes() -> bool:
    """True when a probe thread is still running past the deadline."""
    return any(thread.is_alive() for thread in _abandoned)


class _Options(NamedTuple):
    timeout: float
    python: Optional[str]
    nvml_fixture: Optional[str]
    packages: List[Dict[str, Any]]
    use_cache: bool
    environ: Mapping[str, str]
    nvml_binding: Any  # tests hand in a binding directly
    on_wait: Optional[Callable[[str], None]]  # told once when a probe keeps the run waiting over WAIT_NOTICE
    kernel_log: Optional[str]  # a captured kernel log to read Xid events from (--kernel-log)
    smoke: Optional[Dict[str, Any]]  # the smoke worker's request (preflight smoke, check --smoke); None: not asked


class Options(_Options):
    """How to probe: the deadline, the interpreter, a replayed NVML, the packages to look up."""

    __slots__ = ()

    def __new__(cls, timeout: float = 10.0, python: Optional[str] = None, nvml_fixture: Optional[str] = None,
                packages: Optional[List[Dict[str, Any]]] = None, use_cache: bool = True,
                environ: Optional[Mapping[str, str]] = None, nvml_binding: Any = None,
                on_wait: Optional[Callable[[str], None]] = None, kernel_log: Optional[str] = None,
                smoke: Optional[Dict[str, Any]] = None) -> "Options":
        return super().__new__(cls, timeout, python, nvml_fixture, list(packages or []), use_cache,
                               os.environ if environ is None else environ, nvml_binding, on_wait, kernel_log, smoke)


WAIT_NOTICE = 1.0  # seconds a probe may run before the user is told what is being waited for
# What each probe waits on, in words.


class _Task:
    def __init__(self, name: str, function: Callable[[], Any]) -> None:
        self.name = name
        self.result: Any = None
        self.error: Optional[str] = None
        self.seconds: Optional[float] = None
        self.timed_out = False
        self._function = function
        self.thread = threading.Thread(target=self._run, name="preflight-probe-" + name, daemon=True)

    def _run(self) -> None:
        started = time.monotonic()
        try:
            self.result = self._function()
        except Exception as exc:  # a probe must never take the run down with it
            self.timed_out = isinstance(exc, ProbeTimeout)
            message = str(exc) or type(exc).__name__
            self.error = message if isinstance(exc, ProbeError) else "%s: %s" % (type(exc).__name__, message)
        self.seconds = round(time.monotonic() - started, 4)


def collect(probes, options: Options, reuse: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """A snapshot of these probes; ``reuse``: a snapshot taken moments ago whose probes are not run again."""
    started = time.monotonic()
    deadline = started + options.timeout

    def remaining() -> float:
        return max(0.0, deadline - time.monotonic())

    snapshot: Dict[str, Any] = {
        "schema": SCHEMA,
        "preflight_version": __version__,
        "knowledge_as_of": as_of(),
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "source": "nvml-fixture:%s" % options.nvml_fixture if options.nvml_fixture else "live",
        "hostname": inventory.host_name(),  # ("host" is the host probe's section)
        "probes": {},
    }
    reused = [name for name in PROBES if reuse and name in probes and name in (reuse.get("probes") or {})]
    for name in reused:
        snapshot[name] = reuse[name]
        snapshot["probes"][name] = reuse["probes"][name]
    tasks = _start([name for name in probes if name not in reused], options, remaining)
    waiting = _Notice(options, started)
    for task in tasks.values():
        waiting.join(task, remaining)
        _record(snapshot, task, options.timeout)

    if "nvml" in tasks or "nvml" in reused:
        nvml = snapshot.get("nvml")
        snapshot["visibility"] = _visibility(nvml, options.environ) if nvml else None
        live = options.nvml_binding is None and not options.nvml_fixture
        if "nvml" in tasks and nvml and nvml.get("health_read") and live and options.use_cache:
            if cache.usable():
                history.annotate(nvml)

    if "torch_arch" in probes:
        _collect_torch_arch(snapshot, options, remaining, waiting)

    snapshot["seconds"] = round(time.monotonic() - started, 4)
    snapshot["inventory"] = inventory.of(snapshot)
    return snapshot


class _Notice:
    """Joins probe threads, telling ``on_wait`` once when one keeps the run waiting for more than WAIT_NOTICE."""

    def __init__(self, options: Options, started: float) -> None:
        self.options = options
        self.started = started
        self.told = options.on_wait is None

    def join(self, task: _Task, remaining, extra: float = 0.0) -> None:
        if not self.told:
            task.thread.join(max(0.0, min(remaining() + extra, self.started + WAIT_NOTICE - time.monotonic())))
            if task.thread.is_alive():
                self.told = True
                what = PROBES[task.name].waits_for % {"python": self.options.python or sys.executable}
                self.options.on_wait("preflight: waiting for %s (at most %.0f s more; --timeout)"
                                     % (what, remaining() + extra))
        task.thread.join(remaining() + extra)


def _nvml(options: Options, remaining, names) -> Callable[[], Any]:
    binding = options.nvml_binding
    if binding is None:
        # Loaded before the threads start: a bad recording is the user's error (exit 2), not an unknown fact; and
        # importing pynvml in a thread would contend with the other probes for the import lock.
        try:
            binding = nvml_probe.load_binding(options.nvml_fixture)
        except nvml_probe.BindingMissing as exc:
            reason = str(exc)
            return lambda: nvml_probe.binding_missing(reason)
    return lambda: nvml_probe.probe(binding, health=NVML_HEALTH in names)


def _kernel_log(options: Options, remaining, names) -> Callable[[], Any]:
    if options.kernel_log:  # opened now (a missing file is the user's error, exit 2), read under the deadline
        descriptor = kernel_log.open_captured(options.kernel_log)
        deadline = time.monotonic() + remaining()
        return lambda: kernel_log.read_captured(descriptor, options.kernel_log, deadline)
    if options.nvml_fixture or options.nvml_binding is not None:
        return kernel_log.not_recorded  # this machine's log says nothing about a replayed one
    return lambda: kernel_log.probe(None, remaining())


class Probe(NamedTuple):
    """A probe of the snapshot: what the run waits on, in words (``%(python)s``: the interpreter probed), how it
    starts, and the names a request may ask it by. ``start(options, remaining, names)`` runs before the probes'
    threads start (opening what, when it fails, is the user's error) and returns what its thread runs;
    ``remaining()`` is the time left to the deadline, ``names`` what the request asked for. ``loads_gpus``: the
    active test, run only when asked by name (never by ``preflight facts``)."""

    waits_for: str
    start: Optional[Callable[[Options, Callable[[], float], Any], Callable[[], Any]]]
    asked_by: Tuple[str, ...] = ()
    loads_gpus: bool = False


# Every probe a snapshot can hold, in the order they are reported; torch_arch runs after the others, only when a
# visible GPU could use its answer (_collect_torch_arch).
PROBES: Dict[str, Probe] = {
    "nvml": Probe("NVML (the NVIDIA driver) to answer", _nvml, (NVML_HEALTH,)),
    "host": Probe("the host probe (CPUs, memory, /dev/shm)", lambda o, r, n: lambda: host.probe(environ=o.environ)),
    "python": Probe("%(python)s to list its packages",
                    lambda o, r, n: lambda: python_env.probe(o.packages, o.python, r()), ("torch_arch",)),
    "torch_arch": Probe("'import torch' in %(python)s, to list torch's GPU architectures (cached once known)", None),
    "container": Probe("the container probe", lambda o, r, n: lambda: container.probe(o.environ)),
    "kernel_log": Probe("the kernel log (Xid events)", _kernel_log),
    # Its own limit ends just before the run's deadline, so the worker's process group is killed and said so by
    # the probe itself, rather than the run abandoning it.
    "smoke": Probe("the active GPU test (preflight smoke) in %(python)s",
                   lambda o, r, n: lambda: smoke.probe(o.smoke, o.python, max(0.5, r() - 0.5), smoke.say_progress),
                   loads_gpus=True),
}
PASSIVE = tuple(name for name, probe in PROBES.items() if not probe.loads_gpus)  # what 'preflight facts' collects


def _start(names, options: Options, remaining) -> Dict[str, _Task]:
    plan = {name: probe.start(options, remaining, names) for name, probe in PROBES.items()
            if probe.start is not None and (name in names or any(other in names for other in probe.asked_by))}
    tasks = {name: _Task(name, function) for name, function in plan.items()}
    for task in tasks.values():
        task.thread.start()
    return tasks


def _record(snapshot: Dict[str, Any], task: _Task, timeout: float) -> None:
    if task.timed_out:  # its helper was killed at the deadline
        snapshot[task.name] = None
        snapshot["probes"][task.name] = {"status": "timeout", "seconds": task.seconds,
                                         "error": "the %s probe gave no answer: %s" % (task.name, task.error)}
    elif task.thread.is_alive():
        _abandoned.append(task.thread)
        snapshot[task.name] = None
        snapshot["probes"][task.name] = {
            "status": "timeout", "seconds": None,
            "error": "the %s probe gave no answer within the %.1f s deadline (--timeout)" % (task.name, timeout),
        }
    elif task.error is not None:
        snapshot[task.name] = None
        snapshot["probes"][task.name] = {"status": "error", "seconds": task.seconds,
                                         "error": "the %s probe failed: %s" % (task.name, task.error)}
    else:
        snapshot[task.name] = task.result
        snapshot["probes"][task.name] = {"status": "ok", "seconds": task.seconds, "error": None}


def _visibility(nvml: Dict[str, Any], environ: Mapping[str, str]) -> Dict[str, Any]:
    return visibility.resolve(nvml.get("gpus") or [], environ.get("CUDA_VISIBLE_DEVICES"),
                              environ.get("CUDA_DEVICE_ORDER"))


def _collect_torch_arch(snapshot: Dict[str, Any], options: Options, remaining, waiting: _Notice) -> None:
    """Ask torch for its architectures only when some visible GPU could use the answer."""
    torch = (snapshot.get("python") or {}).get("torch") or {}
    visible = (snapshot.get("visibility") or {}).get("count")
    if snapshot.get("python") is None:
        return  # the python probe's own error already explains the unknown
    if not torch.get("installed") or not torch.get("cuda"):
        snapshot["torch_arch"] = None
        snapshot["probes"]["torch_arch"] = {"status": "not_applicable", "seconds": 0.0,
                                            "error": "torch is not installed as a CUDA build"}
        return
    if visible == 0:
        snapshot["torch_arch"] = None
        snapshot["probes"]["torch_arch"] = {"status": "not_applicable", "seconds": 0.0,
                                            "error": "no GPU is visible"}
        return

    python = options.python or sys.executable
    task = _Task("torch_arch", lambda: torch_arch.probe(torch, python, remaining(), options.use_cache))
    task.thread.start()
    waiting.join(task, remaining, 1.5)  # the helper process is killed at the deadline itself
    _record(snapshot, task, options.timeout)
