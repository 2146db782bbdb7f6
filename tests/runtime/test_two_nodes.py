"""A two-node Ray cluster on one machine (a head and a second node, CPUs only), joined with
`rlcfg run --address`: a config whose plan puts the actor on node 0 and the rollout engine on node 1 runs each
worker on the node the plan placed it on, completes, and resumes like a local run."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
cluster_utils = pytest.importorskip("ray.cluster_utils")

from tests.runtime.test_kill_resume import quickstart_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _two_node_config(tmp_path):
    """The ROLL quickstart with the actor on GPU 0 and the rollout on GPU 1, one GPU per node: two nodes."""
    text = quickstart_config(tmp_path).read_text()
    text = text.replace("max_steps: 100", "max_steps: 4\nnum_nodes: 2\nnum_gpus_per_node: 1")
    text = text.replace("save_steps: 20", "save_steps: 2")
    head, sep, tail = text.partition("actor_infer:")
    assert sep and "device_mapping: list(range(0,1))" in tail
    text = head + sep + tail.replace("device_mapping: list(range(0,1))", "device_mapping: list(range(1,2))", 1)
    path = tmp_path / "two-nodes.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def two_nodes():
    # No declared GPUs: on a cluster with GPUs the workers compute on CUDA, which the CPU build of torch has not.
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    worker = cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    try:
        yield cluster, cluster.head_node.node_id, worker.node_id
    finally:
        cluster.shutdown()


def test_a_run_on_a_two_node_cluster_places_each_worker_where_the_plan_says(tmp_path, two_nodes):
    cluster, head_id, worker_id = two_nodes
    config = _two_node_config(tmp_path)
    plan = subprocess.run([sys.executable, "-m", "rlcfg", "plan", str(config), "--show-gpu-map"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert re.search(r"GPU 0 \(node 0\) .*\bactor\b", plan.stdout), plan.stdout
    assert re.search(r"GPU 1 \(node 1\) .*\brollout\b", plan.stdout), plan.stdout

    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    command = [sys.executable, "-m", "rlcfg", "run", str(config), "--address", cluster.address, "--output", str(out)]
    first = subprocess.run(command + ["--steps", "2"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
    assert first.returncode == 0, first.stderr
    assert f"starting the workers on the Ray cluster at {cluster.address}" in first.stderr
    placement = json.loads((out / "placement.json").read_text())
    assert [(w["plan_node"], w["ray_node"]) for w in placement["actor"]] == [(0, head_id)]
    assert [(w["plan_node"], w["ray_node"]) for w in placement["rollout"]] == [(1, worker_id)]

    second = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert f"resuming from {out / 'checkpoints' / 'step-00000002'} (step 2)" in second.stderr
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
    assert json.loads((out / "hf_model" / "rlcfg-export.json").read_text())["step"] == 4

    # The cluster recorded as this machine's current one (what `ray start` leaves for `ray.init()` to find): a
    # run without --address still starts a private instance of its own.
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths live under it
    try:
        Path(ray_tmp, "ray_current_cluster").write_text(cluster.address)
        local = subprocess.run([sys.executable, "-m", "rlcfg", "run", "--quickstart", "--steps", "1", "--output",
                                str(tmp_path / "local")], cwd=tmp_path, env={**env, "RAY_TMPDIR": ray_tmp},
                               capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert local.returncode == 0, local.stderr
    assert "starting the workers on a local Ray instance" in local.stderr
