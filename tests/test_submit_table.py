"""The submit filters decide from a table (preflight slurm --submit-table) in Lua, starting no process: their
decisions must be plan's. deploy/slurm/preflight_submit.lua is run here in Lua 5.1 (what Debian's Slurm links) and
5.4, through lupa, against plan's own code: the largest batches over the whole grid of image sizes, every workload,
setup and catalog GPU; and whole decisions, as the user reads them, at each workload's edges. The filters inside a
real Slurm are tests/test_slurm_submit.py's."""

from __future__ import annotations

import json
import re

import pytest
from conftest import REPO, clean_env, run_cli

from preflight import __version__
from preflight.capacity import estimate
from preflight.capacity.workloads import OPTIMIZER_STATE_BYTES, PRECISIONS
from preflight.engine import loader
from preflight.integrations import submit_table

LOGIC = REPO / "deploy" / "slurm" / "preflight_submit.lua"
LUAS = ("lua51", "lua54")
IMAGE_SIZES = range(320, 1280 + 1, 32)


def lua_runtime(version: str):
    lupa = pytest.importorskip("lupa", reason="SKIPPED LOUDLY: lupa (a test dependency, Lua in Python) is missing: "
                                              "the submit filter's Lua is not compared with plan here")
    module = pytest.importorskip("lupa." + version, reason="lupa has no %s here" % version)
    del lupa
    runtime = module.LuaRuntime(unpack_returned_tuples=True)
    return runtime, runtime.execute(LOGIC.read_text())


@pytest.fixture(scope="module")
def ruleset():
    return loader.load(capacity=True)


@pytest.fixture(scope="module")
def written(tmp_path_factory, ruleset):
    folder = tmp_path_factory.mktemp("etc")
    config = folder / "config.toml"
    config.write_text('[defaults]\nslurm_gpu_types = ["big=a100-80gb"]\n')
    path = folder / submit_table.FILE_NAME
    submit_table.write(str(path), ruleset, ["big=a100-80gb"], "refuse", str(config))
    return folder


@pytest.fixture(scope="module", params=LUAS)
def lua(request, written):
    runtime, module = lua_runtime(request.param)
    fit, why = module.load(str(written) + "/")
    assert why is None, why
    return runtime, module, fit


def test_the_filter_is_this_releases():
    assert re.search(r'M\.VERSION = "%s"' % re.escape(__version__), LOGIC.read_text()), \
        "deploy/slurm/preflight_submit.lua's VERSION must be preflight's own (%s)" % __version__


def test_the_largest_batches_are_plans_over_the_whole_grid(lua, ruleset):
    """For every workload, setup a declaration can ask for, image size from 320 to 1280 and catalog GPU: the
    largest batch that fits and the largest that is tight, from the table in Lua and from estimate.py."""
    _, module, fit = lua
    compared = 0
    for workload in ruleset.workloads.values():
        for task, precisions in PRECISIONS.items():
            for precision in precisions:
                if (task, precision) not in workload.estimates:
                    continue
                for optimizer in (OPTIMIZER_STATE_BYTES if task == "train" else [None]):
                    key = " ".join(part for part in (task, precision, optimizer) if part)
                    setup = fit.workloads[workload.id].setups[key]
                    for imgsz in IMAGE_SIZES:
                        request = estimate.make_request(ruleset.workloads, workload.id, task, precision, None, imgsz,
                                                        optimizer or "SGD")
                        for gpu in ruleset.gpus.values():
                            usable = gpu.usable_bytes
                            assert (module.max_batch(setup, usable, imgsz),
                                    module.max_tight_batch(setup, usable, imgsz)) == (
                                estimate.max_batch(request, usable), estimate.max_tight_batch(request, usable)), \
                                (workload.id, key, imgsz, gpu.id)
                            for batch in (1, 7, 64):
                                assert module.required(setup, batch, imgsz) == estimate.required_bytes(request, batch)
                            compared += 1
    assert compared > 50000, compared
    print("submit table: %d (workload, setup, image size, GPU) edges equal to plan's" % compared)


