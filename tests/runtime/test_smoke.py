"""`rlcfg run FILE --smoke`: the pure transform (what it substitutes, what it keeps, that it keeps the config's
divisibility), the files it builds, and the CLI end to end for every template and the reference documents'
example configs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from rlcfg import lower
from rlcfg.frontend import check_file
from rlcfg.plan import build_plan
from rlcfg.plan.model import ClusterShape
from rlcfg.runtime import smoke as S
from tests.helpers import ROOT, TEMPLATES

FIXTURES = ROOT / "tests" / "fixtures"
TEMPLATE_FILES = sorted(TEMPLATES.glob("*.yaml"))
# The example configs of the reference documents (seeds 000-004), kept as fixtures so that CI needs no seeds.
# AReaL's reference document shows no example config (only launcher command lines).
REFERENCE_EXAMPLES = [FIXTURES / "chatlearn" / "reference-example.yaml",
                      FIXTURES / "chatlearn" / "reference-example-megatron.yaml",
                      FIXTURES / "rlinf" / "seed.yaml",
                      FIXTURES / "roll" / "reference-example.yaml",
                      FIXTURES / "skyrl" / "reference-example.yaml"]


def experiment(path: Path, overrides: list[str] | None = None):
    result = check_file(str(path), overrides or [])
    assert not result.errors, [d.message for d in result.diagnostics if d.severity.value == "error"]
    return lower.lower(result.dialect, result.config, result.release)


def host(tmp_path: Path, **facts) -> S.Host:
    return S.Host(cache=str(tmp_path / "cache"), **facts)


def subs(smoke: S.Smoke) -> dict[str, tuple[str, str]]:
    return {s.label: (s.config, s.smoke) for s in smoke.substitutions}


# ---- the transform -------------------------------------------------------------------------------------------------


def test_the_substitutions_name_the_configs_own_keys(tmp_path):
    exp = experiment(TEMPLATES / "roll-megatron-vllm.yaml")
    smoke = S.smoke_experiment(exp, host(tmp_path, megatron=True, families=(("Qwen/Qwen2.5-7B-Instruct", "qwen2"),)))
    table = subs(smoke)
    assert table["model (actor_train, actor_infer, reference)"] == (
        "Qwen/Qwen2.5-7B-Instruct", "tiny qwen2, 2 layers, hidden 128")
    assert table["rollout engine (actor_infer)"] == ("vllm", "hf (vLLM does not run here)")
    assert table["engine tensor/pipeline parallel (actor_infer)"] == ("tp=2, pp=1", "tp=1, pp=1")
    assert table["GPUs"] == ("8", "2 CPU workers (1 placement group)")
    assert table["actor_train.training_args.per_device_train_batch_size"] == ("2", "1")
    assert table["prompts per step"] == ("64", "2 (÷32)")  # one per rollout engine
    assert table["response length (max new tokens)"] == ("4096", "32")
    assert "offload (actor_train)" in table
    # Megatron stays Megatron, tensor parallel 2 over the 2 workers, through its CPU path.
    actor = smoke.experiment.role("actor")
    assert actor.backend == "megatron" and actor.parallelism.tp == 2 and smoke.megatron_on_cpu
    assert smoke.workers == 2
    # The table a user reads before the run starts, one line per substitution.
    assert len(smoke.table().splitlines()) == len(smoke.substitutions)


def test_the_prompt_limit_reads_as_the_longest_prompt_kept(tmp_path):
    # ChatLearn keeps prompts shorter than max_prompt_tokens_length: the table must not look like an off-by-one.
    exp = experiment(TEMPLATES / "chatlearn-fsdp-vllm.yaml", ["models.policy.max_prompt_tokens_length=1024"])
    table = subs(S.smoke_experiment(exp, host(tmp_path)))
    assert table["longest prompt"] == ("1023 tokens", "64 characters (the tiny tokenizer has one token per character)")


def test_what_the_machine_runs_is_kept(tmp_path):
    exp = experiment(TEMPLATES / "roll-megatron-vllm.yaml")
    smoke = S.smoke_experiment(exp, host(tmp_path, vllm=True, megatron=False))
    assert smoke.experiment.role("rollout").backend == "vllm"
    assert "rollout engine (actor_infer)" not in subs(smoke)
    # Without megatron-core the training roles fall back to FSDP, and say so.
    assert smoke.experiment.role("actor").backend == "fsdp"
    assert subs(smoke)["training backend (actor_train, reference)"] == ("megatron", "fsdp (megatron-core is not installed)")
    assert not smoke.megatron_on_cpu


def test_the_transform_is_pure(tmp_path):
    exp = experiment(TEMPLATES / "skyrl-fsdp-vllm.yaml")
    before = repr(exp)
    first = S.smoke_experiment(exp, host(tmp_path))
    assert S.smoke_experiment(exp, host(tmp_path)) == first
    assert repr(exp) == before
    assert not (tmp_path / "cache").exists()  # nothing built until materialize


def test_what_is_not_substituted_stays(tmp_path):
    exp = experiment(TEMPLATES / "skyrl-ppo-fsdp-vllm.yaml")
    own_data = frozenset(exp.data.train_files + exp.data.eval_files)
    smoke = S.smoke_experiment(exp, host(tmp_path, local_files=own_data)).experiment
    assert smoke.algorithm == replace(exp.algorithm, group_size=smoke.algorithm.group_size)
    assert smoke.colocation == exp.colocation
    assert [r.name for r in smoke.roles] == [r.name for r in exp.roles]
    assert [r.optimizer for r in smoke.roles] == [r.optimizer for r in exp.roles]
    assert smoke.reward_function == exp.reward_function and smoke.kind == exp.kind
    assert smoke.sampling.temperature == exp.sampling.temperature and smoke.sampling.top_p == exp.sampling.top_p


def test_the_overlong_penalty_keeps_its_share_of_the_shorter_responses(tmp_path):
    # DAPO's penalty over the last 256 of 1024 tokens starts at 768; the smoke run's 32 tokens keep the last quarter
    exp = experiment(TEMPLATES / "areal-fsdp-sglang-grpo.yaml",
                     ["+actor.overlong_reward_penalty=true", "+actor.overlong_tokens=256",
                      "+actor.overlong_penalty_factor=1.0"])
    assert exp.algorithm.reward.overlong_penalty_length == 768
    smoke = S.smoke_experiment(exp, host(tmp_path))
    assert smoke.experiment.sampling.max_new_tokens == S.RESPONSE_TOKENS == 32
    assert smoke.experiment.algorithm.reward.overlong_penalty_length == 24
    assert subs(smoke)["overlong penalty start (tokens)"] == ("768", "24 (the same share of the response length)")
    assert replace(smoke.experiment.algorithm.reward, overlong_penalty_length=768) == exp.algorithm.reward


def test_a_prompt_room_shrinks_to_the_stand_ins_longest_prompt(tmp_path):
    """SkyRL's DAPO trainers that end the buffer at the context limit: the window moves by the room less the prompt,
    so with the stand-in's short prompts the room is the smoke run's longest prompt, or nothing would be punished."""
    exp = experiment(TEMPLATES / "areal-fsdp-sglang-grpo.yaml",
                     ["+actor.overlong_reward_penalty=true", "+actor.overlong_tokens=256",
                      "+actor.overlong_penalty_factor=1.0"])
    exp = replace(exp, algorithm=replace(exp.algorithm, reward=replace(exp.algorithm.reward,
                                                                       overlong_penalty_prompt_room=2048)))
    smoke = S.smoke_experiment(exp, host(tmp_path))
    longest = smoke.experiment.data.max_prompt_length
    assert smoke.experiment.algorithm.reward.overlong_penalty_prompt_room == longest < 2048
    assert subs(smoke)["overlong penalty prompt room (tokens)"] == ("2048", f"{longest} (the longest prompt)")


@pytest.mark.parametrize("path", TEMPLATE_FILES + REFERENCE_EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_divisibility_is_kept(path, tmp_path):
    exp = experiment(path)
    smoke = S.smoke_experiment(exp, host(tmp_path))
    new = smoke.experiment
    s, old = new.schedule, exp.schedule
    assert s.samples_per_step == s.prompts_per_step * new.algorithm.group_size
    if old.samples_per_optimizer_step:
        assert s.samples_per_step % s.samples_per_optimizer_step == 0
        # The number of optimizer steps per step (mini-batches) is the config's.
        assert s.samples_per_step // s.samples_per_optimizer_step == \
            old.samples_per_step // old.samples_per_optimizer_step
    group, kept = exp.algorithm.group_size, new.algorithm.group_size
    assert kept == group if group <= 8 else (kept <= 8 and group % kept == 0)
    assert old.prompts_per_step % s.prompts_per_step == 0  # one factor
    assert s.samples_per_step >= min(8, old.samples_per_step)
    assert new.sampling.max_new_tokens <= 32
    plan, diagnostics = build_plan(new, ClusterShape(nodes=1, gpus_per_node=max(smoke.workers, 1), gpu_name="cpu",
                                                     gpu_memory_bytes=1 << 34))
    errors = [f"{d.code} {d.path}: {d.message}" for d in diagnostics
              if d.severity.value == "error" and not d.code.startswith("RLC5")]
    assert errors == []
    used = {g for p in plan.placements for g in p.gpus}
    assert len(used) == smoke.workers <= max(2, len(plan.groups))
    rollout = plan.placement("rollout")
    if rollout is not None and rollout.dp:
        assert s.prompts_per_step % rollout.dp == 0
    for role in new.roles:
        if role.name != "rollout" and role.backend != "rule":
            assert role.parallelism.sp == 1 and role.parallelism.pp == 1
        assert role.offload == S.Offload()
    if exp.role("rollout") is not None:
        assert new.role("rollout").parallelism.tp == 1


def test_the_critics_mini_batches_keep_their_count(tmp_path):
    exp = experiment(TEMPLATES / "skyrl-ppo-fsdp-vllm.yaml", ["trainer.critic_mini_batch_size=64"])
    old = exp.schedule
    assert old.samples_per_step // old.critic_samples_per_optimizer_step == 4
    smoke = S.smoke_experiment(exp, host(tmp_path))
    s = smoke.experiment.schedule
    assert s.samples_per_step // s.critic_samples_per_optimizer_step == 4
    assert subs(smoke)["critic samples per optimizer step"][1].startswith(
        f"{s.critic_samples_per_optimizer_step} (4 critic optimizer steps per step")


@pytest.mark.parametrize("group, kept", [(1, 1), (5, 5), (8, 8), (12, 6), (16, 8), (32, 8), (10, 5), (9, 3)])
def test_group_size_rule(group, kept):
    assert S._group_size(group) == kept


def test_prompts_are_divided_by_one_factor_that_keeps_the_split():
    # 1024 prompts × 5, 4 mini-batches over 2 ranks: 8 prompts (÷128), 40 samples, 10 per mini-batch, 5 per rank.
    assert S._prompts(1024, 5, 4, 2) == 8
    # A tiny config stays as it is.
    assert S._prompts(2, 2, 1, 1) == 2
    # Prompts split over the rollout engines too.
    assert S._prompts(64, 8, 1, 2, engines=2) == 2
    # No divisor works: the fewest prompts that split.
    p = S._prompts(3, 5, 1, 2)
    assert (p * 5) % 2 == 0


def test_the_configs_own_data_is_used_when_it_is_here(tmp_path):
    exp = experiment(TEMPLATES / "skyrl-fsdp-vllm.yaml")
    files = frozenset(exp.data.train_files + exp.data.eval_files)
    smoke = S.smoke_experiment(exp, host(tmp_path, local_files=files))
    assert smoke.experiment.data.train_files == exp.data.train_files and smoke.data == ()
    assert smoke.experiment.data.max_prompt_length == S.PROMPT_TOKENS_OWN_DATA
    generated = S.smoke_experiment(exp, host(tmp_path))
    assert generated.experiment.data.train_files != exp.data.train_files
    assert generated.experiment.data.max_prompt_length == S.PROMPT_TOKENS
    # SkyRL's gsm8k verifier scores its own data as configured; the generated task's plain-number answers are
    # scored by math instead, and the table says so.
    assert smoke.experiment.reward_function == exp.reward_function == "gsm8k_strict"
    assert "reward function" not in subs(smoke)
    assert generated.experiment.reward_function == "math"
    assert subs(generated)["reward function"] == ("gsm8k_strict (`#### <number>` answers only)",
                                                  "math (the generated task's answers are plain numbers)")


def test_generated_data_is_written_in_the_configs_columns(tmp_path):
    exp = experiment(TEMPLATES / "chatlearn-fsdp-vllm.yaml")  # prompt as chat, answer `reward_model.ground_truth`
    smoke = S.smoke_experiment(exp, host(tmp_path))
    S.materialize(replace(smoke, models=()))
    rows = [json.loads(line) for line in Path(smoke.experiment.data.train_files[0]).read_text().splitlines()]
    assert len(rows) >= smoke.experiment.schedule.prompts_per_step
    question = rows[0]["prompt"][0]["content"]
    a, b = question.rstrip("=").split("+")
    assert rows[0]["reward_model"]["ground_truth"] == str(int(a) + int(b))
    from rlcfg.runtime import rewards

    assert rewards.get(exp.reward_function)(rows[0]["reward_model"]["ground_truth"],
                                            rows[0]["reward_model"]["ground_truth"]) == 1.0


def test_the_tiny_model_is_built_once_and_loads(tmp_path):
    tiny = S.TinyModel("qwen3", str(tmp_path / "tiny-qwen3"))
    assert S.build_model_dir(tiny, warm=False) and not S.build_model_dir(tiny, warm=False)
    config = json.loads((tmp_path / "tiny-qwen3" / "config.json").read_text())
    assert config["model_type"] == "qwen3" and config["head_dim"] == 32 and not config["tie_word_embeddings"]
    from rlcfg.runtime.data import load_tokenizer

    tokenizer = load_tokenizer(str(tmp_path / "tiny-qwen3"))
    text = tokenizer.apply_chat_template([{"role": "user", "content": "12+7="}], tokenize=False,
                                         add_generation_prompt=True)
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text


@pytest.mark.parametrize("path, family", [("Qwen/Qwen2.5-7B-Instruct", "qwen2"), ("/m/Qwen3-8B", "qwen3"),
                                          ("meta-llama/Llama-3.1-8B", "llama"),
                                          ("/x/DeepSeek-R1-Distill-Qwen-1.5B", "qwen2"), ("my-model", None),
                                          ("Qwen/Qwen3-30B-A3B-Base", "qwen3_moe"),
                                          ("/ckpt/Qwen3-235B-A22B-Instruct-2507/", "qwen3_moe"),
                                          ("moonshotai/Moonlight-16B-A3B-Instruct", "deepseek_v3"),
                                          ("/home/user/moonlight16b", "deepseek_v3")])
def test_model_family_from_the_table(path, family):
    assert S.model_family(path) == family


@pytest.mark.parametrize("model_type", ["llama", "qwen3_moe", "deepseek_v3"])
def test_model_family_from_a_local_config(tmp_path, model_type):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    assert S.model_family(str(tmp_path)) == model_type


MOE_CHATLEARN = ["models.policy_trainer.num_gpu=2", "models.policy_trainer.expert_model_parallel_size=2",
                 "models.policy.load=Qwen/Qwen3-30B-A3B", "models.policy_trainer.load=Qwen/Qwen3-30B-A3B"]


def test_a_mixture_of_experts_keeps_its_experts_split_over_the_workers(tmp_path):
    exp = experiment(FIXTURES / "chatlearn" / "reference-example-megatron.yaml", MOE_CHATLEARN)
    exp = replace(exp, roles=tuple(replace(r, parallelism=replace(r.parallelism, tp=2, ep=8))
                                   if r.name == "actor" else r for r in exp.roles))
    smoke = S.smoke_experiment(exp, host(tmp_path, megatron=True, families=(("Qwen/Qwen3-30B-A3B", "qwen3_moe"),)))
    table = subs(smoke)
    assert table["model (models.policy_trainer, models.policy)"][1] == \
        "tiny qwen3_moe, 2 layers, hidden 128, 4 experts (2 per token)"
    # The expert mesh (etp × ep) must fit the 2 workers beside tp=2: the experts stay whole on each rank.
    assert table["parallel sizes (models.policy_trainer)"] == ("ep=8, etp=None", "ep=2, etp=1")
    actor = smoke.experiment.role("actor")
    assert (actor.parallelism.tp, actor.parallelism.ep, actor.parallelism.etp) == (2, 2, 1)
    dense = S.smoke_experiment(exp, host(tmp_path, megatron=True))  # the name unknown: a dense stand-in
    assert dense.experiment.role("actor").parallelism.ep == 1


# ---- the CLI -------------------------------------------------------------------------------------------------------


def run_cli(*args: str, cache: Path, timeout: int = 300) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100", "XDG_CACHE_HOME": str(cache)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "rlcfg", "run", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=timeout)
    return done, time.perf_counter() - start


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("smoke-cache")


def training_steps(metrics: Path) -> list[int]:
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    # An evaluation before training writes a line of its own (step 0, eval/ keys only).
    return [r["step"] for r in rows if any(k != "step" and not k.startswith("eval/") for k in r)]


# ChatLearn's reference document shows 1.2.0's `models.policy.seq_length` (each prompt's limit on prompt + response),
# and its Megatron block a min_lr that ChatLearn's Megatron trainer reaches after one step: the runs keep both.
KEPT = {"chatlearn/reference-example.yaml": ({"max_total_length": 2048}, {"scheduler": "constant"}),
        "chatlearn/reference-example-megatron.yaml": ({"max_total_length": 2048},
                                                      {"scheduler": "linear", "decay_steps": 1, "min_lr": 0.0})}


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


@pytest.mark.parametrize("path", TEMPLATE_FILES + REFERENCE_EXAMPLES, ids=_name)
def test_smoke_runs(path, tmp_path, cache):
    out = tmp_path / "out"
    done, wall = run_cli(str(path), "--smoke", "--steps", "2", "-o", str(out), cache=cache)
    print(f"{path.name}: {wall:.1f} s")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "substitutions for what this machine lacks" in done.stderr
    assert "may score rewards of 0.000" in done.stderr  # what a zero reward of a smoke run means
    assert training_steps(out / "metrics.jsonl") == [1, 2]
    if _name(path) in KEPT:
        ran = json.loads((out / "experiment.json").read_text())
        sampling, optimizer = KEPT[_name(path)]
        actor = next(r for r in ran["roles"] if r["name"] == "actor")
        assert {k: ran["sampling"][k] for k in sampling} == sampling
        assert {k: actor["optimizer"][k] for k in optimizer} == optimizer


def test_a_mixture_of_experts_smoke_runs_with_its_experts_on_two_ranks(tmp_path, cache):
    """Qwen3-MoE on the Megatron backend: the tiny stand-in has experts, megatron-core's all-to-all sends each token
    to the rank that holds its experts, and the rollout engine takes the trained experts under the checkpoint's
    names at every step."""
    out = tmp_path / "out"
    done, _wall = run_cli(str(FIXTURES / "chatlearn" / "reference-example-megatron.yaml"), *MOE_CHATLEARN, "--smoke",
                          "--steps", "2", "-o", str(out), cache=cache)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tiny qwen3_moe, 2 layers, hidden 128, 4 experts (2 per token)" in done.stderr
    assert training_steps(out / "metrics.jsonl") == [1, 2]


# SkyRL's Moonlight example on Megatron, in short: tensor parallel 2 (sequence parallelism on), expert parallel 2.
MOONLIGHT_SKYRL = ["trainer.strategy=megatron", "trainer.policy.model.path=/home/user/moonlight16b",
                   "trainer.policy.megatron_config.tensor_model_parallel_size=2",
                   "trainer.ref.megatron_config.tensor_model_parallel_size=2",
                   "trainer.policy.megatron_config.expert_model_parallel_size=2",
                   "trainer.ref.megatron_config.expert_model_parallel_size=2"]


def test_a_deepseek_v3_smoke_runs_with_latent_attention_and_experts_split(tmp_path, cache):
    """DeepSeek-V3's architecture on the Megatron backend: the tiny stand-in has multi-latent attention, a dense
    first layer and routed and shared experts; its heads split over two tensor-parallel ranks, its experts over
    two expert-parallel ranks, and the routing correction moves after each step as SkyRL's setup moves it."""
    stderr, actor = skyrl_smoke_actor(tmp_path, cache, MOONLIGHT_SKYRL)
    assert "tiny deepseek_v3, 2 layers, hidden 128, multi-latent attention" in stderr
    assert (actor["parallelism"]["tp"], actor["parallelism"]["ep"], actor["expert_bias"]) == (2, 2, 1e-3)


