"""One plan across every finding (preflight/fix_plan.py): its steps agree with each other, its pip lines are
transactions that cannot harm, and each fix says each thing once. The plan followed for real is
tests/test_fix_loop.py; here it is composed from constructed environments and recorded machines."""

from __future__ import annotations

import json
import shlex
import sys

from conftest import nvml_fixture, python_with_current_torch_wheels, run_cli

from preflight import fix_plan
from preflight.knowledge import pip_commands

PYTHON = "%d.%d" % sys.version_info[:2]


def report_of(*args: str) -> dict:
    completed = run_cli("check", "--format", "json", *args)
    assert completed.returncode in (0, 1), completed.stderr
    return json.loads(completed.stdout)


def requirement_names(command: str):
    words = shlex.split(command)
    start = words.index("install") + 1
    return [pip_commands.package_index.canonical(pip_commands._name(w)) for w in words[start:]
            if not w.startswith("-") and not words[words.index(w) - 1].startswith("--index")]


def test_no_package_twice_in_a_pip_line_and_no_sentence_twice_in_a_fix(fake_env, tmp_path):
    env = fake_env()
    env.add_torch(version="2.13.0+cpu", cuda=None)
    env.add_package("numpy", "2.4.1")
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("Pillow>=7.1.2\nnumpy>=1.18.5\nopencv-python>=4.1.1\nthop>=0.1.1\n")
    report = report_of("--python", env.python, "--nvml-fixture", "h200", "--requirements", str(requirements))
    for result in report["results"]:
        fix = result["fix"] or {"steps": [], "commands": []}
        assert len(fix["steps"]) == len(set(fix["steps"])), fix["steps"]
        for command in fix["commands"]:
            if "pip install" in command:
                names = requirement_names(command)
                assert len(names) == len(set(names)), command
    plan = report["plan"]
    commands = [c for step in plan["steps"] for c in step["run"]]
    for command in commands:
        assert len(requirement_names(command)) == len(set(requirement_names(command))), command
    pypi = [c for c in commands if "--index-url" not in c and "--no-deps" not in c]
    assert len(pypi) == 1, commands  # python.packages and python.requirements: one transaction
    assert "opencv-python-headless>=4.1.1" in pypi[0] and "'opencv-python>" not in pypi[0]
    assert pypi[0].count("Pillow") == 1 and pypi[0].count("numpy") == 1


def test_torch_only_packages_come_after_torch_with_no_deps(fake_env):
    env = fake_env()
    report = report_of("--python", env.python, "--nvml-fixture", "h200")
    commands = [c for step in report["plan"]["steps"] for c in step["run"]]
    torch = [i for i, c in enumerate(commands) if "download.pytorch.org" in c]
    thop = [i for i, c in enumerate(commands) if "thop" in c]
    assert torch and thop and thop[0] > torch[-1], commands
    assert commands[thop[0]].split(" -m pip install ")[1] == "--no-deps thop"
    first = commands[0]
    assert "thop" not in first and " torch" not in first and "torchvision" not in first, first


def test_a_reason_is_given_only_for_a_pin_the_line_keeps(fake_env):
    env = fake_env()
    env.add_torch()
    env.add_yolov9_packages(skip=("Pillow", "PIL"))
    packages = [r for r in report_of("--python", env.python, "--nvml-fixture", "h200", "--select",
                                     "python.packages")["results"] if r["id"] == "python.packages"][0]
    line = [c for c in packages["fix"]["commands"] if "pip install" in c][0]
    pinned = "'Pillow<10'" in line
    said = " ".join(packages["fix"]["steps"])
    assert ("Pillow<10: Pillow 10 removed" in said) == pinned, (line, said)
    assert said.count("Pillow 10 removed FreeTypeFont.getsize") <= 1


def test_headless_opencv_meets_a_requirement_for_opencv_python_and_says_so(fake_env, tmp_path):
    env = fake_env()
    env.add_package("opencv-python-headless", "4.12.0.88", "cv2")
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("opencv-python>=4.1.1\n")
    result = [r for r in report_of("--python", env.python, "--nvml-fixture", "h200", "--requirements",
                                   str(requirements), "--select", "python.requirements")["results"]][0]
    assert result["status"] == "pass", result
    assert "opencv-python is met by opencv-python-headless 4.12.0.88" in result["message"]


def test_numpy_2_beside_a_torch_older_than_2_3_is_pinned_below_2(fake_env):
    env = fake_env()
    env.add_torch(version="2.2.2+cu121", cuda="12.1")
    env.add_yolov9_packages(skip=("numpy",))
    env.add_package("numpy", "2.3.5")
    packages = [r for r in report_of("--python", env.python, "--nvml-fixture", "h200", "--select",
                                     "python.packages")["results"]][0]
    assert packages["status"] == "fail" and "numpy 2.3.5 does not satisfy <2" in packages["message"], packages
    assert any("Numpy is not available" in s for s in packages["fix"]["steps"])
    if pip_commands.package_index.installable("numpy<2", PYTHON):
        assert any("'numpy<2'" in c for c in packages["fix"]["commands"]), packages["fix"]
    else:  # NumPy 1.x has no wheel for this Python (3.13 on): no pip line that cannot succeed, and the way out
        assert not any("numpy" in c for c in packages["fix"]["commands"]), packages["fix"]
        assert any("where NumPy 1.x has wheels" in s for s in packages["fix"]["steps"]), packages["fix"]


