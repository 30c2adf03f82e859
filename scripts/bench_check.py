#!/usr/bin/env python3
"""Time `preflight check` against importing its runtime libraries, side by side, with preflight's cache cold and warm.

The yardstick is `python -c "import pynvml, click, packaging.version, psutil"`: what any tool built on those
libraries pays before it does anything. Each round runs every command once, in turn, so that a noisy machine slows
them all alike; the medians are compared ("vs imports"), and so is each round's own ratio to the imports ("per
round", the median of those ratios: steadier where the machine's speed drifts). The guard (not a target): each
profile's check within 1.75x of the imports, cold and warm.

"cold" runs each check with a new, empty cache folder (PREFLIGHT_CACHE_DIR), as a fresh container does; "warm"
keeps one folder across runs, as a workstation does. (The operating system's page cache is warm in both.)

    python scripts/bench_check.py [--rounds 21] [--python PYTHON] [--preflight CMD] [--baseline CMD]
                                  [--profile train|inference|node ...] [--instructions]

By default PYTHON is this interpreter and CMD is `PYTHON -m preflight`; give `--preflight /path/to/venv/bin/preflight`
to time an installed console script, and `--baseline /path/to/old-venv/bin/preflight` to time an older install in
the same rounds. `--instructions` counts the instructions each command runs instead (valgrind's callgrind, once per
command: the same on every run, which a shared machine's wall clock is not; it leaves out the kernel and waiting).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
H200 = os.path.join(HERE, os.pardir, "preflight", "recordings", "h200-driver580.json")
IMPORTS = "import pynvml, click, packaging.version, psutil"


def _run(argv, env, cold: bool, prefix=()) -> subprocess.CompletedProcess:
    scratch = tempfile.mkdtemp(prefix="preflight-bench-") if cold else None
    if scratch:
        env = dict(env, PREFLIGHT_CACHE_DIR=scratch)
    try:
        return subprocess.run(list(prefix) + argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=env)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _time(argv, env, cold: bool) -> float:
    started = time.perf_counter()
    _run(argv, env, cold)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--preflight", help="command that runs preflight (default: PYTHON -m preflight)")
    parser.add_argument("--baseline", metavar="CMD",
                        help="another preflight (an older install) to time in the same rounds, interleaved")
    parser.add_argument("--profile", action="append", choices=("train", "inference", "node"),
                        help="a profile to check (repeatable; default: node and train)")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions with valgrind (callgrind) instead of timing, once per command")
    args = parser.parse_args()
    profiles = args.profile or ["node", "train"]
    preflight = shlex.split(args.preflight) if args.preflight else [args.python, "-m", "preflight"]
    env = {k: v for k, v in os.environ.items() if k not in ("PREFLIGHT_NVML_FIXTURE", "PREFLIGHT_CACHE_DIR")}
    warm_cache = tempfile.mkdtemp(prefix="preflight-bench-warm-")
    env["PREFLIGHT_CACHE_DIR"] = warm_cache
    commands = {  # name -> (argv, cold)
        "python -c pass": ([args.python, "-c", "pass"], False),
        "runtime libraries' import": ([args.python, "-c", IMPORTS], False),
    }
    replay = ["--nvml-fixture", os.path.abspath(H200)]
    for profile in profiles:
        check = ["check", "--profile", profile]
        for cold in (True, False):
            state = "cold" if cold else "warm"
            commands["%s, H200 replay, %s" % (profile, state)] = (preflight + check + replay, cold)
            commands["%s, this machine, %s" % (profile, state)] = (preflight + check, cold)
        if args.baseline:
            commands["baseline %s, H200 replay" % profile] = (shlex.split(args.baseline) + check + replay, False)
    try:
        for argv, cold in commands.values():  # the page cache, and the warm cache folder
            _run(argv, env, cold)
        if args.instructions:
            return _instructions(commands, env)
        samples = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, (argv, cold) in commands.items():
                samples[name].append(_time(argv, env, cold))
    finally:
        shutil.rmtree(warm_cache, ignore_errors=True)
    python = statistics.median(samples["python -c pass"])
    imports = samples["runtime libraries' import"]
    libraries = statistics.median(imports)
    print("%-32s %10s %10s %10s %12s %12s %12s" % ("command", "median", "min", "max", "vs python", "vs imports",
                                                 "per round"))
    for name, values in samples.items():
        median = statistics.median(values)
        # The median of each round's ratio: a machine that slows down for a while slows both sides of a ratio
        # taken in one round, but shifts the medians of the two columns apart when it slows them unevenly.
        paired = statistics.median(value / library for value, library in zip(values, imports))
        print("%-32s %8.1fms %8.1fms %8.1fms %+10.1fms %11.2fx %11.2fx" % (
            name, median * 1000, min(values) * 1000, max(values) * 1000, (median - python) * 1000,
            median / libraries, paired))
    print("rounds: %d, python: %s, profiles: %s; imports: %s" % (args.rounds, args.python, ", ".join(profiles),
                                                                  IMPORTS))
    return 0


def _instructions(commands, env) -> int:
    if shutil.which("valgrind") is None:
        print("--instructions counts with valgrind, which is not installed here (Debian: apt-get install valgrind)",
              file=sys.stderr)
        return 2
    counts = {}
    for name, (argv, cold) in commands.items():
        done = _run(argv, env, cold, ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"])
        found = [line for line in done.stderr.splitlines() if "Collected :" in line]
        if not found:
            print("valgrind did not count %s: %s" % (name, done.stderr.strip()[-300:]), file=sys.stderr)
            return 2
        counts[name] = int(found[-1].split(":")[-1])
    libraries = counts["runtime libraries' import"]
    print("%-32s %16s %12s" % ("command", "instructions", "vs imports"))
    for name, count in counts.items():
        print("%-32s %15.1fM %11.3fx" % (name, count / 1e6, count / libraries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
