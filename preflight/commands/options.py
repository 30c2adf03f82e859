"""The options values commands take: immutable, built once by the CLI (or by tests), checked when built."""

from __future__ import annotations

import os
import sys
from typing import FrozenSet, Iterable, NamedTuple, Optional, Sequence, Tuple

from preflight.config.settings import SETTINGS
from preflight.errors import PreflightError


class _Workload(NamedTuple):
    workload: str
    task: str
    batch: Optional[int]
    imgsz: int
    precision: str
    optimizer: str
    max_objects: Optional[int]
    objects_source: str


class WorkloadOptions(_Workload):
    """A workload to size: --workload, --task, --batch, --img, the precision --fp32/--half give, --optimizer and
    the most objects in one image (--max-objects, or found from --instances-per-batch or --labels: at most one
    of the three; ``objects_source`` says how it was found)."""

    __slots__ = ()

    def __new__(cls, workload: str, task: str = "train", batch: Optional[int] = None, imgsz: int = 640,
                fp32: bool = False, half: bool = False, optimizer: str = "SGD",
                max_objects: Optional[int] = None, instances_per_batch: Optional[int] = None,
                labels: Optional[str] = None) -> "WorkloadOptions":
        from preflight.capacity import objects
        from preflight.capacity.estimate import precision_for

        given = [flag for flag, value in (("--max-objects", max_objects), ("--instances-per-batch",
                 instances_per_batch), ("--labels", labels)) if value is not None]
        if len(given) > 1:
            raise PreflightError("%s each say how many objects an image holds: give one of them" % " and ".join(given),
                                 "--labels DIR counts them exactly; --instances-per-batch N takes your log's figure")
        source = ""
        if instances_per_batch is not None:
            max_objects, source = objects.from_instances(instances_per_batch)
        elif labels is not None:
            max_objects, source = objects.from_labels(labels)
        return super().__new__(cls, workload, task, batch, imgsz, precision_for(task, fp32, half), optimizer,
                               max_objects, source)


# On a CPU the measured fit times the model at a size that cannot exhaust the host (the trainer's batch 16 at
# --img 640 held 21 GB resident for GELAN-C): what it measures there is time, never GPU memory.
CPU_FIT_LIMITS = {"batch": 2, "imgsz": 320}


class SmokeOptions(NamedTuple):
    """What ``preflight smoke`` (and ``check --smoke``) runs in the job's interpreter: on which device kind and
    GPUs, how much of the free memory the memory test takes, and the workload to measure (with the checkout)."""

    device: str = "auto"  # auto: cuda where NVML sees a GPU, else cpu; cuda; cpu (the logic, without a GPU)
    gpus: Tuple[int, ...] = ()  # CUDA indices; () all visible
    memory_share: float = 0.5
    repo: Optional[str] = None  # a YOLOv9 checkout: measure the workload's training steps there
    tests: Tuple[str, ...] = ()  # the worker's tests to run (--select/--ignore over smoke's rules); (): all
    iterations: int = 1  # each per-GPU test repeated, the worst result kept (--iterations, --level long)
    cfg: Optional[str] = None  # the fit's model definition, relative to the checkout (the trainer's --cfg)
    hyp: Optional[str] = None  # the hyperparameter file its loss reads (the trainer's --hyp)
    data: Optional[str] = None  # the dataset YAML whose nc the model is built with (the trainer's --data)
    fit_budget: float = 0.0  # seconds of the deadline kept for the measured fit
    deadline: float = 0.0  # the deadline when --timeout is not given (commands.smoke.options_from sets it)

    def request(self, workload: Optional[dict], timeout: float) -> dict:
        """The smoke worker's request (preflight/probes/smoke_worker.py): it keeps a tenth of the deadline (at
        most 5 s) to answer in; preflight kills it at the deadline itself. ``workload`` is the sized request
        (capacity.estimate.make_request): its model is measured with the loss its own trainer uses."""
        request = {"device": self.device, "gpus": list(self.gpus) or None, "memory_share": self.memory_share,
                   "budget": timeout - min(5.0, timeout / 10)}
        if self.tests:
            request["checks"] = list(self.tests)
        if self.iterations > 1:
            request["iterations"] = self.iterations
        if workload is not None and self.repo:
            dual = workload.get("train_script", "train_dual.py") == "train_dual.py"  # YOLOv9's two heads
            request["fit"] = {"repo": self.repo, "cfg": self.cfg or "models/detect/%s.yaml" % workload["id"],
                              "hyp": self.hyp or "data/hyps/hyp.scratch-high.yaml", "data": self.data,
                              "batch": workload["batch"], "imgsz": workload["imgsz"],
                              "objects": workload.get("max_objects") or 8,
                              "loss_module": "utils.loss_tal_dual" if dual else "utils.loss_tal",
                              "cpu_limits": CPU_FIT_LIMITS,
                              # the other tests keep 50 s of a deadline the user shortened; the fit the rest
                              "budget": min(self.fit_budget, max(0.0, request["budget"] - 50.0))}
        return request


