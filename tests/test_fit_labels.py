"""Workload-fit labels (--fit-label, the site configuration's fit_labels): the largest batch per GPU that fits on
this node, published as NFD labels by check --format nfd and serve --nfd-output."""

from __future__ import annotations

import json
import re

from conftest import nvml_fixture, ok, run_cli, write_fixture

H200 = nvml_fixture("h200-driver580.json")
A100X2 = nvml_fixture("2x-a100-40g-driver550-ecc.json")


def labels(text):
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def fit_labels(*args):
    completed = run_cli("check", "--profile", "node", "--format", "nfd", *args)
    assert completed.returncode in (0, 1), completed.stderr
    return {key: value for key, value in labels(completed.stdout).items() if key.startswith("preflight.fit.")}


def plan_max_batch(workload, gpu, *more):
    completed = run_cli("plan", "--workload", workload, "--gpu", gpu, "--format", "json", *more)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)["gpus"][0]["max_batch"]


def test_the_label_is_what_plan_says_fits_on_that_gpu():
    # The recorded H200 has the catalog H200's total (143771 MiB), so its idle usable memory is the catalog's.
    found = fit_labels("--nvml-fixture", H200, "--fit-label", "gelan-c:train:640,yolov9-e",
                       "--fit-label", "yolov9-t:inference:1280")
    assert found == {
        "preflight.fit.gelan-c.train.640": str(plan_max_batch("gelan-c", "h200")),
        "preflight.fit.yolov9-e.train.640": str(plan_max_batch("yolov9-e", "h200")),
        "preflight.fit.yolov9-t.inference.1280": str(plan_max_batch("yolov9-t", "h200", "--task", "inference",
                                                                    "--img", "1280")),
    }
    assert int(found["preflight.fit.gelan-c.train.640"]) > int(found["preflight.fit.yolov9-e.train.640"]) > 0


def test_the_smallest_gpu_of_a_node_decides_and_free_memory_does_not(tmp_path):
    def mixed(data):
        # GPU 1 becomes a 16 GB T4; GPU 0 is busy (almost no free memory), which a node label must not follow.
        data["devices"][1]["nvmlDeviceGetName"] = ok("Tesla T4")
        for call in ("nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo(v2)"):
            t4 = dict(data["devices"][1][call]["ok"], total=15360 * 2**20, free=15000 * 2**20)
            data["devices"][1][call] = ok(t4)
            busy = data["devices"][0][call]["ok"]
            data["devices"][0][call] = ok(dict(busy, free=2**20))
    fixture = write_fixture(tmp_path, "2x-a100-40g-driver550-ecc.json", mixed)
    found = fit_labels("--nvml-fixture", fixture, "--fit-label", "gelan-c")
    assert found == {"preflight.fit.gelan-c.train.640": str(plan_max_batch("gelan-c", "t4"))}
    assert fit_labels("--nvml-fixture", A100X2, "--fit-label", "gelan-c") == {
        "preflight.fit.gelan-c.train.640": str(plan_max_batch("gelan-c", "a100-40gb"))}


def test_no_label_without_a_readable_gpu_and_none_unless_asked():
    assert fit_labels("--nvml-fixture", nvml_fixture("no-library.json"), "--fit-label", "gelan-c") == {}
    assert fit_labels("--nvml-fixture", H200) == {}


def test_bad_fit_labels_are_usage_errors_that_say_what_exists():
    completed = run_cli("check", "--nvml-fixture", H200, "--fit-label", "gelan-x")
    assert completed.returncode == 2 and "unknown workload 'gelan-x'" in completed.stderr
    assert "workloads: gelan-c" in completed.stderr
    for bad, said in (("gelan-c:tran", "the task must be train or inference"),
                      ("gelan-c:train:20", "the image size must be from 32 to 16384"),
                      ("Gelan C", "is not WORKLOAD[:TASK[:IMG]]")):
        completed = run_cli("check", "--nvml-fixture", H200, "--fit-label", bad)
        assert completed.returncode == 2 and said in completed.stderr, completed.stderr
        assert "Traceback" not in completed.stderr


def test_the_site_configuration_gives_fit_labels_and_validate_checks_their_workloads(tmp_path):
    site = tmp_path / "site.toml"
    site.write_text('[defaults]\nprofile = "node"\n\n[[match]]\ngpus = ["*H200*"]\nfit_labels = ["gelan-c"]\n\n'
                    '[[match]]\nhosts = ["other-*"]\nfit_labels = ["yolov9-x:train:640"]\n')
    completed = run_cli("config", "validate", str(site))
    assert completed.returncode == 2
    assert "%s:10: [[match]] 2: fit_labels: unknown workload in yolov9-x:train:640" % site in completed.stdout, completed.stdout
    site.write_text('[defaults]\nprofile = "node"\n\n[[match]]\ngpus = ["*H200*"]\nfit_labels = ["gelan-c"]\n')
    assert run_cli("config", "validate", str(site)).returncode == 0
    shown = run_cli("config", "show", "--config", str(site), "--nvml-fixture", H200)
    assert re.search(r"fit_labels +gelan-c:train:640", shown.stdout), shown.stdout
    found = fit_labels("--config", str(site), "--nvml-fixture", H200)
    assert found == {"preflight.fit.gelan-c.train.640": str(plan_max_batch("gelan-c", "h200"))}
    # A match for other GPUs gives this node none.
    assert fit_labels("--config", str(site), "--nvml-fixture", A100X2) == {}