def skyrl_smoke_actor(tmp_path: Path, cache: Path, overrides: list[str]) -> tuple[str, dict]:
    """Two smoke steps of the SkyRL template with `overrides`, which must go through: the run's stderr and the
    actor it ran (experiment.json)."""
    out = tmp_path / "out"
    done, _wall = run_cli(str(TEMPLATES / "skyrl-fsdp-vllm.yaml"), *overrides, "--smoke", "--steps", "2",
                          "-o", str(out), cache=cache)
    assert done.returncode == 0, done.stderr[-3000:]
    assert training_steps(out / "metrics.jsonl") == [1, 2]
    roles = json.loads((out / "experiment.json").read_text())["roles"]
    return done.stderr, next(r for r in roles if r["name"] == "actor")


# SkyRL's Megatron LoRA on a mixture of experts (its run_megatron_lora_qwen3-30b-a3b.sh, in short).
MEGATRON_LORA_SKYRL = ["trainer.strategy=megatron", "trainer.policy.model.path=Qwen/Qwen3-30B-A3B",
                       "trainer.policy.megatron_config.expert_model_parallel_size=2",
                       "trainer.ref.megatron_config.expert_model_parallel_size=2",
                       "trainer.policy.model.lora.rank=8", "trainer.policy.model.lora.alpha=16"]


