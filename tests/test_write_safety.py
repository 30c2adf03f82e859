"""Every file preflight writes goes through one link policy; the cache is the user's own and keyed by what it
describes. Links are planted as an attacker would: in a sticky, world-writable folder owned by another user,
owned by that user (this needs root, as CI runs; elsewhere these tests skip and say why)."""

from __future__ import annotations

import json
import os
import stat
import time

import pytest
from conftest import nvml_fixture, run_cli
from test_serve import Server

H200 = nvml_fixture("h200-driver580.json")
OTHER = 65534  # nobody

needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="planting a link owned by another user needs root (CI runs as root)")


@pytest.fixture
def shared(tmp_path):
    """A folder like /tmp or a shared drop folder: sticky, world-writable, owned by another user; and a victim: a
    0600 root-owned file elsewhere."""
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chown(str(folder), OTHER, OTHER)
    folder.chmod(0o1777)
    victim = tmp_path / "private" / "secret"
    victim.parent.mkdir()
    victim.write_text("root's own\n")
    victim.chmod(0o600)
    return folder, victim


def plant(link, target, owner: int = OTHER) -> None:
    os.symlink(str(target), str(link))
    os.lchown(str(link), owner, owner)


@needs_root
def test_output_never_follows_a_planted_link_to_replace_a_file(shared):
    folder, victim = shared
    plant(folder / "report.json", victim)
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--format", "json",
                        "--output", str(folder / "report.json"))
    assert completed.returncode == 2, completed.stderr
    assert "symbolic link owned by user 65534" in completed.stderr and "nothing was written" in completed.stderr
    assert "Traceback" not in completed.stderr
    assert victim.read_text() == "root's own\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert os.path.islink(str(folder / "report.json"))  # left as it was


@needs_root
def test_output_never_creates_a_file_where_a_planted_link_dangles(shared, tmp_path):
    folder, _ = shared
    wanted = tmp_path / "private" / "created-by-root"
    plant(folder / "features", wanted)
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--format", "nfd",
                        "--output", str(folder / "features"))
    assert completed.returncode == 2 and "does not follow it" in completed.stderr
    assert not wanted.exists()


@needs_root
def test_a_planted_link_to_a_folder_on_the_way_is_refused_too(shared, tmp_path):
    folder, _ = shared
    elsewhere = tmp_path / "private"
    plant(folder / "reports", elsewhere)
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--format", "json",
                        "--output", str(folder / "reports" / "node.json"))
    assert completed.returncode == 2 and "reports is a symbolic link owned by user 65534" in completed.stderr
    assert not (elsewhere / "node.json").exists()


@needs_root
def test_a_link_root_owns_in_a_shared_folder_is_followed_and_stays_a_link(shared, tmp_path):
    folder, _ = shared
    target = tmp_path / "private" / "node.prom"
    plant(folder / "node.prom", target, owner=0)
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--format", "prometheus",
                        "--output", str(folder / "node.prom"))
    assert completed.returncode == 0, completed.stderr
    assert "preflight_ok" in target.read_text() and os.path.islink(str(folder / "node.prom"))


@needs_root
def test_serve_never_writes_the_nfd_file_through_a_planted_link(shared):
    folder, victim = shared
    plant(folder / "preflight", victim)
    server = Server("--profile", "node", "--nvml-fixture", H200, "--interval", "60s",
                    "--nfd-output", str(folder / "preflight"))
    try:
        server.wait_for_check()
        status, body, _ = server.get("/healthz")
        assert status == 200, body  # the check itself is served; only the side output is refused
    finally:
        server.stop()
    assert victim.read_text() == "root's own\n"
    assert "does not follow it" in server.said


@needs_root
def test_exec_never_truncates_a_file_through_a_planted_termination_log_link(shared):
    folder, victim = shared
    plant(folder / "termination-log", victim)
    bad = nvml_fixture("2x-a100-40g-driver550-ecc.json")
    completed = run_cli("exec", "--profile", "node", "--nvml-fixture", bad, "--set", "gpu.count.min=4",
                        "--termination-log", str(folder / "termination-log"), "--", "true")
    assert completed.returncode == 78, completed.stderr
    assert victim.read_text() == "root's own\n"
    assert "does not follow it" in completed.stderr


