#!/usr/bin/env python3
"""Measure how fast `preflight diagnose` reads a large training log.

Generates a realistic YOLOv9 log (scripts/make_training_log.py) once, then
runs the whole command on it several times and reports MB/s, with the time of
reading the file alone (`cat > /dev/null` equivalent) for comparison:

    python scripts/bench_diagnose.py [--size-mb 1024] [--runs 3] [--log PATH] [--preflight CMD]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--log", default=os.path.join(tempfile.gettempdir(), "preflight-bench-train.log"))
    parser.add_argument("--preflight", help="command that runs preflight (default: this python -m preflight)")
    args = parser.parse_args()
    preflight = shlex.split(args.preflight) if args.preflight else [sys.executable, "-m", "preflight"]
    want = int(args.size_mb * 1e6)
    if not os.path.exists(args.log) or abs(os.path.getsize(args.log) - want) > want * 0.01:
        subprocess.run([sys.executable, os.path.join(HERE, "make_training_log.py"), args.log,
                        "--size-mb", str(args.size_mb)], check=True)
    size = os.path.getsize(args.log)

    def read_only() -> float:
        started = time.perf_counter()
        with open(args.log, "rb") as handle:
            while handle.read(4 << 20):
                pass
        return time.perf_counter() - started

    read_times, runs = [], []
    for _ in range(args.runs):
        read_times.append(read_only())
        started = time.perf_counter()
        completed = subprocess.run(preflight + ["diagnose", args.log, "--no-facts", "--format", "json"],
                                   capture_output=True, text=True)
        runs.append(time.perf_counter() - started)
        if completed.returncode not in (0, 1):
            print(completed.stderr, file=sys.stderr)
            return 1
    found = [(m["id"], m["line"]) for m in json.loads(completed.stdout)["matches"]]
    median = statistics.median(runs)
    print("log: %s, %.1f MB" % (args.log, size / 1e6))
    print("found: %s" % ", ".join("%s at line %d" % f for f in found))
    print("preflight diagnose: median %.2f s over %d runs = %.0f MB/s (min %.2f s, max %.2f s)"
          % (median, len(runs), size / median / 1e6, min(runs), max(runs)))
    print("reading the file alone: median %.2f s = %.0f MB/s" % (statistics.median(read_times),
                                                               size / statistics.median(read_times) / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
