"""`rlcfg run FILE --dry-run`: would `rlcfg run` launch this config on its cluster? And `plan` and `convert`, which
describe a valid config whatever `run` would do with it."""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers import assert_golden, cli
from tests.test_light_imports import probe

# Relative to the checkout (where `cli` runs), so that what the goldens hold does not depend on where it is.
RLINF = "templates/rlinf-megatron-sglang.yaml"
SKYRL = "templates/skyrl-fsdp-vllm.yaml"


def test_a_config_that_would_launch_exits_0_and_says_what_the_nodes_need():
    done = cli("run", SKYRL, "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "would launch" in done.stdout and "rlcfg[vllm]" in done.stdout
    # The data lives on the cluster, not here: said, not refused.
    assert "note: the training data `/home/user/data/gsm8k/train.parquet` is not on this machine" in done.stdout


def test_every_refusal_is_listed_at_once_with_the_key_and_the_value_that_runs():
    done = cli("run", RLINF, "algorithm.loss_type=gspo", "algorithm.adv_type=gae", "--dry-run")
    assert done.returncode == 1
    assert_golden("dry_run/rlinf-refusals.txt", done.stdout)


def test_json_for_tools():
    done = cli("run", RLINF, "algorithm.adv_type=gae", "--dry-run", "--format", "json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["launches"] is False and report["dialect"] == "rlinf"
    [blocker] = report["blockers"]
    assert (blocker["code"], blocker["key"]) == ("RLC118", "algorithm.adv_type")
    assert blocker["fix"] == "use `adv_type: grpo`"
    assert report["cluster"] == {"nodes": 1, "gpus_per_node": 8}


def test_the_plan_of_the_cluster_is_judged_memory_included():
    done = cli("run", SKYRL, "--dry-run", "--gpu", "4GB")
    assert done.returncode == 1
    assert "RLC500" in done.stdout and "does not fit in memory" in done.stdout


# A setting the runtime refuses for the actor alone: Megatron LoRA adapters with dropout.
MEGATRON_LORA_DROPOUT = ("trainer.strategy=megatron", "trainer.policy.model.lora.rank=8",
                         "trainer.policy.model.lora.dropout=0.1")

def test_a_backend_the_cluster_cannot_run_is_named_by_its_key():
    dropout = "trainer.policy.model.lora.dropout"
    done = cli("run", SKYRL, *MEGATRON_LORA_DROPOUT, "--dry-run", "--format", "json")
    report = json.loads(done.stdout)
    refusals = [b for b in report["blockers"] if b["code"] == "RLC119"]
    assert refusals and dropout in refusals[0]["message"], report


def test_a_config_with_errors_is_answered_as_validate_answers_it():
    done = cli("run", RLINF, "algorithm.group_size=0", "--dry-run")
    assert done.returncode == 1
    assert "error[" in done.stdout and "would launch" not in done.stdout


@pytest.mark.parametrize("args,message", [
    (("--dry-run", "--smoke"), "cannot go with --smoke"),
    (("--nodes", "2"), "go with --dry-run"),
    (("--format", "json"), "go with --dry-run"),
])
def test_flags_that_do_not_go_together_are_a_usage_error(args, message):
    done = cli("run", SKYRL, *args)
    assert done.returncode == 2 and message in done.stderr


def test_a_missing_file_is_a_usage_error():
    done = cli("run", "no-such.yaml", "--dry-run")
    assert done.returncode == 2 and "no-such.yaml" in done.stderr


def test_the_dry_run_needs_no_torch_or_ray():
    found = probe("run", SKYRL, "--dry-run")
    assert found["code"] == 0 and found["heavy"] == [], found


def test_an_embodied_config_gets_one_word_for_its_pipeline(tmp_path):
    from tests.dialects.rlinf.test_schema import EMBODIED

    config = tmp_path / "embodied.yaml"
    config.write_text(EMBODIED)
    checked = cli("validate", str(config), "--format", "json")
    codes = [d["code"] for d in json.loads(checked.stdout)["diagnostics"]]
    assert codes.count("RLC116") == 1 and "RLC118" not in codes
    dry = cli("run", str(config), "--dry-run", "--format", "json")
    assert dry.returncode == 1
    assert [b["code"] for b in json.loads(dry.stdout)["blockers"]] == ["RLC116"]
    planned = cli("plan", str(config))
    assert planned.returncode == 1 and "no GPU map" in planned.stderr


def test_plan_draws_the_map_of_a_config_run_refuses():
    # A per-micro-batch loss mean over RLinf's token-budget micro-batches, which `run` refuses.
    done = cli("plan", RLINF, "runner.enable_dynamic_batch_size=true", "--show-gpu-map")
    assert done.returncode == 0, done.stderr
    assert "note[RLC118]" in done.stdout and "runner.enable_dynamic_batch_size" in done.stdout
    assert "GPU" in done.stdout and "plan for 8 GPUs" in done.stdout


def test_plan_says_once_what_run_would_not_launch():
    done = cli("plan", SKYRL, *MEGATRON_LORA_DROPOUT)
    assert done.returncode == 0
    assert done.stdout.count("note[RLC119]") == 1


def test_convert_converts_a_config_run_refuses():
    done = cli("convert", RLINF, "algorithm.adv_type=gae", "--to", "skyrl")
    assert done.returncode == 0, done.stderr
    assert "algorithm.adv_type" in done.stderr  # named as a setting that is not carried over


def test_run_stops_on_every_refusal_at_once_and_points_at_the_dry_run():
    done = cli("run", RLINF, "algorithm.loss_type=gspo", "algorithm.adv_type=gae")
    assert done.returncode == 1
    assert "algorithm.loss_type" in done.stderr and "algorithm.adv_type" in done.stderr
    assert "--dry-run" in done.stderr


def test_with_address_the_ray_cluster_as_it_is_is_judged():
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    # Declared (fake) GPUs: two nodes of one, where the template's colocated roles ask for four.
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 1})
    cluster.add_node(num_cpus=1, num_gpus=1)
    cluster.wait_for_nodes()
    try:
        # This user's HOME: a Ray that an earlier ray.init in this process set to token authentication
        # (RAY_AUTH_MODE=token) starts a cluster that asks for the token kept there.
        done = cli("run", SKYRL, "--dry-run", "--address", cluster.address, "--format", "json",
                   env={"HOME": os.path.expanduser("~")})
    finally:
        cluster.shutdown()
    assert done.stdout, done.stderr
    report = json.loads(done.stdout)
    assert report.get("cluster") == {"nodes": 2, "gpus_per_node": 1}, report
    assert done.returncode == 1 and report["launches"] is False
    assert {b["code"] for b in report["blockers"]} == {"RLC403"}  # the placement exceeds the cluster


