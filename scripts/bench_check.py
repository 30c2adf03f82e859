#!/usr/bin/env python3
"""Time `preflight check` against `python -c pass`, side by side in one run.

Each round runs every command once, in turn, so that a noisy machine slows
them all alike; the medians are compared. Usage:

    python scripts/bench_check.py [--rounds 21] [--python PYTHON] [--preflight CMD] [--baseline CMD]
                                  [--profile train|inference|node]

By default PYTHON is this interpreter and CMD is `PYTHON -m preflight`; give
`--preflight /path/to/venv/bin/preflight` to time an installed console script,
and `--baseline /path/to/old-venv/bin/preflight` to time an older install in
the same rounds (a noisy machine then slows both alike).
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
H200 = os.path.join(HERE, os.pardir, "preflight", "recordings", "h200-driver580.json")


def _time(argv, env) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--preflight", help="command that runs preflight (default: PYTHON -m preflight)")
    parser.add_argument("--baseline", metavar="CMD",
                        help="another preflight (an older install) to time in the same rounds, interleaved")
    parser.add_argument("--profile", default="train", choices=("train", "inference", "node"),
                        help="the profile checked (node: the node-health rules and the kernel log too)")
    args = parser.parse_args()
    preflight = shlex.split(args.preflight) if args.preflight else [args.python, "-m", "preflight"]
    check = ["check", "--profile", args.profile]
    env = {k: v for k, v in os.environ.items() if k != "PREFLIGHT_NVML_FIXTURE"}
    commands = {
        "python -c pass": [args.python, "-c", "pass"],
        "preflight check (H200 replay)": preflight + check + ["--nvml-fixture", os.path.abspath(H200)],
        "preflight check (this machine)": preflight + check,
    }
    if args.baseline:
        baseline_command = shlex.split(args.baseline)
        commands["baseline check (H200 replay)"] = baseline_command + check + ["--nvml-fixture", os.path.abspath(H200)]
        commands["baseline check (this machine)"] = baseline_command + check
    for argv in commands.values():  # warm the page cache and the torch-architecture cache
        _time(argv, env)
    samples = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, argv in commands.items():
            samples[name].append(_time(argv, env))
    baseline = statistics.median(samples["python -c pass"])
    print("%-32s %10s %10s %10s %14s" % ("command", "median", "min", "max", "vs python"))
    for name, values in samples.items():
        median = statistics.median(values)
        print("%-32s %8.1fms %8.1fms %8.1fms %+12.1fms" % (name, median * 1000, min(values) * 1000,
                                                         max(values) * 1000, (median - baseline) * 1000))
    print("rounds: %d, python: %s, profile: %s" % (args.rounds, args.python, args.profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
