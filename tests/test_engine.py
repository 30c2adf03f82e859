"""The pure layers: sizes, comparisons, templates and rule selection."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

from preflight import units
from preflight.engine import compare, loader, selection, template
from preflight.errors import SelectionError

MIB = 2**20


# --- units ----------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [
    ("12GB", 12 * 10**9), ("16GiB", 16 * 2**30), ("512MiB", 512 * MIB), ("1.5GB", 1500 * 10**6),
    ("64M", 64 * 10**6), ("0", 0), (1024, 1024), ("8 gb", 8 * 10**9), ("1TB", 10**12),
])
def test_parse_bytes(text, value):
    assert units.parse_bytes(text) == value


@pytest.mark.parametrize("text", ["twelve", "12XB", "-1GB", "", "GB", True, -5, "1.2.3GB"])
def test_parse_bytes_rejects(text):
    with pytest.raises(ValueError):
        units.parse_bytes(text)


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["GB", "GiB", "MB", "MiB", "kB", "KiB"]))
def test_parse_bytes_scales_whole_numbers_exactly(number, unit):
    factor = {"GB": 10**9, "GiB": 2**30, "MB": 10**6, "MiB": 2**20, "kB": 10**3, "KiB": 2**10}[unit]
    assert units.parse_bytes("%d%s" % (number, unit)) == number * factor


@pytest.mark.parametrize("card, mib", [("RTX A4000", 16376), ("T4", 15360), ("RTX 4090", 24564), ("L4", 23034),
                                       ("A10", 23028), ("RTX 3060", 12288), ("RTX 3070", 8192)])
def test_cards_meet_the_size_they_are_sold_as(card, mib):
    sold = {"RTX A4000": 16, "T4": 16, "RTX 4090": 24, "L4": 24, "A10": 24, "RTX 3060": 12, "RTX 3070": 8}[card]
    threshold = compare.COMPARISONS["bytes"].parse_param("min", "%dGB" % sold)
    verdict = compare.COMPARISONS["bytes"].evaluate(mib * MIB, {"min": threshold}, {})
    assert verdict.status == "pass", card


def test_format_bytes():
    assert units.format_bytes(12 * 2**30) == "12.0 GiB"
    assert units.format_bytes(16 * 10**9, binary=False) == "16.0 GB"
    assert units.format_bytes(512) == "512 B"
    assert units.format_gpu_memory(15360 * MIB) == "15.0 GiB (15360 MiB)"


# --- comparisons ----------------------------------------------------------------------

def evaluate(name, value, **raw):
    comparison = compare.COMPARISONS[name]
    params = {key: comparison.parse_param(key, v) for key, v in raw.items()}
    comparison.check(params, ())
    return comparison.evaluate(value, comparison.prepare(params), {})


@pytest.mark.parametrize("value, status", [
    ("525.60.13", "fail"), ("530.30.02", "warn"), ("535.104.05", "warn"), ("550", "pass"), ("580.159.04", "pass"),
])
def test_version_two_tiers(value, status):
    assert evaluate("version", value, min="530", recommended="550").status == status


def test_version_max_and_bad_value():
    assert evaluate("version", "13.1", max="13.0").status == "fail"
    assert evaluate("version", "not-a-version", min="1").status == "error"
    assert evaluate("version", None, min="1").status == "fail"


@given(st.tuples(st.integers(0, 999), st.integers(0, 999), st.integers(0, 99)),
       st.tuples(st.integers(0, 999), st.integers(0, 999)))
def test_version_comparison_agrees_with_packaging(driver, threshold):
    value = "%d.%d.%02d" % driver
    minimum = "%d.%d" % threshold
    expected = "fail" if Version(value) < Version(minimum) else "pass"
    assert evaluate("version", value, min=minimum).status == expected


def test_number_bool_in_pattern_empty_excludes():
    assert evaluate("number", 1, min=2).status == "fail"
    assert evaluate("number", 3.0, min=2, recommended=4).status == "warn"
    assert evaluate("bool", True, expected=True).status == "pass"
    assert evaluate("bool", False, expected="true").status == "fail"
    assert evaluate("in", "base", expected=["yolov9"]).status == "fail"
    assert evaluate("in", "minor", expected=["ok"], tolerated=["minor"]).status == "warn"
    assert evaluate("in", "yolov9", expected="yolov9,other").status == "pass"
    assert evaluate("pattern", "NVIDIA H200", pattern="H100|H200").status == "pass"
    assert evaluate("pattern", "Tesla T4", pattern="^NVIDIA").status == "fail"
    assert evaluate("empty", []).status == "pass"
    assert evaluate("empty", ["lost"]).observed == "lost"
    assert evaluate("excludes", ["gpu_idle"], discouraged=["hw_slowdown"]).status == "pass"
    assert evaluate("excludes", ["gpu_idle", "hw_slowdown"], discouraged=["hw_slowdown"]).status == "warn"
    assert evaluate("excludes", ["x"], forbidden=["x"], discouraged=["y"]).status == "fail"


def test_present_packages():
    found = {"numpy": {"version": "1.17.0", "importable": True}, "thop": {"version": None, "importable": False},
             "cv": {"version": "4.0", "importable": False}}
    verdict = evaluate("present", found, required=["numpy>=1.18.5", "cv"], recommended=["thop"])
    assert verdict.status == "fail"
    assert "numpy 1.17.0 does not satisfy >=1.18.5" in verdict.observed
    assert "cv 4.0 is installed but module 'cv' cannot be imported" in verdict.observed
    assert "thop is missing (optional)" in verdict.observed
    assert verdict.details["missing_pip"] == "'numpy>=1.18.5' cv"
    assert verdict.details["missing_no_deps"] == "thop"  # its one requirement is torch: never pulled from PyPI
    assert evaluate("present", found, recommended=["thop"]).status == "warn"
    assert evaluate("present", {"numpy": {"version": "2.0", "importable": True}}, required=["numpy"]).status == "pass"
    # A name the facts never looked up is not "missing": it is unknown.
    assert evaluate("present", {}, required=["numpy"]).status == "error"


@pytest.mark.parametrize("name, raw", [
    ("version", {"min": "x.y"}), ("number", {"min": "many"}), ("bytes", {"min": "12XB"}), ("bool", {"expected": "yes"}),
    ("pattern", {"pattern": "("}), ("in", {"expected": {"a": 1}}),
])
def test_bad_parameters_raise_value_error(name, raw):
    comparison = compare.COMPARISONS[name]
    with pytest.raises(ValueError):
        for key, value in raw.items():
            comparison.parse_param(key, value)


def test_expected_texts():
    version = compare.COMPARISONS["version"]
    params = {"min": version.parse_param("min", "530.30.02"), "recommended": version.parse_param("recommended", 550)}
    # Thresholds are shown as written ("530.30.02", not packaging's "530.30.2") and compared as versions.
    assert version.expected(params) == ">= 530.30.02, recommended >= 550"
    assert params["min"] < params["recommended"] and params["min"].value == Version("530.30.2")
    assert compare.COMPARISONS["in"].expected({"expected": ["a", "b"]}) == "one of: a, b"
    size = compare.COMPARISONS["bytes"].parse_param("min", "16GiB")
    assert size.value == 16 * 2**30 and size.text == "16GiB" and repr(size) == "Written(17179869184, '16GiB')"


def test_set_resolves_without_changing_the_loaded_rules():
    ruleset = loader.load()
    rule = ruleset.rules["gpu.memory"]
    before = (dict(rule.raw_params), {k: dict(v) for k, v in rule.profile_params.items()})
    settings = selection.parse_settings(ruleset, ["gpu.memory.min=24GB", "gpu.memory.severity=warning"], "train")
    chosen = selection.choose(ruleset, "train", ["gpu.memory"], [], settings)
    resolved = [r for r in chosen if r.id == "gpu.memory"][0]
    assert resolved.params["min"].text == "24GB" and resolved.severity == "warning"
    assert "recommended" not in resolved.params  # the raised floor drops the lower warning tier
    assert (dict(rule.raw_params), {k: dict(v) for k, v in rule.profile_params.items()}) == before
    plain = [r for r in selection.choose(ruleset, "train", ["gpu.memory"], []) if r.id == "gpu.memory"][0]
    assert plain.params["min"].text != "24GB" and plain.severity == "error"
    with pytest.raises(AttributeError):
        resolved.severity = "info"  # resolved rules are immutable


# --- templates ----------------------------------------------------------------------

def test_template_substitutes_only_plain_known_names():
    values = {"gpu_index": 1, "name": "H200"}
    assert template.render("reset -i {gpu_index}", values) == "reset -i 1"
    assert template.render("{unknown} stays", values) == "{unknown} stays"
    assert template.render("echo ${HOME} {{literal}}", values) == "echo ${HOME} {literal}"
    assert template.render("{name.__class__}", values) == "{name.__class__}"
    assert template.placeholders("a {b} ${C} {d_e} {{f}}") == {"b", "d_e"}


# --- selection -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def ruleset():
    return loader.load()


@pytest.mark.parametrize("select, ignore, chosen, left_out", [
    ([], [], ["gpu.count", "driver.version", "torch.cuda"], []),
    (["gpu"], [], ["gpu.count", "gpu.memory", "gpu.mig"], ["driver.version", "torch.cuda"]),
    (["gpu"], ["gpu.memory"], ["gpu.count"], ["gpu.memory"]),
    (["gpu.memory"], ["gpu"], ["gpu.memory"], ["gpu.count"]),        # the more specific selector wins
    ([], ["gpu", "torch"], ["driver.version", "cuda.compat"], ["gpu.count", "torch.arch"]),
    (["gpu.count"], ["gpu.count"], [], ["gpu.count"]),                # a tie goes to --ignore
    (["python"], [], ["python.packages", "python.conda_env"], ["nvml.init"]),
])
def test_select_and_ignore(ruleset, select, ignore, chosen, left_out):
    ids = [r.id for r in selection.choose(ruleset, "train", select, ignore)]
    for rule_id in chosen:
        assert rule_id in ids
    for rule_id in left_out:
        assert rule_id not in ids


def test_prefixes_match_whole_words(ruleset):
    with pytest.raises(SelectionError, match="no rule id is or starts with 'gpu.mem'"):
        selection.choose(ruleset, "train", ["gpu.mem"], [])


def test_profiles_choose_rules(ruleset):
    node = [r.id for r in selection.choose(ruleset, "node", [], [])]
    assert "driver.version" in node and "gpu.health" in node
    assert "torch.cuda" not in node and "python.packages" not in node and "gpu.mig" not in node
    assert "host.shm" not in [r.id for r in selection.choose(ruleset, "inference", [], [])]


@pytest.mark.parametrize("setting, problem", [
    ("driver.version.min", "expected RULE.KEY=VALUE"),
    ("nope.min=1", "unknown rule id 'nope'"),
    ("driver.versoin.min=1", "did you mean driver.version"),
    ("driver.version.minimum=535", "rule 'driver.version' has no setting 'minimum'"),
    ("driver.version.min=abc", "'min': 'abc' is not a version"),
    ("gpu.memory.min=lots", "expected a size"),
    ("gpu.memory.severity=fatal", "severity must be one of"),
])
def test_bad_settings(setting, problem):
    fresh = loader.load()
    with pytest.raises(Exception) as raised:
        selection.parse_settings(fresh, [setting], "train")
    assert problem in str(raised.value)
    assert getattr(raised.value, "exit_code", None) == 2


def test_settings_change_thresholds_and_severity():
    fresh = loader.load()
    settings = selection.parse_settings(fresh, ["gpu.memory.min=24GB", "host.shm.severity=error"], "train")
    resolved = fresh.rules["gpu.memory"].resolve("train", settings["gpu.memory"])
    assert resolved.params["min"].value == 24 * 10**9 and resolved.texts()["min"] == "24GB"
    assert "recommended" not in resolved.params  # 16GB no longer means anything above a 24GB floor
    assert fresh.rules["host.shm"].resolve("train", settings["host.shm"]).severity == "error"


