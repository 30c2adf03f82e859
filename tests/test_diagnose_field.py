"""diagnose on text it has never seen: families, never a harmful fix, whose facts, through the real CLI.

Real texts come from tests/corpus-field (each with its public source); the platform variations (a RHEL
host, Colab, WSL) are real messages with the platform's own lines added, as such logs show them.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import REPO, nvml_fixture, run_cli

from preflight.engine import loader

FIELD = REPO / "tests" / "corpus-field"


def diagnose(text, *args, env=None):
    completed = run_cli("diagnose", "-", "--format", "json", *args, stdin=text, env=env)
    assert completed.returncode in (0, 1), completed.stderr
    return json.loads(completed.stdout)


def field(name):
    """A text of tests/corpus-field by its name, or of another corpus by its folder and name."""
    return ((FIELD.parent / name) if "/" in name else (FIELD / name)).read_text(encoding="utf-8")


def first(report):
    assert report["matches"], report
    return report["matches"][0]


def fix_text(match):
    return "\n".join(match["fix"]["steps"] + match["fix"]["commands"])


def everything_printed(report):
    return "\n".join(fix_text(m) + "\n" + "\n".join(m["context"]) for m in report["matches"])


# --- never harmful --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["30-models-yolo-yolov5-68.txt", "31-models-boxmot-70.txt", "32-models-yolov3-1642.txt",
                                  "33-models-socialdist-1.txt"])
def test_a_repositorys_own_package_is_never_a_pip_name(name):
    report = diagnose(field(name), "--no-facts")
    match = first(report)
    assert match["id"] == "module.repository_package"
    printed = everything_printed(report)
    assert not re.search(r"pip3? install[^\n]*\b(models|utils)\b", printed), printed
    assert "PYTHONPATH" in printed


def test_a_missing_module_gets_pip_only_with_a_known_distribution_name():
    known = first(diagnose("ModuleNotFoundError: No module named 'cv2'\n", "--no-facts"))
    assert "opencv-python" in fix_text(known)
    unknown = first(diagnose("ModuleNotFoundError: No module named 'frobnicator_tools'\n", "--no-facts"))
    assert "pip install" not in fix_text(unknown)
    assert "does not know which package provides" in fix_text(unknown)


WINDOWS_TOO_OLD = (
    'Traceback (most recent call last):\n  File "C:\\Users\\me\\yolov9\\train_dual.py", line 644, in <module>\n'
    "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver "
    "by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, "
    "go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA "
    "driver.\n")


def test_a_windows_log_gets_no_linux_package_commands():
    report = diagnose(WINDOWS_TOO_OLD, "--no-facts")
    assert report["from_log"].get("os") == "windows"
    printed = everything_printed(report)
    for linux_only in ("apt", "ubuntu-drivers", "dnf ", "sudo ", "modprobe"):
        assert linux_only not in printed, (linux_only, printed)
    # The same failure on Linux does get the packaged driver.
    linux = everything_printed(diagnose(WINDOWS_TOO_OLD.replace("C:\\Users\\me\\yolov9\\", "/home/me/yolov9/"),
                                        "--no-facts"))
    assert "driver" in linux


def test_a_windows_log_gets_windows_steps():
    report = diagnose(field("01-winerror1455-yolov5-11418.txt"), "--no-facts")
    match = first(report)
    assert match["id"] == "windows.paging_file"
    assert "paging file" in fix_text(match) and "apt" not in fix_text(match)
    # A YOLOv5 log gets no YOLOv9 train_dual.py line.
    assert "train_dual" not in everything_printed(report)


NO_MODULE = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
             "NVIDIA driver is installed and running.\n")


def test_rhel_gets_dnf_and_never_ubuntu_drivers():
    rhel = "Linux gpu01 5.14.0-427.13.1.el9_4.x86_64 #1 SMP x86_64 GNU/Linux\n" + NO_MODULE
    printed = everything_printed(diagnose(rhel, "--no-facts"))
    assert "ubuntu-drivers" not in printed and "apt" not in printed
    assert "dnf" in printed or "dracut" in printed or "modprobe" in printed, printed


def test_a_driver_too_old_on_rhel_names_its_tools():
    text = 'NAME="Rocky Linux"\n' + WINDOWS_TOO_OLD.replace("C:\\Users\\me\\yolov9\\", "/home/me/yolov9/")
    report = diagnose(text, "--no-facts")
    assert report["from_log"].get("distro") == "rhel"
    printed = everything_printed(report)
    assert "ubuntu-drivers" not in printed and "apt-get" not in printed


def test_colab_gets_no_driver_upgrade():
    text = "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:118\n" \
           "File \"/content/yolov9/train_dual.py\", line 12\n" + WINDOWS_TOO_OLD.split("\n", 2)[2]
    report = diagnose(text, "--no-facts")
    assert report["from_log"].get("managed") == "colab", report["from_log"]
    match = first(report)
    steps = " ".join(match["fix"]["steps"])
    assert "cannot be upgraded" in steps
    assert "Upgrade the driver" not in steps and "Upgrade the NVIDIA driver" not in steps
    assert not any("ubuntu-drivers" in c or "reboot" in c for c in match["fix"]["commands"])


def test_wsl_upgrades_the_windows_driver():
    text = "Linux DESKTOP-1 5.15.153.1-microsoft-standard-WSL2 #1 SMP x86_64 GNU/Linux\n" + \
        WINDOWS_TOO_OLD.replace("C:\\Users\\me\\yolov9\\", "/home/me/yolov9/")
    match = first(diagnose(text, "--no-facts"))
    steps = " ".join(match["fix"]["steps"])
    assert "driver in Windows" in steps
    assert not any("ubuntu-drivers" in c or "apt-get" in c for c in match["fix"]["commands"])


@pytest.mark.parametrize("library, module, says", [
    ("550.127.05", "535.183.01", "The libraries are newer"),
    ("535.183.01", "550.127.05", "The libraries are older"),
])
def test_driver_library_mismatch_in_both_directions_with_the_logs_versions(library, module, says):
    text = ("Failed to initialize NVML: Driver/library version mismatch\n"
            "[ 12.3] NVRM: API mismatch: the client has the version %s, but\n"
            "NVRM: this kernel module has the version %s.  Please\n" % (library, module))
    match = first(diagnose(text, "--no-facts"))
    assert match["id"] == "nvml.driver_library_mismatch"
    text = fix_text(match)
    assert "The loaded kernel module is %s and the user-space libraries (libcuda, libnvidia-ml) are %s" % (
        module, library) in text
    assert says in text
    # The reboot already happened and the mismatch stayed: finish the half-done upgrade.
    assert "still there after a reboot" in text and "sudo apt --fix-broken install" in text


def test_driver_library_mismatch_without_versions_covers_both_directions():
    match = first(diagnose(field("64-mismatch-opengpu-47.txt"), "--no-facts"))
    text = fix_text(match)
    assert "libraries are newer" in text and "libraries are older" in text


def test_driver_too_old_names_the_logs_driver_and_the_archived_torch_for_it():
    text = ("| NVIDIA-SMI 418.87.01    Driver Version: 418.87.01    CUDA Version: 10.1     |\n"
            "YOLOv5 🚀 v7.0 Python-3.8.10 torch-1.13.1+cu117 CUDA:0 (Tesla V100-SXM2-16GB, 16160MiB)\n"
            + WINDOWS_TOO_OLD.split("\n", 2)[2].replace("11040", "10010"))
    match = first(diagnose(text, "--no-facts"))
    printed = fix_text(match) + "\n".join(match["context"])
    assert "driver 418.87.01 supports CUDA 10.1 at most" in printed
    assert "torch 1.8.1+cu101 with torchvision 0.9.1+cu101" in printed
    assert "-f https://download.pytorch.org/whl/torch_stable.html" in printed


@pytest.mark.parametrize("code, torch, python", [("10000", "1.7.1+cu92", "3.8"), ("10000", "1.2.0", "3.5"),
                                                 ("9020", "1.7.1+cu92", None)])
def test_the_archived_torch_fits_the_drivers_cuda_and_the_python(code, torch, python):
    banner = "YOLOv5 🚀 v7.0 Python-%s.10 torch-1.13.1+cu117 CUDA:0 (Tesla V100-SXM2-16GB, 16160MiB)\n" % python \
        if python else ""
    text = banner + WINDOWS_TOO_OLD.split("\n", 2)[2].replace("11040", code)
    assert "torch %s with" % torch in fix_text(first(diagnose(text, "--no-facts")))


def test_the_archived_builds_exist_for_the_pythons_they_claim():
    from preflight.knowledge import package_index, torch_wheels

    for build in torch_wheels.catalog().archived:
        release = build.torch.split("+")[0]
        for python in build.pythons:
            for package, version in (("torch", release), ("torchvision", build.torchvision.split("+")[0])):
                record = package_index.releases(package)[version]
                assert "%d.%d" % python in record["wheels"]["linux_x86_64"], (package, version, python)


def test_mig_gets_one_instance_per_process():
    match = first(diagnose(field("55-mig-pytorch-130181.txt"), "--no-facts"))
    assert match["id"] == "cuda.mig_one_instance"
    assert "MIG-" in fix_text(match) and "CUDA_VISIBLE_DEVICES" in fix_text(match)


def test_loading_a_cuda_checkpoint_without_a_gpu_gets_map_location_not_a_driver_install():
    for name in ("34-maplocation-dhlive-22.txt", "35-maplocation-cutie-37.txt", "36-maplocation-cyclegan-10.txt"):
        report = diagnose(field(name), "--no-facts")
        match = first(report)
        assert "map_location='cpu'" in fix_text(match), name
        assert "ubuntu-drivers" not in everything_printed(report)
    # On a machine known to have no GPU, only the CPU advice.
    no_gpu = diagnose(field("34-maplocation-dhlive-22.txt"), "--facts-from", "machine",
                      "--nvml-fixture", nvml_fixture("no-library.json"))
    assert "map_location='cpu'" in fix_text(first(no_gpu))


def test_example_commands_come_from_the_logs_program():
    text = ('Traceback (most recent call last):\n  File "/home/me/proj/tools/finetune.py", line 88, in <module>\n'
            "RuntimeError: CUDA error: device-side assert triggered\n")
    report = diagnose(text, "--no-facts")
    assert report["from_log"].get("program") == "tools/finetune.py" or "finetune.py" in report["from_log"].get("program", "")
    printed = everything_printed(report)
    assert "train_dual" not in printed and "finetune.py" in printed
    yolov9 = everything_printed(diagnose(text.replace("/home/me/proj/tools/finetune.py", "/home/me/yolov9/train_dual.py"),
                                         "--no-facts"))
    assert "train_dual.py" in yolov9


def test_weights_only_says_yolov9_only_for_yolov9():
    message = ("_pickle.UnpicklingError: Weights only load failed. This file can still be loaded, to do so you have "
               "two options, do those steps only if you trust the source of the checkpoint.\n")
    other = everything_printed(diagnose('  File "/srv/app/serve.py", line 3, in <module>\n' + message, "--no-facts"))
    assert "YOLOv9" not in other
    yolo = everything_printed(diagnose('  File "/home/me/yolov9/detect_dual.py", line 3, in <module>\n' + message,
                                       "--no-facts"))
    assert "YOLOv9 checkpoints" in yolo


def test_no_step_shows_escapes_copied_from_a_log():
    for path in sorted(FIELD.glob("*.txt")):
        report = diagnose(path.read_text(encoding="utf-8"), "--no-facts")
        for match in report["matches"]:
            for line in match["fix"]["steps"] + match["fix"]["commands"] + match["context"]:
                assert "\\'" not in line and '\\"' not in line and "\\n" not in line, (path.name, line)


# --- families -------------------------------------------------------------------------------------------------

def source_of(name):
    for line in field(name).splitlines()[:6]:
        if line.startswith("# source:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("no source in %s" % name)


def _expected(name):
    return next(line.split(":", 1)[1].strip() for line in field(name).splitlines()[:6] if line.startswith("# expect:"))


def family_texts():
    """Every failure family of the catalog -> the public texts whose header expects it (``family`` or ``family/row``),
    from tests/corpus-field and tests/corpus-heldout: a new family is covered only when texts for it are there."""
    families = loader.load(failures=True).families
    found = {family: [] for family in families}
    for folder in (FIELD, FIELD.parent / "corpus-heldout"):
        for path in sorted(folder.glob("*.txt")):
            name = path.name if folder == FIELD else "%s/%s" % (folder.name, path.name)
            expected = _expected(name).split("/", 1)[0]
            if expected in found and "\n# missed:" not in field(name):
                found[expected].append(name)
    return found


def test_every_family_has_real_texts_from_two_public_sources():
    thin = {family: names for family, names in family_texts().items() if len({source_of(n) for n in names}) < 2}
    assert not thin, "families without texts from two public sources in tests/corpus-field or -heldout: %s" % thin


@pytest.mark.parametrize("family", sorted(family_texts()))
def test_each_family_recognises_its_real_texts(family):
    for name in family_texts()[family]:
        report = diagnose(field(name), "--no-facts")
        found = [m for m in report["matches"] if m["id"] == family]
        assert found, (name, [m["key"] for m in report["matches"]])
        match = found[0]
        assert match["confidence"] == "family" and match["key"].startswith(family + "/")
        assert match["family"]["source"].startswith("http") and match["family"]["row"]
        assert match["fix"]["steps"], match


def test_a_family_finding_is_said_to_be_less_certain_and_what_it_could_not_tell():
    text = "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable\n"
    shown = run_cli("diagnose", "-", "--no-facts", stdin=text).stdout
    assert "a family, less certain than a known failure" in shown
    report = diagnose(text, "--no-facts")
    assert first(report)["key"] == "cuda.runtime_error/cudaErrorDevicesUnavailable"


def test_a_known_failure_on_the_same_line_wins_over_a_family():
    report = diagnose("RuntimeError: CUDA error: out of memory\n", "--no-facts")
    assert first(report)["confidence"] == "known"
    assert all(m["confidence"] == "known" for m in report["matches"])


def test_explain_shows_a_family_and_one_row():
    family = run_cli("explain", "cuda.runtime_error")
    assert family.returncode == 0 and "a family of failures" in family.stdout and "rows" in family.stdout
    row = run_cli("explain", "cuda.runtime_error/cudaErrorNoDevice")
    assert row.returncode == 0 and "cudaErrorNoDevice" in row.stdout
    missing = run_cli("explain", "cuda.runtime_error/cudaErrorNotAThing")
    assert missing.returncode == 2


# --- whose facts ----------------------------------------------------------------------------------------------

H200 = "h200-driver580.json"
RTX3060_LOG = ("YOLOv5 🚀 v7.0 Python-3.8.10 torch-2.5.1+cu124 CUDA:0 (NVIDIA GeForce RTX 3060, 12042MiB)\n"
               "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 11.76 GiB total "
               "capacity; 10.91 GiB already allocated; 3.06 MiB free; 11.01 GiB reserved in total by PyTorch)\n")


def header(text, *args):
    return run_cli("diagnose", "-", *args, stdin=text).stdout.splitlines()[1]


def test_the_header_says_whose_facts_were_used():
    assert header(RTX3060_LOG, "--no-facts") == "facts: from the log (this machine not looked at: --facts-from log)"
    plain = "RuntimeError: CUDA error: out of memory\n"
    assert header(plain, "--nvml-fixture", nvml_fixture(H200)).startswith("facts: this machine (")
    assert header(plain, "--facts-from", "log").startswith("facts: none")


def test_a_log_from_another_machine_keeps_this_machines_facts_out_and_says_why():
    report = diagnose(RTX3060_LOG, "--nvml-fixture", nvml_fixture(H200))
    assert report["facts"]["whose"] == "log"
    assert "RTX 3060" in report["facts"]["why"] and "H200" in report["facts"]["why"]
    assert "H200" not in everything_printed(report)
    # --facts-from machine overrides the contradiction.
    forced = diagnose(RTX3060_LOG, "--nvml-fixture", nvml_fixture(H200), "--facts-from", "machine")
    assert forced["facts"]["whose"] == "machine"


def test_the_site_configuration_sets_whose_facts(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[defaults]\nfacts_from = "log"\n')
    plain = "RuntimeError: CUDA error: out of memory\n"
    assert header(plain, "--config", str(config), "--nvml-fixture", nvml_fixture(H200)).startswith("facts: none")
    # The command line wins over the file.
    assert header(plain, "--config", str(config), "--nvml-fixture", nvml_fixture(H200), "--facts-from",
                  "machine").startswith("facts: this machine (")
    config.write_text('[defaults]\nfacts_from = "lgo"\n')
    bad = run_cli("diagnose", "-", "--config", str(config), stdin=plain)
    assert bad.returncode == 2 and "facts_from" in bad.stderr and "Traceback" not in bad.stderr


def test_no_facts_and_facts_from_cannot_contradict():
    completed = run_cli("diagnose", "-", "--no-facts", "--facts-from", "machine", stdin="x\n")
    assert completed.returncode == 2 and "contradict" in completed.stderr