def test_megatron_lora_on_a_mixture_of_experts_smoke_runs(tmp_path, cache):
    """Adapters on megatron-core's layers, the experts of each rank sharing theirs; the rollout engine takes the
    merged weights at every step, and the run records the adapters it trained."""
    stderr, actor = skyrl_smoke_actor(tmp_path, cache, MEGATRON_LORA_SKYRL)
    assert "tiny qwen3_moe" in stderr
    assert actor["backend"] == "megatron" and actor["lora"]["rank"] == 8


def test_long_context_layouts_smoke_run_as_written(tmp_path, cache):
    """Megatron context parallelism and FSDP Ulysses are kept by the smoke run where its two workers take them:
    each sequence split over both workers, the way the GPU run splits it."""
    for name, template, size, smoke_says in (
            ("cp", "roll-megatron-vllm.yaml", "actor_train.strategy_args.strategy_config.context_parallel_size=2",
             None),
            ("ulysses", "skyrl-fsdp-vllm.yaml", "trainer.policy.sequence_parallel_size=4",
             r"sp \(Ulysses\)=4 +-> sp \(Ulysses\)=2")):
        out = tmp_path / name
        extra = ("actor_train.strategy_args.strategy_config.tensor_model_parallel_size=1",) if name == "cp" else ()
        done, _wall = run_cli(str(TEMPLATES / template), size, *extra, "--smoke", "--steps", "2", "-o", str(out),
                              cache=cache)
        assert done.returncode == 0, done.stderr[-3000:]
        assert training_steps(out / "metrics.jsonl") == [1, 2]
        actor = next(r for r in json.loads((out / "experiment.json").read_text())["roles"] if r["name"] == "actor")
        if smoke_says:
            assert re.search(smoke_says, done.stderr), done.stderr
            assert actor["parallelism"]["sp"] == 2
        else:
            assert "parallel sizes" not in done.stderr  # kept as written
            assert actor["backend"] == "megatron" and actor["parallelism"]["cp"] == 2


