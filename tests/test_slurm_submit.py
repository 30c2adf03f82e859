"""Before the queue: plan's Slurm mode (Python, by hand), and the submit filters (deploy/slurm: cli_filter.lua on a
submit host, job_submit.lua in slurmctld, both deciding from preflight's table in Lua) inside a real Slurm."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
from conftest import REPO, clean_env, run_cli
from test_slurm import running_cluster

from preflight import __version__
from preflight.errors import PreflightError
from preflight.integrations import slurm_submit as submit

TOO_BIG = "preflight: workload=gelan-c batch=256 img=640"  # about 195 GiB per GPU: more than an H200 holds
FITS = "preflight: workload=gelan-c batch=16 img=640"


# --- what Slurm writes, read --------------------------------------------------------------------

@pytest.mark.parametrize("options, expected", [
    ({"gres": "gres:gpu:h200:2"}, (("h200",), 2)),  # Slurm 22.05 prefixes "gres:" to --gres
    ({"gres": "gres/gpu:h200:2"}, (("h200",), 2)),  # later releases "gres/"
    ({"gres": "gpu:h200"}, (("h200",), 1)),
    ({"gres": "gpu:2"}, (("",), 2)),
    ({"gres": "gres:shard:2,gres:gpu:t4:1"}, (("t4",), 1)),  # other GRES left out
    ({"gres": "gpu:h200:2", "nodes": "2"}, (("h200",), 4)),
    ({"gres": "gpu:h200:2", "nodes": "1-0"}, (("h200",), 2)),  # --nodes unset, as the filter reads it
    ({"gres": "gpu:h200:2", "nodes": "2-4"}, (("h200",), 8)),  # the most nodes: the most generous reading
    ({"gpus": "h200:8", "nodes": "2"}, (("h200",), 8)),  # --gpus counts the whole job
    ({"gpus_per_node": "A100_80GB:4"}, (("a100_80gb",), 4)),
    ({"gres": "gpu:h200:1,gpu:t4:1"}, (("h200", "t4"), 2)),
])
def test_gpu_requests_as_slurm_writes_them(options, expected):
    found = submit.gpu_request(**options)
    assert (found.types, found.count) == expected


def test_no_gpu_and_bad_counts():
    assert submit.gpu_request() is None
    assert submit.gpu_request(gres="gres:shard:1") is None
    with pytest.raises(PreflightError, match="--slurm-gpus 'h200:two': the GPU count 'two' is not a number"):
        submit.gpu_request(gpus="h200:two")
    with pytest.raises(PreflightError, match="not N or MIN-MAX"):
        submit.gpu_request(gres="gpu:h200:1", nodes="many")


def test_declarations():
    assert submit.declaration(None) is None
    assert submit.declaration("nightly run") is None
    assert submit.declaration("run 7; Preflight: workload=gelan-c batch=64 fp32; owner=ana") == [
        ("workload", "gelan-c"), ("batch", "64"), ("fp32", None)]
    for bad in ("preflight:", "preflight: batch=", "preflight: 'unclosed"):
        with pytest.raises(PreflightError):
            submit.declaration(bad)


# --- plan's Slurm mode ------------------------------------------------------------------------

def slurm_plan(comment, *args, env=None):
    return run_cli("plan", "--slurm-comment", comment, *args, env=env)


def test_a_workload_that_does_not_fit_is_refused_with_the_batch_that_fits():
    completed = slurm_plan(TOO_BIG, "--slurm-gres", "gres:gpu:h200:1")
    assert completed.returncode == 1, completed.stderr
    line = completed.stdout.strip()
    assert "\n" not in line
    assert line.startswith("preflight: gelan-c (batch 256, img 640) does not fit H200 SXM 141GB: needs 195.0 GiB "
                           "per GPU, 139.8 GiB usable; the largest batch that fits is 183 (submission refused)"), line
    # Where a larger GPU of the same kind holds it, the job is told which, by the Slurm type it would ask for.
    completed = slurm_plan("preflight: workload=gelan-c batch=64", "--slurm-gres", "gpu:t4:1")
    assert completed.returncode == 1
    assert re.search(r"does not fit Tesla T4 16GB: .*; the largest batch that fits is 17; it would fit "
                     r"[^;]*\(gpu:a100-80gb\)", completed.stdout), completed.stdout
    assert "Jetson" not in completed.stdout and "RTX" not in completed.stdout  # data-centre GPUs for a data-centre ask


def test_fits_tight_and_what_is_not_judged():
    fits = slurm_plan(FITS, "--slurm-gres", "gpu:h200:2")
    assert fits.returncode == 0 and "fits 2 x H200 SXM 141GB" in fits.stdout, fits.stdout
    # The batch is split over every GPU asked for; a declared gpus=N says how many the run really uses.
    assert "8 per GPU" in fits.stdout
    one = slurm_plan(FITS + " gpus=1", "--slurm-gres", "gpu:h200:2")
    assert "fits H200 SXM 141GB" in one.stdout and "per GPU," not in one.stdout.split(":")[1], one.stdout
    tight = slurm_plan("preflight: workload=gelan-c batch=24", "--slurm-gres", "gpu:t4:1")
    assert tight.returncode == 0 and tight.stdout.startswith("preflight: warning: gelan-c (batch 24, img 640) is tight "
                                                             "on Tesla T4 16GB"), tight.stdout
    for gres, why in (("gres:gpu:2", "--gres=gpu:2 names no GPU type"), ("gpu:a100x:1", "it could be a100-40gb, "
                                                                      "a100-40gb-pcie, a100-80gb, a100-80gb-pcie"),
                      ("gpu:h200:1,gpu:t4:1", "several GPU types")):
        completed = slurm_plan(TOO_BIG, "--slurm-gres", gres)
        assert completed.returncode == 0 and completed.stdout.startswith("preflight: not judged: "), completed.stdout
        assert why in completed.stdout
    assert "asks for no GPU" in slurm_plan(TOO_BIG).stdout
    untouched = slurm_plan("nightly", "--slurm-gres", "gpu:h200:1")
    assert untouched.returncode == 0 and untouched.stdout == "" and untouched.stderr == ""


def test_uneven_split_warns():
    completed = slurm_plan("preflight: workload=gelan-c batch=64", "--slurm-gres", "gpu:h200:3")
    assert completed.returncode == 0
    assert "batch 64 does not divide by the 3 GPUs the job asks for" in completed.stdout


def test_bad_declarations_are_usage_errors_naming_the_key():
    completed = slurm_plan("preflight: workload=gelan-c colour=red", "--slurm-gres", "gpu:h200:1")
    assert completed.returncode == 2 and "declares 'colour': not a workload option" in completed.stderr
    completed = slurm_plan("preflight: workload=gelan-c batch=lots", "--slurm-gres", "gpu:h200:1")
    assert completed.returncode == 2 and "batch=lots" in completed.stderr and "not a valid integer" in completed.stderr
    completed = slurm_plan("preflight: workload=gelan-c batch=16", "--batch", "32", "--slurm-gres", "gpu:h200:1")
    assert completed.returncode == 2 and "given on the command line and in the job's comment" in completed.stderr
    completed = slurm_plan(FITS, "--slurm-gres", "gpu:h200:1", "--gpu", "t4")
    assert completed.returncode == 2 and "leave out --gpu" in completed.stderr


def test_site_configuration_maps_types_and_turns_refusal_into_a_warning(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[defaults]\nslurm_gpu_types = ["tee=t4", "big=a100-80gb"]\nslurm_does_not_fit = "warn"\n')
    env = clean_env({"PREFLIGHT_CONFIG": str(config)})
    declared = "preflight: workload=gelan-c batch=64"
    completed = slurm_plan(declared, "--slurm-gres", "gpu:TEE:1", env=env)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("preflight: warning: gelan-c (batch 64, img 640) does not fit Tesla T4 16GB")
    assert "A100 SXM4 80GB (gpu:big)" in completed.stdout and "refused" not in completed.stdout
    shown = run_cli("config", "show", env=env)
    assert re.search(r"slurm_gpu_types\s+tee=t4, big=a100-80gb\s+%s" % re.escape(str(config)), shown.stdout), \
        shown.stdout
    # The command line overrides the file, as for every setting.
    assert slurm_plan(declared, "--slurm-gres", "gpu:tee:1", "--slurm-does-not-fit", "refuse",
                      env=env).returncode == 1


def test_config_validate_checks_the_gpu_ids_and_the_policy(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[defaults]\nslurm_gpu_types = ["a100l=a100-80"]\n')
    completed = run_cli("config", "validate", str(config))
    assert completed.returncode == 2
    assert "config.toml:2: [defaults]: slurm_gpu_types: not a catalog GPU id in a100l=a100-80" in completed.stdout, \
        completed.stdout
    config.write_text('[defaults]\nslurm_gpu_types = "a100l"\n\n[[match]]\nhosts = "login*"\n'
                      'slurm_does_not_fit = "block"\n')
    completed = run_cli("config", "validate", str(config))
    assert completed.returncode == 2
    assert "config.toml:2: [defaults]: slurm_gpu_types: slurm_gpu_types 'a100l' is not TYPE=GPU" in completed.stdout, \
        completed.stdout
    assert "config.toml:6: [[match]] 1: slurm_does_not_fit: slurm_does_not_fit must be one of refuse, warn" \
        in completed.stdout, completed.stdout
    config.write_text('[defaults]\nslurm_gpu_types = ["a100l=a100-80gb"]\nslurm_does_not_fit = "warn"\n')
    assert run_cli("config", "validate", str(config)).returncode == 0


def test_the_decision_as_json_validates():
    jsonschema = pytest.importorskip("jsonschema", reason="SKIPPED LOUDLY: jsonschema (a test dependency) is missing")
    schema = json.loads(run_cli("schema", "submission").stdout)
    for args in ((TOO_BIG, "--slurm-gres", "gpu:h200:1"), (FITS, "--slurm-gpus", "h200:2"), ("nightly",),
                 (TOO_BIG, "--slurm-gres", "gpu:a100:1")):
        completed = slurm_plan(*args, "--format", "json")
        document = json.loads(completed.stdout)
        assert not list(jsonschema.Draft202012Validator(schema).iter_errors(document))
        assert document["decision"] in submit.DECISIONS
        assert (completed.returncode == 1) == (document["decision"] == "refuse")


# --- the shipped filters, inside a real Slurm ---------------------------------------------------------------

PLUGIN_FOLDERS = ("/usr/lib/x86_64-linux-gnu/slurm-wlm", "/usr/lib/aarch64-linux-gnu/slurm-wlm", "/usr/lib64/slurm",
                  "/usr/lib/slurm", "/usr/local/lib/slurm")
DEPLOY = REPO / "deploy" / "slurm"
CLIENT_FILTER, CONTROLLER_FILTER, LOGIC = DEPLOY / "cli_filter.lua", DEPLOY / "job_submit.lua", \
    DEPLOY / "preflight_submit.lua"
AUTODETECT_TYPE = "nvidia_h100_80gb_hbm3"  # what AutoDetect=nvml names an H100 SXM: NVML's name, as Slurm writes it
H100 = "H100 SXM 80GB"


def _table(path, config=None):
    env = clean_env({"PREFLIGHT_CONFIG": str(config)} if config else {})
    completed = run_cli("slurm", "--submit-table", str(path), env=env)
    assert completed.returncode == 0, completed.stderr
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A cluster whose node has one GPU of AutoDetect's type, the controller filter (JobSubmitPlugins=lua) and two
    submit hosts: one with the client filter (CliFilterPlugins=lua), one without. preflight is on no PATH: the
    filters decide from the table."""
    if not all(any(os.path.exists(os.path.join(folder, plugin)) for folder in PLUGIN_FOLDERS)
               for plugin in ("cli_filter_lua.so", "job_submit_lua.so")):
        pytest.skip("SLURM'S LUA PLUGINS ARE MISSING (cli_filter_lua.so, job_submit_lua.so in none of %s): the submit "
                    "filters' real-Slurm tests did not run; Debian's slurm-wlm-basic-plugins has them"
                    % ", ".join(PLUGIN_FOLDERS))
    table = _table(tmp_path_factory.mktemp("table") / "preflight-fit.lua")
    for running in running_cluster(gpus=1, gpu_type=AUTODETECT_TYPE, plugins="JobSubmitPlugins=lua",
                                   conf_files=[CONTROLLER_FILTER, LOGIC, table]):
        running.filtered = running.client("filtered", "CliFilterPlugins=lua", [CLIENT_FILTER, LOGIC, table])
        running.plain = running.client("plain")
        yield running


