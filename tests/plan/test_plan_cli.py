"""`rlcfg plan` as a user types it: golden plans for every template whose dialect has a lowering, exit codes,
the model-config flags, and no heavy imports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from rlcfg.lower import available
from tests.helpers import ROOT, TEMPLATES, assert_golden, cli

HEAVY = ("torch", "ray", "transformers", "vllm", "sglang", "megatron", "deepspeed")


def template_dialect(path) -> str:
    from rlcfg.frontend import check_file

    return check_file(str(path)).dialect or ""


# New dialects are picked up as soon as their lowering (rlcfg/dialects/<name>/lower.py) lands.
PLANNABLE = [t for t in sorted(TEMPLATES.glob("*.yaml")) if available(template_dialect(t))]


def test_there_is_something_to_plan():
    assert PLANNABLE, "no template has a dialect with a lowering"


def plan_in_clean_folder(template, tmp_path, *flags):
    """Plan a template from a folder of its own: a model directory that happens to exist where the tests run
    (the quickstart's, once someone has run it) would otherwise change the memory estimate under the golden file."""
    relative = template.relative_to(ROOT)
    (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(template, tmp_path / relative)
    return cli("plan", str(relative), *flags, cwd=tmp_path)


@pytest.mark.parametrize("template", PLANNABLE, ids=lambda p: p.stem)
def test_template_plan_text(template, tmp_path):
    result = plan_in_clean_folder(template, tmp_path, "--show-gpu-map")
    assert result.returncode in (0, 1), result.stderr
    assert not result.stderr
    assert_golden(f"plan/{template.stem}.txt", result.stdout)


@pytest.mark.parametrize("template", PLANNABLE, ids=lambda p: p.stem)
def test_template_plan_json(template, tmp_path):
    result = plan_in_clean_folder(template, tmp_path, "--format", "json")
    assert result.returncode in (0, 1), result.stderr
    payload = json.loads(result.stdout)
    assert payload["valid"] == (payload["errors"] == 0) == (result.returncode == 0)
    plan = payload["plan"]
    assert {"experiment", "cluster", "groups", "placements", "batch", "memory", "notes"} <= set(plan)
    assert_golden(f"plan/{template.stem}.json", result.stdout)


def test_plan_without_the_map_is_shorter():
    template = str(PLANNABLE[0].relative_to(ROOT))
    short, full = cli("plan", template).stdout, cli("plan", template, "--show-gpu-map").stdout
    assert "GPU map" in full and "GPU map" not in short
    assert "batch schedule" in short and "memory estimate" in short


def test_flags_set_the_cluster_and_the_gpu():
    template = str(TEMPLATES / "chatlearn-fsdp-vllm.yaml")
    result = cli("plan", template, "--nodes", "2", "--gpus-per-node", "8", "--gpu", "h200", "--format", "json")
    payload = json.loads(result.stdout)
    cluster = payload["plan"]["cluster"]
    assert (cluster["nodes"], cluster["gpus_per_node"], cluster["gpu_name"]) == (2, 8, "H200 141GB")
    assert any(d["code"] == "RLC404" for d in payload["diagnostics"])  # node 1 sits idle


def test_overrides_reach_the_plan():
    template = str(TEMPLATES / "chatlearn-fsdp-vllm.yaml")
    result = cli("plan", template, "models.policy.tensor_model_parallel_size=4", "--format", "json")
    rollout = next(p for p in json.loads(result.stdout)["plan"]["placements"] if p["role"] == "rollout")
    assert rollout["dp"] == 2


def test_the_critics_own_mini_batches_are_shown():
    template = str(TEMPLATES / "skyrl-ppo-fsdp-vllm.yaml")
    text = cli("plan", template, "trainer.critic_mini_batch_size=64").stdout
    assert re.search(r"critic optimizer steps per step +4 of 320 samples\n", text), text
    assert "critic optimizer steps" not in cli("plan", template).stdout  # one step over the whole batch


def test_an_areal_reward_model_plans_its_batch_on_the_critic():
    # AReaL's reward-model training (RWConfig) trains a critic and has no actor: the batch of 128 pairs splits over
    # the critic's 8 data-parallel ranks (d8p1t1), 16 each, packed into micro-batches of 4,096 tokens.
    template = str(TEMPLATES / "areal-sft.yaml")
    text = cli("plan", template, "train_dataset.type=rw", "+model.is_critic=true").stdout
    assert re.search(r"critic data-parallel ranks +8\n", text), text
    assert re.search(r"samples per rank per optimizer step +16\n", text)
    assert "packed up to 4,096 tokens each" in text and "actor" not in text
    batch = json.loads(cli("plan", template, "train_dataset.type=rw", "+model.is_critic=true",
                           "--format", "json").stdout)["plan"]["batch"]
    assert (batch["trained_role"], batch["dp"], batch["samples_per_rank"]) == ("critic", 8, 16)


def test_model_config_file(tmp_path):
    config = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
              "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = cli("plan", str(TEMPLATES / "chatlearn-fsdp-vllm.yaml"), "--model-config", str(path), "--format", "json")
    arch = json.loads(result.stdout)["plan"]["memory"]["architectures"]
    assert arch[0]["layers"] == 2 and arch[0]["source"] == f"--model-config {path}"


def test_local_model_directory_is_read(tmp_path):
    model = tmp_path / "TinyModel"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "model_type": "qwen2", "num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8,
        "num_key_value_heads": 2, "intermediate_size": 1024, "vocab_size": 5000, "tie_word_embeddings": True}))
    result = cli("plan", str(TEMPLATES / "chatlearn-fsdp-vllm.yaml"), f"models.policy_trainer.load={model}",
                 f"models.policy.load={model}", "--format", "json")
    memory = json.loads(result.stdout)["plan"]["memory"]
    assert memory["architectures"][0]["source"] == f"config.json in {model}"
    assert memory["architectures"][0]["layers"] == 4