class _Check(NamedTuple):
    profile: str
    rules_paths: Tuple[str, ...]
    select: Tuple[str, ...]
    ignore: Tuple[str, ...]
    settings: Tuple[str, ...]
    facts_file: Optional[str]
    python: Optional[str]
    nvml_fixture: Optional[str]
    timeout: float
    use_cache: bool
    strict: bool
    workload: Optional[WorkloadOptions]
    expect_gpus: Optional[str]
    config: Optional[str]
    given: FrozenSet[str]
    kernel_log: Optional[str]
    command: str
    facts_from: str
    fit_labels: Tuple[str, ...]
    smoke: Optional["SmokeOptions"]
    requirements: Optional[str]  # a project's requirements file the job's interpreter must meet (--requirements)
    slurm_gpu_types: Tuple[str, ...]  # plan's Slurm mode: TYPE=GPU, a Slurm GPU type's catalog GPU
    slurm_does_not_fit: str  # plan's Slurm mode: refuse or warn


class CheckOptions(_Check):
    """What to check and how to probe: shared by check, exec, slurm, facts, diagnose and plan.

    ``expect_gpus`` is None (no expectation), ``auto`` or a count; ``config``
    the site configuration file given with --config; ``given`` names the
    options the command line set, which a site configuration never overrides;
    ``command`` the command running (an unsafe site configuration is refused by
    the ones that admit nodes or start jobs, only warned about by the others).
    """

    __slots__ = ()

    def __new__(cls, profile: str = "train", rules_paths: Sequence[str] = (), select: Sequence[str] = (),
                ignore: Sequence[str] = (), settings: Sequence[str] = (), facts_file: Optional[str] = None,
                python: Optional[str] = None, nvml_fixture: Optional[str] = None, timeout: float = 10.0,
                use_cache: bool = True, strict: bool = False,
                workload: Optional[WorkloadOptions] = None, expect_gpus: Optional[str] = None,
                config: Optional[str] = None, given: Iterable[str] = (),
                kernel_log: Optional[str] = None, command: str = "check", facts_from: str = "auto",
                fit_labels: Sequence[str] = (), smoke: Optional["SmokeOptions"] = None,
                requirements: Optional[str] = None, slurm_gpu_types: Sequence[str] = (),
                slurm_does_not_fit: str = "refuse") -> "CheckOptions":
        # Each setting parsed and checked by its one declaration (preflight.config.settings), whoever builds the options.
        profile = SETTINGS["profile"].read(profile)
        timeout = SETTINGS["timeout"].read(timeout)
        expect_gpus = SETTINGS["expect_gpus"].read(expect_gpus)
        select, ignore = SETTINGS["select"].read(list(select)), SETTINGS["ignore"].read(list(ignore))
        facts_from = SETTINGS["facts_from"].read(facts_from)
        fit_labels = SETTINGS["fit_labels"].read(list(fit_labels or ()))
        slurm_gpu_types = SETTINGS["slurm_gpu_types"].read(list(slurm_gpu_types or ()))
        slurm_does_not_fit = SETTINGS["slurm_does_not_fit"].read(slurm_does_not_fit)
        if facts_file and (python or nvml_fixture or kernel_log):
            given = "--python" if python else "--kernel-log" if kernel_log else \
                "--nvml-fixture (or PREFLIGHT_NVML_FIXTURE)"
            raise PreflightError("--facts evaluates a saved snapshot without probing; %s has nothing to probe" % given,
                                 "give one or the other")
        return super().__new__(cls, profile, tuple(rules_paths or ()), select, ignore,
                               tuple(settings or ()), facts_file, python, nvml_fixture, timeout, use_cache, strict,
                               workload, expect_gpus, config, frozenset(given),
                               kernel_log, command, facts_from, fit_labels, smoke, requirements, slurm_gpu_types,
                               slurm_does_not_fit)

    def replace(self, **changes) -> "CheckOptions":
        """A copy with some fields changed, checked like a new one (_replace would skip the checks)."""
        values = self._asdict()
        values.update(changes)
        return CheckOptions(**values)


class OutputOptions(NamedTuple):
    """Where and how a command's result is shown: --format, --output, --quiet, --color, --expires-in."""

    format: str = "text"
    output: Optional[str] = None
    quiet: bool = False
    color: str = "auto"
    expires_in: float = 3600.0

    def colored(self, stream=None) -> bool:
        """Colour only for text on a terminal (or when asked), never with NO_COLOR or TERM=dumb."""
        if self.format != "text" or (self.output not in (None, "-") and stream is None):
            return False
        if self.color == "always":
            return True
        if self.color == "never" or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
            return False
        stream = sys.stdout if stream is None else stream
        return stream is not None and stream.isatty()
