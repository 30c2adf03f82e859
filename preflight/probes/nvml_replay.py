"""Replay a recorded machine's NVML answers (``nvml-fixture/1`` files).

A ``ReplayBinding`` stands in for the ``pynvml`` module: it answers the
``nvml*`` calls from the file and raises the real ``pynvml.NVMLError_*``
classes, so the probe behaves exactly as on the recorded machine. It is given
the ``pynvml`` module; it never imports it (``probes.nvml`` is the one door).

Format (see the fixtures' FORMAT.md): ``init`` is the outcome of nvmlInit;
``system`` holds calls without a device handle; ``devices[i]`` holds calls
made with the handle of index i, keyed ``name`` or ``name(arg,arg)``; the
memory call with ``version=nvmlMemory_v2`` is keyed ``name(v2)``. A call the
file does not list raises NotSupported. After a failed init every call
raises Uninitialized.
"""

from __future__ import annotations

from typing import Any, Dict, List

from preflight.errors import FixtureError

FORMAT = "nvml-fixture/1"


class _Handle:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return "<replayed device %d>" % self.index


class _Struct:
    """A C struct as pynvml returns it: fields as attributes."""

    def __init__(self, fields: Dict[str, Any]) -> None:
        for key, value in fields.items():
            setattr(self, key, _to_native(value))

    def __repr__(self) -> str:
        return "_Struct(%r)" % self.__dict__


def _to_native(value):
    if isinstance(value, dict):
        return _Struct(value)
    if isinstance(value, list):
        return [_to_native(item) for item in value]
    return value


class ReplayBinding:
    is_replay = True

    def __init__(self, pynvml, fixture: Dict[str, Any], source: str = "<fixture>") -> None:
        self._lib = pynvml
        self._source = source
        self._init = fixture["init"]
        self._system: Dict[str, Any] = fixture.get("system", {})
        self._devices: List[Dict[str, Any]] = fixture.get("devices", [])
        self._initialised = False
        self.description = fixture.get("description", "")
        # /dev/nvidia* of the recorded machine: as listed, else what a driver with these GPUs creates once
        # CUDA has run there (nvidia-modprobe adds the unified-memory nodes on the first CUDA call).
        started = "ok" in self._init
        self.device_files: List[str] = list(fixture.get("device_files") or (
            ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"] + ["nvidia%d" % i for i in range(len(self._devices))]
            if started else []))
        # NVIDIA GPUs on the recorded machine's PCI bus (sysfs), where the recording lists them.
        self.pci_gpus: List[str] = list(fixture.get("pci_gpus") or [])

    @classmethod
    def from_file(cls, pynvml, path: str) -> "ReplayBinding":
        return cls(pynvml, load_fixture(path), source=path)

    # Constants, exception classes and anything that is not an NVML call come
    # from the real module, so code written against pynvml works unchanged.
    def __getattr__(self, name: str):
        real = getattr(self._lib, name)
        if name.startswith("nvml") and callable(real) and not isinstance(real, type):
            return lambda *args, **kwargs: self._call(name, args, kwargs)
        return real

    def _raise(self, outcome: Dict[str, Any]):
        cls = getattr(self._lib, outcome["err"], None)
        if isinstance(cls, type) and issubclass(cls, self._lib.NVMLError):
            raise cls(outcome.get("code"))
        raise self._lib.NVMLError(outcome.get("code"))

    def _answer(self, outcome: Dict[str, Any]):
        if "err" in outcome:
            self._raise(outcome)
        return _to_native(outcome.get("ok"))

    def _call(self, name: str, args, kwargs):
        if name in ("nvmlInit", "nvmlInitWithFlags"):
            result = self._answer(self._init)
            self._initialised = True
            return result
        if not self._initialised:
            raise self._lib.NVMLError_Uninitialized()
        if name == "nvmlShutdown":
            self._initialised = False
            return None
        if name == "nvmlDeviceGetHandleByIndex":
            index = int(args[0])
            if not 0 <= index < len(self._devices):
                raise self._lib.NVMLError_InvalidArgument()
            entry = self._devices[index]
            if name in entry:
                self._answer(entry[name])
            return _Handle(index)
        if args and isinstance(args[0], _Handle):
            calls = self._devices[args[0].index]
            args = args[1:]
        else:
            calls = self._system
        # A C struct passed in (nvmlDeviceGetGpuFabricInfo fills one) is not part of the key: it receives the answer.
        filled = [a for a in args if not isinstance(a, int)]
        args = [a for a in args if isinstance(a, int)]
        key = name
        if kwargs.get("version") is not None and kwargs["version"] == getattr(self._lib, "nvmlMemory_v2", object()):
            key += "(v2)"
        elif args:
            key += "(%s)" % ",".join(str(int(a)) for a in args)
        outcome = calls.get(key)
        if outcome is None:
            raise self._lib.NVMLError_NotSupported()
        answer = self._answer(outcome)
        if filled and isinstance(answer, _Struct):
            for field, value in vars(answer).items():
                try:
                    setattr(filled[0], field, value)
                except (TypeError, AttributeError, ValueError):
                    pass  # arrays (a UUID) are not read back
            return 0  # NVML_SUCCESS
        return answer


