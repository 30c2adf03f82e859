"""Facts from the active test (``preflight smoke``): what the job's interpreter measured on each device.

The worker's answer (probes/smoke_worker.py) lists devices by CUDA index; each fact here reads one measurement
over every tested device and names the worst one, so a rule's threshold (in rules/smoke/) judges the node by
its weakest GPU.
"""

from __future__ import annotations

import shlex
from typing import Any, Callable, Dict, List, Optional, Tuple

from preflight import units
from preflight.facts.view import SnapshotView, Unknown
from preflight.knowledge import gpus

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


def answer(facts: SnapshotView) -> Dict[str, Any]:
    return facts.section("smoke")


def devices(facts: SnapshotView) -> List[Dict[str, Any]]:
    return answer(facts).get("devices") or []


def label(device: Dict[str, Any]) -> str:
    return "%s %s (%s)" % ("GPU" if str(device.get("device", "")).startswith("cuda") else "device",
                           device.get("index"), device.get("name") or "?")


def nvml_gpu(facts: SnapshotView, device: Dict[str, Any]) -> Dict[str, Any]:
    """NVML's facts of a tested CUDA device (its CUDA index counts the visible GPUs in CUDA's order); Unknown when
    the device is not a GPU NVML lists."""
    index = device.get("index")
    visible = facts.visible_gpus()
    if not str(device.get("device", "")).startswith("cuda") or not isinstance(index, int) \
            or not 0 <= index < len(visible):
        raise Unknown("%s is not a GPU NVML lists" % label(device))
    return visible[index]


def identity(facts: SnapshotView, device: Dict[str, Any]) -> str:
    """Where a tested GPU is, for its owner and its vendor: its PCI address and UUID as NVML gives them (the CUDA
    index moves with CUDA_VISIBLE_DEVICES)."""
    try:
        gpu = nvml_gpu(facts, device)
    except Unknown:
        gpu = None
    if not gpu or not (gpu.get("pci_bus_id") or gpu.get("uuid")):
        return "%s (NVML did not say where it is: nvidia-smi -q lists each GPU's PCI address and serial)" % label(device)
    return "%s at PCI address %s, UUID %s" % (label(device), gpu.get("pci_bus_id") or "?", gpu.get("uuid") or "?")


def _measured(facts: SnapshotView, check: str) -> List[Tuple[Dict[str, Any], Dict[str, Any]]]:
    """(device, its result) for every device where ``check`` ran; a check that raised is Unknown, with its error."""
    found = []
    for device in devices(facts):
        result = device.get(check)
        if not isinstance(result, dict) or "skipped" in result:
            continue
        if "error" in result:
            raise Unknown("%s on %s failed: %s" % (check, label(device), result["error"]))
        found.append((device, result))
    if not found:
        cut = answer(facts).get("cut")
        raise Unknown("the active test ended before the %s check: %s" % (check, cut) if cut else
                      "the %s check did not run on any device" % check)
    return found


def problems(facts: SnapshotView, gpu) -> Tuple[List[str], Dict[str, Any]]:
    smoke = answer(facts)
    return list(smoke.get("errors") or []), {"smoke_python": smoke.get("interpreter") or "?",
                                             "smoke_torch": smoke.get("torch") or "not importable"}


def memory_errors(facts: SnapshotView, gpu) -> Tuple[int, Dict[str, Any]]:
    measured = _measured(facts, "memory")
    worst = max(measured, key=lambda pair: pair[1].get("errors", 0))
    return sum(int(r.get("errors", 0)) for _, r in measured), {
        "smoke_device": label(worst[0]), "smoke_identity": identity(facts, worst[0]),
        "smoke_tested": "; ".join("%s: %s tested, %d bytes read back wrong" % (
            label(d), units.format_bytes(r.get("tested_bytes", 0)), r.get("errors", 0)) for d, r in measured)}


