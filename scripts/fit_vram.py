#!/usr/bin/env python3
"""Fit YOLOv9's GPU memory to measurements and write the workload catalog.

Input: vram.json as recorded on an H200 (tests/fixtures/h200-vram.json, a copy
of ../shared/fixtures/h200/vram.json). Output: rules/capacity/yolov9.toml, the
data `preflight check --workload` and `preflight plan` estimate from.

The model: memory = fixed + per_image * batch * (imgsz / 640)^2, where the
target is what NVML saw the process use (CUDA context included). Measured
peaks grow linearly with batch and with pixels (yolov9-s at 320, 480, 640
and 1280 fall on one line to within 3%).

- Training, AMP: fixed = CUDA context + ALPHA * parameters, with one ALPHA for
  every model (FP32 weights, gradients and AdamW state scale with the
  parameter count), and a per-image slope per model; fitted together on
  relative error. Leave-one-out, this predicts every point within 3%,
  batch 1 included, where a separate line per model misses by up to 11%.
- Training, FP32: the same fixed part (the same FP32 state) and a per-image
  slope fitted where measured (yolov9-s, yolov9-c). For the other models:
  the AMP slope times the mean measured FP32/AMP ratio (extrapolated).
- Inference, FP16 and FP32: a line per model where measured (yolov9-s,
  yolov9-c), weighted by relative error. For the other models: the per-image
  slope is the training AMP slope times the mean measured inference/training
  ratio, and the fixed part is interpolated by parameter count between the
  measured models (extrapolated).

- GELAN (gelan-t ... gelan-e, trained with train.py): not measured on the
  H200. Derived from the dual-head model of the same size: its per-image
  memory times the ratio of the bytes autograd saves in one training forward
  pass, GELAN over YOLOv9, measured on the CPU from the repository's own model
  definitions (tests/fixtures/yolov9-activations-cpu.json); the fixed part
  from GELAN's own parameter count.
- The whole run: train.py and train_dual.py validate after each epoch at
  twice the training batch, in FP16 (rectangular batches). Each training
  estimate carries validation_per_image_bytes (the model's FP16 inference
  per-image memory); a run's peak adds it for 2 x batch images on top of the
  training steps, which is what public training logs show (+1.2 to +2.3 GB
  on 16-24 GB cards).
- The optimizer: the H200 runs used AdamW (two FP32 state buffers); each
  workload records it, and estimates for SGD (the trainers' default, one
  buffer) take 4 bytes per parameter off the fixed part.

Every estimate then carries MARGIN. The script checks, and prints, that with
the margin no measured point is under-estimated and none by more than 25%
(the H200 points are training steps only, with no validation, so they are
compared with the training-steps figure).

    python scripts/fit_vram.py [--input FILE] [--output FILE] [--check]

--check rewrites nothing and exits 1 when the catalog differs from a new fit.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_INPUT = os.path.join(REPO, "tests", "fixtures", "h200-vram.json")
DEFAULT_OUTPUT = os.path.join(REPO, "rules", "capacity", "yolov9.toml")
ACTIVATIONS = os.path.join(REPO, "tests", "fixtures", "yolov9-activations-cpu.json")
GELAN = {"gelan-t": "yolov9-t", "gelan-s": "yolov9-s", "gelan-m": "yolov9-m", "gelan-c": "yolov9-c",
         "gelan-e": "yolov9-e"}
# The YOLOv9 README's table of converted (inference) models, which are GELAN of the same size.
README_PARAMS = {"gelan-t": "2.0M", "gelan-s": "7.1M", "gelan-m": "20.0M", "gelan-c": "25.3M", "gelan-e": "57.3M"}
MEASURED_OPTIMIZER = "AdamW"
MARGIN = 0.10
REFERENCE_IMGSZ = 640
MODELS = ["yolov9-t", "yolov9-s", "yolov9-m", "yolov9-c", "yolov9-e"]
TITLES = {"yolov9-t": "YOLOv9-T", "yolov9-s": "YOLOv9-S", "yolov9-m": "YOLOv9-M", "yolov9-c": "YOLOv9-C",
          "yolov9-e": "YOLOv9-E", "gelan-t": "GELAN-T", "gelan-s": "GELAN-S", "gelan-m": "GELAN-M",
          "gelan-c": "GELAN-C", "gelan-e": "GELAN-E"}
MEASURED_ON = "NVIDIA H200 (driver 580.159.04), PyTorch 2.11.0+cu130, 80 classes, AdamW"
CASES = [("train", "amp"), ("train", "fp32"), ("inference", "fp16"), ("inference", "fp32")]


def load(path: str):
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    context = None
    rows = []
    for row in data:
        if "cuda_context_bytes" in row:
            context = row["cuda_context_bytes"]
        elif "mode" in row:
            task = "train" if row["mode"] == "train" else "inference"
            precision = ("amp" if row["amp"] else "fp32") if task == "train" else ("fp16" if row["amp"] else "fp32")
            rows.append(dict(row, task=task, precision=precision))
    return context, rows


def pixels(row) -> float:
    return row["batch"] * (row["imgsz"] / REFERENCE_IMGSZ) ** 2


def _slope_through(points, fixed: float) -> float:
    """Per-image slope minimising relative error with the fixed part given."""
    num = sum((p["nvml_used_delta"] - fixed) * pixels(p) / p["nvml_used_delta"] ** 2 for p in points)
    den = sum(pixels(p) ** 2 / p["nvml_used_delta"] ** 2 for p in points)
    return num / den


def _relative_error(points, fixed: float, slope: float) -> float:
    return sum(((p["nvml_used_delta"] - fixed - slope * pixels(p)) / p["nvml_used_delta"]) ** 2 for p in points)


def _line(points) -> Tuple[float, float]:
    """Weighted least squares (weights 1/y^2) of y = fixed + slope * pixels."""
    weights = [1.0 / p["nvml_used_delta"] ** 2 for p in points]
    xs = [pixels(p) for p in points]
    ys = [float(p["nvml_used_delta"]) for p in points]
    total = sum(weights)
    mean_x = sum(w * x for w, x in zip(weights, xs)) / total
    mean_y = sum(w * y for w, y in zip(weights, ys)) / total
    slope = sum(w * (x - mean_x) * (y - mean_y) for w, x, y in zip(weights, xs, ys)) / \
        sum(w * (x - mean_x) ** 2 for w, x in zip(weights, xs))
    return mean_y - slope * mean_x, slope


def fit(context: int, rows) -> Dict[str, object]:
    groups: Dict[Tuple[str, str, str], List[dict]] = defaultdict(list)
    params: Dict[str, int] = {}
    for row in rows:
        groups[(row["cfg"], row["task"], row["precision"])].append(row)
        params[row["cfg"]] = row["params"]

    # Training with AMP: one bytes-per-parameter for all models (0.05-byte grid, deterministic).
    amp = {m: groups[(m, "train", "amp")] for m in MODELS}
    best = None
    for step in range(0, 1201):
        alpha = step * 0.05
        slopes = {m: _slope_through(amp[m], context + alpha * params[m]) for m in MODELS}
        error = sum(_relative_error(amp[m], context + alpha * params[m], slopes[m]) for m in MODELS)
        if best is None or error < best[0] - 1e-15:
            best = (error, alpha, slopes)
    _, alpha, amp_slopes = best

    estimates: Dict[str, Dict[Tuple[str, str], dict]] = {m: {} for m in MODELS}
    for model in MODELS:
        estimates[model][("train", "amp")] = {"fixed": context + alpha * params[model], "per_image": amp_slopes[model],
                                              "points": amp[model], "extrapolated": ""}

    # Training in FP32: the same fixed part; slopes where measured, else the mean measured ratio.
    ratios = []
    for model in MODELS:
        points = groups.get((model, "train", "fp32"))
        if points:
            fixed = estimates[model][("train", "amp")]["fixed"]
            slope = _slope_through(points, fixed)
            ratios.append(slope / amp_slopes[model])
            estimates[model][("train", "fp32")] = {"fixed": fixed, "per_image": slope, "points": points,
                                                   "extrapolated": ""}
    fp32_ratio = sum(ratios) / len(ratios)
    for model in MODELS:
        if ("train", "fp32") not in estimates[model]:
            estimates[model][("train", "fp32")] = {
                "fixed": estimates[model][("train", "amp")]["fixed"], "per_image": amp_slopes[model] * fp32_ratio,
                "points": [], "extrapolated": "not measured: the AMP per-image memory x %.3f, the FP32/AMP ratio "
                                              "measured on yolov9-s and yolov9-c" % fp32_ratio}

    # Inference: a line per measured model; others from the training slope and parameter count.
    for precision in ("fp16", "fp32"):
        measured = {m: _line(groups[(m, "inference", precision)]) for m in MODELS
                    if groups.get((m, "inference", precision))}
        ratio = sum(slope / amp_slopes[m] for m, (_, slope) in measured.items()) / len(measured)
        (small, (fixed_small, _)), (large, (fixed_large, _)) = sorted(measured.items(), key=lambda kv: params[kv[0]])
        per_param = (fixed_large - fixed_small) / (params[large] - params[small])
        for model in MODELS:
            if model in measured:
                fixed, slope = measured[model]
                estimates[model][("inference", precision)] = {
                    "fixed": fixed, "per_image": slope, "points": groups[(model, "inference", precision)],
                    "extrapolated": ""}
            else:
                fixed = max(context, fixed_small + per_param * (params[model] - params[small]))
                estimates[model][("inference", precision)] = {
                    "fixed": fixed, "per_image": amp_slopes[model] * ratio, "points": [],
                    "extrapolated": "not measured: per-image memory = training (AMP) per-image x %.4f, the ratio "
                                    "measured on %s; fixed part interpolated by parameter count" % (
                                        ratio, " and ".join(sorted(measured)))}
    fitted = {"alpha": alpha, "context": context, "params": params, "estimates": estimates, "fp32_ratio": fp32_ratio,
              "inference_line": {}}
    for precision in ("fp16", "fp32"):
        measured = {m: _line(groups[(m, "inference", precision)]) for m in MODELS
                    if groups.get((m, "inference", precision))}
        (small, (fixed_small, _)), (large, (fixed_large, _)) = sorted(measured.items(), key=lambda kv: params[kv[0]])
        fitted["inference_line"][precision] = (params[small], fixed_small,
                                               (fixed_large - fixed_small) / (params[large] - params[small]))
    derive_gelan(fitted)
    return fitted


def derive_gelan(fitted, activations_path: str = ACTIVATIONS) -> None:
    """GELAN estimates from the dual-head model of the same size and the activation ratio (see the docstring)."""
    with open(activations_path, encoding="utf-8") as handle:
        models = json.load(handle)["models"]
    context, alpha = fitted["context"], fitted["alpha"]
    for gelan, dual in GELAN.items():
        ratio = models[gelan]["saved_bytes_640_b1"] / models[dual]["saved_bytes_640_b1"]
        params = models[gelan]["params"]
        fitted["params"][gelan] = params
        how = ("derived, not measured: %s's per-image memory x %.3f, the bytes autograd saves per image for %s "
               "over %s (tests/fixtures/yolov9-activations-cpu.json); fixed part from %s's %d parameters"
               % (dual, ratio, gelan, dual, gelan, params))
        estimates = {}
        for task, precision in CASES:
            dual_estimate = fitted["estimates"][dual][(task, precision)]
            if task == "train":
                fixed = context + alpha * params
            else:
                small_params, fixed_small, per_param = fitted["inference_line"][precision]
                fixed = max(context, fixed_small + per_param * (params - small_params))
            estimates[(task, precision)] = {"fixed": fixed, "per_image": dual_estimate["per_image"] * ratio,
                                            "points": [], "extrapolated": how}
        fitted["estimates"][gelan] = estimates


def validation_per_image(fitted, model: str) -> float:
    """What one validation image adds to a run's peak: the model's FP16 inference per-image memory."""
    return fitted["estimates"][model][("inference", "fp16")]["per_image"]


def required(estimate: dict, batch: int, imgsz: int) -> float:
    return (estimate["fixed"] + estimate["per_image"] * batch * (imgsz / REFERENCE_IMGSZ) ** 2) * (1 + MARGIN)


def check_margin(fitted, rows) -> List[Tuple[str, float]]:
    """Required / measured for every measured point; raises if any is below 1 or above 1.25."""
    out = []
    for row in rows:
        estimate = fitted["estimates"][row["cfg"]][(row["task"], row["precision"])]
        ratio = required(estimate, row["batch"], row["imgsz"]) / row["nvml_used_delta"]
        label = "%s %s %s batch %d img %d" % (row["cfg"], row["task"], row["precision"], row["batch"], row["imgsz"])
        out.append((label, ratio))
        if not 1.0 <= ratio <= 1.25:
            raise SystemExit("margin check failed: %s: required/measured = %.3f" % (label, ratio))
    return out


def render(fitted) -> str:
    lines = [
        "# Generated by scripts/fit_vram.py from tests/fixtures/h200-vram.json; do not edit by hand.",
        "# memory = (fixed_bytes + per_image_bytes * batch * (imgsz / reference_imgsz)^2) * (1 + margin)",
        "# Training (AMP): fixed = CUDA context (%d bytes) + %.2f bytes per parameter (with %s state)." % (
            fitted["context"], fitted["alpha"], MEASURED_OPTIMIZER),
        "# A run's peak adds validation_per_image_bytes for 2 x batch images (validation at twice the batch, FP16).",
        "",
    ]
    for model in MODELS + list(GELAN):
        lines += [
            "[[workload]]",
            'id = "%s"' % model,
            'title = "%s"' % (TITLES[model] + (" (dual head: train_dual.py, detect_dual.py, val_dual.py)"
                                               if model in MODELS else " (train.py, detect.py, val.py; "
                                               "models/detect/%s.yaml)" % model)),
            "parameters = %d" % fitted["params"][model],
            'measured_on = "%s"' % MEASURED_ON,
            'optimizer = "%s"' % MEASURED_OPTIMIZER,
            'train_script = "%s"' % ("train_dual.py" if model in MODELS else "train.py"),
            ('source = "tests/fixtures/h200-vram.json (nvml_used_delta: the memory NVML saw the process use), '
             'fitted by scripts/fit_vram.py"' if model in MODELS else
             'source = "derived by scripts/fit_vram.py from tests/fixtures/h200-vram.json and '
             'tests/fixtures/yolov9-activations-cpu.json; parameters with 80 classes (the YOLOv9 README lists the '
             'converted model at %s)"' % README_PARAMS[model]),
            "margin = %.2f" % MARGIN,
            "reference_imgsz = %d" % REFERENCE_IMGSZ,
        ]
        for task, precision in CASES:
            estimate = fitted["estimates"][model][(task, precision)]
            points = estimate["points"]
            lines += [
                "",
                "[[workload.estimate]]",
                'task = "%s"' % task,
                'precision = "%s"' % precision,
                "fixed_bytes = %d" % round(estimate["fixed"]),
                "per_image_bytes = %d" % round(estimate["per_image"]),
            ]
            if task == "train":
                lines.append("validation_per_image_bytes = %d" % round(validation_per_image(fitted, model)))
            if points:
                lines.append("measured_batches = [%s]" % ", ".join(str(b) for b in sorted({p["batch"] for p in points})))
                lines.append("measured_imgsz = [%s]" % ", ".join(str(s) for s in sorted({p["imgsz"] for p in points})))
            else:
                lines.append('extrapolated = "%s"' % estimate["extrapolated"])
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", default=DEFAULT_INPUT)
    parser.add_argument("--output", default=DEFAULT_OUTPUT)
    parser.add_argument("--check", action="store_true", help="exit 1 if the catalog differs from a fresh fit")
    args = parser.parse_args()
    context, rows = load(args.input)
    fitted = fit(context, rows)
    ratios = check_margin(fitted, rows)
    text = render(fitted)
    if args.check:
        try:
            with open(args.output, encoding="utf-8") as handle:
                current = handle.read()
        except OSError:
            current = ""
        if current != text:
            print("%s differs from a fresh fit of %s: run python scripts/fit_vram.py" % (args.output, args.input))
            return 1
        print("%s matches the fit" % args.output)
        return 0
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as handle:
        handle.write(text)
    print("wrote %s (%.2f bytes/parameter; FP32/AMP %.3f)" % (args.output, fitted["alpha"], fitted["fp32_ratio"]))
    print("required (margin %d%%) / measured, all %d points: min %.3f, max %.3f" % (
        MARGIN * 100, len(ratios), min(r for _, r in ratios), max(r for _, r in ratios)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
