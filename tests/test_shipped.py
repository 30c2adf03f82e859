"""The shipped data's release-time parse (rules/parsed/): equal to the files, used for them, and never for a file
whose bytes differ."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest

from preflight.engine import loader
from preflight.files import input_files
from preflight.knowledge import shipped

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_shipped_parse_is_the_parse_of_the_files_as_they_are():
    completed = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_parsed_rules.py"), "--check"],
                               capture_output=True, text=True)
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_shipped_files_are_not_parsed_when_read(monkeypatch):
    def refuse(text, what="a TOML file"):
        raise AssertionError("parsed %s although its parse ships with it" % what)

    monkeypatch.setattr(input_files, "parse_toml", refuse)
    ruleset = loader.load(failures=True, capacity=True, smoke=True)
    assert "driver.version" in ruleset.rules and ruleset.failures and ruleset.gpus


def test_a_file_whose_bytes_differ_from_the_parse_is_parsed_as_it_is(monkeypatch):
    path = os.path.join(shipped.data_dir(), "40-host.toml")
    entry = shipped._parsed("40-host.toml")
    stale = dict(entry, key="0-00000000", data={"rule": []})
    monkeypatch.setattr(shipped, "_parsed", lambda relative: stale if relative == "40-host.toml" else None)
    data = shipped.read_toml(path, path, input_files.PreflightError)
    assert data == entry["data"] and data["rule"]


def test_a_file_outside_the_shipped_data_is_parsed(tmp_path):
    rules = tmp_path / "site.toml"
    rules.write_text('[[fix]]\nid = "x"\ntitle = "y"\n')
    assert shipped.read_toml(str(rules), "rules", input_files.PreflightError) == {"fix": [{"id": "x", "title": "y"}]}
    rules.write_bytes(b"[[fix]\n")
    with pytest.raises(ValueError, match="not valid TOML"):
        shipped.read_toml(str(rules), "rules", input_files.PreflightError)


def test_loading_leaves_the_shipped_parse_as_it_was():
    names = ("20-torch.toml", "fixes.toml", "failures/known.toml", "capacity/yolov9.toml")
    before = {name: copy.deepcopy(shipped._parsed(name)) for name in names}
    loader.load(failures=True, capacity=True, smoke=True)
    loader.load(["%s/20-torch.toml" % shipped.data_dir()])
    assert all(before[name] for name in names)
    assert {name: shipped._parsed(name) for name in names} == before


def test_a_check_reads_only_the_parses_of_the_files_it_loads(monkeypatch):
    read = []
    parsed = shipped._parsed
    monkeypatch.setattr(shipped, "_parsed", lambda relative: read.append(relative) or parsed(relative))
    loader.load()
    assert "40-host.toml" in read and "fixes.toml" in read
    assert not [name for name in read if name.startswith("failures/")], read


def test_a_missing_or_damaged_parse_costs_only_time(monkeypatch, tmp_path):
    folder = tmp_path / "rules"
    folder.mkdir()
    for name in ("40-host.toml", "fixes.toml"):
        (folder / name).write_bytes(open(os.path.join(shipped.data_dir(), name), "rb").read())
    (folder / shipped.PARSED).mkdir()
    (folder / shipped.PARSED / "40-host.json").write_text("{ not json")
    monkeypatch.setattr(shipped, "data_dir", lambda: str(folder))
    shipped._parsed.cache_clear()
    try:
        assert shipped._parsed("40-host.toml") is None and shipped._parsed("fixes.toml") is None
        assert "host.shm" in loader.load().rules
    finally:
        shipped._parsed.cache_clear()