def sbatch(cluster, *args, client=None, script=None, program="sbatch"):
    """sbatch (or srun) as a user runs it on a submit host (``client``: its slurm.conf; the one with the client
    filter by default), with no preflight on PATH; (exit code, stdout, stderr)."""
    import shutil
    import subprocess

    env = dict(cluster.env, PATH="/usr/bin:/bin", SLURM_CONF=str(client or cluster.filtered))
    env.pop("PREFLIGHT_CONFIG", None)
    if program == "srun":
        command = [shutil.which("srun"), *args, "hostname"]
    else:
        command = [shutil.which("sbatch"), "-o", str(cluster.root / "job-%j.out"), *args]
        command += ["--wrap", "hostname"] if script is None else [str(script)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, cwd=str(cluster.root))
    return done.returncode, done.stdout, done.stderr


def queued(stdout):
    return re.search(r"Submitted batch job \d+", stdout) is not None


GRES = "--gres=gpu:%s:1" % AUTODETECT_TYPE


def test_a_misfit_is_refused_by_the_client_filter_and_by_the_controller_for_a_client_without_it(cluster):
    before = cluster.run("squeue", "-h", "-o", "%i")
    code, out, err = sbatch(cluster, GRES, "--comment", TOO_BIG)
    assert code != 0 and not queued(out), (out, err)
    assert "preflight: gelan-c (batch 256, img 640) does not fit %s" % H100 in err and "(submission refused)" in err
    assert "stack traceback" not in err and err.count("does not fit") == 1, err
    print("sbatch with the client filter refused, as the user sees it:\n" + err)
    code, out, err = sbatch(cluster, GRES, "--comment", TOO_BIG, client=cluster.plain)
    assert code != 0 and not queued(out), (out, err)
    assert "does not fit %s" % H100 in err and "(submission refused)" in err, err
    print("sbatch without the client filter, refused by slurmctld's job_submit.lua:\n" + err)
    for asked in ("--gpus=%s:1" % AUTODETECT_TYPE, "--gpus-per-node=%s:1" % AUTODETECT_TYPE):
        for client in (cluster.filtered, cluster.plain):
            code, out, err = sbatch(cluster, asked, "--comment", TOO_BIG, client=client)
            assert code != 0 and not queued(out) and "does not fit %s" % H100 in err, (asked, client, out, err)
    code, out, err = sbatch(cluster, GRES, "--comment", TOO_BIG, program="srun")
    assert code != 0 and "does not fit %s" % H100 in err and out == "", (out, err)
    assert cluster.run("squeue", "-h", "-o", "%i") == before


