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
    ("UTF-32 with a mark", codecs.BOM_UTF32_LE + OOM.encode("utf-32-le"), "UTF-32 little-endian"),
    ("UTF-32 big-endian with a mark", codecs.BOM_UTF32_BE + OOM.encode("utf-32-be"), "UTF-32 big-endian"),
    ("UTF-16, then UTF-8 appended", codecs.BOM_UTF16_LE + "epoch 1\r\n".encode("utf-16-le") +
     ("epoch 2 of 300 ... the trainer goes on in another program's UTF-8 output\r\n" + OOM[36:]).encode(),
     "read as UTF-8 from byte 20 on, where it turns into UTF-8"),
])
def test_a_log_in_any_text_encoding_is_read(tmp_path, encoding, data, note):
    completed = _diagnose(data, tmp_path)
    assert completed.returncode == 1, (encoding, completed.stderr)
    report = json.loads(completed.stdout)
    [match] = report["matches"]
    line = 23 if "without" in encoding else 4 if "appended" in encoding else 3
    assert match["id"] == "cuda.oom" and match["line"] == line, (encoding, match)
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


def test_a_huge_line_is_searched_at_its_start_and_end_and_the_rest_said(tmp_path):
    """A line of 64 MiB with the failure at both ends: found, fast, and the middle said to be passed over."""
    from preflight.diagnose.scan import LINE_SEARCHED

    middle = b"RuntimeError: CUDA error: out of memory " * ((64 << 20) // 40)
    data = b"epoch 1\n" + OOM.encode()[:-2] + middle + b"NCCL error: unhandled system error\n"
    completed = _diagnose(gzip.compress(data, 1), tmp_path, "train.log.gz")
    report = json.loads(completed.stdout)
    found = {match["id"]: match["line"] for match in report["matches"]}
    assert found.get("cuda.oom") == 4 and "nccl.system_error" in found, found  # the line's start and its end
    [note] = [line for line in report["notes"] if "long" in line]
    assert note.startswith("line 4 is 64."), note
    assert "its first %d.0 MiB and its last" % (LINE_SEARCHED >> 20) in note and "between passed over" in note


def test_a_log_past_the_search_limit_is_searched_at_its_start_and_its_end(monkeypatch):
    """Past SEARCH_LIMIT a log is read to its end without searching, and its end is searched (the limit made
    small here: the real one is 4 GiB)."""
    import io

    from preflight.diagnose import scan
    from preflight.engine import loader

    monkeypatch.setattr(scan, "SEARCH_LIMIT", 1 << 20)
    failures = list(loader.load(failures=True).failures.values())
    lines = [b"epoch %d: loss 0.5" % number for number in range(200000)]
    lines[10] = b"RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED"
    lines[100000] = b"RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error"  # not searched
    lines[-3:] = OOM.encode().split(b"\r\n")[:3]
    data = b"\n".join(lines) + b"\n"
    result = scan.scan(io.BytesIO(data), failures, chunk_size=1 << 16)
    assert set(result.hits) >= {"cuda.oom"} and not any("nccl" in key for key in result.hits), sorted(result.hits)
    assert any("cudnn" in key for key in result.hits), sorted(result.hits)
    assert result.hits["cuda.oom"].line == 200000
    assert 0 < result.unsearched < len(data) - (1 << 20) and result.lines == 200000


def test_a_gzip_log_is_expanded_to_a_bounded_size(monkeypatch, tmp_path):
    from preflight.diagnose import log_input

    monkeypatch.setattr(log_input, "GZIP_EXPANDED", 1 << 20)
    data = OOM.encode() + b"epoch\n" * (1 << 20)
    completed = _diagnose(gzip.compress(data), tmp_path, "train.log.gz")
    report = json.loads(completed.stdout)
    assert [match["id"] for match in report["matches"]] == ["cuda.oom"]
    assert "the gzip file was expanded to 1.0 MiB and no further: the rest of the log (its end among it) was not " \
           "read" in report["notes"], report["notes"]