def test_areal_s_asynchronous_example_smoke_runs_as_written(tmp_path, cache):
    """AReaL's GSM8K GRPO example trains with rollouts up to 2 updates stale and one step's prompts generating at
    once: the smoke run keeps both (only the concurrency shrinks with the prompts), and every step stays in bound."""
    out = tmp_path / "out"
    done, _ = run_cli(str(FIXTURES / "areal" / "gsm8k-grpo-v0.3.yaml"), "--smoke", "--steps", "4", "-o", str(out),
                      cache=cache)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "max_head_offpolicyness" not in done.stderr
    assert re.search(r"prompts generating at once +256 +-> 2\n", done.stderr)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    staleness = [r["async/staleness_max"] for r in rows if "async/staleness_max" in r]
    assert len(staleness) == 4 and all(s <= 2 for s in staleness) and staleness[0] == 0 and max(staleness) == 1


PARTIAL_ROLLOUT = ("runtime_args.use_partial_rollout=true", "runtime_args.train_global_batch_size=2048",
                   # Rounds of 3 and 29 of the stand-in's 32 tokens: "8<eos>" ends in the first, "16<eos>" fills it.
                   "models.partial_rollout_manager.rollout_ratio=[0.09375,0.90625]",
                   "models.partial_rollout_manager.mini_response_per_prompt=1",
                   "models.partial_rollout_manager.num_cpu=1", "models.partial_rollout_manager.cpu_per_process=1")