@pytest.mark.parametrize("args,message", [
    (("--gpu", "tpu"), "unknown GPU `tpu`"),
    (("--model-config", "/nonexistent/config.json"), "no such file"),
    (("--nodes", "0"), "--nodes"),
])
def test_usage_errors_exit_2(args, message):
    result = cli("plan", str(TEMPLATES / "chatlearn-fsdp-vllm.yaml"), *args)
    assert result.returncode == 2
    assert message in result.stderr or message in result.stdout


def test_missing_file_exits_2():
    assert cli("plan", "does-not-exist.yaml").returncode == 2


def test_a_config_with_errors_is_reported_like_validate():
    broken = ROOT / "tests" / "fixtures" / "chatlearn" / "broken.yaml"
    if not broken.exists():
        pytest.skip("no broken ChatLearn fixture")
    plan, validate = cli("plan", str(broken.relative_to(ROOT))), cli("validate", str(broken.relative_to(ROOT)))
    assert plan.returncode == validate.returncode == 1
    assert plan.stdout == validate.stdout


def test_a_dialect_without_a_lowering_gets_a_clear_message(tmp_path):
    from rlcfg import schema

    missing = [name for name in schema.names() if not available(name)]
    templates = [t for t in sorted(TEMPLATES.glob("*.yaml")) if template_dialect(t) in missing]
    if not templates:
        pytest.skip("every dialect has a lowering")
    template = templates[0]
    result = cli("plan", str(template))
    if result.returncode == 1:
        pytest.skip(f"{template.name} does not validate")
    assert result.returncode == 2
    assert f"planning is not available for dialect {template_dialect(template)} yet" in result.stderr


def test_a_plan_that_does_not_fit_exits_1():
    result = cli("plan", str(TEMPLATES / "chatlearn-fsdp-vllm.yaml"), "--gpu", "l4")
    assert result.returncode == 1
    assert "error[RLC500]" in result.stdout and "DOES NOT FIT" in result.stdout


# Runs `rlcfg ARGS...` in-process, then lists the heavy modules it imported.
PROBE = """
import json, sys
heavy = json.loads(sys.argv[1])
sys.argv = ["rlcfg", *sys.argv[2:]]
try:
    from rlcfg.cli import main
    main()
except SystemExit:
    pass
print("PROBE " + json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy)))
"""


@pytest.mark.parametrize("template", PLANNABLE, ids=lambda p: p.stem)
def test_plan_imports_nothing_heavy(template):
    result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(HEAVY), "plan", str(template), "--show-gpu-map"],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    line = next(l for l in result.stdout.splitlines() if l.startswith("PROBE "))
    assert json.loads(line[6:]) == []


def _roll_reference_example(tmp_path, model: str, gpus: int):
    """ROLL's documented RLVR example (tests/dialects/roll/test_schema.py) with a model, on `gpus` GPUs."""
    from tests.dialects.roll.test_schema import SEED_YAML

    text = SEED_YAML.replace("list(range(0,16))", f"list(range(0,{gpus}))")
    path = tmp_path / "roll.yaml"
    path.write_text(f"pretrain: {model}\n" + text)
    return cli("plan", str(path), "--format", "json")


def test_rolls_reference_example_plans_with_a_length_warning(tmp_path):
    # Its reference forward holds fp32 logits for infer_batch_size samples at once: only with every sample at its
    # longest do they overflow, so the plan stands, with a warning naming the key that sets that number.
    result = _roll_reference_example(tmp_path, "Qwen/Qwen2.5-7B-Instruct", 16)
    assert result.returncode == 0, result.stdout
    report = json.loads(result.stdout)
    memory = [d for d in report["diagnostics"] if d["code"] in ("RLC500", "RLC502")]
    assert [(d["code"], d["severity"]) for d in memory] == [("RLC502", "warning")]
    assert "up to about" in memory[0]["message"] and "`reference.infer_batch_size`" in memory[0]["hint"]
    # each placement names the config's section beside rlcfg's role
    sections = {p["role"]: p["section"] for p in report["plan"]["placements"]}
    assert (sections["actor"], sections["rollout"], sections["reference"]) == \
        ("actor_train", "actor_infer", "reference")


def test_a_72b_model_on_8_gpus_is_still_a_memory_error(tmp_path):
    result = _roll_reference_example(tmp_path, "Qwen/Qwen2.5-72B-Instruct", 8)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert any(d["code"] == "RLC500" and d["severity"] == "error" for d in report["diagnostics"])


def test_a_placed_component_without_a_role_is_named_in_the_plan(tmp_path):
    # RLinf's `inference` group recomputes log-probs; with kl_beta 0 it holds no role rlcfg plans, so the plan
    # says so instead of leaving the component out of the GPU map silently.
    text = (TEMPLATES / "rlinf-megatron-sglang.yaml").read_text()
    assert "    actor,rollout,reward: all\n" in text
    path = tmp_path / "rlinf.yaml"
    path.write_text(text.replace("    actor,rollout,reward: all\n",
                                 "    actor: 0-3\n    inference: 4-5\n    rollout,reward: 6-7\n"))
    result = cli("plan", str(path), "--format", "json")
    assert result.returncode == 0, result.stdout
    plan = json.loads(result.stdout)["plan"]
    assert not any(p["role"] == "inference" for p in plan["placements"])
    [note] = [n for n in plan["notes"] if n.startswith("`inference`")]
    assert "not in the GPU map" in note
    text_out = cli("plan", str(path), "--no-color").stdout
    assert "note: `inference`, which the config places" in text_out