EDGE_CASES = [  # (declaration beyond workload and batch, the job's --gres)
    ("img=640", "gpu:t4:1"), ("img=1280", "gpu:nvidia_h100_80gb_hbm3:1"), ("img=320 fp32", "gpu:rtx4090:1"),
    ("optimizer=AdamW img=960", "gpu:a100:1"), ("task=inference half img=1280", "gpu:tesla_t4:1"),
    ("img=640", "gpu:h200:2"), ("img=736 gpus=2", "gpu:l4:4"), ("img=640", "gpu:big:1"),
]


def _plan(comment: str, gres: str, env=None):
    completed = run_cli("plan", "--slurm-comment", comment, "--slurm-gres", gres, "--format", "json", env=env)
    assert completed.returncode in (0, 1), completed.stderr
    return json.loads(completed.stdout)


@pytest.mark.parametrize("workload", ["gelan-c", "yolov9-e", "gelan-t"])
def test_at_each_edge_the_filter_says_what_plan_says(lua, written, workload):
    """Each workload's largest batch that fits (queued), its largest tight batch (queued with a warning) and one
    more (refused): the same decision and the same words as plan --slurm-comment."""
    runtime, module, fit = lua
    env = clean_env({"PREFLIGHT_CONFIG": str(written / "config.toml")})
    for extra, gres in EDGE_CASES:
        probe = _plan("preflight: workload=%s batch=%d %s" % (workload, 2 if "gpus=2" in extra or ":2" in gres else 1,
                                                               extra), gres, env)
        if probe["plan"] is None:  # a type or setup plan does not judge: the filter must not either
            continue
        row = probe["plan"]["gpus"][0]
        gpus = probe["gpu_count"]
        decided = set()
        for batch in sorted({row["max_batch"], row["max_batch_tight"], row["max_batch_tight"] + gpus} - {0}):
            if batch % gpus:
                continue
            comment = "preflight: workload=%s batch=%d %s" % (workload, batch, extra)
            python = _plan(comment, gres, env)
            decision, line = module.decide(fit, runtime.table_from({"comment": comment, "gres": gres}))
            assert (decision, line) == (python["decision"], python["message"]), (comment, gres)
            decided.add(decision)
        assert "refuse" in decided, (workload, extra, gres)


def test_what_the_filter_does_not_judge_and_why(lua):
    runtime, module, fit = lua

    def decide(comment, **request):
        return module.decide(fit, runtime.table_from(dict(request, comment=comment)))
    assert decide("nightly run", gres="gpu:h200:1") == ("none", "")
    assert decide("nopreflight: workload=gelan-c batch=512", gres="gpu:h200:1") == ("none", "")
    assert decide("run 7 preflight: workload=gelan-c batch=512", gres="gpu:h200:1")[0] == "refuse"
    decision, line = decide("preflight: workload=gelan-c batch=64 gpus=4", gres="gpu:h200:2")
    assert decision == "not judged" and "declares gpus=4, more than the 2 GPUs it asks for" in line
    decision, line = decide("preflight: workload=gelan-c batch=64", gres="gpu:a100x:1")
    assert decision == "not judged" and "it could be a100-40gb, a100-40gb-pcie, a100-80gb, a100-80gb-pcie" in line
    decision, line = decide("preflight: workload=gelan-c batch=64 max-objects=300", gres="gpu:h200:1")
    assert decision == "not judged" and "preflight plan --slurm-comment" in line
    decision, line = decide("preflight: workload=gelan-c 'unclosed", gres="gpu:h200:1")
    assert decision == "not judged" and "No closing quotation" in line
    assert decide("preflight: workload=gelan-c batch=64", gpus="h200:1")[0] == "submit"  # --gpus=TYPE:N
    assert decide("preflight: workload=gelan-c batch=64", gres="gres/gpu:h200:1")[0] == "submit"  # 23.11's form
    assert decide("preflight: workload=gelan-c batch=64", gres="gpu:h200:1")[0] == "submit"  # 20.11's form


