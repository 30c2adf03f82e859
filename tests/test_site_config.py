"""The site configuration file: found, matched, merged under the command line, and refused clearly when bad."""

from __future__ import annotations

import json
import socket

import pytest
from conftest import nvml_fixture, run_cli, run_json
from test_slurm import calls, fake_scontrol

H200 = nvml_fixture("h200-driver580.json")
A100X2 = nvml_fixture("2x-a100-40g-driver550-ecc.json")
HOST = socket.gethostname().split(".")[0]

SITE = """# a site's nodes
[defaults]
profile = "node"
set = ["driver.version.min=550"]
ignore = "gpu.throttle"

[[match]]
hosts = ["%(host)s", "gpu-a*"]
expect_gpus = 8
set = ["driver.version.min=560", "gpu.memory.min=80GB"]

[[match]]
gpus = "*A100*"
timeout = "30s"
set = ["gpu.memory.min=40GB"]
""" % {"host": HOST}


def write(tmp_path, text, name="config.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def one(report, rule_id):
    found = [r for r in report["results"] if r["id"] == rule_id]
    assert len(found) == 1, [r["id"] for r in report["results"]]
    return found[0]


def test_config_show_says_where_each_setting_came_from(tmp_path):
    config = write(tmp_path, SITE)
    shown = run_cli("config", "show", "--config", config, "--nvml-fixture", H200)
    assert shown.returncode == 0, shown.stderr
    lines = {line.split()[0] + " " + line.split()[1]: line for line in shown.stdout.splitlines() if len(line.split()) > 2}
    assert lines["profile node"].endswith("%s:3 [defaults]" % config)
    assert lines["expect_gpus 8"].endswith("%s:9 [[match]] 1" % config)
    assert lines["set driver.version.min=560"].endswith("%s:10 [[match]] 1" % config)
    assert lines["timeout 10.0"].endswith("built-in default")
    assert "[[match]] 2 (line 12): does not apply: gpus = *A100* matches none of: NVIDIA H200" in shown.stdout
    # --host and --gpu stand in for another machine: gpu-a07 with A100s gets both matches, later ones winning.
    other = json.loads(run_cli("config", "show", "--config", config, "--host", "gpu-a07", "--gpu", "NVIDIA A100-SXM4-40GB",
                               "--format", "json").stdout)
    settings = {(s["setting"], s["value"]): s["from"] for s in other["settings"]}
    assert settings[("set", "gpu.memory.min=40GB")] == "%s:15 [[match]] 2" % config
    assert settings[("timeout", "30.0")] == "%s:14 [[match]] 2" % config
    assert [s["applies"] for s in other["sections"]] == [True, True, True]
    elsewhere = json.loads(run_cli("config", "show", "--config", config, "--host", "login1", "--gpu", "x",
                                   "--format", "json").stdout)
    assert elsewhere["sections"][1]["why_not"] == "hosts = %s gpu-a* matches none of: login1" % HOST


def test_check_follows_the_file_and_the_command_line_overrides_it(tmp_path):
    config = write(tmp_path, SITE)
    report = run_json("check", "--config", config, "--nvml-fixture", H200)
    assert report["profile"] == "node"
    assert one(report, "driver.version")["message"] == "driver 580.159.04, expected >= 560, recommended >= 580"
    assert one(report, "gpu.expected_count")["message"] == "expected 8 GPUs (expect_gpus 8, config.toml:9), found 1"
    assert "gpu.throttle" not in [r["id"] for r in report["results"]]
    # The command line wins: its profile, its --expect-gpus, its --set for the same key (the file's others stay).
    mine = run_json("check", "--config", config, "--nvml-fixture", H200, "--profile", "inference", "--expect-gpus", "1",
                    "--set", "driver.version.min=570", "--select", "driver,gpu.memory,gpu.expected_count")
    assert mine["profile"] == "inference"
    assert one(mine, "gpu.expected_count")["status"] == "pass"
    assert one(mine, "driver.version")["message"] == "driver 580.159.04, expected >= 570, recommended >= 580"
    assert "expected >= 80GB" in one(mine, "gpu.memory")["message"]
    # PREFLIGHT_PROFILE is the user's too.
    assert run_json("check", "--config", config, "--nvml-fixture", H200, env={"PREFLIGHT_PROFILE": "train"})[
        "profile"] == "train"


def test_gpus_selector_matches_this_machines_gpus(tmp_path):
    config = write(tmp_path, SITE.replace(HOST, "no-such-host"))
    a100 = run_json("check", "--config", config, "--nvml-fixture", A100X2, "--select", "gpu.memory")
    assert all("expected >= 40GB" in r["message"] for r in a100["results"]), a100["results"]
    h200 = run_json("check", "--config", config, "--nvml-fixture", H200, "--select", "gpu.memory")
    assert "expected >= 8GB" in one(h200, "gpu.memory")["message"]  # node profile's own default


def test_the_file_is_found_through_the_environment_and_the_system_path(tmp_path, monkeypatch):
    config = write(tmp_path, '[defaults]\nprofile = "node"\n')
    assert run_json("check", "--nvml-fixture", H200, env={"PREFLIGHT_CONFIG": config})["profile"] == "node"
    from preflight.commands import site

    monkeypatch.setattr(site, "SYSTEM_CONFIG", config)
    assert run_json("check", "--nvml-fixture", H200)["profile"] == "node"
    monkeypatch.setattr(site, "SYSTEM_CONFIG", str(tmp_path / "absent.toml"))
    assert run_json("check", "--nvml-fixture", H200)["profile"] == "train"


def test_relative_rule_paths_are_relative_to_the_file(tmp_path):
    (tmp_path / "site-rules").mkdir()
    (tmp_path / "site-rules" / "site.toml").write_text(
        '[[rule]]\nid = "site.cpus"\ntitle = "CPUs"\nseverity = "error"\nprofiles = ["node"]\nfact = "host.cpu.count"\n'
        'compare = "number"\nmin = 100000\nwhy = "site policy"\nsource = "site"\n')
    config = write(tmp_path, '[defaults]\nprofile = "node"\nrules = ["site-rules"]\n')
    report = run_json("check", "--config", config, "--nvml-fixture", H200, "--select", "site")
    assert one(report, "site.cpus")["status"] == "fail"


def test_slurm_matches_partitions_and_features(tmp_path):
    config = write(tmp_path, '[[match]]\npartitions = "debug"\nfeatures = "h200*"\nexpect_gpus = 2\n')
    scontrol = fake_scontrol(tmp_path / "a", features="h200x1,ib")
    completed = run_cli("slurm", "--config", config, "--nvml-fixture", H200, "--scontrol", str(scontrol),
                        "--node", "n1")
    assert completed.returncode == 1
    assert "expected 2 GPUs (expect_gpus 2, config.toml:4), found 1" in completed.stderr
    assert [c for c in calls(tmp_path / "a") if "State=DRAIN" in c]
    # Another feature: the match does not apply, the node's Gres (none) sets no count, the node passes.
    other = fake_scontrol(tmp_path / "b", features="a100")
    assert run_cli("slurm", "--config", config, "--nvml-fixture", H200, "--scontrol", str(other),
                   "--node", "n1").returncode == 0


def test_slurm_job_profile_from_the_file_still_needs_the_interpreter(tmp_path):
    config = write(tmp_path, '[defaults]\nprofile = "train"\n')
    completed = run_cli("slurm", "--config", config, "--nvml-fixture", H200, "--scontrol",
                        str(fake_scontrol(tmp_path / "s")), "--node", "n1")
    assert completed.returncode == 5  # the configuration cannot be used: unknown, the node left as it is
    assert "--profile train (from %s:2 [defaults]) checks a job's Python environment" % config in completed.stderr
    assert not [c for c in calls(tmp_path / "s") if c.startswith("update")]


def test_check_in_a_job_matches_its_partition(tmp_path):
    config = write(tmp_path, '[[match]]\npartitions = ["gpu", "debug"]\nprofile = "node"\n')
    assert run_json("check", "--config", config, "--nvml-fixture", H200,
                    env={"SLURM_JOB_PARTITION": "debug"})["profile"] == "node"
    assert run_json("check", "--config", config, "--nvml-fixture", H200)["profile"] == "train"


def test_exec_reads_the_file(tmp_path):
    config = write(tmp_path, '[defaults]\nprofile = "node"\nset = ["gpu.memory.min=200GB"]\n')
    completed = run_cli("exec", "--config", config, "--nvml-fixture", H200, "--", "echo", "started")
    assert completed.returncode != 0 and "started" not in completed.stdout
    assert "expected >= 200GB" in completed.stderr


@pytest.mark.parametrize("text, where, problem", [
    ('[defaults]\nprofile = "nod"\n', ":2: [defaults]: profile", "profile must be one of train, inference, node"),
    ('[defaults]\nprofle = "node"\n', ":2: [defaults]: profle", "unknown key 'profle'"),
    ('[defaults]\nprofile = "node"\n\n[[match]]\nhosts = ["gpu[1-4"]\n', ":5: [[match]] 1: hosts", "not a valid glob"),
    ('[[match]]\nhosts = []\n', ":2: [[match]] 1: hosts", "is empty"),
    ('[[match]]\nprofile = "node"\n', ":1: [[match]] 1", "needs at least one selector"),
    ('[defaults]\nhosts = "x"\n', ":2: [defaults]: hosts", "selectors belong in a [[match]]"),
    ('[defaults]\nset = ["driver.versoin.min=550"]\n', ":2: [defaults]: set: driver.versoin.min=550",
     "unknown rule id 'driver.versoin'"),
    ('[defaults]\nset = ["driver.version.mn=550"]\n', ":2: [defaults]: set", "has no setting 'mn'"),
    ('[defaults]\nset = ["driver.version.min=abc"]\n', ":2: [defaults]: set", "'abc' is not a version"),
    ('[defaults]\nset = "driver"\n', ":2: [defaults]: set", "is not RULE.KEY=VALUE"),
    ('[defaults]\nselect = ["gpuz"]\n', ":2: [defaults]: select", "no rule id is or starts with 'gpuz'"),
    ('[defaults]\nexpect_gpus = -1\n', ":2: [defaults]: expect_gpus", "must be a GPU count"),
    ('[defaults]\ntimeout = "soon"\n', ":2: [defaults]: timeout", "must be seconds"),
    ('[defaults]\nrules = ["nowhere.toml"]\n', ":2: [defaults]: rules", "no such file or folder"),
    ('foo = 1\n', ":1: top level: foo", "unknown key 'foo'"),
    ('[defaults\nx = 1\n', "", "not valid TOML"),
    ('\xff\n', "", "not UTF-8"),
])
def test_a_bad_file_is_a_usage_error_naming_file_line_and_key(tmp_path, text, where, problem):
    path = tmp_path / "site.toml"
    path.write_bytes(text.encode("latin-1"))
    for argv in (["check", "--nvml-fixture", H200], ["config", "show", "--gpu", "x"], ["config", "validate"],
                 ["slurm", "--nvml-fixture", H200, "--scontrol", str(fake_scontrol(tmp_path / "s")), "--node", "n1"],
                 ["slurm", "--prolog", "--nvml-fixture", H200]):
        if argv == ["config", "validate"]:
            completed = run_cli(*argv, str(path))
            completed.stderr += completed.stdout  # validate lists the problems on standard output
        else:
            completed = run_cli(*argv, "--config", str(path))
        # Under Slurm a broken configuration is never a verdict: the health program leaves the node as it is
        # (5, unknown) and the prolog lets the job start (0); both say where the file is wrong.
        expected = 5 if argv[0] == "slurm" and "--prolog" not in argv else 0 if "--prolog" in argv else 2
        assert completed.returncode == expected, (argv, completed.stderr)
        assert "%s%s" % (path, where) in completed.stderr and problem in completed.stderr, (argv, completed.stderr)
        assert "Traceback" not in completed.stderr
    assert not [c for c in calls(tmp_path / "s") if c.startswith("update")]


def test_a_missing_config_file_is_a_usage_error(tmp_path):
    completed = run_cli("check", "--config", str(tmp_path / "none.toml"), "--nvml-fixture", H200)
    assert completed.returncode == 2 and "none.toml: no such file" in completed.stderr


# --- a verdict needs rules; a configuration others could change is not acted on -----------------------

CANCELLING = """[defaults]
ignore = "gpu"

[[match]]
hosts = "%(host)s"
select = "gpu"
ignore = "gpu"
""" % {"host": HOST}


def test_a_configuration_whose_select_and_ignore_cancel_is_refused_not_ok(tmp_path):
    config = write(tmp_path, CANCELLING)
    completed = run_cli("check", "--config", config, "--profile", "node", "--nvml-fixture", A100X2)
    assert completed.returncode == 2, completed.stdout
    assert "no rule is left to check in profile node: select gpu (%s:6 [[match]] 1); ignore gpu (%s:7 [[match]] 1)" \
        % (config, config) in completed.stderr
    assert "OK" not in completed.stdout
    shown = run_cli("config", "show", "--config", config)
    assert shown.returncode == 0 and "PROBLEM: no rule is left to check" in shown.stdout
    assert json.loads(run_cli("config", "show", "--config", config, "--format", "json").stdout)["problems"]


def test_exec_never_starts_a_job_on_an_empty_rule_set(tmp_path):
    marker = tmp_path / "started"
    config = write(tmp_path, CANCELLING)
    completed = run_cli("exec", "--config", config, "--profile", "node", "--nvml-fixture", A100X2, "--",
                        "touch", str(marker))
    assert completed.returncode == 2 and "no rule is left to check" in completed.stderr
    assert not marker.exists()  # the A100 node has uncorrected ECC errors: it must not run a job


def test_ignore_covering_every_group_is_refused(tmp_path):
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--ignore",
                        "nvml,gpu,driver,cuda,xid,container")
    assert completed.returncode == 2 and "ignore nvml,gpu,driver,cuda,xid,container (--ignore)" in completed.stderr