def test_exec_writes_the_termination_log_only_into_a_regular_file(tmp_path):
    bad = nvml_fixture("2x-a100-40g-driver550-ecc.json")
    fifo = tmp_path / "fifo"
    os.mkfifo(str(fifo))
    completed = run_cli("exec", "--profile", "node", "--nvml-fixture", bad, "--set", "gpu.count.min=4",
                        "--termination-log", str(fifo), "--", "true")
    assert completed.returncode == 78  # no reader on the FIFO: nothing blocks, nothing written
    log = tmp_path / "termination-log"
    log.write_text("x" * 5000)
    completed = run_cli("exec", "--profile", "node", "--nvml-fixture", bad, "--set", "gpu.count.min=4",
                        "--termination-log", str(log), "--", "true")
    assert completed.returncode == 78
    assert log.read_text().startswith("preflight: not starting true: gpu.count") and len(log.read_text()) < 300


# --- the cache ---------------------------------------------------------------------------------------------

def _arch_check(env, cache, *extra):
    return run_cli("check", "--python", env.python, "--select", "torch.arch", "--format", "json",
                   "--nvml-fixture", H200, *extra, env={"PREFLIGHT_CACHE_DIR": str(cache)})


def test_a_rewritten_torch_arch_entry_cannot_turn_a_failure_into_a_pass(tmp_path, fake_env):
    env = fake_env()
    env.add_torch(version="2.5.1+cu118", cuda="11.8", arch_flags="sm_50 sm_60 sm_70 sm_75 sm_80 sm_86")
    cache = tmp_path / "cache"
    first = _arch_check(env, cache)
    assert json.loads(first.stdout)["results"][0]["status"] == "fail", first.stdout  # no sm_90 for the H200
    path = cache / "torch-arch-flags.json"
    entries = json.loads(path.read_text())
    (key, entry), = entries.items()
    for forged in ({key: dict(entry, flags=entry["flags"] + ["sm_90"])},  # the hash no longer fits
                   {key: ["sm_90"]},  # the old format
                   {key.replace(env.python, "/usr/bin/python3"): dict(entry, flags=["sm_90"])}):  # another key
        path.write_text(json.dumps(forged))
        again = _arch_check(env, cache)
        assert json.loads(again.stdout)["results"][0]["status"] == "fail", (forged, again.stdout)


def test_the_torch_arch_entry_is_keyed_by_the_interpreter_and_torch_files(tmp_path, fake_env):
    from preflight.probes import torch_arch

    env = fake_env()
    env.add_torch()
    location = str(env.site / "torch")
    facts = {"location": location, "version": "2.11.0", "extension": {"size": 64, "mtime_ns": 1}}
    key = torch_arch.cache_key(facts, env.python)
    assert os.path.realpath(env.python) in key and torch_arch.cache_key(facts, "/usr/bin/python3") != key
    time.sleep(0.01)
    (env.site / "torch" / "version.py").write_text("__version__ = '2.11.0'\ncuda = '13.0'\n")  # reinstalled
    assert torch_arch.cache_key(facts, env.python) != key


def test_a_cache_folder_owned_by_someone_else_turns_caching_off_with_one_warning(tmp_path, fake_env):
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("a folder owned by another user needs root to make (CI runs as root)")
    env = fake_env()
    env.add_torch(import_log=tmp_path / "imports.log")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    os.chown(str(cache), OTHER, OTHER)
    first = _arch_check(env, cache)
    assert first.returncode == 0, first.stderr
    assert first.stderr.count("not using the cache folder") == 1 and "belongs to user 65534" in first.stderr
    assert os.listdir(str(cache)) == []
    _arch_check(env, cache)
    assert len((tmp_path / "imports.log").read_text().split()) == 2  # nothing cached: asked twice


def test_a_cache_folder_that_is_a_link_is_not_used(tmp_path, fake_env):
    env = fake_env()
    env.add_torch()
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "cache"
    link.symlink_to(real)
    completed = _arch_check(env, link)
    assert completed.returncode == 0 and "it is a symbolic link; caching is off" in completed.stderr
    assert os.listdir(str(real)) == []


def test_a_cache_folder_of_ours_that_others_can_read_is_made_private(tmp_path, fake_env):
    env = fake_env()
    env.add_torch()
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    completed = _arch_check(env, cache)
    assert completed.returncode == 0 and "not using the cache" not in completed.stderr
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700 and os.listdir(str(cache)) == ["torch-arch-flags.json"]