def _outcome_problem(outcome: Any):
    """What is wrong with one recorded call outcome, or None."""
    if not isinstance(outcome, dict) or ("ok" in outcome) == ("err" in outcome):
        return "an outcome must be {\"ok\": value} or {\"err\": \"NVMLError_...\", \"code\": N}"
    if "err" in outcome and not (isinstance(outcome["err"], str) and outcome["err"].startswith("NVMLError")):
        return "'err' must name an NVML error class (NVMLError_...), found %r" % (outcome["err"],)
    code = outcome.get("code")
    if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
        return "'code' must be a whole number, found %r" % (code,)
    return None


def load_fixture(path: str) -> Dict[str, Any]:
    """Read and validate a fixture file (or a shipped recording by name); FixtureError (exit 2) says what is
    wrong."""
    from preflight.knowledge.shipped import recording

    path = recording(path)
    hint = "an NVML fixture is a JSON recording in the nvml-fixture/1 format: format, init, system, devices (docs/workstation.md: Replaying a machine; preflight/recordings/FORMAT.md)"
    from preflight.files import input_files

    data = input_files.load_json(path, "NVML fixture %s" % path, FixtureError, hint)
    problems = []
    if not isinstance(data, dict):
        raise FixtureError("NVML fixture %s: the top level must be a JSON object" % path, hint)
    if data.get("format") != FORMAT:
        problems.append("'format' must be %r, found %r" % (FORMAT, data.get("format")))
    init = data.get("init")
    if not (isinstance(init, dict) and ("ok" in init or "err" in init)):
        problems.append("'init' must be {\"ok\": null} or {\"err\": \"NVMLError_...\", \"code\": N}")
    if isinstance(init, dict) and _outcome_problem(init):
        problems.append("'init': %s" % _outcome_problem(init))
    system = data.get("system", {})
    if not isinstance(system, dict):
        problems.append("'system' must be an object of call outcomes")
    else:
        problems.extend("system.%s: %s" % (key, _outcome_problem(outcome)) for key, outcome in system.items()
                        if _outcome_problem(outcome))
    devices = data.get("devices", [])
    if not (isinstance(devices, list) and all(isinstance(d, dict) for d in devices)):
        problems.append("'devices' must be a list of objects of call outcomes")
    else:
        for index, device in enumerate(devices):
            problems.extend("devices[%d].%s: %s" % (index, key, _outcome_problem(outcome))
                            for key, outcome in device.items() if _outcome_problem(outcome))
    if problems:
        raise FixtureError("NVML fixture %s: %s" % (path, "; ".join(problems[:5])), hint)
    return data
