#!/usr/bin/env python3
"""Print the capacity table of docs/capacity.md from the shipped workload catalog and the H200 measurements.

For every workload: its parameters and basis (measured on the H200, or derived
for GELAN); training with AMP at batch 16 and --img 640, the H200 measurement
(training steps with AdamW, as measured) against the estimate of the same
steps, and the whole run's peak the trainers' defaults give (SGD, validation at
twice the batch); and the largest batch whose whole run fits on an idle
catalog GPU's usable memory.

    python scripts/capacity_table.py [--vram tests/fixtures/h200-vram.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from preflight.capacity import estimate  # noqa: E402
from preflight.engine import loader  # noqa: E402

GPUS = ("rtx-3060", "t4", "rtx-4090", "a100-80gb")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vram", default=os.path.join(os.path.dirname(HERE), "tests", "fixtures", "h200-vram.json"))
    args = parser.parse_args()
    with open(args.vram) as handle:
        rows = json.load(handle)
    measured = {row["cfg"]: row["nvml_used_delta"] for row in rows
                if row.get("mode") == "train" and row.get("amp") and row.get("batch") == 16 and row.get("imgsz") == 640}
    ruleset = loader.load(capacity=True)
    gpus = [ruleset.gpus[g] for g in GPUS]
    print("| model | params | basis | train AMP, batch 16, training steps (AdamW): H200 measured / estimate (GB) "
          "| whole run, SGD (GB) | largest batch, whole run: %s |" % " / ".join(g.name for g in gpus))
    print("|---|---|---|---|---|---|")
    order = sorted(ruleset.workloads.values(), key=lambda w: (not w.id.startswith("yolov9"), "tsmce".index(w.id[-1])))
    for workload in order:
        adamw = estimate.make_request(ruleset.workloads, workload.id, "train", "amp", 16, 640, "AdamW")
        sgd = estimate.make_request(ruleset.workloads, workload.id, "train", "amp", 16, 640, "SGD")
        seen = measured.get(workload.id)
        steps = "%s / %.1f" % ("%.1f" % (seen / 1e9) if seen else "-", estimate.training_bytes(adamw, 16) / 1e9)
        largest = " / ".join(str(estimate.max_batch(sgd, estimate.catalog_available(g))) for g in gpus)
        print("| %s | %.1fM | %s | %s | %.1f | %s |" % (workload.id, (workload.parameters or 0) / 1e6, sgd["basis"],
                                                      steps, estimate.required_bytes(sgd, 16) / 1e9, largest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