PARTIAL_KEYS = ("partial/generated", "partial/trained", "partial/unfinished", "partial/steps_waited_max",
                "reward/mean", "data/prompt_indices")


def test_chatlearns_partial_rollout_continues_responses_in_later_steps_and_across_a_resume(tmp_path, cache):
    template = str(TEMPLATES / "chatlearn-fsdp-vllm.yaml")
    whole, split = tmp_path / "whole", tmp_path / "split"
    done, _ = run_cli(template, "--smoke", "--steps", "4", "-o", str(whole), "--", *PARTIAL_ROLLOUT, cache=cache)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (whole / "metrics.jsonl").read_text().splitlines() if line.strip()]
    assert any(r["partial/unfinished"] for r in rows[:-1])  # responses went on into the next step
    assert any(r["partial/steps_waited_max"] == 1 for r in rows)  # and trained there
    # Any number trains, over two data-parallel ranks (evened out with rows of no loss), in one update per step.
    assert any(r["partial/trained"] % 2 for r in rows)
    for steps in (2, 2):  # the second call resumes from the first one's final checkpoint
        done, _ = run_cli(template, "--smoke", "--steps", str(steps), "-o", str(split), "--", *PARTIAL_ROLLOUT,
                          cache=cache)
        assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming from" in done.stderr
    resumed = [json.loads(line) for line in (split / "metrics.jsonl").read_text().splitlines() if line.strip()]
    # The checkpoint carried the unfinished responses: steps 3 and 4 continue them as the whole run did.
    assert [[r[k] for k in PARTIAL_KEYS] for r in resumed] == [[r[k] for k in PARTIAL_KEYS] for r in rows]