def test_a_cpu_torch_beside_pypis_untagged_torchvision_is_named_with_and_without_a_gpu(fake_env):
    env = fake_env()
    env.add_torch(version="2.13.0+cpu", cuda=None)
    env.add_companion("torchvision", "0.28.0", "==2.13.0")  # PyPI's wheel as a stand-in build might carry it
    for fixture in ("h200", "no-library"):
        result = [r for r in report_of("--python", env.python, "--nvml-fixture", fixture, "--select",
                                       "torch.companions")["results"]][0]
        assert result["status"] == "fail", (fixture, result)
        assert "torchvision 0.28.0 is a CUDA 13.0 build (no local version tag: PyPI's CUDA 13.0 build for " \
               "linux_x86_64) beside torch 2.13.0+cpu" in result["message"], result["message"]


def test_no_printed_command_uninstalls(fake_env):
    env = fake_env()
    env.add_torch(version="2.13.0+cpu", cuda=None)
    env.add_companion("torchvision", "0.28.0+cu130", "==2.13.0")
    for fixture in ("h200", "rtx3060", "v100", "no-library"):
        report = report_of("--python", env.python, "--nvml-fixture", fixture)
        for result in report["results"]:
            for command in (result["fix"] or {}).get("commands", []):
                assert "uninstall" not in command, (fixture, result["id"], command)


def test_a_torch_of_the_chosen_release_but_another_build_is_pinned_with_the_index_tag(fake_env):
    env = fake_env(base_python=python_with_current_torch_wheels())
    env.add_torch(version="2.14.1+cpu", cuda=None)
    env.add_companion("torchvision", "0.29.1+cpu", ">=2.14.0")
    result = [r for r in report_of("--python", env.python, "--nvml-fixture", "h200", "--select",
                                   "torch.cuda")["results"]][0]
    # 'torch==2.14.*' would be "already satisfied" by 2.14.1+cpu: pip would keep the CPU build
    assert any("'torch==2.14.1+cu130' 'torchvision==0.29.1+cu130'" in c for c in result["fix"]["commands"]), result


def test_the_driver_step_says_which_driver_the_torch_after_it_is_for(fake_env):
    env = fake_env(base_python=python_with_current_torch_wheels())
    env.add_torch(version="2.13.0+cpu", cuda=None)
    report = report_of("--python", env.python, "--nvml-fixture", "rtx3060")
    steps = report["plan"]["steps"]
    assert steps[0]["where"] == ["driver.version"] and steps[0]["yours"] and not steps[0]["run"]
    torch = [s for s in steps if any("download.pytorch.org" in c for c in s["run"])][0]
    assert "cu126" in torch["run"][0]  # it runs on driver 525 now (minor-version compatibility) and after 580
    assert any("chosen for the driver as it is now (525.60.13)" in n and "torch 2.14 from cu130 is newer" in n
               for n in torch["notes"]), torch


def test_diagnose_gives_a_missing_torchvision_the_installed_cpu_torchs_pair(fake_env):
    env = fake_env(base_python=python_with_current_torch_wheels())
    env.add_torch(version="2.13.0+cpu", cuda=None)
    completed = run_cli("diagnose", "-", "--format", "json", "--python", env.python, "--nvml-fixture", "h200",
                        stdin="ModuleNotFoundError: No module named 'torchvision'\n")
    match = json.loads(completed.stdout)["matches"][0]
    assert match["id"] == "module.torch_companion_missing"
    assert match["fix"]["commands"] == ["%s -m pip install 'torch==2.13.*' 'torchvision==0.28.*' --index-url "
                                        "https://download.pytorch.org/whl/cpu" % env.python], match["fix"]


def test_merge_keeps_one_requirement_per_distribution_and_module():
    merged = pip_commands.merge_requirements(["numpy<2.4", "opencv-python-headless", "numpy<2", "Pillow",
                                              "opencv-python-headless>=4.1.1", "Pillow<10"])
    assert merged == ["numpy<2", "opencv-python-headless>=4.1.1", "Pillow<10"]


def test_steps_answered_by_another_are_told_with_it_and_only_by_a_shown_one():
    def finding(rule, order, answers=(), commands=()):
        return fix_plan.Finding(rule, rule, {"title": "fix " + rule, "steps": [], "commands": list(commands)},
                                order, tuple(answers))
    plan = fix_plan.compose([finding("driver.version", 90, ["cuda.compat"]),
                             finding("cuda.compat", 120, ["torch.companions"]),
                             finding("torch.companions", 155)], "/env/bin/python")
    assert [s.where for s in plan.steps] == [["driver.version", "cuda.compat"], ["torch.companions"]]


def test_the_readme_fix_example(tmp_path):
    """README's `preflight fix --dry-run` on a broken environment, printed for an environment built the same way."""
    import importlib.util

    from conftest import REPO, FakeEnvironment

    spec = importlib.util.spec_from_file_location("docs_examples", str(REPO / "scripts" / "docs_examples.py"))
    docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(docs)
    example = [e for e in docs.examples("README.md") if e.command.startswith("preflight fix ")][0]
    assert example.checked_by == "tests/test_fix_plan.py::test_the_readme_fix_example"
    env = FakeEnvironment(tmp_path / "yolov9", base_python=python_with_current_torch_wheels())
    env.add_torch(version="2.13.0+cpu", cuda=None)
    env.add_companion("torchvision", "0.28.0+cu130", "==2.13.0")
    env.add_yolov9_packages(skip=("torchvision", "numpy", "opencv-python-headless", "thop"))
    env.add_package("numpy", "2.4.1")
    shown = "/home/me/envs/yolov9/bin/python"
    words = docs.argv(example)
    words[words.index(shown)] = env.python
    printed = run_cli(*words[1:], env={"COLUMNS": "100"}).stdout.replace(env.python, shown)
    assert docs.matches(example.output, printed.rstrip("\n").split("\n")), printed
