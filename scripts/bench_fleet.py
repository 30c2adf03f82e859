#!/usr/bin/env python3
"""Generate a fleet of varied facts snapshots from the NVML fixtures, then time `preflight fleet` over them.

Each snapshot is a real `preflight facts` snapshot of one recorded machine (the H200, the 8-GPU HGX, the A100
pair, the RTX 3060), renamed node-00001 ... and varied the way a fleet drifts: driver versions, a torch build
per node, and planted failures on some nodes (a lost GPU, uncorrected ECC errors, a small /dev/shm, a
missing package). Reports, for each --jobs value side by side, the rate (snapshots a second) and the peak
memory: of the largest process, and of the fleet process and its workers together (their resident sizes added,
pages they share counted in each: an upper bound).

    python scripts/bench_fleet.py [--count 10000] [--keep DIR] [--reuse] [--jobs 1,2] [--preflight CMD]
                                  [--format json]
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
MACHINES = ("h200-driver580.json", "8x-h100-hgx.json", "2x-a100-40g-driver550-ecc.json", "rtx3060-12g-driver525.json")
DRIVERS = ("580.159.04", "580.126.09", "595.45.04", "570.195.03")


def base_snapshots() -> List[Dict[str, Any]]:
    """`preflight facts` of each recorded machine, with this interpreter's packages as the Python side."""
    from preflight.commands import facts
    from preflight.commands.options import CheckOptions

    return [facts.run(CheckOptions(nvml_fixture=os.path.join(ROOT, "preflight", "recordings", name),
                                   use_cache=False)) for name in MACHINES]


def vary(base: Dict[str, Any], index: int, rng: random.Random) -> Dict[str, Any]:
    snapshot = copy.deepcopy(base)
    snapshot["hostname"] = "node-%05d" % index
    python = snapshot.get("python")
    known = {"numpy": "1.26.4", "Pillow": "9.5.0", "opencv": "4.10.0.84"}
    for name, package in ((python or {}).get("packages") or {}).items():  # a training image: everything installed
        if isinstance(package, dict) and not package.get("version"):
            package.update(version=known.get(name, "1.0.0"), importable=True)
    nvml = snapshot["nvml"]
    if nvml.get("driver_version") and rng.random() < 0.1:
        nvml["driver_version"] = rng.choice(DRIVERS)
    gpus = nvml.get("gpus") or []
    planted = rng.random()
    if gpus and planted < 0.02:
        gpus[-1] = {"index": gpus[-1]["index"], "lost": True, "unsupported": [], "errors": {"handle": "NVMLError_GpuIsLost (15)"}}
    elif gpus and planted < 0.05:
        gpus[0]["ecc_uncorrected_volatile"] = rng.randint(1, 9)
    elif planted < 0.08 and isinstance(snapshot.get("host"), dict) and snapshot["host"].get("shm"):
        snapshot["host"]["shm"]["total"] = 64 << 20
    elif planted < 0.10 and isinstance(snapshot.get("python"), dict):
        snapshot["python"]["packages"]["IPython"] = {"dist": "ipython", "version": None, "importable": False}
    if isinstance(python, dict) and rng.random() < 0.9:  # most nodes have a CUDA torch, in a few builds
        version, cuda = rng.choice((("2.11.0+cu130", "13.0"), ("2.11.0+cu128", "12.8"), ("2.10.0+cu128", "12.8")))
        python["torch"] = {"installed": True, "version": version, "cuda": cuda, "location": "/opt/venv/torch"}
        snapshot["torch_arch"] = {"flags": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"],
                                  "source": "generated"}
        snapshot["probes"]["torch_arch"] = {"status": "ok", "seconds": 0.0, "error": None}
    return snapshot


def write_fleet(folder: str, count: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    bases = base_snapshots()
    for index in range(1, count + 1):
        snapshot = vary(bases[index % len(bases)], index, rng)
        text = json.dumps(snapshot)
        path = os.path.join(folder, "node-%05d.json" % index)
        if index % 10 == 0:  # some gzipped, as a collector may store them
            with gzip.open(path + ".gz", "wt", encoding="utf-8") as out:
                out.write(text)
        else:
            with open(path, "w", encoding="utf-8") as out:
                out.write(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--keep", metavar="DIR", help="write the snapshots here and keep them")
    parser.add_argument("--preflight", default="%s -m preflight" % sys.executable)
    parser.add_argument("--format", default="json")
    parser.add_argument("--jobs", default="1,%d" % max(2, len(os.sched_getaffinity(0))),
                        help="fleet --jobs values to time one after the other (comma-separated)")
    parser.add_argument("--reuse", action="store_true", help="with --keep: use the snapshots already there")
    args = parser.parse_args()
    folder = args.keep or tempfile.mkdtemp(prefix="preflight-fleet-")
    os.makedirs(folder, exist_ok=True)
    if args.reuse and args.keep:
        args.count = len([name for name in os.listdir(folder) if name.endswith((".json", ".json.gz"))])
        print("reusing %d snapshots in %s" % (args.count, folder))
    else:
        started = time.perf_counter()
        write_fleet(folder, args.count)
        print("generated %d snapshots in %.1f s (%s)" % (args.count, time.perf_counter() - started, folder))
    for jobs in [int(value) for value in args.jobs.split(",")]:
        command = shlex.split(args.preflight) + ["fleet", folder, "--format", args.format, "--output", os.devnull,
                                                 "--jobs", str(jobs)]
        started = time.perf_counter()
        code, largest, together = _run_measured(command)
        elapsed = time.perf_counter() - started
        print("--jobs %d: exit %d, %d snapshots in %.1f s, %.0f snapshots/s, peak memory %.0f MiB in the largest "
              "process, %.0f MiB all together" % (jobs, code, args.count, elapsed, args.count / elapsed,
                                                  largest / 2**20, together / 2**20))
        if code not in (0, 1):
            return 1
    return 0


def _run_measured(command: List[str]):
    """Run ``command``; (exit code, peak resident size of its largest process, peak of their sum), sampled."""
    import psutil

    process = subprocess.Popen(command, stderr=subprocess.PIPE)
    watched = psutil.Process(process.pid)
    largest = together = 0
    while process.poll() is None:
        try:
            sizes = [p.memory_info().rss for p in [watched] + watched.children(recursive=True)]
        except psutil.Error:
            sizes = []
        if sizes:
            largest, together = max(largest, max(sizes)), max(together, sum(sizes))
        time.sleep(0.05)
    stderr = process.stderr.read().decode("utf-8", "replace") if process.stderr else ""
    if process.returncode not in (0, 1):
        print(stderr)
    return process.returncode, largest, together


if __name__ == "__main__":
    sys.exit(main())