def matmul(precision: str):
    def compute(facts: SnapshotView, gpu) -> Tuple[float, Dict[str, Any]]:
        rows = [(device, result[precision]) for device, result in _measured(facts, "matmul")
                if (result.get(precision) or {}).get("supported")]
        if not rows:
            raise Unknown("no tested device runs %s" % precision)
        worst_device, worst = max(rows, key=lambda pair: _error(pair[1]))
        value = _error(worst)
        shown = float("%.2g" % value) if value != float("inf") else value
        return shown, {"smoke_device": label(worst_device), "smoke_identity": identity(facts, worst_device),
                       "smoke_precision": precision,
                       "smoke_errors": "; ".join("%s: %.2g" % (label(d), _error(r)) for d, r in rows)}
    return compute


def _error(result: Dict[str, Any]) -> float:
    """A non-finite product is the worst error there is."""
    value = result.get("max_relative_error")
    return float("inf") if value is None or not result.get("finite", True) else float(value)


def supports(precision: str):
    return lambda facts: _applies(lambda: matmul(precision)(facts, None), "%s is not tested here" % precision)


def peer_ratio(facts: SnapshotView, gpu) -> Tuple[float, Dict[str, Any]]:
    """The slowest device's matrix-multiply throughput over the median of its model's devices (1.0: as fast)."""
    import statistics  # with decimal and fractions: a start-up cost only the rules that compare GPUs need

    measured = _measured(facts, "throughput")
    worst: Optional[Tuple[float, Dict[str, Any], float]] = None
    for device, result in measured:
        peers = [r["matmul_tflops"] for d, r in measured if d.get("name") == device.get("name")]
        if len(peers) < 2:
            continue
        median = statistics.median(peers)
        ratio = result["matmul_tflops"] / median if median else 0.0
        if worst is None or ratio < worst[0]:
            worst = (ratio, device, median)
    if worst is None:
        raise Unknown("no two tested GPUs of the same model to compare")
    ratio, device, median = worst
    return round(ratio, 3), {
        "smoke_device": label(device), "smoke_median_tflops": "%.1f" % median,
        "smoke_throughput": "; ".join("%s: %.1f TFLOPS, %.0f GB/s" % (label(d), r["matmul_tflops"], r["bandwidth_gbs"])
                                      for d, r in measured)}


def has_peers(facts: SnapshotView) -> Optional[str]:
    try:
        peer_ratio(facts, None)
    except Unknown as unknown:
        try:
            measured = "; measured: " + "; ".join("%s: %.2f TFLOPS (%s), %.0f GB/s" % (
                label(d), r["matmul_tflops"], r.get("matmul_dtype", "?"), r["bandwidth_gbs"])
                for d, r in _measured(facts, "throughput"))
        except (Unknown, KeyError, TypeError):
            measured = ""
        return "throughput is compared among GPUs of one model: %s%s" % (unknown, measured)
    return None


# What each datasheet figure is compared with: the matrix product's TFLOPS (only a float16 product: the datasheets
# give FP16 tensor-core figures) and the copy's bandwidth.
_AGAINST_DATASHEET = {"tflops": ("matmul_tflops", "fp16_tflops", "TFLOPS"),
                      "bandwidth": ("bandwidth_gbs", "memory_gbs", "GB/s")}


def _against_datasheet(facts: SnapshotView, what: str) -> list:
    """(ratio, device, measured, catalog GPU) for every tested GPU whose datasheet peaks the catalog lists."""
    measured_key, sheet_key, _ = _AGAINST_DATASHEET[what]
    rows = []
    for device, result in _measured(facts, "throughput"):
        sheet = gpus.by_nvml_name(device.get("name"))
        if sheet is None or sheet.fp16_tflops is None or (what == "tflops" and result.get("matmul_dtype") != "float16"):
            continue
        value = float(result[measured_key])
        rows.append((value / getattr(sheet, sheet_key), device, value, sheet))
    if not rows:
        names = sorted({str(d.get("name")) for d, _ in _measured(facts, "throughput")})
        raise Unknown("no tested GPU has a datasheet figure in rules/%s (tested: %s)" % (
            gpus.CATALOG, ", ".join(names)))
    return rows


