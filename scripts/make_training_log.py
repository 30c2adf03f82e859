#!/usr/bin/env python3
"""Write a large, realistic YOLOv9 training log with a few real errors inside.

The body imitates train_dual.py's console output: coloured headers, per-epoch
tqdm progress bars redrawn with carriage returns, validation tables and
warnings. Errors from PyTorch 2.11 (an out-of-memory traceback and a
DataLoader bus error followed by the generic "exited unexpectedly") are placed
at fixed fractions of the file. Usage:

    python scripts/make_training_log.py OUT.log [--size-mb 1024] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import sys

HEADER = (
    "\x1b[34m\x1b[1mtrain_dual: \x1b[0mweights=, cfg=models/detect/yolov9-c.yaml, data=data/coco.yaml, "
    "hyp=hyp.scratch-high.yaml, epochs=500, batch_size=16, imgsz=640, workers=8\n"
    "YOLO  v0.1-104-g5b1ea9a Python-3.8.5 torch-1.10.0+cu113 CUDA:0 (NVIDIA GeForce RTX 3090, 24268MiB)\n\n"
    "\x1b[34m\x1b[1mhyperparameters: \x1b[0mlr0=0.01, lrf=0.01, momentum=0.937, weight_decay=0.0005\n"
    "\x1b[34m\x1b[1mAMP: \x1b[0mchecks passed \u2705\n"
    "\x1b[34m\x1b[1mtrain: \x1b[0mScanning /data/coco/train2017.cache... 117266 images, 1021 backgrounds, 0 corrupt\n"
)

OOM = (
    "Traceback (most recent call last):\n"
    '  File "train_dual.py", line 644, in <module>\n'
    "    main(opt)\n"
    '  File "train_dual.py", line 538, in main\n'
    "    train(opt.hyp, opt, device, callbacks)\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 372.53 GiB. GPU 0 has a total capacity of "
    "139.80 GiB of which 139.29 GiB is free. Including non-PyTorch memory, this process has 518.00 MiB memory in use. "
    "Of the allocated memory 0 bytes is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. "
    "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to "
    "avoid fragmentation.  See documentation for Memory Management  "
    "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)\n"
)

BUS_ERROR = (
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n"
    "Traceback (most recent call last):\n"
    '  File "/opt/conda/lib/python3.8/site-packages/torch/utils/data/dataloader.py", line 1323, in _try_get_data\n'
    "    raise RuntimeError(f'DataLoader worker (pid(s) {pids_str}) exited unexpectedly') from e\n"
    "RuntimeError: DataLoader worker (pid(s) 13615) exited unexpectedly\n"
)


def epoch_block(rng: random.Random, epoch: int) -> str:
    parts = ["\n      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size\n"]
    total = 7330
    line = ""
    for step in range(0, total + 1, 73):
        pct = step * 100 // total
        bar = "\u2588" * (pct // 10) + " " * (10 - pct // 10)
        line += "\r    %3d/499     %5.3gG     %6.4f     %6.4f     %6.4f        %3d        640: %3d%%|%s| %d/%d [%02d:%02d<%02d:%02d, %5.2fit/s]" % (
            epoch, 14 + rng.random(), 1 + rng.random(), 2 + rng.random(), 1.2 + rng.random(), rng.randint(80, 250),
            pct, bar, step, total, step // 600, step // 10 % 60, (total - step) // 600, (total - step) // 10 % 60,
            9 + rng.random())
    parts.append(line + "\n")
    parts.append("                 Class     Images  Instances          P          R      mAP50   mAP50-95: 100%|"
                 "\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 157/157 [00:31<00:00,  5.02it/s]\n")
    parts.append("                   all       5000      36335      %.3f      %.3f      %.3f      %.3f\n" % (
        rng.random(), rng.random(), rng.random(), rng.random()))
    if epoch % 7 == 0:
        parts.append("WARNING \u26a0\ufe0f NMS time limit 2.500s exceeded\n")
    return "".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--size-mb", type=float, default=1024)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    target = int(args.size_mb * 1e6)
    inserts = {int(target * 0.37): BUS_ERROR, int(target * 0.995): OOM}
    written = 0
    epoch = 0
    with open(args.out, "w", encoding="utf-8", newline="") as out:
        written += out.write(HEADER)
        while written < target:
            block = epoch_block(rng, epoch % 500)
            for at in sorted(inserts):
                if written <= at < written + len(block):
                    block += inserts.pop(at)
            written += len(block.encode("utf-8"))
            out.write(block)
            epoch += 1
    print("wrote %s: %.1f MB" % (args.out, written / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
