"""Before the queue: plan's Slurm mode, and deploy/slurm/cli_filter.lua run by a real sbatch (CliFilterPlugins=lua)."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
from conftest import REPO, clean_env, run_cli
from test_slurm import running_cluster

from preflight.errors import PreflightError
from preflight.integrations import slurm_submit as submit

FILTER = REPO / "deploy" / "slurm" / "cli_filter.lua"
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
    for gres, why in (("gres:gpu:2", "--gres=gpu:2 names no GPU type"), ("gpu:a100:1", "it could be a100-40gb, a100-40gb-pcie, "
                                                                      "a100-80gb, a100-80gb-pcie"),
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


# --- the shipped filter, run by a real sbatch ------------------------------------------------------

PLUGIN_FOLDERS = ("/usr/lib/x86_64-linux-gnu/slurm-wlm", "/usr/lib/aarch64-linux-gnu/slurm-wlm", "/usr/lib64/slurm",
                  "/usr/lib/slurm", "/usr/local/lib/slurm")


@pytest.fixture(scope="module")
def cluster():
    if not any(os.path.exists(os.path.join(folder, "cli_filter_lua.so")) for folder in PLUGIN_FOLDERS):
        pytest.skip("SLURM'S LUA PLUGIN IS MISSING (cli_filter_lua.so in none of %s): the submit filter's real-Slurm "
                    "tests did not run; Debian's slurm-wlm-basic-plugins has it" % ", ".join(PLUGIN_FOLDERS))
    yield from running_cluster(gpus=1, gpu_type="h200", cli_filter=FILTER)


def sbatch(cluster, *args, path=None, deadline="30", script=None, config=None, program="sbatch"):
    """sbatch (or srun) as a user runs it, with preflight in PATH (or ``path``); (exit code, stdout, stderr)."""
    import shutil
    import subprocess

    bin_dir = cluster.root / "user-bin"
    if not bin_dir.exists():
        bin_dir.mkdir()
        (bin_dir / "preflight").write_text("#!/bin/sh\nexec %s -m preflight \"$@\"\n" % sys.executable)
        (bin_dir / "preflight").chmod(0o755)
    env = dict(cluster.env, PATH=path if path is not None else "%s:%s" % (bin_dir, os.environ.get("PATH", "")),
               PYTHONPATH=str(REPO))
    env.pop("PREFLIGHT_CONFIG", None)
    if config is not None:
        env["PREFLIGHT_CONFIG"] = str(config)
    if deadline is not None:
        env["PREFLIGHT_SUBMIT_DEADLINE"] = deadline  # a loaded CI machine starts Python slowly
    if program == "srun":
        command = [shutil.which("srun"), *args, "hostname"]
    else:
        command = [shutil.which("sbatch"), "-o", str(cluster.root / "job-%j.out"), *args]
        command += ["--wrap", "hostname"] if script is None else [str(script)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, cwd=str(cluster.root))
    return done.returncode, done.stdout, done.stderr


def queued(stdout):
    return re.search(r"Submitted batch job \d+", stdout) is not None


def test_real_sbatch_refuses_a_workload_that_does_not_fit_before_it_queues(cluster):
    before = cluster.run("squeue", "-h", "-o", "%i")
    code, out, err = sbatch(cluster, "--gres=gpu:h200:1", "--comment", TOO_BIG)
    assert code != 0 and not queued(out), (out, err)
    assert "preflight: gelan-c (batch 256, img 640) does not fit H200 SXM 141GB" in err, err
    assert "(submission refused)" in err and "stack traceback" not in err
    assert cluster.run("squeue", "-h", "-o", "%i") == before
    print("sbatch refused, as the user sees it:\n" + err)
    # The other ways to ask for GPUs, as sbatch hands them to the filter; and srun, which runs the filter too.
    for asked in ("--gpus=h200:1", "--gpus-per-node=h200:1"):
        code, out, err = sbatch(cluster, asked, "--comment", TOO_BIG)
        assert code != 0 and not queued(out) and "does not fit H200 SXM 141GB" in err, (asked, out, err)
    code, out, err = sbatch(cluster, "--gres=gpu:h200:1", "--comment", TOO_BIG, program="srun")
    assert code != 0 and "does not fit H200 SXM 141GB" in err and out == "", (out, err)
    assert cluster.run("squeue", "-h", "-o", "%i") == before


def test_real_sbatch_passes_the_comment_to_preflight_as_one_word(cluster):
    planted = cluster.root / "planted"
    comment = TOO_BIG + "; it's ours $(touch %s) `touch %s`" % (planted, planted)
    code, out, err = sbatch(cluster, "--gres=gpu:h200:1", "--comment", comment)
    assert code != 0 and "does not fit H200 SXM 141GB" in err, (out, err)
    assert not planted.exists()


def test_real_sbatch_reads_the_declaration_from_the_script(cluster, tmp_path):
    script = cluster.root / "train.sh"
    script.write_text("#!/bin/sh\n#SBATCH --gres=gpu:h200:1\n#SBATCH --comment=\"%s\"\nhostname\n" % TOO_BIG)
    code, out, err = sbatch(cluster, script=script)
    assert code != 0 and not queued(out) and "does not fit H200" in err, (out, err)


def test_real_sbatch_queues_a_job_that_fits_and_one_that_declares_nothing(cluster):
    code, out, err = sbatch(cluster, "--gres=gpu:h200:1", "--comment", FITS)
    assert code == 0 and queued(out), (out, err)
    assert "preflight: gelan-c (batch 16, img 640) fits H200 SXM 141GB" in err, err
    code, out, err = sbatch(cluster, "--gres=gpu:h200:1", "--comment", "nightly run")
    assert code == 0 and queued(out) and err == "", (out, err)
    code, out, err = sbatch(cluster, "--gres=gpu:h200:1")
    assert code == 0 and queued(out) and err == "", (out, err)


def test_real_sbatch_site_warn_only(cluster):
    config = cluster.root / "warn.toml"
    config.write_text('[defaults]\nslurm_does_not_fit = "warn"\n')
    code, out, err = sbatch(cluster, "--gres=gpu:h200:1", "--comment", TOO_BIG, config=config)
    assert code == 0 and queued(out), (out, err)
    assert "preflight: warning: gelan-c (batch 256, img 640) does not fit H200" in err, err


def test_real_sbatch_goes_on_when_preflight_is_missing_slow_or_failing(cluster):
    code, out, err = sbatch(cluster, "--gres=gpu:h200:1", "--comment", TOO_BIG, path="/usr/bin:/bin")
    assert code == 0 and queued(out), (out, err)
    assert "preflight: warning: preflight is not installed on this host" in err and "unchecked" in err, err
    slow = cluster.root / "slow-bin"
    slow.mkdir(exist_ok=True)
    (slow / "preflight").write_text("#!/bin/sh\nsleep 30\n")
    (slow / "preflight").chmod(0o755)
    code, out, err = sbatch(cluster, "--gres=gpu:h200:1", "--comment", TOO_BIG, path="%s:/usr/bin:/bin" % slow,
                            deadline=None)
    assert code == 0 and queued(out), (out, err)
    assert "preflight: warning: preflight did not answer within 0.5 s; the job goes on unchecked" in err, err
    code, out, err = sbatch(cluster, "--gres=gpu:h200:1", "--comment", "preflight: workload=gelan-c colour=red")
    assert code == 0 and queued(out), (out, err)
    assert "preflight: warning: the job's workload was not judged (Error: the job's comment declares 'colour'" in err