# --- a folder's owner or its group can plant links too (third round) ---------------------------------------------

@needs_root
@pytest.mark.parametrize("owner, mode", [(OTHER, 0o755), (0, 0o775)])
def test_a_report_folder_anyone_else_can_write_never_gets_its_planted_link_followed(tmp_path, owner, mode):
    """A 0755 folder another user owns, or a 0775 one a group can write: the report replaces the planted link
    itself; the root-only file it points to is untouched, and a dangling one creates nothing."""
    folder = tmp_path / "reports"
    folder.mkdir()
    victim = tmp_path / "secret"
    victim.write_text("root's own\n")
    victim.chmod(0o600)
    host = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--format", "json").stdout
    name = json.loads(host)["host"] + ".json"
    plant(folder / name, victim)
    os.chown(str(folder), owner, owner)
    folder.chmod(mode)
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--report-dir", str(folder))
    assert completed.returncode == 0, completed.stderr
    assert victim.read_text() == "root's own\n"
    assert not os.path.islink(str(folder / name)) and json.loads((folder / name).read_text())["schema"]
    # --output follows a link only where nobody else could have put it.
    plant(folder / "out.json", tmp_path / "created-by-root")
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--output", str(folder / "out.json"))
    assert not (tmp_path / "created-by-root").exists()
    assert "symbolic link owned by user 65534" in completed.stderr and "nothing was written" in completed.stderr


@needs_root
def test_an_existing_report_is_replaced_by_a_file_of_the_writers_own(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    name = json.loads(run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--format",
                              "json").stdout)["host"] + ".json"
    old = folder / name
    old.write_text("{}")
    os.chown(str(old), OTHER, OTHER)
    old.chmod(0o6777)
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--report-dir", str(folder))
    assert completed.returncode == 0, completed.stderr
    info = old.stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode) & 0o7111) == (os.geteuid(), 0), (info.st_uid, oct(info.st_mode))
    assert stat.S_IMODE(info.st_mode) == 0o644  # nothing of the planted file's 0666: no one else can rewrite it


@needs_root
def test_a_report_in_a_shared_sticky_folder_never_takes_a_planted_files_mode(shared):
    """Round 3's case: in a sticky folder anyone can write, another user plants HOST.json (and out.json) with
    mode 0666; root's report replaces each with a file of its own, 0644, that the planter cannot rewrite."""
    folder, _ = shared
    name = json.loads(run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--format",
                              "json").stdout)["host"] + ".json"
    for planted in (folder / name, folder / "out.json"):
        planted.write_text("{}")
        os.chown(str(planted), OTHER, OTHER)
        planted.chmod(0o666)
    assert run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--report-dir", str(folder),
                   "--output", str(folder / "out.json")).returncode == 0
    for written in (folder / name, folder / "out.json"):
        info = written.stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o644), (written, info.st_uid, oct(info.st_mode))
    # A report of the writer's own keeps the mode its owner gave it (here: private).
    (folder / name).chmod(0o600)
    assert run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--report-dir", str(folder)).returncode == 0
    assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600


def test_a_report_that_cannot_be_written_keeps_the_checks_own_exit_code(tmp_path):
    failing = nvml_fixture("2x-a100-40g-driver550-ecc.json")
    for fixture, code in ((failing, 1), (H200, 0)):
        completed = run_cli("check", "--profile", "node", "--nvml-fixture", fixture, "--output", "/dev/full")
        assert completed.returncode == code, completed.stderr
        assert "the report was not written" in completed.stderr and "verdict stands (exit %d)" % code in completed.stderr
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", failing, "--report-dir",
                        str(tmp_path / "no-such-folder"))
    assert completed.returncode == 1 and "the report was not kept" in completed.stderr


def test_an_explicit_termination_log_is_created_when_missing(tmp_path):
    log = tmp_path / "why"
    completed = run_cli("exec", "--profile", "node", "--nvml-fixture", nvml_fixture("2x-a100-40g-driver550-ecc.json"),
                        "--set", "gpu.count.min=4", "--termination-log", str(log), "--", "true")
    assert completed.returncode == 78 and log.read_text().startswith("preflight: not starting true")
    assert stat.S_IMODE(log.stat().st_mode) == 0o644