def test_a_job_that_fits_or_declares_nothing_queues(cluster):
    for client in (cluster.filtered, cluster.plain):
        code, out, err = sbatch(cluster, GRES, "--comment", FITS, client=client)
        assert code == 0 and queued(out), (out, err)
        code, out, err = sbatch(cluster, GRES, "--comment", "nopreflight: " + TOO_BIG[len("preflight: "):],
                                client=client)
        assert code == 0 and queued(out) and "preflight" not in err, (out, err)
        code, out, err = sbatch(cluster, GRES, client=client)
        assert code == 0 and queued(out) and err == "", (out, err)
    code, out, err = sbatch(cluster, GRES, "--comment", FITS)
    assert "preflight: gelan-c (batch 16, img 640) fits %s" % H100 in err, err


def test_the_comment_is_read_as_data_and_from_the_script(cluster):
    planted = cluster.root / "planted"
    comment = TOO_BIG + "; it's ours $(touch %s) `touch %s`" % (planted, planted)
    code, out, err = sbatch(cluster, GRES, "--comment", comment)
    assert code != 0 and "does not fit %s" % H100 in err, (out, err)
    assert not planted.exists()
    script = cluster.root / "train.sh"
    script.write_text("#!/bin/sh\n#SBATCH %s\n#SBATCH --comment=\"%s\"\nhostname\n" % (GRES, TOO_BIG))
    for client in (cluster.filtered, cluster.plain):
        code, out, err = sbatch(cluster, script=script, client=client)
        assert code != 0 and not queued(out) and "does not fit %s" % H100 in err, (out, err)