def datasheet_ratio(what: str):
    """The lowest measured share of the datasheet's peak over the tested GPUs (matrix TFLOPS or bandwidth)."""
    unit = _AGAINST_DATASHEET[what][2]
    sheet_key = _AGAINST_DATASHEET[what][1]

    def compute(facts: SnapshotView, gpu) -> Tuple[float, Dict[str, Any]]:
        rows = _against_datasheet(facts, what)
        ratio, device, value, sheet = min(rows, key=lambda row: row[0])
        return round(ratio, 3), {
            "smoke_device": label(device), "smoke_measured": "%.1f %s" % (value, unit),
            "smoke_datasheet": "%g %s (%s)" % (getattr(sheet, sheet_key), unit, sheet.name),
            "smoke_shares": "; ".join("%s: %.1f %s, %.0f%% of %g" % (label(d), v, unit, r * 100,
                                                                     getattr(s, sheet_key)) for r, d, v, s in rows)}
    return compute


def _applies(read: Callable[[], Any], why: str) -> Optional[str]:
    """A condition from a reader: None when it reads, else ``why`` and what it could not read."""
    try:
        read()
    except Unknown as unknown:
        return "%s: %s" % (why, unknown)
    return None


def has_datasheet(facts: SnapshotView) -> Optional[str]:
    return _applies(lambda: [_against_datasheet(facts, what) for what in _AGAINST_DATASHEET],
                    "a GPU's speed and bandwidth are compared with NVIDIA's datasheet only for the models it lists")