def test_slurm_does_not_resume_a_node_on_an_empty_rule_set(tmp_path):
    scontrol = fake_scontrol(tmp_path, "IDLE+DRAIN", "preflight: gpu.health gpu1 ECC")
    config = write(tmp_path, CANCELLING)
    completed = run_cli("slurm", "--config", config, "--nvml-fixture", A100X2, "--scontrol", str(scontrol),
                        "--node", HOST)
    assert completed.returncode != 0 and "no rule is left to check" in completed.stderr
    assert not [c for c in calls(tmp_path) if c.startswith("update")]


@pytest.mark.parametrize("mode, folder_mode, problem", [
    (0o666, 0o755, "it is world-writable (mode 666)"),
    (0o644, 0o777, "is world-writable: anyone can replace it"),
])
def test_a_configuration_others_could_change_is_refused_by_admission_and_warned_about_elsewhere(
        tmp_path, mode, folder_mode, problem):
    folder = tmp_path / "etc"
    folder.mkdir()
    config = write(folder, SITE)
    (folder / "config.toml").chmod(mode)
    folder.chmod(folder_mode)
    scontrol = fake_scontrol(tmp_path / "slurm")
    for command in (["slurm", "--scontrol", str(scontrol), "--node", "n1"], ["exec"],
                    ["serve", "--listen", "127.0.0.1:0"]):
        args = command + ["--config", config, "--nvml-fixture", H200] + (["--", "true"] if command == ["exec"] else [])
        completed = run_cli(*args)
        assert completed.returncode == (5 if command[0] == "slurm" else 2), (command, completed.stderr)
        assert problem in completed.stderr and "does not act on a configuration others could change" \
            in completed.stderr, completed.stderr
        # What to make of it, never a command that changes a file preflight did not create (chmod /dev/null ...)
        assert "only root can change" in completed.stderr and "chmod" not in completed.stderr
    assert not [c for c in calls(tmp_path / "slurm") if c.startswith("update")]
    checked = run_cli("check", "--config", config, "--nvml-fixture", H200, "--profile", "node")
    assert checked.returncode in (0, 1) and "warning: configuration file %s: " % config in checked.stderr
    assert problem in checked.stderr


def test_a_configuration_in_a_sticky_folder_owned_by_someone_else_is_refused(tmp_path):
    import os

    if os.geteuid() != 0:
        pytest.skip("a file owned by another user needs root to make (CI runs as root)")
    folder = tmp_path / "tmp"
    folder.mkdir()
    folder.chmod(0o1777)
    config = write(folder, SITE)
    os.chown(config, 65534, 65534)
    completed = run_cli("exec", "--config", config, "--nvml-fixture", H200, "--", "true")
    assert completed.returncode == 2 and "belongs to user 65534" in completed.stderr


def test_dev_null_as_the_configuration_gets_no_advice_to_change_it():
    """--config /dev/null: not a configuration file, and a fix never changes a device file (chown or chmod of
    /dev/null would break every other program until reboot)."""
    completed = run_cli("exec", "--config", "/dev/null", "--nvml-fixture", "h200", "--", "true")
    assert completed.returncode == 2 and "not a regular file" in completed.stderr, completed.stderr
    assert "chown" not in completed.stderr and "chmod" not in completed.stderr
