"""The most labelled objects in one training image, which the loss's assigner pads every image of a batch to
(``--max-objects``), from what a user has: the ``Instances`` column of a training log, or the dataset's label
folder.

Training logs print, per batch, how many labels the batch holds (YOLOv5-lineage trainers: ``Instances``), never
the most in one image. All of them could sit in one image, so that count is taken as the bound: conservative,
and what the public dense run in tests/test_capacity.py is estimated within 1.35x with. A YOLO label folder says
it exactly: one line per object, one ``.txt`` file per image.
"""

from __future__ import annotations

import os
from typing import Tuple

from preflight.errors import PreflightError

MOST_LABEL_FILES = 2_000_000  # more files than any dataset a label folder holds; a wrong folder stops here
MOST_LABEL_BYTES = 1 << 20  # a YOLO label file is a few kB; a larger .txt is not a label file


def from_instances(instances: int) -> Tuple[int, str]:
    """(the bound, how it was found) from the largest ``Instances`` a training log shows for one batch."""
    if instances < 1:
        raise PreflightError("--instances-per-batch must be 1 or more, got %d" % instances,
                             "the largest Instances value your training log shows for one batch")
    return instances, ("the log's %d instances in one batch, taken as the most in one image (all could be in one; "
                       "--labels DIR counts them exactly)" % instances)


def from_labels(folder: str) -> Tuple[int, str]:
    """(the most object lines in one label file, how it was found) for a YOLO label folder (searched recursively)."""
    if not os.path.isdir(folder):
        raise PreflightError("--labels %s: not a folder" % folder,
                             "the dataset's labels folder (YOLO format: one .txt per image, one line per object)")
    most, where, files = 0, None, 0
    for root, _, names in os.walk(folder):
        for name in names:
            if not name.endswith(".txt"):
                continue
            files += 1
            if files > MOST_LABEL_FILES:
                raise PreflightError("--labels %s: more than %d .txt files; is this the labels folder?"
                                     % (folder, MOST_LABEL_FILES), "give the dataset's labels folder")
            path = os.path.join(root, name)
            try:
                if os.path.getsize(path) > MOST_LABEL_BYTES:
                    continue
                with open(path, "rb") as handle:
                    count = sum(1 for line in handle if line.strip())
            except OSError:
                continue
            if count > most:
                most, where = count, path
    if files == 0:
        raise PreflightError("--labels %s: no .txt label files there" % folder,
                             "the dataset's labels folder (YOLO format: one .txt per image, one line per object)")
    if most == 0:
        raise PreflightError("--labels %s: every label file is empty (%d files)" % (folder, files),
                             "leave out --labels; the estimate then assumes a typical count")
    return most, "%d objects in %s, the most of %d label files" % (most, os.path.relpath(where, folder), files)