def train_step(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    failed = []
    for device in devices(facts):
        result = device.get("train_step")
        if not isinstance(result, dict) or "skipped" in result:
            continue
        if "error" in result:
            failed.append("%s: %s" % (label(device), result["error"]))
        elif not result.get("ok"):
            failed.append("%s: the loss or its gradients were not finite (losses %s)" % (
                label(device), ", ".join(result.get("losses") or [])))
    if not failed and not any(isinstance(d.get("train_step"), dict) and "ok" in d["train_step"]
                              for d in devices(facts)):
        cut = answer(facts).get("cut")
        raise Unknown("the active test ended before the training step: %s" % cut if cut else
                      "the training step did not run on any device")
    return ("failed" if failed else "ok"), {"smoke_failures": "; ".join(failed) or "none",
                                            "smoke_amp": _amp(facts)}


def _amp(facts: SnapshotView) -> str:
    for device in devices(facts):
        result = device.get("train_step")
        if isinstance(result, dict) and result.get("amp"):
            return result["amp"]
    return "?"


def _node_check(facts: SnapshotView, name: str, what: str) -> Dict[str, Any]:
    """The answer of a check run once for the node (the collective, the measured fit); Unknown if it did not run."""
    smoke = answer(facts)
    result = (smoke.get("checks") or {}).get(name)
    if result is None and smoke.get("cut"):
        raise Unknown("the active test ended before %s: %s" % (what, smoke["cut"]))
    if not isinstance(result, dict) or "skipped" in result:
        raise Unknown("%s did not run (%s)" % (what, (result or {}).get("skipped", "not asked")))
    return result


def collective_ran(facts: SnapshotView) -> Optional[str]:
    """The collective had ranks to reduce across: a one-GPU node has none, which is no failure (a collective the
    deadline left no time for is, as smoke.allreduce's unknown)."""
    collective = (answer(facts).get("checks") or {}).get("collective")
    reduce = collective.get("allreduce") if isinstance(collective, dict) else None
    skipped = reduce.get("skipped") if isinstance(reduce, dict) else None
    return "the all-reduce did not run: %s" % skipped if skipped else None


def allreduce(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    collective = _node_check(facts, "collective", "the collective test")
    if "error" in collective:
        return "failed", {"smoke_detail": collective["error"], "smoke_bus_gbs": "?", "smoke_backend": "?",
                          "smoke_world": "?", "smoke_peers": "not measured"}
    reduce = collective.get("allreduce") or {}
    if "skipped" in reduce:
        raise Unknown(reduce["skipped"])
    peers = "; ".join("GPUs %d-%d: peer access %s, %.1f GB/s%s" % (
        p["pair"][0], p["pair"][1], "yes" if p.get("access") else "no", p.get("gbs", 0),
        "" if p.get("correct", True) else ", data wrong") for p in collective.get("peers") or []) or "none"
    details = {"smoke_backend": reduce.get("backend", "?"), "smoke_bus_gbs": reduce.get("bus_gbs", "?"),
               "smoke_world": reduce.get("world", "?"), "smoke_peers": peers,
               "smoke_detail": "; ".join(reduce.get("errors") or []) or reduce.get("error") or "none"}
    if reduce.get("error") or reduce.get("errors"):
        return "failed", details
    if not reduce.get("correct") or any(not p.get("correct", True) for p in collective.get("peers") or []):
        return "wrong", details
    return "ok", details


def link_share(facts: SnapshotView, gpu) -> Tuple[float, Dict[str, Any]]:
    """The NCCL all-reduce's bus bandwidth over what the tested GPUs' links carry in one direction: NVLink's active
    links when every tested GPU has some (the GPU with the fewest), else PCIe (the slowest current link)."""
    collective = _node_check(facts, "collective", "the collective test")
    reduce = collective.get("allreduce") or {}
    bus = reduce.get("bus_gbs")
    if reduce.get("backend") != "nccl" or isinstance(bus, bool) or not isinstance(bus, (int, float)) or bus <= 0:
        raise Unknown("no NCCL all-reduce over GPUs was measured")
    expected, link = _links(facts)
    return round(bus / expected, 3), {"smoke_bus_gbs": "%.1f" % bus, "smoke_expected": link}


def _links(facts: SnapshotView) -> Tuple[float, str]:
    from preflight.knowledge import nvidia

    gpus = [nvml_gpu(facts, device) for device in devices(facts)]
    nvlinks = [(gpu.get("nvlink") or {}).get("active") for gpu in gpus]
    if gpus and all(isinstance(active, int) and active > 0 for active in nvlinks):
        majors = {int(str(gpu.get("compute_capability") or "0").split(".")[0]) for gpu in gpus}
        per_link = min(nvidia.NVLINK_GBS_PER_LINK.get(major, 0.0) for major in majors)
        if per_link:
            fewest = min(nvlinks)
            return fewest * per_link, "NVLink: %d active links x %g GB/s = %g GB/s per direction" % (
                fewest, per_link, fewest * per_link)
    lanes = []
    for gpu in gpus:
        pcie = gpu.get("pcie") or {}
        generation, width = pcie.get("current_generation"), pcie.get("current_width")
        if generation not in nvidia.PCIE_GBS_PER_LANE or not isinstance(width, int) or width <= 0:
            raise Unknown("NVML reports neither NVLink nor the PCIe link of GPU %s" % gpu.get("index"))
        lanes.append((nvidia.PCIE_GBS_PER_LANE[generation] * width, generation, width))
    if not lanes:
        raise Unknown("no tested GPU")
    slowest, generation, width = min(lanes)
    return slowest, "PCIe Gen%d x%d: %.1f GB/s per direction" % (generation, width, slowest)


def has_links(facts: SnapshotView) -> Optional[str]:
    return _applies(lambda: link_share(facts, None), "the all-reduce's bandwidth is judged against the GPUs' links")


def fit(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    measured = _node_check(facts, "fit", "the measured fit")
    if "error" in measured:
        details = {"smoke_detail": measured["error"], "smoke_points": "none", "smoke_largest": "?",
                   "smoke_estimate": "none"}
        if measured.get("missing_module") and measured.get("requirements"):
            # The checkout's own imports: its requirements file installs them (never a package guessed from a name).
            details["smoke_requirements"] = shlex.quote(measured["requirements"])
            details["smoke_python"] = shlex.quote(str(answer(facts).get("interpreter") or "python"))
        if measured.get("repo"):  # the worker's own error: something of the checkout
            details["smoke_repo"] = shlex.quote(measured["repo"])
        else:  # the worker was ended while it ran the fit: time or memory, not the checkout
            details["smoke_ended"] = measured["error"].split(":")[0]  # what ended it; the detail says the rest
        return "failed", details
    points = measured.get("points") or []
    if not points:
        raise Unknown("the measured fit measured nothing: %s" % _fit_detail(measured))
    on_gpu = any("reserved_bytes" in p for p in points)
    largest = measured.get("largest_batch")
    return "measured", {"smoke_detail": _fit_detail(measured),
                        "smoke_points": _fit_points(points),
                        "smoke_largest": largest if largest is not None else "not measured on this device",
                        # Memory is compared only where it was measured: on the CPU nothing is set beside the plan.
                        "smoke_estimate": _estimated(facts, points) if on_gpu else
                        "not compared: GPU memory is measured on a GPU only"}


def _fit_detail(measured: Dict[str, Any]) -> str:
    return "%s with %s classes on %s at --img %s, in %s s of its %s s budget%s%s" % (
        measured.get("cfg") or "the model", measured.get("classes", 80), measured.get("device"),
        measured.get("imgsz"), measured.get("seconds", "?"), measured.get("budget_seconds", "?"),
        "; bounded on the CPU to %s" % measured["bounded"] if measured.get("bounded") else "",
        "; %s" % measured["stopped"] if measured.get("stopped") else "")


def _fit_points(points: List[Dict[str, Any]]) -> str:
    def said(point: Dict[str, Any]) -> str:
        speed = ("%.3g s per step" % point["seconds_per_step"]) if isinstance(point.get("seconds_per_step"),
                                                                             (int, float)) else ""
        if "reserved_bytes" not in point:  # the CPU: what it measured is the time, nothing of GPU memory
            return speed or "ran"
        memory = "peak %s allocated, %s reserved" % (units.format_bytes(point["allocated_bytes"]),
                                                     units.format_bytes(point["reserved_bytes"]))
        return "%s, %s" % (memory, speed) if speed else memory

    return "; ".join("batch %d: %s" % (p["batch"], said(p)) for p in points) or "none"


def fit_measured_memory(facts: SnapshotView) -> Optional[str]:
    """The fit measured GPU memory: a fit on the CPU measured time only, which is said and not judged (a pass
    would vouch for memory it did not see). A fit that failed or measured nothing is judged."""
    measured = (answer(facts).get("checks") or {}).get("fit")
    if not isinstance(measured, dict) or "error" in measured or "skipped" in measured:
        return None
    points = measured.get("points") or []
    if not points or any("reserved_bytes" in p for p in points):
        return None
    return "on %s the fit measures time, not GPU memory, so nothing is judged: %s: %s" % (
        "the CPU" if str(measured.get("device", "cpu")).startswith("cpu") else measured["device"],
        _fit_detail(measured), _fit_points(points))


def _estimated(facts: SnapshotView, points: List[Dict[str, Any]]) -> str:
    """plan's estimate for the same workload at the measured batches, to set beside the measurement."""
    request = facts.context.workload
    if not request or not points:
        return "none (no workload was sized)"
    from preflight.capacity import estimate

    return "; ".join("batch %d: training steps %s, whole run %s" % (
        p["batch"], units.format_bytes(estimate.steps_need_bytes(request, p["batch"])),
        units.format_bytes(estimate.required_bytes(request, p["batch"]))) for p in points)


def fit_asked(facts: SnapshotView) -> Optional[str]:
    smoke = answer(facts)
    measured = (smoke.get("checks") or {}).get("fit")
    return None if measured or "fit" in (smoke.get("asked") or ()) else \
        "no workload to measure (preflight smoke --workload ID --repo PATH)"


def ran(facts: SnapshotView) -> Optional[str]:
    """The worker answered and found something to test (its own problems are smoke.torch's)."""
    try:
        smoke = answer(facts)
    except Unknown as unknown:
        return "the active test did not answer: %s" % unknown
    if smoke.get("errors"):
        return "the active test could not test anything (see smoke.torch)"
    return None