def test_a_partial_rollout_step_that_finishes_nothing_stops_the_run_with_one_line(tmp_path, cache):
    # A first round of one token: no answer and its end-of-sequence token fit, so no response finishes in step 1.
    done, _ = run_cli(str(TEMPLATES / "chatlearn-fsdp-vllm.yaml"), "--smoke", "--steps", "2", "-o",
                      str(tmp_path / "out"), "--", *PARTIAL_ROLLOUT,
                      "models.partial_rollout_manager.rollout_ratio=[0.03125,0.96875]", cache=cache)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "step 1: partial rollout finished no prompt's responses" in done.stderr
    assert "Traceback" not in done.stderr


def test_without_smoke_nothing_is_substituted(tmp_path, cache):
    done, _ = run_cli(str(TEMPLATES / "roll-fsdp2-vllm.yaml"), "--steps", "1", "-o", str(tmp_path / "out"),
                      cache=cache)
    # Refused for what this machine lacks (vLLM here), nothing replaced.
    assert done.returncode == 1 and "this plan cannot run here" in done.stderr
    assert "substitutions for what this machine lacks" not in done.stderr
    assert not (tmp_path / "out" / "metrics.jsonl").exists()


def test_smoke_and_quickstart_do_not_mix(cache):
    done, _ = run_cli("--quickstart", "--smoke", cache=cache)
    assert done.returncode == 2 and "--smoke" in done.stderr



