"""The deployment files are parsed, and every preflight command line in them is one the CLI accepts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from preflight.cli import command as cli_command
from preflight.render.npd import LIMIT

DEPLOY = REPO / "deploy"
FEATURES_D = "/etc/kubernetes/node-feature-discovery/features.d"


def parses(argv):
    """Parse a preflight command line with the real CLI, without running it (UsageError if it is wrong)."""
    assert argv[0].endswith("preflight"), argv
    name, rest = argv[1], argv[2:]
    command = cli_command(name)
    with command.make_context(name, list(rest)) as ctx:
        return name, ctx.params


def manifests():
    documents = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        documents += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return documents


def containers(doc):
    spec = doc["spec"]["template"]["spec"]
    return spec.get("initContainers", []) + spec["containers"], spec


def test_every_manifest_is_valid_yaml_with_a_kind():
    docs = manifests()
    assert {name for name, _ in docs} == {"nfd-daemonset.yaml", "training-job-init-container.yaml",
                                          "prometheusrule.yaml", "nfd-taint-not-ready.yaml",
                                          "node-readiness-rule.yaml"}
    for _, doc in docs:
        assert doc["apiVersion"] and doc["kind"] and doc["metadata"]["name"]


# Kinds kubernetes-validate has no schema for (custom resources): each is checked by a test of its own below
# against the rules its controller's CRD states.
CUSTOM_KINDS = {"NodeFeatureRule", "PrometheusRule", "NodeReadinessRule"}


def test_every_built_in_resource_passes_the_kubernetes_schema_strictly():
    import kubernetes_validate

    checked = []
    for name, doc in manifests():
        if doc["kind"] in CUSTOM_KINDS:
            continue
        # strict: a misspelt or misplaced field (securityContext one level off, say) is an error, not ignored
        kubernetes_validate.validate(doc, "1.37.0", strict=True)
        checked.append((name, doc["kind"]))
    assert sorted(checked) == [("nfd-daemonset.yaml", "DaemonSet"), ("training-job-init-container.yaml", "Job")]
    broken = next(doc for name, doc in manifests() if doc["kind"] == "DaemonSet")
    broken["spec"]["template"]["spec"]["containers"][0]["securityContxt"] = {"privileged": True}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.37.0", strict=True)


def test_the_readiness_gate_waits_for_a_passing_preflight():
    [rule] = [doc for name, doc in manifests() if name == "node-readiness-rule.yaml"]
    spec = rule["spec"]
    assert rule["apiVersion"] == "readiness.node.x-k8s.io/v1alpha1"
    # The CRD's validations (config/crd/bases/readiness.node.x-k8s.io_nodereadinessrules.yaml, v0.5.0): the taint
    # key starts with readiness.k8s.io/ and has exactly one '/'; 1 to 32 conditions with type and requiredStatus.
    taint = spec["taint"]
    assert taint["key"].startswith("readiness.k8s.io/") and taint["key"].count("/") == 1
    assert taint["effect"] == "NoSchedule" and spec["enforcementMode"] == "continuous"
    # The condition is the one node-problem-detector sets from preflight's npd output; only False (preflight
    # passed) admits. No defaultStatus: a node whose condition is not there yet counts as Unknown, so stays tainted.
    config = json.loads((DEPLOY / "kubernetes" / "node-problem-detector-preflight.json").read_text())
    permanent = {r["condition"] for r in config["rules"] if r["type"] == "permanent"}
    assert spec["conditions"] == [{"type": "GPUPreflightProblem", "requiredStatus": "False"}]
    assert permanent == {"GPUPreflightProblem"}
    # node-problem-detector sets a permanent condition False on exit 0, True on 1, Unknown on 2.
    from conftest import nvml_fixture, run_cli

    assert run_cli("check", "--profile", "node", "--nvml-fixture", nvml_fixture("h200-driver580.json"),
                   "--format", "npd").returncode == 0
    assert run_cli("check", "--profile", "node", "--nvml-fixture",
                   nvml_fixture("2x-a100-40g-driver550-ecc.json"), "--format", "npd").returncode == 1
    # preflight's own DaemonSet runs on a tainted node: it is what reports the node healthy.
    [daemonset] = [doc for name, doc in manifests() if doc["kind"] == "DaemonSet"]
    assert {"key": taint["key"], "operator": "Exists", "effect": "NoSchedule"} in \
        daemonset["spec"]["template"]["spec"]["tolerations"]


def test_the_daemonset_serves_checks_and_writes_the_nfd_feature_file_where_nfd_reads_it():
    [doc] = [d for name, d in manifests() if name == "nfd-daemonset.yaml"]
    assert doc["kind"] == "DaemonSet"
    [container], spec = containers(doc)
    name, params = parses(container["command"])
    assert name == "serve" and params["profile"] == "node" and params["listen"] == "0.0.0.0:10480"
    assert Path(params["nfd_output"]).parent == Path(FEATURES_D)
    [port] = container["ports"]
    assert port["containerPort"] == 10480 and container["readinessProbe"]["httpGet"] == {"path": "/healthz",
                                                                                       "port": port["name"]}
    assert "httpGet" not in container["livenessProbe"]  # a failing node must not restart the pod
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes[mounts[FEATURES_D]["name"]]["hostPath"]["path"] == FEATURES_D
    # The kernel log, read-only, so that the Xid checks are not silently skipped in the recommended deployment.
    kmsg = mounts["/dev/kmsg"]
    assert kmsg["readOnly"] is True and volumes[kmsg["name"]]["hostPath"] == {"path": "/dev/kmsg",
                                                                              "type": "CharDevice"}
    assert container["securityContext"]["privileged"] is True
    from preflight.probes import kernel_log

    assert kernel_log.KMSG == "/dev/kmsg"
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in container["env"]
    # It tolerates the taint its NodeFeatureRule sets, or it could never clear it.
    [rule] = [d for name, d in manifests() if name == "nfd-taint-not-ready.yaml"]
    [taint] = rule["spec"]["rules"][0]["taints"]
    assert taint["key"].startswith("feature.node.kubernetes.io/")  # the only namespace NFD allows for taints
    assert {"key": taint["key"], "operator": "Exists", "effect": taint["effect"]} in spec["tolerations"]
    assert rule["spec"]["rules"][0]["matchFeatures"] == [
        {"feature": "local.label", "matchExpressions": {"preflight.ready": {"op": "In", "value": ["false"]}}}]
    labels = run_nfd()
    assert "preflight.ready=false" in labels  # the label the rule matches is the one preflight writes


def run_nfd():
    from conftest import nvml_fixture, run_cli

    return run_cli("check", "--profile", "node", "--nvml-fixture", nvml_fixture("2x-a100-40g-driver550-ecc.json"),
                   "--format", "nfd").stdout.splitlines()


def _metric_names():
    """Every metric name preflight serve's /metrics can carry."""
    import re as regex

    from preflight.integrations import serve
    from preflight.render import prometheus

    text = (Path(prometheus.__file__).read_text() + Path(serve.__file__).read_text())
    return set(regex.findall(r"\b(preflight_[a-z_]+)\b", text))


