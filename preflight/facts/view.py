"""What evaluation reads: one snapshot (what the probes saw) and the context of the run (what was asked).

The snapshot holds only what the probes saw, and evaluates the same anywhere.
What a command asks for (a workload to size, the GPUs a node should have)
travels beside it in a ``Context``: nothing is written into a snapshot, so a
file saved on a node and read by ``fleet`` carries nothing to scrub.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional


class Unknown(Exception):
    """A fact that could not be known; the message says why."""


class Context(NamedTuple):
    """The requests and expectations a run brings to evaluation.

    ``workload``: the sized workload of ``--workload`` (split over the visible GPUs), or None.
    ``expected_gpus``: ``{"count", "source", "scope"}`` from --expect-gpus, the site configuration, Slurm's
    Gres or the job's allocation; None when nothing says how many GPUs there should be.
    """

    workload: Optional[Dict[str, Any]] = None
    expected_gpus: Optional[Dict[str, Any]] = None


NO_CONTEXT = Context()


class SnapshotView:
    """Read access to one snapshot with its context, raising ``Unknown`` with the reason for what is missing."""

    def __init__(self, snapshot: Dict[str, Any], context: Context = NO_CONTEXT) -> None:
        self.snapshot = snapshot
        self.context = context

    def section(self, name: str) -> Dict[str, Any]:
        value = self.snapshot.get(name)
        if isinstance(value, dict):
            return value
        probe = "nvml" if name == "visibility" else name
        status = (self.snapshot.get("probes") or {}).get(probe)
        if status and status.get("error"):
            raise Unknown(status["error"])
        raise Unknown("the %s probe did not run for this snapshot" % probe)

    def nvml_ok(self) -> bool:
        return self.section("nvml").get("init", {}).get("status") == "ok"

    def machine_gpus(self) -> List[Dict[str, Any]]:
        """Every GPU NVML lists here, lost ones too (``inventory.machine_gpus``); Unknown without NVML facts."""
        from preflight import inventory

        self.section("nvml")
        return inventory.machine_gpus(self.snapshot)

    def visible_gpus(self, readable: bool = False) -> List[Dict[str, Any]]:
        """The GPUs CUDA sees here, in CUDA's order (``inventory.visible_gpus``); Unknown without NVML facts."""
        from preflight import inventory

        self.section("nvml")
        self.section("visibility")
        return inventory.visible_gpus(self.snapshot, readable)

    def visible_indices(self) -> List[int]:
        return [gpu.get("index") for gpu in self.visible_gpus()]

    def gpu(self, index: int) -> Dict[str, Any]:
        for gpu in self.section("nvml").get("gpus") or []:
            if gpu.get("index") == index:
                return gpu
        raise Unknown("GPU %d is not in the NVML facts" % index)

    def torch(self) -> Dict[str, Any]:
        return self.section("python").get("torch") or {"installed": False}