def test_a_missing_stale_or_foreign_table_lets_the_job_go_on(tmp_path, ruleset):
    runtime, module = lua_runtime("lua51")
    request = runtime.table_from({"comment": "preflight: workload=gelan-c batch=512", "gres": "gpu:h200:1"})
    folder = str(tmp_path) + "/"
    decision, line = module.check(request, folder)
    assert decision == "not judged" and "there is no submit table" in line and "goes on unchecked" in line
    config = tmp_path / "config.toml"
    config.write_text("[defaults]\n")
    submit_table.write(str(tmp_path / submit_table.FILE_NAME), ruleset, [], "refuse", str(config))
    assert module.check(request, folder)[0] == "refuse"
    config.write_text('[defaults]\nslurm_does_not_fit = "warn"\n')  # the site changed its mind: the table is stale
    decision, line = module.check(request, folder)
    assert decision == "not judged" and "changed after the submit table" in line
    config.write_text("[defaults]\n")
    text = (tmp_path / submit_table.FILE_NAME).read_text()
    (tmp_path / submit_table.FILE_NAME).write_text(text.replace('["preflight"] = "%s"' % __version__,
                                                                '["preflight"] = "0.0.1"'))
    decision, line = module.check(request, folder)
    assert decision == "not judged" and "was written by preflight 0.0.1" in line
    (tmp_path / submit_table.FILE_NAME).write_text("return {")
    decision, line = module.check(request, folder)
    assert decision == "not judged" and "cannot be read" in line
    (tmp_path / submit_table.FILE_NAME).write_text("os.exit(3)")  # code, not data: never run with the filter's globals
    decision, line = module.check(request, folder)
    assert decision == "not judged" and "not one this filter reads" in line


def test_the_table_is_data_only(written):
    """Tables, strings, numbers and booleans: outside its string literals the file has no name but its keys'."""
    text = (written / submit_table.FILE_NAME).read_text()
    body = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text.split("\nreturn ", 1)[1])
    assert set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", body)) <= {"true", "false", "e"}, \
        set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", body))
    runtime, _ = lua_runtime("lua51")
    odd = {"a": 'q"uote\\ \x00 é\n', "n": [1, 2.5]}
    back = runtime.execute(submit_table.lua(odd))
    assert back.a == odd["a"].encode("utf-8") or back.a == odd["a"]


def test_the_table_command_and_config_validate_saying_it_is_stale(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[defaults]\nslurm_gpu_types = ["big=h100-nvl"]\n')
    table = tmp_path / submit_table.FILE_NAME
    env = clean_env({"PREFLIGHT_CONFIG": str(config)})
    completed = run_cli("slurm", "--submit-table", str(table), env=env)
    assert completed.returncode == 0 and "wrote %s" % table in completed.stderr, completed.stderr
    text = table.read_text()
    assert '["big"] = {"h100-nvl"}' in text and '["nvidia_h100_80gb_hbm3"] = {"h100"}' in text
    validated = run_cli("config", "validate", str(config), "--submit-table", str(table))
    assert validated.returncode == 0 and "stale" not in validated.stderr and "another version" not in validated.stderr
    config.write_text('[defaults]\nslurm_gpu_types = ["big=h100"]\n')
    validated = run_cli("config", "validate", str(config), "--submit-table", str(table))
    assert validated.returncode == 0, validated.stdout  # the configuration itself is fine: a warning, not a failure
    assert "was written from another version of %s" % config in validated.stderr, validated.stderr
    missing = run_cli("slurm", "--submit-table", str(tmp_path / "no-such-folder" / "t.lua"), env=env)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    both = run_cli("slurm", "--submit-table", str(table), "--dry-run", env=env)
    assert both.returncode == 2 and "checks nothing" in both.stderr