def test_the_alerting_rules_pass_promtool_and_match_the_operator_resource():
    import shutil
    import subprocess

    import pytest

    rules = yaml.safe_load((DEPLOY / "prometheus" / "preflight-rules.yml").read_text())
    [operator] = [d for name, d in manifests() if name == "prometheusrule.yaml"]
    assert operator["kind"] == "PrometheusRule" and operator["spec"] == rules
    alerts = {rule["alert"]: rule for group in rules["groups"] for rule in group["rules"]}
    assert alerts["PreflightNodeNotReady"]["for"] == "10m"
    assert alerts["PreflightNodeNotReady"]["expr"] == "max by (hostname, instance) (preflight_ok) == 0"
    # Nodes, never GPU series: the rule's failures are reduced to one per node (hostname) before they are counted,
    # and "many" is a share of the nodes reporting (at least 2), not a fixed count.
    many = alerts["PreflightRuleFailingOnManyNodes"]["expr"]
    assert "count by (rule) (max by (rule, hostname) (" in many
    assert "> scalar(clamp_min(0.05 * count(max by (hostname) (preflight_ok)), 1))" in many
    assert alerts["PreflightTargetDown"]["expr"] == 'up{job=~"preflight.*"} == 0'
    assert "absent(" in alerts["PreflightAbsent"]["expr"]
    names = _metric_names()
    for rule in alerts.values():
        for used in re.findall(r"\b(preflight_[a-z_]+)\b", rule["expr"]):
            assert used in names, used
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("SKIPPED LOUDLY: promtool is not installed (Debian: apt-get install prometheus); the alerting "
                    "rules were parsed but not checked by Prometheus itself")
    checked = subprocess.run([promtool, "check", "rules", str(DEPLOY / "prometheus" / "preflight-rules.yml")],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0 and "SUCCESS: %d rules found" % len(alerts) in checked.stdout, \
        checked.stdout + checked.stderr
    # The unit tests beside the rules: three targets (healthy, faulty on two GPUs, down) and nodes-not-GPUs.
    tested = subprocess.run([promtool, "test", "rules", "preflight-rules.test.yml"], capture_output=True, text=True,
                            timeout=120, cwd=str(DEPLOY / "prometheus"))
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_the_scrape_config_and_the_grafana_dashboard(tmp_path):
    import shutil
    import subprocess

    scrape = yaml.safe_load((DEPLOY / "prometheus" / "scrape.yml").read_text())
    jobs = {job["job_name"]: job for job in scrape["scrape_configs"]}
    keep = [r for r in jobs["preflight"]["relabel_configs"] if r.get("action") == "keep"]
    assert {r["regex"] for r in keep} == {"preflight", "metrics"}
    promtool = shutil.which("promtool")
    if promtool:  # Debian's Prometheus is built without Kubernetes discovery: check the static job there
        static = tmp_path / "static.yml"
        static.write_text(yaml.safe_dump({"scrape_configs": [jobs["preflight-static"]]}))
        checked = subprocess.run([promtool, "check", "config", str(static)], capture_output=True, text=True,
                                 timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    dashboard = json.loads((DEPLOY / "grafana" / "preflight-dashboard.json").read_text())
    titles = {panel["title"] for panel in dashboard["panels"]}
    assert {"Fleet readiness", "Failing rules by node", "Drift: driver versions", "Drift: GPU models"} <= titles
    names = _metric_names()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            for used in re.findall(r"\b(preflight_[a-z_]+)\b", target["expr"]):
                assert used in names, (panel["title"], used)


def test_the_init_container_runs_preflight_exec():
    [doc] = [d for name, d in manifests() if name == "training-job-init-container.yaml"]
    init = doc["spec"]["template"]["spec"]["initContainers"][0]
    name, params = parses(init["command"])
    assert name == "exec" and params["command"] == ("true",) and params["retry_timeout"] == "5m"


def test_the_node_problem_detector_plugin_config():
    config = json.loads((DEPLOY / "kubernetes" / "node-problem-detector-preflight.json").read_text())
    assert config["plugin"] == "custom" and config["pluginConfig"]["max_output_length"] == LIMIT
    condition_types = {c["type"] for c in config["conditions"]}
    for rule in config["rules"]:
        assert rule["type"] in ("temporary", "permanent")
        if rule["type"] == "permanent":
            assert rule["condition"] in condition_types
        name, params = parses([rule["path"]] + rule["args"])
        assert name == "check" and params["output_format"] == "npd"


def test_the_dockerfiles_use_real_commands():
    training = (DEPLOY / "docker" / "Dockerfile.training-example").read_text()
    entry = json.loads(re.search(r"^ENTRYPOINT (\[.*\])$", training, re.M).group(1))
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", training, re.M).group(1))
    name, params = parses(entry + cmd)
    assert name == "exec" and params["command"][:2] == ("python", "train_dual.py")
    assert "--batch-size" in cmd and "--amp" not in cmd
    image = (DEPLOY / "docker" / "Dockerfile").read_text()
    assert json.loads(re.search(r"^ENTRYPOINT (\[.*\])$", image, re.M).group(1)) == ["preflight"]
    assert parses(["preflight"] + json.loads(re.search(r"^CMD (\[.*\])$", image, re.M).group(1)))[0] == "check"


