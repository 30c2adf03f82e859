"""A facts snapshot as a block a person pastes into a bug report (Markdown-friendly), as collect_env does."""

from __future__ import annotations

from typing import Any, Dict, List

from preflight import inventory, units


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _size(value: Any) -> str:
    return units.format_bytes(value) if isinstance(value, int) else "unknown"


def render(snapshot: Dict[str, Any]) -> str:
    lines: List[str] = ["### preflight facts: %s, %s (preflight %s)" % (
        snapshot.get("hostname") or "unknown host", snapshot.get("collected_at") or "?",
        snapshot.get("preflight_version") or "?"), ""]
    host = snapshot.get("host") if isinstance(snapshot.get("host"), dict) else {}
    os_facts = host.get("os") or {}
    if host:
        container = _get(host, "container", "kind") if _get(host, "container", "detected") else None
        lines.append("- OS: %s %s %s%s%s" % (os_facts.get("system") or "?", os_facts.get("release") or "",
                                            os_facts.get("machine") or "",
                                            " (%s)" % os_facts["distribution"] if os_facts.get("distribution") else "",
                                            "; in a container (%s)" % container if container else ""))
        lines.append("- CPUs: %s; RAM: %s (%s available); /dev/shm: %s" % (
            _get(host, "cpu", "count") or "?", _size(_get(host, "memory", "total")),
            _size(_get(host, "memory", "available")), _size(_get(host, "shm", "total"))))
    python = snapshot.get("python") if isinstance(snapshot.get("python"), dict) else None
    if python:
        conda = python.get("conda") or {}
        where = "venv" if python.get("venv") else ("conda env %s" % conda.get("env_name") if conda.get("active")
                                                     else "no venv")
        lines.append("- Python: %s at %s (%s)" % (python.get("version") or "?", python.get("executable") or "?", where))
        torch = python.get("torch") or {}
        if torch.get("installed"):
            flags = _get(snapshot, "torch_arch", "flags")
            lines.append("- torch: %s, built for CUDA %s%s" % (torch.get("version"), torch.get("cuda") or "none (CPU)",
                                                              "; architectures %s" % " ".join(flags) if flags else ""))
        else:
            lines.append("- torch: not installed")
    else:
        lines.append("- Python: not probed")
    nvml = snapshot.get("nvml") if isinstance(snapshot.get("nvml"), dict) else {}
    status = _get(nvml, "init", "status")
    if status == "ok":
        lines.append("- NVIDIA driver: %s (CUDA %s)" % (nvml.get("driver_version"), nvml.get("cuda_driver_version")))
    else:
        lines.append("- NVIDIA driver: NVML %s%s" % (status or "not probed", ": %s" % _get(nvml, "init", "message")
                                                     if _get(nvml, "init", "message") else ""))
    for gpu in (snapshot.get("inventory") or inventory.of(snapshot)).get("gpus") or []:
        if gpu.get("lost"):
            lines.append("- GPU %s: lost (NVML cannot read it)" % gpu.get("index"))
            continue
        lines.append("- GPU %s: %s, %s, compute capability %s, PCI %s" % (
            gpu.get("index"), gpu.get("name"), _size(gpu.get("memory_total")), gpu.get("compute_capability"),
            gpu.get("pci_bus_id")))
    visible = _get(snapshot, "visibility", "cuda_visible_devices")
    if visible is not None:
        lines.append("- CUDA_VISIBLE_DEVICES: %r" % visible)
    container = snapshot.get("container") if isinstance(snapshot.get("container"), dict) else {}
    shown = ["%s=%s" % (key, value) for key, value in sorted(container.items())
             if isinstance(value, str) and key != "requirements"]
    if shown:
        lines.append("- Container: %s" % ", ".join(shown))
    packages = (python or {}).get("packages") or {}
    if packages:
        listed = ["%s %s" % (name, info.get("version") or "missing") for name, info in sorted(packages.items(),
                                                                                            key=lambda i: i[0].lower())
                  if isinstance(info, dict)]
        lines.append("- Packages: %s" % ", ".join(listed))
    from preflight.terminal import printable

    return "\n".join(printable(line) for line in lines) + "\n"
