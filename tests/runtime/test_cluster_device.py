"""The workers compute where the Ray cluster's resources are, whatever the machine the run is started from: a run
launched with --address from a CPU-only head node onto GPU nodes trains on those GPUs, and each worker's threads
are its node's CPUs, not the driver host's. Checked on a Ray cluster with declared (fake) GPUs, up to the specs
the driver hands its workers; no worker starts (the CPU build of torch could not run one on CUDA)."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
cluster_utils = pytest.importorskip("ray.cluster_utils")

from rlcfg.runtime import quickstart  # noqa: E402
from rlcfg.runtime.backends import detect_machine  # noqa: E402
from rlcfg.runtime.driver import Cluster, Run, RunOptions, plan_here  # noqa: E402


def test_from_a_host_without_gpus_the_workers_get_the_clusters_gpus_and_cpus(tmp_path):
    host = detect_machine()
    if host.gpus:
        pytest.skip("this machine has GPUs: the driver's host and the cluster would agree anyway")
    node_cpus = host.cpus + 6  # more than the driver's host has
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": node_cpus, "num_gpus": 1})
    cluster.wait_for_nodes()
    run = None
    try:
        exp = quickstart.experiment(str(tmp_path / "out"), steps=1)
        plan, errors = plan_here(exp, address=cluster.address)
        assert not errors
        run = Run(plan, RunOptions(output_dir=str(tmp_path / "out"), address=cluster.address))
        run.prepare()
        run.cluster = Cluster(plan, run.machine, run.ray_address, debug=False)
        spec = run._train_spec(exp.role("actor"), "actor")
        assert spec.device == "cuda"
        assert run.cluster.threads == node_cpus  # the plan's one slot has its node's CPUs
    finally:
        if run is not None and hasattr(run, "cluster"):
            run.cluster.shutdown()
            run.cluster.ray.shutdown()
        if run is not None:
            run.release()
        cluster.shutdown()