@pytest.mark.parametrize("workload", ["gelan-c", "yolov9-e", "gelan-s"])
def test_at_the_edge_the_filters_agree_with_plan(cluster, workload):
    """The largest tight batch is queued (with the warning), one more is refused, by either filter, as plan says."""
    probe = json.loads(slurm_plan("preflight: workload=%s batch=1" % workload, "--slurm-gres",
                                  "gpu:%s:1" % AUTODETECT_TYPE, "--format", "json").stdout)
    tight = probe["plan"]["gpus"][0]["max_batch_tight"]
    for batch, fits in ((tight, True), (tight + 1, False)):
        comment = "preflight: workload=%s batch=%d" % (workload, batch)
        said = json.loads(slurm_plan(comment, "--slurm-gres", "gpu:%s:1" % AUTODETECT_TYPE, "--format", "json").stdout)
        assert (said["decision"] != "refuse") == fits, said
        for client in (cluster.filtered, cluster.plain):
            code, out, err = sbatch(cluster, GRES, "--comment", comment, client=client)
            assert (code == 0 and queued(out)) == fits, (batch, client, out, err)
            assert said["message"] in err, (said["message"], err)
            print("%s, %s: %s" % (client.parent.name, "queued" if fits else "refused", err.strip()))


def test_without_a_table_or_with_a_stale_one_no_job_is_refused(cluster, tmp_path):
    controller = cluster.root / "etc" / "preflight-fit.lua"
    client = cluster.filtered.parent / "preflight-fit.lua"
    kept = controller.read_bytes()
    try:
        controller.unlink()
        client.unlink()
        for where in (cluster.filtered, cluster.plain):
            code, out, err = sbatch(cluster, GRES, "--comment", TOO_BIG, client=where)
            assert code == 0 and queued(out), (where, out, err)
            assert "there is no submit table" in err and "goes on unchecked" in err, err
        stale = kept.replace(b'["preflight"] = "%s"' % __version__.encode(), b'["preflight"] = "0.0.1"')
        controller.write_bytes(stale)
        client.write_bytes(stale)
        code, out, err = sbatch(cluster, GRES, "--comment", TOO_BIG)
        assert code == 0 and queued(out) and "was written by preflight 0.0.1" in err, (out, err)
    finally:
        controller.write_bytes(kept)
        client.write_bytes(kept)


