"""bench/gpu_acceptance.sh, run as a user runs it, on a machine without CUDA: every check is named and skipped
with its reason, the run exits 0, and neither the script nor anything it starts imports Ray (the GPU machines
it is written for may have none)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT

CHECKS = ("fsdp2_logprobs_bf16", "fsdp2_ppo_step", "fsdp2_offload_onload", "fsdp2_checkpoint", "fsdp2_cpu_offload",
          "hf_rollout_gpu", "megatron_tp1_bf16", "megatron_moe_bf16", "megatron_mla_bf16", "megatron_lora_bf16", "vllm_hybrid_2ranks",
          "sglang_sleep_update_wake")


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


pytestmark = pytest.mark.skipif(_has_cuda(), reason="with a CUDA device the script runs the checks themselves")


def run_script(tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, bool]:
    """The script's output, and whether anything it ran imported `ray`: a stand-in package ahead of the real one
    on the path records the import (and fails it, as on a machine without Ray)."""
    stand_in = tmp_path / "path" / "ray"
    stand_in.mkdir(parents=True)
    marker = tmp_path / "ray-was-imported"
    (stand_in / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n"
                                          "raise ImportError('the GPU acceptance script imported ray')\n")
    path = os.pathsep.join(p for p in (str(tmp_path / "path"), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHON=sys.executable, PYTHONPATH=path)
    result = subprocess.run(["bash", str(ROOT / "bench" / "gpu_acceptance.sh"), *args], env=env,
                            capture_output=True, text=True, timeout=600)
    return result, marker.exists()


def check_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.split(" ", 1)[0] in ("PASS", "FAIL", "SKIP")]


def test_without_cuda_every_check_is_skipped_and_ray_is_never_imported(tmp_path):
    result, ray_imported = run_script(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert check_lines(result.stdout) == [f"SKIP {name}: no CUDA device" for name in CHECKS]
    assert result.stdout.splitlines()[-1].startswith(f"summary: 0 passed, 0 failed, {len(CHECKS)} skipped")
    assert not ray_imported


def test_list_names_every_check_and_only_runs_the_named_ones(tmp_path):
    listed, _ = run_script(tmp_path, "--list")
    assert listed.returncode == 0 and listed.stdout.split() == list(CHECKS)
    only, _ = run_script(tmp_path / "only", "--only", "megatron_tp1_bf16,hf_rollout_gpu")
    assert only.returncode == 0, only.stdout + only.stderr
    assert check_lines(only.stdout) == ["SKIP hf_rollout_gpu: no CUDA device", "SKIP megatron_tp1_bf16: no CUDA device"]
