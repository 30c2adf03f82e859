"""Node health as DCGM and NHC users expect it: PCIe, NVLink, fabric, retired pages, temperature, power, persistence,
InfoROM, Xid events, and GPUs that NVML lost or does not list, found by their PCI address."""

from __future__ import annotations

import json
import os
import re
import stat
import time

import pytest
from conftest import FIXTURES, by_id, nvml_fixture, run_cli, run_json, status_of

from preflight.facts import collect, history
from preflight.probes import kernel_log

HGX = nvml_fixture("8x-h100-hgx.json")
FAULTS = nvml_fixture("8x-h100-hgx-faults.json")
MISSING = nvml_fixture("8x-h100-one-missing-one-lost.json")
V100 = nvml_fixture("v100-retired-pages.json")
H200 = nvml_fixture("h200-driver580.json")
LOGS = FIXTURES / "kernel-log"
NODE_RULES = ("gpu.pcie", "gpu.nvlink", "gpu.fabric", "gpu.retired_pages", "gpu.temperature", "gpu.power_limit",
              "gpu.persistence", "gpu.inforom")


def node(*args, expect_code=None):
    return run_json("check", "--profile", "node", *args, expect_code=expect_code)


def test_a_healthy_hgx_node_passes_every_node_health_rule():
    report = node("--nvml-fixture", HGX, "--select", ",".join(NODE_RULES), expect_code=0)
    results = by_id(report)
    assert {r["status"] for rule in NODE_RULES for r in results[rule]} == {"pass"}
    assert len(results["gpu.nvlink"]) == 8
    assert results["gpu.nvlink"][0]["message"].endswith("18 of 18 NVLinks active")
    assert results["gpu.fabric"][0]["message"].endswith("registered in the NVLink fabric")


def test_each_fault_fails_its_rule_on_its_gpu_only():
    report = node("--nvml-fixture", FAULTS, expect_code=1)
    failing = {(r["id"], r["subject"]) for r in report["results"] if r["status"] in ("fail", "warn")}
    assert failing == {("gpu.pcie", "gpu2"), ("gpu.nvlink", "gpu3"), ("gpu.fabric", "gpu4"), ("gpu.temperature", "gpu5"),
                       ("gpu.power_limit", "gpu6"), ("gpu.inforom", "gpu7"), ("gpu.persistence", "gpu7"),
                       ("gpu.pcie", "gpu7")}
    results = {(r["id"], r["subject"]): r for r in report["results"]}
    assert "PCIe link x8 of x16" in results[("gpu.pcie", "gpu2")]["message"]
    assert "00000000:3A:00.0" in results[("gpu.pcie", "gpu2")]["message"]  # the operator finds the card
    assert "PCIe Gen3 of Gen5 while the GPU is busy (97%)" in results[("gpu.pcie", "gpu7")]["message"]
    assert "12 of 18 NVLinks active (inactive links: 12, 13, 14, 15, 16, 17; other GPUs of this model on the node " \
           "have 18)" in results[("gpu.nvlink", "gpu3")]["message"]
    fabric = results[("gpu.fabric", "gpu4")]
    assert "fabric registration has not started" in fabric["message"]
    assert "systemctl status nvidia-fabricmanager" in fabric["fix"]["commands"]
    assert "90 C, at or over its slowdown temperature of 89 C" in results[("gpu.temperature", "gpu5")]["message"]
    power = results[("gpu.power_limit", "gpu6")]
    assert "power limit 450 W, below the default 700 W" in power["message"]
    assert "sudo nvidia-smi -i 6 -pl 700" in power["fix"]["commands"]
    assert "InfoROM corrupted" in results[("gpu.inforom", "gpu7")]["message"]
    assert "sudo nvidia-smi -i 7 -pm 1" in results[("gpu.persistence", "gpu7")]["fix"]["commands"]
    # Warning-severity rules do not block: the errors (PCIe, NVLink, fabric) do.
    blocking = {r["id"] for r in report["results"] if r["status"] == "fail" and r["severity"] == "error"}
    assert blocking == {"gpu.pcie", "gpu.nvlink", "gpu.fabric"}


