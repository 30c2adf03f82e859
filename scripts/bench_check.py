#!/usr/bin/env python3
"""Time `preflight check` against `python -c pass` and `python -c "import pynvml, click"`, side by side.

Each round runs every command once, in turn, so that a noisy machine slows
them all alike; the medians are compared ("vs imports"), and so is each
round's own ratio to importing the two libraries ("per round", the median of
those ratios: steadier where the machine's speed drifts). The target: each
profile's check starts within 1.25x of importing its two runtime libraries.
Usage:

    python scripts/bench_check.py [--rounds 21] [--python PYTHON] [--preflight CMD] [--baseline CMD]
                                  [--profile train|inference|node ...]

By default PYTHON is this interpreter and CMD is `PYTHON -m preflight`; give
`--preflight /path/to/venv/bin/preflight` to time an installed console script,
and `--baseline /path/to/old-venv/bin/preflight` to time an older install in
the same rounds (a noisy machine then slows both alike).

`--instructions` counts the instructions each command runs instead of timing
it (valgrind's callgrind, run once per command: slow, but the same on every
run, which a shared 2-core machine's wall clock is not). It leaves out what
the kernel does and time spent waiting, so report it beside the medians.
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
    parser.add_argument("--profile", action="append", choices=("train", "inference", "node"),
                        help="a profile to check (repeatable; default: node and train; node reads the node-health "
                             "values and the kernel log too)")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions with valgrind (callgrind) instead of timing, once per command")
    args = parser.parse_args()
    profiles = args.profile or ["node", "train"]
    preflight = shlex.split(args.preflight) if args.preflight else [args.python, "-m", "preflight"]
    env = {k: v for k, v in os.environ.items() if k != "PREFLIGHT_NVML_FIXTURE"}
    commands = {
        "python -c pass": [args.python, "-c", "pass"],
        "import pynvml, click": [args.python, "-c", "import pynvml, click"],
    }
    replay = ["--nvml-fixture", os.path.abspath(H200)]
    for profile in profiles:
        check = ["check", "--profile", profile]
        commands["check %s (H200 replay)" % profile] = preflight + check + replay
        commands["check %s (this machine)" % profile] = preflight + check
        if args.baseline:
            commands["baseline %s (H200 replay)" % profile] = shlex.split(args.baseline) + check + replay
    for argv in commands.values():  # warm the page cache and the torch-architecture cache
        _time(argv, env)
    if args.instructions:
        return _instructions(commands, env)
    samples = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, argv in commands.items():
            samples[name].append(_time(argv, env))
    baseline = statistics.median(samples["python -c pass"])
    libraries = statistics.median(samples["import pynvml, click"])
    imports = samples["import pynvml, click"]
    print("%-32s %10s %10s %10s %14s %12s %12s" % ("command", "median", "min", "max", "vs python", "vs imports",
                                                 "per round"))
    for name, values in samples.items():
        median = statistics.median(values)
        # The median of each round's ratio: a machine that slows down for a while slows both sides of a ratio
        # taken in one round, but shifts the medians of the two columns apart when it slows them unevenly.
        paired = statistics.median(value / library for value, library in zip(values, imports))
        print("%-32s %8.1fms %8.1fms %8.1fms %+12.1fms %11.2fx %11.2fx" % (
            name, median * 1000, min(values) * 1000, max(values) * 1000, (median - baseline) * 1000,
            median / libraries, paired))
    print("rounds: %d, python: %s, profiles: %s" % (args.rounds, args.python, ", ".join(profiles)))
    return 0


def _instructions(commands, env) -> int:
    import shutil

    if shutil.which("valgrind") is None:
        print("--instructions counts with valgrind, which is not installed here (Debian: apt-get install valgrind)",
              file=sys.stderr)
        return 2
    counts = {}
    for name, argv in commands.items():
        done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + argv,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        found = [line for line in done.stderr.splitlines() if "Collected :" in line]
        if not found:
            print("valgrind did not count %s: %s" % (name, done.stderr.strip()[-300:]), file=sys.stderr)
            return 2
        counts[name] = int(found[-1].split(":")[-1])
    libraries = counts["import pynvml, click"]
    print("%-32s %16s %12s" % ("command", "instructions", "vs imports"))
    for name, count in counts.items():
        print("%-32s %15.1fM %11.3fx" % (name, count / 1e6, count / libraries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