def test_evaluation_prompts_are_held_to_the_stand_in_models_length_too(tmp_path):
    exp = experiment(TEMPLATES / "areal-fsdp-sglang-grpo.yaml")
    data = replace(exp.data, eval_files=("valid.jsonl",), max_prompt_length=1024, eval_max_prompt_length=None)
    smoke = S.smoke_experiment(replace(exp, data=data),
                               host(tmp_path, local_files=frozenset((*data.train_files, "valid.jsonl"))))
    limit = smoke.experiment.data.max_prompt_length
    assert limit < 1024 and smoke.experiment.data.eval_prompt_limit == limit
    assert subs(smoke)["longest evaluation prompt"] == ("unlimited", f"{limit} characters")


# SkyRL's multi-turn environments on the SkyRL template (their launch scripts, in short).
TEXT2SQL_SKYRL = ["environment.env_class=text2sql", "generator.max_turns=6", "generator.max_input_length=4096",
                  "generator.batched=false", "generator.sampling_params.stop=['</sql>','</solution>']",
                  "generator.eval_sampling_params.stop=['</sql>','</solution>']"]
SEARCH_SKYRL = ["environment.env_class=search", "generator.max_turns=4", "generator.max_input_length=4096",
                "generator.batched=false", "generator.use_conversation_multi_turn=true",
                "generator.sampling_params.stop=['</search>','</answer>']",
                "generator.eval_sampling_params.stop=['</search>','</answer>']"]