def test_with_address_a_cluster_that_does_not_answer_is_one_line():
    done = cli("run", SKYRL, "--dry-run", "--address", "127.0.0.1:9")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "127.0.0.1:9" in done.stderr


def test_with_address_and_json_a_cluster_that_does_not_answer_is_json_too():
    done = cli("run", SKYRL, "--dry-run", "--address", "127.0.0.1:9", "--format", "json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["launches"] is False and "127.0.0.1:9" in report["environment_error"]


def test_an_sglang_config_names_the_sglang_extra_alone_which_brings_its_own_torch():
    done = cli("run", "templates/areal-fsdp-sglang-grpo.yaml", "--dry-run", "--format", "json")
    report = json.loads(done.stdout)
    # `run` pins the torch vLLM needs; SGLang needs another, so `rlcfg[run,sglang]` would not install.
    assert report["extras"] == ["sglang"], report


# What the GCS probe's process writes when the cluster wants a token this machine lacks: with this machine's
# RAY_AUTH_MODE=token, Ray's C++ client ends on a failed check followed by its stack trace; without, Ray raises.
FATAL_CHECK = """[2026-11-28 20:46:40,692 C 14865 14865] authentication_token_loader.cc:115:  An unexpected system state \
has occurred. Check failed: has_token || ignore_auth_mode Token authentication is enabled but Ray couldn't find an \
authentication token. Create a token file at ~/.ray/auth_token, or set the RAY_AUTH_TOKEN environment variable.
*** StackTrace Information ***
/venv/lib/python3.11/site-packages/ray/_raylet.so(+0x1812b9a) [0x7f113a612b9a] ray::operator<<()
/venv/bin/python(_start+0x21) [0x5629b19c3081] _start
"""
RAISED = """[2026-11-28 20:46:41,281 W 14875 14875] gcs_client.cc:210: Failed to get cluster ID from GCS server
Traceback (most recent call last):
  File "python/ray/includes/common.pxi", line 119, in ray._raylet.check_status
ray.exceptions.AuthenticationError: RPC error: InvalidAuthToken: Authentication token is missing or incorrect. \
Note: RAY_AUTH_MODE is currently 'disabled' (not 'token').
"""


@pytest.mark.parametrize("stderr", [FATAL_CHECK, RAISED], ids=["fatal-check", "raised"])
def test_a_cluster_that_wants_a_token_this_machine_lacks_is_said_so(stderr):
    from rlcfg.runtime.environment import probe_failure

    reason = probe_failure(stderr, 1)
    assert "authentication token" in reason and "RAY_AUTH_TOKEN" in reason and "_start" not in reason


def test_a_probe_that_dies_on_a_check_gives_the_check_not_the_stack_trace():
    from rlcfg.runtime.environment import probe_failure

    stderr = "[2026-11-28 C 1 1] gcs_client.cc:9: Check failed: cluster_id_ready The GCS did not reply. More.\n" \
             "*** StackTrace Information ***\n/venv/bin/python(_start+0x21) [0x5629b19c3081] _start\n"
    assert probe_failure(stderr, 1) == "no Ray cluster answers there: cluster_id_ready The GCS did not reply"
