"""Where a failure's wordings are written (``emitted``): each wording with the releases that print it is read as
data, recognised by its entry, shown by explain, and a malformed row is a clear load error."""

from __future__ import annotations

import pytest
from conftest import run_cli
from packaging.specifiers import SpecifierSet

from preflight.engine import loader

RULESET = loader.load(failures=True)
ENTRIES = list(RULESET.failures.values()) + list(RULESET.families.values())


def test_the_version_dependent_entries_say_which_releases_print_each_wording():
    emitted = {entry.id: entry.emitted for entry in ENTRIES if entry.emitted}
    for name in ("pip.resolution_too_deep", "numpy.removed_alias", "numpy.removed_release", "nccl.shm_permission",
                 "container.runtime_handler_missing", "nccl.error"):
        assert emitted.get(name), "%s names no emitter" % name
    for rows in emitted.values():
        for row in rows:
            SpecifierSet(row.versions)  # a real specifier
            assert row.project and row.file and row.says


@pytest.mark.parametrize("entry", [e for e in RULESET.families.values() if e.emitted], ids=lambda e: e.id)
def test_every_wording_of_every_release_is_recognised_by_its_family_with_a_row(entry):
    # (a known failure on the same line wins in a diagnosis: NCCL's "unhandled system error" is nccl.system_error)
    for row in entry.emitted:
        assert row.says in entry.examples and entry.classify(row.says), row


@pytest.mark.parametrize("entry", [e for e in RULESET.failures.values() if e.emitted], ids=lambda e: e.id)
def test_every_wording_of_every_release_is_diagnosed_as_its_failure(entry):
    for row in entry.emitted:
        assert row.says in entry.examples
        completed = run_cli("diagnose", "-", "--format", "json", stdin=row.says + "\n")
        assert completed.returncode == 1, (row, completed.stdout, completed.stderr)
        assert ('"id": "%s' % entry.id) in completed.stdout, (row.label(), completed.stdout[:400])


def test_pip_before_25_1_ends_with_resolvelib_s_traceback_and_is_recognised():
    log = ("ERROR: Exception:\nTraceback (most recent call last):\n"
           '  File "/venv/lib/python3.10/site-packages/pip/_vendor/resolvelib/resolvers.py", line 457, in resolve\n'
           "    raise ResolutionTooDeep(max_rounds)\n"
           "pip._vendor.resolvelib.resolvers.ResolutionTooDeep: 200000\n")
    completed = run_cli("diagnose", "-", stdin=log)
    assert completed.returncode == 1 and "pip.resolution_too_deep" in completed.stdout, completed.stdout


def test_nccl_2_12_s_permission_line_is_not_blamed_on_the_size_of_dev_shm():
    log = ("misc/shmutils.cc:35 NCCL WARN Call to open failed : Permission denied\n"
           "misc/shmutils.cc:69 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-XJ3n8e "
           "(size 9637888)\n")
    completed = run_cli("diagnose", "-", "--format", "json", stdin=log)
    first = completed.stdout.split('"id": "', 2)[1].split('"', 1)[0]
    assert first == "nccl.shm_permission", completed.stdout[:600]


def test_explain_lists_each_wording_with_its_releases_and_file():
    completed = run_cli("explain", "pip.resolution_too_deep")
    assert completed.returncode == 0, completed.stderr
    assert "pip >=25.1: src/pip/_internal/exceptions.py" in completed.stdout
    assert "pip._vendor.resolvelib.resolvers.ResolutionTooDeep: 2000000" in completed.stdout


@pytest.mark.parametrize("row, message", [
    ('{ project = "pip", file = "x.py", versions = "newer than 25", says = "error: resolution-too-deep" }',
     "versions 'newer than 25' is not a version specifier"),
    ('{ project = "pip", file = "x.py", says = "error: resolution-too-deep" }',
     "must have exactly project, file, versions and says"),
])
def test_a_malformed_or_unrecognised_row_is_a_clear_error(tmp_path, row, message):
    rules = tmp_path / "mine.toml"
    rules.write_text('[[failure]]\nid = "site.too_deep"\ntitle = "t"\npatterns = ["error: resolution-too-deep"]\n'
                     'cause = "c"\nfix = { title = "f", steps = ["s"] }\nexamples = ["error: resolution-too-deep"]\n'
                     "emitted = [%s]\n" % row)
    completed = run_cli("diagnose", "-", "--rules", str(rules), stdin="nothing\n")
    assert completed.returncode == 2 and "Traceback" not in completed.stderr, completed.stderr
    assert message in completed.stderr and "mine.toml" in completed.stderr, completed.stderr


def test_every_cuda_runtime_error_is_recognised_by_the_text_the_runtime_itself_gives():
    # the texts were read from libcudart 11.7-13.5 (scripts/read_cudart_errors.py): "CUDA error: <text>" is how
    # torch prints cudaGetErrorString, so every row must answer to each of its texts there
    family = RULESET.families["cuda.runtime_error"]
    rows = [row for row in family.table.rows if row.get("kind") not in family.quiet]
    assert len(rows) >= 130
    every_text = [t for row in rows for t in (row.get("text") if isinstance(row.get("text"), list) else [row.get("text")])]
    shared = {t for t in every_text if every_text.count(t) > 1}
    assert len(shared) <= 2, shared
    for row in rows:
        texts = row.get("text")
        assert texts, "%s has no text from the runtime" % row["name"]
        for text in texts if isinstance(texts, list) else [texts]:
            found = family.classify("RuntimeError: CUDA error: %s" % text)
            assert found, (row["name"], text)
            # (two codes share a text in some releases: 200 and 300's "device kernel image is invalid")
            assert found[0][1]["name"] == row["name"] or text in shared, (row["name"], text, found[0][1]["name"])


def test_every_driver_api_error_name_is_recognised_as_its_runtime_row():
    # the names were read from cuda.h's CUresult in the same wheels; TensorFlow prints "failed call to cuInit: <name>"
    family = RULESET.families["cuda.runtime_error"]
    rows = [row for row in family.table.rows if row.get("driver_name")]
    assert len(rows) >= 100
    for row in rows:
        found = family.classify("E cuda_driver.cc:268] failed call to cuInit: %s" % row["driver_name"])
        assert found and found[0][1]["name"] == row["name"], (row["driver_name"], found)
    assert not family.classify("CUDA_ERROR_NOT_A_REAL_NAME")


def test_every_nvml_error_of_the_installed_nvidia_ml_py_has_a_row():
    # nvidia-ml-py (a dependency) makes one exception class per NVML return code; a release that adds codes must
    # find its classes in rules/knowledge/nvml-errors.toml
    import pynvml

    family = RULESET.families["nvml.error"]
    rows = {row["name"]: row for row in family.table.rows}
    classes = [name for name in dir(pynvml) if name.startswith("NVMLError_")]
    assert len(classes) >= 30
    for name in classes:
        assert name in rows, "%s of the installed nvidia-ml-py has no row" % name
        row = rows[name]
        assert getattr(pynvml, row["constant"]) == row["code"], name  # the constant and its number, as pynvml has them
        assert issubclass(getattr(pynvml, name), pynvml.NVMLError)
        found = family.classify("pynvml.%s: something" % name)
        assert found and found[0][1]["name"] == name