def test_fabric_blocks_training_too_and_the_rest_only_node_admission():
    report = run_json("check", "--nvml-fixture", FAULTS, "--select", "gpu", expect_code=1)
    ids = {r["id"] for r in report["results"]}
    assert "gpu.fabric" in ids and not ids & {"gpu.pcie", "gpu.nvlink", "gpu.retired_pages", "gpu.persistence"}
    assert status_of(report, "gpu.fabric", "gpu4") == "fail"


def test_what_a_gpu_cannot_report_passes_as_not_supported():
    report = node("--nvml-fixture", H200, "--select", ",".join(NODE_RULES), expect_code=0)
    messages = {r["id"]: r["message"] for r in report["results"]}
    assert messages["gpu.nvlink"].endswith("no NVLink on this GPU")
    assert messages["gpu.fabric"].endswith("no NVLink fabric (not an NVSwitch system)")
    assert "row remapping instead" in messages["gpu.retired_pages"]
    assert messages["gpu.inforom"].endswith("InfoROM not checked (the GPU cannot validate it)")


def test_retired_pages_over_dcgms_limit_fail():
    report = node("--nvml-fixture", V100, "--select", "gpu.retired_pages", expect_code=1)
    assert "62 retired pages (48 single-bit, 14 double-bit): at or over DCGM's limit of 60" in \
        report["results"][0]["message"]


def test_a_missing_and_a_lost_gpu_are_named_by_their_pci_address():
    report = node("--nvml-fixture", MISSING, "--expect-gpus", "8", expect_code=1)
    results = {(r["id"], r["subject"]): r for r in report["results"]}
    count = results[("gpu.expected_count", "system")]
    assert count["message"] == ("expected 8 GPUs (--expect-gpus 8), found 7; on the PCI bus but not in NVML: "
                                "0000:5d:00.0, 0000:ba:00.0")
    lost = results[("gpu.health", "gpu5")]
    assert lost["status"] == "fail" and "the GPU is lost" in lost["message"] and "0000:ba:00.0" in lost["message"]


def test_node_health_values_are_read_only_for_rules_that_need_them():
    plain = collect.collect({"nvml"}, collect.Options(nvml_fixture=HGX))
    assert plain["nvml"]["health_read"] is False and "pcie" not in plain["nvml"]["gpus"][0]
    assert "nvlink" not in plain["nvml"]["gpus"][0] and "pci_gpus" not in plain["nvml"]
    full = collect.collect({"nvml", collect.NVML_HEALTH}, collect.Options(nvml_fixture=HGX))
    assert full["nvml"]["health_read"] is True and full["nvml"]["gpus"][0]["nvlink"]["active"] == 18
    # The default (train) check does not ask for them; the node profile does.
    train = run_json("check", "--nvml-fixture", HGX)
    assert not {r["id"] for r in train["results"]} & set(NODE_RULES[:2])
    # A snapshot without them (an older `preflight facts`) skips the rules rather than passing or failing them.
    saved = json.dumps(plain)
    skipped = run_cli("check", "--profile", "node", "--facts", "-", "--select", "gpu.pcie", "--format", "json",
                      stdin=saved)
    result = json.loads(skipped.stdout)["results"][0]
    assert result["status"] == "skip" and "no node-health values" in result["message"]


