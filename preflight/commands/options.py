"""The options values commands take: built once by the CLI (or by tests), checked when built."""

from __future__ import annotations

import math
from typing import List, Mapping, Optional

from preflight.errors import PreflightError

PROFILES = ("train", "inference", "node")
MAX_TIMEOUT = 3600


class WorkloadOptions:
    """A workload to size: --workload, --task, --batch, --img, --fp32/--half."""

    def __init__(self, workload: str, task: str = "train", batch: Optional[int] = None, imgsz: int = 640,
                 fp32: bool = False, half: bool = False) -> None:
        from preflight.capacity.estimate import precision_for

        self.workload = workload
        self.task = task
        self.precision = precision_for(task, fp32, half)
        self.batch = batch
        self.imgsz = imgsz


class CheckOptions:
    """What to check and how to probe: shared by check, exec, slurm, facts, diagnose and plan."""

    def __init__(self, profile: str = "train", rules_paths: Optional[List[str]] = None,
                 select: Optional[List[str]] = None, ignore: Optional[List[str]] = None,
                 settings: Optional[List[str]] = None, facts_file: Optional[str] = None,
                 python: Optional[str] = None, nvml_fixture: Optional[str] = None, timeout: float = 10.0,
                 use_cache: bool = True, strict: bool = False, environ: Optional[Mapping[str, str]] = None,
                 workload: Optional[WorkloadOptions] = None) -> None:
        if profile not in PROFILES:
            raise PreflightError("unknown profile %r" % profile, "profiles: %s" % ", ".join(PROFILES))
        if math.isnan(timeout) or not 0 < timeout <= MAX_TIMEOUT:
            raise PreflightError("--timeout must be more than 0 and at most %d seconds, got %s" % (MAX_TIMEOUT, timeout),
                                 "probing takes well under a second; --timeout 10 is the default")
        if facts_file and (python or nvml_fixture):
            given = "--python" if python else "--nvml-fixture (or PREFLIGHT_NVML_FIXTURE)"
            raise PreflightError("--facts evaluates a saved snapshot without probing; %s has nothing to probe" % given,
                                 "give one or the other")
        self.profile = profile
        self.rules_paths = rules_paths or []
        self.select = select or []
        self.ignore = ignore or []
        self.settings = settings or []
        self.facts_file = facts_file
        self.python = python
        self.nvml_fixture = nvml_fixture
        self.timeout = timeout
        self.use_cache = use_cache
        self.strict = strict
        self.environ = environ
        self.workload = workload


class OutputOptions:
    """Where and how a command's result is shown: --format, --output, --quiet, --color, --expires-in."""

    def __init__(self, format: str = "text", output: Optional[str] = None, quiet: bool = False,
                 color: str = "auto", expires_in: float = 3600.0) -> None:
        self.format = format
        self.output = output
        self.quiet = quiet
        self.color = color
        self.expires_in = expires_in

    def colored(self, stream=None) -> bool:
        """Colour only for text on a terminal (or when asked), never with NO_COLOR or TERM=dumb."""
        import os
        import sys

        if self.format != "text" or (self.output not in (None, "-") and stream is None):
            return False
        if self.color == "always":
            return True
        if self.color == "never" or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
            return False
        stream = sys.stdout if stream is None else stream
        return stream is not None and stream.isatty()
