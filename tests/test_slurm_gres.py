"""A real Slurm node whose Gres says it has two GPUs, checked by preflight as its health program."""

from __future__ import annotations

import pytest
from test_slurm import H200, running_cluster


@pytest.fixture(scope="module")
def cluster():
    yield from running_cluster(gpus=2)


def test_real_slurm_a_node_short_of_its_gres_gpus_drains(cluster):
    cluster.set_fixture(H200)  # one GPU where slurm.conf and gres.conf say two
    state, reason = cluster.wait_node(lambda state, reason: "DRAIN" in state, 60, "the node to be drained")
    assert reason == "preflight: gpu.expected_count expected 2 GPUs (Slurm Gres), found 1", reason
    said = cluster.health_now()
    assert "FAIL gpu.expected_count system: expected 2 GPUs (Slurm Gres), found 1" in said, said
    # Told to expect one (a GPU taken out for repair), the same node is resumed.
    cluster.set_extra("--expect-gpus", "1")
    try:
        state, reason = cluster.wait_node(lambda state, reason: "DRAIN" not in state, 60, "the node to be resumed")
        assert reason is None
    finally:
        cluster.set_extra()


def test_real_slurm_prolog_checks_the_jobs_gpus_and_calls_no_scontrol(cluster):
    cluster.set_fixture(H200)
    cluster.set_extra("--expect-gpus", "1")  # one GPU of the two taken out for repair: the node serves
    try:
        cluster.wait_node(lambda state, reason: "DRAIN" not in state, 60, "the node to be in service")
        job = cluster.run_job("--gres=gpu:1")
    finally:
        cluster.set_extra()
    prolog = cluster.prolog_log()
    assert "== job %s SLURM_JOB_GPUS=0" % job in prolog, prolog
    assert "prolog job %s: GPUs 0 of 1, from SLURM_JOB_GPUS: OK" % job in prolog, prolog
    assert not cluster.prolog_scontrol_calls(), cluster.prolog_scontrol_calls()
