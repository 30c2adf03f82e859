#!/usr/bin/env python3
"""What the submit filter adds to sbatch, on an idle machine and beside busy loops, in one run.

Runs tests/test_slurm_submit.py's timing test (a real Slurm: sbatch --hold of a declared job, 25 times with the
client filter and 25 without, interleaved, medians) with 0 and then N busy loops (one per CPU by default) beside it,
and prints both lines. Needs what that test needs: Slurm with its lua plugins, munge, root.

    python scripts/bench_submit.py            # 0 and one busy loop per CPU
    python scripts/bench_submit.py --load 4
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def busy() -> None:
    while True:
        pass


def run(load: int) -> str:
    loops = [multiprocessing.Process(target=busy, daemon=True) for _ in range(load)]
    for loop in loops:
        loop.start()
    try:
        completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                                    "tests/test_slurm_submit.py", "-k", "adds_to_sbatch"],
                                   cwd=ROOT, capture_output=True, text=True, timeout=900)
    finally:
        for loop in loops:
            loop.terminate()
    found = re.search(r"sbatch --hold, median of 25: .*", completed.stdout)
    if found is None:
        return "no figure (the test did not run: %s)" % (completed.stdout.strip().splitlines() or ["?"])[-1]
    return found.group(0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", type=int, default=os.cpu_count() or 1, help="busy loops beside the second run")
    args = parser.parse_args()
    print("idle:              %s" % run(0))
    print("%2d busy loops:     %s" % (args.load, run(args.load)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