def test_a_site_that_warns_instead_of_refusing(cluster, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[defaults]\nslurm_does_not_fit = "warn"\n')
    controller = cluster.root / "etc" / "preflight-fit.lua"
    client = cluster.filtered.parent / "preflight-fit.lua"
    kept = controller.read_bytes()
    try:
        _table(controller, config)
        client.write_bytes(controller.read_bytes())
        for where in (cluster.filtered, cluster.plain):
            code, out, err = sbatch(cluster, GRES, "--comment", TOO_BIG, client=where)
            assert code == 0 and queued(out), (out, err)
            assert "preflight: warning: gelan-c (batch 256, img 640) does not fit %s" % H100 in err, err
    finally:
        controller.write_bytes(kept)
        client.write_bytes(kept)


def test_what_the_client_filter_adds_to_sbatch(cluster):
    """sbatch --hold of a declared job, 25 times with the client filter and 25 without, interleaved; the medians
    are printed for the record (a figure, not a verdict: the machine's load decides it)."""
    import statistics
    import time

    times = {"filtered": [], "plain": []}
    for _ in range(25):
        for name in ("filtered", "plain"):
            started = time.monotonic()
            code, out, err = sbatch(cluster, GRES, "--hold", "--comment", FITS, client=getattr(cluster, name))
            times[name].append(time.monotonic() - started)
            assert code == 0 and queued(out), (out, err)
    cluster.run("scancel", "--user", "root")
    medians = {name: statistics.median(values) * 1000 for name, values in times.items()}
    print("sbatch --hold, median of 25: %.1f ms with the client filter, %.1f ms without (+%.1f ms)"
          % (medians["filtered"], medians["plain"], medians["filtered"] - medians["plain"]))
