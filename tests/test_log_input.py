"""diagnose on any bytes: UTF-16 and byte-order marks decoded, gzip told by its bytes, what is not text said to be
so from its first 64 KiB (an endless stream of random bytes ends the command), binary stretches inside a log passed
over, and the fast finder for dense text finding exactly what the one regex finds."""

from __future__ import annotations

import codecs
import gzip
import json
import os
import subprocess
import sys
import zipfile

import pytest
from conftest import NEUTRAL_CWD, clean_env, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

OOM = ("Traceback (most recent call last):\r\n  File \"train_dual.py\", line 644, in <module>\r\n"
       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
       "11.76 GiB of which 3.19 MiB is free.\r\n")


def _diagnose(data: bytes, tmp_path, name: str = "train.log"):
    path = tmp_path / name
    path.write_bytes(data)
    return run_cli("diagnose", str(path), "--no-facts", "--format", "json")


@pytest.mark.parametrize("encoding, data, note", [
    ("UTF-16 with a mark (PowerShell's >)", codecs.BOM_UTF16_LE + OOM.encode("utf-16-le"), "UTF-16 little-endian"),
    ("UTF-16 big-endian with a mark", codecs.BOM_UTF16_BE + OOM.encode("utf-16-be"), "UTF-16 big-endian"),
    ("UTF-16 without a mark", ("epoch 1\r\n" * 20 + OOM).encode("utf-16-le"), "no byte-order mark"),  # line 23
    ("UTF-8 with a mark", codecs.BOM_UTF8 + OOM.encode("utf-8"), None),
    ("gzip, not so named", gzip.compress(OOM.encode("utf-8")), "read as gzip"),
])
def test_a_log_in_any_text_encoding_is_read(tmp_path, encoding, data, note):
    completed = _diagnose(data, tmp_path)
    assert completed.returncode == 1, (encoding, completed.stderr)
    report = json.loads(completed.stdout)
    [match] = report["matches"]
    assert match["id"] == "cuda.oom" and match["line"] == (23 if "without" in encoding else 3), (encoding, match)
    assert match["excerpt"].startswith("torch.OutOfMemoryError: CUDA out of memory.")
    assert (note is None and not report["notes"]) or any(note in line for line in report["notes"]), report["notes"]


def _checkpoint(tmp_path) -> bytes:
    path = tmp_path / "best.pt"
    with zipfile.ZipFile(str(path), "w") as archive:  # the layout torch.save writes
        archive.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        archive.writestr("archive/data/0", os.urandom(4096))
    return path.read_bytes()


@pytest.mark.parametrize("what, data, said", [
    ("a checkpoint", None, "a zip archive (a PyTorch checkpoint saved by torch.save is one)"),
    ("zeros", b"\x00" * (1 << 20), "are bytes no text holds"),
    ("random bytes", os.urandom(1 << 20), "are bytes no text holds"),
    ("a pickle", b"\x80\x02" + os.urandom(1000), "a Python pickle"),
])
def test_what_is_not_a_log_is_said_to_be_so(tmp_path, what, data, said):
    completed = _diagnose(_checkpoint(tmp_path) if data is None else data, tmp_path, "best.pt")
    assert completed.returncode == 2 and "is not a text log" in completed.stderr and said in completed.stderr, (
        what, completed.stderr)


def test_an_endless_stream_of_random_bytes_ends_the_command():
    """Only the first 64 KiB are read before the verdict: the stream behind it never ends, the command does."""
    source = subprocess.Popen(["cat", "/dev/urandom"], stdout=subprocess.PIPE)
    try:
        completed = subprocess.run([sys.executable, "-m", "preflight", "diagnose", "-", "--no-facts"],
                                   stdin=source.stdout, capture_output=True, text=True, env=clean_env(),
                                   cwd=NEUTRAL_CWD, timeout=120)
    finally:
        source.kill()
        source.wait()
    assert completed.returncode == 2 and "standard input is not a text log" in completed.stderr, completed.stderr


def test_a_binary_stretch_inside_a_log_is_passed_over_and_said(tmp_path):
    text = b"epoch 1 loss 0.5\n" * 20000
    data = text + os.urandom(4 << 20) + b"\nRuntimeError: No CUDA GPUs are available\n"
    completed = _diagnose(data, tmp_path)
    report = json.loads(completed.stdout)
    assert completed.returncode == 1 and [m["id"] for m in report["matches"]] == ["cuda.no_gpu_visible"]
    assert any("bytes that are not text" in note for note in report["notes"]), report["notes"]


@pytest.fixture(scope="module")
def anchors():
    from preflight.diagnose.scan import Scanner
    from preflight.engine import loader

    ruleset = loader.load(failures=True)
    scanner = Scanner(list(ruleset.failures.values()), list(ruleset.clues.values()))
    return scanner.anchors


_WORDS = [b"CUDA", b"error", b"out of memory", b"No module named", b"@", b":\\", b"Error", b"A", b"x", b" ", b"\n"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_WORDS) | st.binary(max_size=6), max_size=60))
def test_the_finder_for_dense_text_finds_what_the_one_regex_finds(anchors, parts):
    from preflight.diagnose.scan import _Merged

    text = b"".join(parts)
    merged = _Merged(anchors.by_first, text)
    position = 0
    for start in range(0, len(text) + 1, 3):  # positions only move forward, as the scanner asks
        position = max(position, start)
        one, other = anchors.regex.search(text, position), merged.search(text, position)
        assert (one and (one.start(), one.end())) == (other and (other.start(), other.end())), (text, position)