def test_an_episodes_environment_plays_on_a_generated_task_of_its_kind(tmp_path):
    sql = S.smoke_experiment(experiment(TEMPLATES / "skyrl-fsdp-vllm.yaml", TEXT2SQL_SKYRL), host(tmp_path))
    episodes = sql.experiment.episodes
    assert episodes.setting("db_path") == S.sql_databases(host(tmp_path))
    assert episodes.max_turns == S.SMOKE_TURNS and episodes.longest_sequence(32) <= S.TINY_CONTEXT
    assert [d.task for d in sql.data] == ["text2sql"] * len(sql.data)
    assert sql.experiment.reward_function == "text2sql"  # the environment scores, not a stand-in verifier
    assert "turns per episode" in subs(sql) and "text2sql databases" in subs(sql)
    found = S.smoke_experiment(experiment(TEMPLATES / "skyrl-fsdp-vllm.yaml", SEARCH_SKYRL),
                               replace(host(tmp_path), retrieval_url="http://127.0.0.1:9/retrieve"))
    assert found.experiment.episodes.setting("search_url") == "http://127.0.0.1:9/retrieve"
    assert "search server" in subs(found)


@pytest.mark.parametrize("overrides", [TEXT2SQL_SKYRL, SEARCH_SKYRL], ids=["text2sql", "search"])
def test_an_episodes_smoke_run_goes_through_its_turns(overrides, tmp_path, cache):
    if overrides is TEXT2SQL_SKYRL:
        from tests.runtime.skyrl_gym import require_sandbox

        require_sandbox()
    out = tmp_path / "out"
    done, _wall = run_cli(str(TEMPLATES / "skyrl-fsdp-vllm.yaml"), *overrides, "--smoke", "--steps", "2",
                          "-o", str(out), cache=cache)
    assert done.returncode == 0, done.stderr[-3000:]
    assert training_steps(out / "metrics.jsonl") == [1, 2]
    # the environment's observations are in the responses shown (the stand-in never finishes in one turn)
    assert ("<observation>" if overrides is TEXT2SQL_SKYRL else "<information>") in done.stderr


def test_a_row_the_environment_cannot_start_stops_the_run_with_one_line(tmp_path, cache):
    """The config's own data with a database that is not there: the run's error is the row's, on one line, and no
    worker's traceback follows it (the other engine's call, which fails the same way, is read too)."""
    from tests.runtime.skyrl_gym import require_sandbox

    require_sandbox()
    rows = [{"prompt": [{"role": "user", "content": f"how many? {i}"}], "db_id": "nowhere", "data": "spider",
             "reward_spec": {"ground_truth": "SELECT 1"}} for i in range(40)]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "db").mkdir()
    done, _wall = run_cli(str(TEMPLATES / "skyrl-fsdp-vllm.yaml"), *TEXT2SQL_SKYRL, f"data.train_data=['{data}']",
                          "data.val_data=[]", f"environment.skyrl_gym.text2sql.db_path={tmp_path / 'db'}",
                          "--smoke", "--steps", "2", "-o", str(tmp_path / "out"), cache=cache)
    assert done.returncode == 1
    assert "rlcfg: error: the database of task 'nowhere' is not at " in done.stderr
    assert "Traceback" not in done.stderr and "Unhandled error" not in done.stderr, done.stderr[-2000:]