def test_facts_carries_the_node_health_values_and_the_kernel_log(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text((LOGS / "xid-79-fallen-off-the-bus.log").read_text())
    facts = json.loads(run_cli("facts", "--nvml-fixture", HGX, "--kernel-log", str(log)).stdout)
    assert facts["nvml"]["gpus"][3]["pcie"]["max_width"] == 16
    assert facts["kernel_log"]["source"] == "file:%s" % log and facts["kernel_log"]["events"][0]["xid"] == 79
    checked = run_cli("check", "--profile", "node", "--facts", "-", "--select", "xid", "--format", "json",
                      stdin=json.dumps(facts))
    assert json.loads(checked.stdout)["results"][0]["status"] == "fail"  # a saved snapshot replays its Xids


# --- Xid events -----------------------------------------------------------------------

@pytest.mark.parametrize("log, rule, status, expected", [
    ("xid-79-fallen-off-the-bus.log", "xid.node", "fail",
     "gpu3 (0000:5d:00): Xid 79 x2, GPU has fallen off the bus: drain the node and reboot it"),
    ("xid-48-double-bit-ecc.log", "xid.node", "fail", "gpu1 (0000:2a:00): Xid 48, Double-bit ECC error"),
    ("xid-63-64-row-remapping.log", "xid.node", "fail",
     "gpu5 (0000:ab:00): Xid 64, ECC page retirement or row remapping failed"),
    ("xid-63-64-row-remapping.log", "xid.watch", "fail",
     "gpu4 (0000:9a:00): Xid 63, ECC page retirement or row remapping recorded"),
    ("xid-74-nvlink.log", "xid.node", "fail", "gpu6 (0000:ba:00): Xid 74, NVLink error"),
    ("xid-92-94-95-ecc.log", "xid.node", "fail", "gpu7 (0000:db:00): Xid 95, Uncontained ECC error"),
    ("xid-92-94-95-ecc.log", "xid.watch", "fail", "gpu0 (0000:18:00): Xid 92, High single-bit ECC error rate"),
    ("xid-119-120-gsp.log", "xid.node", "fail", "gpu2 (0000:3a:00): Xid 119, GSP RPC timeout"),
    ("xid-old-driver-format.log", "xid.node", "fail", "gpu0 (0000:18:00): Xid 79, GPU has fallen off the bus"),
    ("xid-application-only.log", "xid.node", "pass",
     "application Xids (the programs' own faults): gpu0 (0000:18:00): Xid 13 x2, Graphics engine exception; "
     "gpu0 (0000:18:00): Xid 43"),
])
def test_xid_events_by_family(log, rule, status, expected):
    report = node("--nvml-fixture", HGX, "--kernel-log", str(LOGS / log), "--select", rule)
    result = report["results"][0]
    assert result["status"] == status, result
    assert expected in result["message"], result["message"]
    if status == "fail":
        assert result["fix"]["commands"]


def test_application_xids_never_fail_the_node():
    report = node("--nvml-fixture", HGX, "--kernel-log", str(LOGS / "xid-application-only.log"), "--select", "xid",
                  expect_code=0)
    assert {r["status"] for r in report["results"]} == {"pass"}
    assert "Xid 31, GPU memory page fault" in report["results"][0]["message"]


def test_an_unreadable_kernel_log_skips_and_says_why(tmp_path):
    report = node("--nvml-fixture", HGX, "--select", "xid", expect_code=0)
    assert {r["status"] for r in report["results"]} == {"skip"}
    assert "a replayed machine's kernel log is not recorded; give it with --kernel-log FILE" in \
        report["results"][0]["message"]
    missing = run_cli("check", "--profile", "node", "--kernel-log", str(tmp_path / "nope.log"))
    assert missing.returncode == 2 and "--kernel-log" in missing.stderr and "Traceback" not in missing.stderr


def _fake(folder, name, body):
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_the_live_kernel_log_falls_back_and_never_hangs(tmp_path, monkeypatch):
    """No /dev/kmsg (a container): journalctl that never answers is given up on; dmesg answers."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake(bin_dir, "journalctl", "exec sleep 60\n")
    _fake(bin_dir, "dmesg", "exec cat %s\n" % (LOGS / "xid-74-nvlink.log"))
    monkeypatch.setattr(kernel_log, "KMSG", str(tmp_path / "no-kmsg"))
    monkeypatch.setattr(kernel_log, "COMMAND_TIMEOUT", 1.0)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    started = time.monotonic()
    found = kernel_log.probe(None, timeout=5.0)
    assert time.monotonic() - started < 4
    assert found["readable"] and found["source"] == "dmesg" and found["events"][0]["xid"] == 74


def test_a_kernel_log_nobody_may_read_is_unreadable_not_empty(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # What a user outside systemd-journal sees: no kernel lines, a hint on stderr, exit 0.
    _fake(bin_dir, "journalctl", "echo 'Hint: You are currently not seeing messages from other users and the "
                                 "system.' >&2\n")
    _fake(bin_dir, "dmesg", "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2\nexit 1\n")
    monkeypatch.setattr(kernel_log, "KMSG", str(tmp_path / "no-kmsg"))
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    found = kernel_log.probe(None, timeout=5.0)
    assert found["readable"] is False
    assert "journalctl -k -b: Hint: You are currently not seeing messages" in found["reason"]
    assert "dmesg: dmesg: read kernel buffer failed: Operation not permitted" in found["reason"]


@pytest.mark.skipif(not os.access("/dev/kmsg", os.R_OK), reason="/dev/kmsg is not readable here")
def test_this_machines_kmsg_is_read_without_blocking():
    started = time.monotonic()
    found = kernel_log.probe(None, timeout=5.0)
    assert found["readable"] and found["source"] == "/dev/kmsg"
    assert time.monotonic() - started < 5


def test_xid_lines_in_every_format():
    cases = {
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.":
            {"xid": 79, "pci": "0000:3b:00", "pid": "1234", "process": "python", "text": "GPU has fallen off the bus"},
        "[ 269.517039] NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007": {"xid": 3, "pci": "0000:01:00"},
        "kernel: NVRM: Xid (PCI:00000000:DB:00.0): 48, pid='<unknown>', name=<unknown>, DBE":
            {"xid": 48, "pci": "0000:db:00", "pid": "'<unknown>'"},
    }
    for line, expected in cases.items():
        event = kernel_log.parse_line(line)
        assert {k: event[k] for k in expected} == expected, line
    assert kernel_log.parse_line("NVRM: loading NVIDIA UNIX x86_64 Kernel Module 580.159.04") is None
    assert kernel_log.normal_pci("00000000:3B:00.0") == kernel_log.normal_pci("0000:3b:00") == "0000:3b:00"


def test_a_huge_log_keeps_only_the_newest_xids(tmp_path):
    log = tmp_path / "kern.log"
    lines = ["NVRM: Xid (PCI:0000:18:00): 13, pid=%d, name=python, Graphics Exception" % i for i in range(3000)]
    log.write_text("\n".join(lines + ["NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus."]) + "\n")
    found = kernel_log.probe(str(log))
    assert len(found["events"]) == kernel_log.MAX_EVENTS and found["truncated"]
    assert found["events"][-1]["xid"] == 79
    report = node("--nvml-fixture", HGX, "--kernel-log", str(log), "--select", "xid.node", expect_code=1)
    assert "(only the newest 1000 Xid lines were kept)" in report["results"][0]["message"]


def test_the_xid_catalogue_is_data_with_its_source():
    from preflight.knowledge import xid

    catalogue = xid.catalogue()
    for number in (13, 31, 43, 45):
        assert catalogue[number].kind == "application"
    for number in (48, 64, 74, 79, 95, 119, 120):
        assert catalogue[number].kind == "node"
    for number in (63, 92, 94):
        assert catalogue[number].kind == "watch"
    assert xid.describe(9999).kind == "watch" and "not in preflight's catalogue" in xid.describe(9999).name
    text = (FIXTURES.parent.parent / "rules" / "knowledge" / "xid.toml").read_text()
    assert 'source = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"' in text


# --- counters against the last check ------------------------------------------------------

def _gpu(replays=0, retired=(0, 0), nvlink=None):
    return {"uuid": "GPU-1", "index": 0, "pcie": {"replay_counter": replays},
            "retired_pages": {"single_bit": retired[0], "double_bit": retired[1]}, "nvlink": nvlink}


def test_rates_come_from_the_last_reading_on_this_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_CACHE_DIR", str(tmp_path))
    first = {"gpus": [_gpu(10, (2, 0), {"links": 18, "active": 18, "inactive": [],
                                         "errors": {"replay": 0, "recovery": 0, "crc_flit": 5, "crc_data": 0}})]}
    history.annotate(first, now=1000.0)
    assert "replay_rate_per_min" not in first["gpus"][0]["pcie"]  # nothing to compare with yet
    second = {"gpus": [_gpu(610, (3, 0), {"links": 18, "active": 18, "inactive": [],
                                          "errors": {"replay": 0, "recovery": 1, "crc_flit": 5, "crc_data": 0}})]}
    history.annotate(second, now=1300.0)  # five minutes later
    gpu = second["gpus"][0]
    assert gpu["pcie"]["replay_rate_per_min"] == 120.0
    assert gpu["retired_pages"]["previous_total"] == 2
    assert gpu["nvlink"]["errors_since_last"] == {"replay": 0, "recovery": 1, "crc_flit": 0, "crc_data": 0}
    from preflight.facts import node_health

    assert node_health.pcie(dict(gpu, pcie=dict(gpu["pcie"], current_width=16, max_width=16, current_generation=5,
                                                max_generation=5)))[0] == "replays_rising"
    assert node_health.retired_pages(gpu)[0] == "growing"
    assert node_health.nvlink(gpu, [gpu])[0] == "errors_rising"
    # A damaged history file is a first reading, not a crash.
    (tmp_path / history.FILE).write_text("{not json")
    (tmp_path / history.FILE).chmod(0o600)
    third = {"gpus": [_gpu(700)]}
    history.annotate(third, now=1400.0)
    assert "replay_rate_per_min" not in third["gpus"][0]["pcie"]


def test_a_replayed_machine_keeps_no_history(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_CACHE_DIR", str(tmp_path))
    collect.collect({"nvml", collect.NVML_HEALTH}, collect.Options(nvml_fixture=HGX))
    assert not (tmp_path / history.FILE).exists()


# --- integrations carry the results --------------------------------------------------------

def test_npd_puts_the_gpu_first_so_the_80_characters_keep_it():
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", FAULTS, "--format", "npd")
    line = completed.stdout.strip()
    assert completed.returncode == 1 and len(line) <= 80
    assert line.startswith("preflight: FAIL gpu2 gpu.pcie"), line


def test_nfd_and_prometheus_carry_the_node_health_rules():
    nfd = run_cli("check", "--profile", "node", "--nvml-fixture", FAULTS, "--format", "nfd").stdout
    assert "preflight.status.gpu.nvlink=fail" in nfd and "preflight.ready=false" in nfd
    metrics = run_cli("check", "--profile", "node", "--nvml-fixture", FAULTS, "--format", "prometheus").stdout
    assert re.search(r'^preflight_rule_status\{rule="gpu.fabric",subject="gpu4",severity="error",gpu="4",'
                     r'hostname="[^"]*",status="fail"\} 1$', metrics, re.M), metrics


def test_a_snapshot_without_the_kernel_log_skips_the_xid_rules():
    snapshot = json.loads(run_cli("facts", "--nvml-fixture", HGX).stdout)
    del snapshot["kernel_log"], snapshot["probes"]["kernel_log"]  # saved by a preflight that did not read it
    report = json.loads(run_cli("check", "--profile", "node", "--facts", "-", "--select", "xid", "--format", "json",
                                stdin=json.dumps(snapshot)).stdout)
    assert {r["status"] for r in report["results"]} == {"skip"} and report["ok"] is True
    assert "the kernel log was not read" in report["results"][0]["message"]


def test_a_captured_log_is_read_line_by_line_from_files_and_pipes(tmp_path):
    binary = tmp_path / "binary.log"
    binary.write_bytes(b"\x00\xff" * 200000 + b"\nNVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.\n")
    assert [e["xid"] for e in kernel_log.probe(str(binary))["events"]] == [79]
    pipe = tmp_path / "pipe.log"
    os.mkfifo(str(pipe))
    import threading

    def feed():
        with open(str(pipe), "w") as out:
            out.write((LOGS / "xid-74-nvlink.log").read_text())
    writer = threading.Thread(target=feed)
    writer.start()
    found = kernel_log.probe(str(pipe))  # as <(journalctl -k) gives it
    writer.join(5)
    assert [e["xid"] for e in found["events"]] == [74]
    folder = run_cli("check", "--profile", "node", "--kernel-log", str(tmp_path))
    assert folder.returncode == 2 and "--kernel-log" in folder.stderr