# --- nothing another user could have written in the cache is believed (third round) -------------------------------

def _forge_a_pass(cache):
    """Rewrite the torch-arch entry as a planter would: flags with sm_90 and a digest that fits them."""
    from preflight.probes import torch_arch

    path = cache / "torch-arch-flags.json"
    (key, entry), = json.loads(path.read_text()).items()
    flags = entry["flags"] + ["sm_90"]
    path.write_text(json.dumps({key: {"flags": flags, "digest": torch_arch.digest(key, flags)}}))
    return path


def _status(completed):
    return json.loads(completed.stdout)["results"][0]["status"]


@pytest.fixture
def arch_env(tmp_path, fake_env):
    env = fake_env()
    env.add_torch(version="2.5.1+cu118", cuda="11.8", arch_flags="sm_50 sm_60 sm_70 sm_75 sm_80 sm_86")
    cache = tmp_path / "cache"
    assert _status(_arch_check(env, cache)) == "fail"  # no sm_90 for the H200; the answer is now cached
    return env, cache


def test_a_loosened_cache_folder_is_emptied_before_use(arch_env):
    env, cache = arch_env
    forged = _forge_a_pass(cache)
    forged.chmod(0o600)
    cache.chmod(0o777)  # anyone could have written the entry while the folder was open
    completed = _arch_check(env, cache)
    assert _status(completed) == "fail", completed.stdout
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700


def test_a_cache_entry_that_is_not_this_users_private_file_is_not_believed(arch_env):
    env, cache = arch_env
    forged = _forge_a_pass(cache)
    forged.chmod(0o666)  # ours, but anyone could have rewritten it
    assert _status(_arch_check(env, cache)) == "fail"
    if os.geteuid() == 0:
        forged = _forge_a_pass(cache)
        forged.chmod(0o600)
        os.chown(str(forged), OTHER, OTHER)  # someone else's file in our folder
        assert _status(_arch_check(env, cache)) == "fail"
    # The entry itself may not be a link either (to a file that says what the planter wants).
    elsewhere = cache.parent / "elsewhere.json"
    forged = _forge_a_pass(cache)
    os.replace(str(forged), str(elsewhere))
    forged.symlink_to(elsewhere)
    assert _status(_arch_check(env, cache)) == "fail"


@pytest.mark.parametrize("damage", ["fifo", "folder", "huge", "deep", "list", "string", "nan", "bytes", "empty"])
def test_a_damaged_cache_entry_of_any_size_or_type_is_a_miss(arch_env, damage):
    env, cache = arch_env
    path = cache / "torch-arch-flags.json"
    path.unlink()
    if damage == "fifo":
        os.mkfifo(str(path), 0o600)  # a read would wait for a writer forever
    elif damage == "folder":
        path.mkdir(mode=0o700)
    elif damage == "huge":
        with open(str(path), "wb") as out:
            out.truncate(200 << 20)  # sparse: 200 MB of NUL claimed, nothing on disk
    else:
        path.write_bytes({"deep": b"[" * 200000 + b"]" * 200000, "list": b"[1, 2, 3]", "string": b'"sm_90"',
                          "nan": b"NaN", "bytes": os.urandom(4096), "empty": b""}[damage])
    if not path.is_dir():
        path.chmod(0o600)
    started = time.monotonic()
    completed = _arch_check(env, cache)
    assert time.monotonic() - started < 30
    assert completed.returncode == 1 and _status(completed) == "fail", (completed.returncode, completed.stderr)
    assert "Traceback" not in completed.stderr


@pytest.mark.parametrize("content", [b"[]", b'{"gpu07": "drained"}', b'{"gpu07": {"reason": 5}}', b"\xff\xfe",
                                     b"[" * 100000])
def test_a_damaged_drain_record_is_no_record(tmp_path, monkeypatch, content):
    from preflight.integrations.slurm import DrainRecord

    monkeypatch.setenv("PREFLIGHT_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir(mode=0o700)
    entry = tmp_path / "cache" / DrainRecord.FILE
    entry.write_bytes(content)
    entry.chmod(0o600)
    record = DrainRecord()
    assert record.kept and record.reason("gpu07") is None
    record.set("gpu07", "preflight: test")
    assert DrainRecord().reason("gpu07") == "preflight: test"
