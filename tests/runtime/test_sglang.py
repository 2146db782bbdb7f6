"""The SGLang rollout backend. Its lowering is tested everywhere; against SGLang's own ServerArgs (every name a
field, every value of the field's type and among its choices, the object constructed for real) where
`sglang.srt.server_args` imports. SGLang's engine needs a GPU (its kernels load libcuda), so the real engine's
generation, weight updates and memory release are skipped without one; the order of the backend's memory calls is
tested everywhere, on a stand-in that keeps SGLang's scheduler bookkeeping.
"""

from __future__ import annotations

import sys
import types
import typing

import pytest

from rlcfg.frontend import check_file
from rlcfg.ir import Sampling
from rlcfg.lower import lower
from rlcfg.plan import build_plan
from rlcfg.runtime.backends import sglang as S
from tests.helpers import TEMPLATES

NO_SGLANG = ("sglang.srt.server_args does not import here (pip install 'rlcfg[sglang]', or sglang --no-deps "
             "beside a CPU torch with msgspec, orjson and IPython)")


def plan_of(path):
    result = check_file(str(path))
    assert result.errors == 0, result.diagnostics
    plan, _ = build_plan(lower(result.dialect, result.config))
    return plan


def sglang_templates():
    out = []
    for path in sorted(TEMPLATES.glob("*.yaml")):
        role = plan_of(path).experiment.role("rollout")
        if role is not None and role.backend == "sglang":
            out.append(pytest.param(path, id=path.stem))
    return out


TEMPLATES_WITH_SGLANG = sglang_templates()


# ---- the lowering -----------------------------------------------------------------------------------------------

def test_every_sglang_template_is_covered():
    assert {p.id for p in TEMPLATES_WITH_SGLANG} >= {"areal-fsdp-sglang-grpo", "rlinf-megatron-sglang"}


def test_rlinf_engine_settings():
    plan = plan_of(TEMPLATES / "rlinf-megatron-sglang.yaml")
    args = S.server_args(plan.experiment.role("rollout"), plan)
    assert args["model_path"] == "/path/to/DeepSeek-R1-Distill-Qwen-1.5B" and args["trust_remote_code"] is True
    assert (args["tp_size"], args["dp_size"]) == (2, 1)  # the plan's 4 engines are 4 Engine instances
    assert args["mem_fraction_static"] == 0.55 and args["attention_backend"] == "triton"
    assert args["max_running_requests"] == 128 and args["context_length"] == 8192
    assert args["cuda_graph_max_bs_decode"] == 128 and args["disable_cuda_graph"] is False
    # rollout shares its GPUs with the actor: weights and KV cache must be releasable
    assert args["enable_memory_saver"] is True


def test_areal_engine_settings():
    plan = plan_of(TEMPLATES.parent / "tests" / "fixtures" / "areal" / "gsm8k-grpo-v0.3.yaml")  # AReaL's own example
    args = S.server_args(plan.experiment.role("rollout"), plan)
    assert args["attention_backend"] == "fa3" and args["mem_fraction_static"] == 0.8
    assert args["context_length"] == 32768 and args["random_seed"] == 1
    assert args["chunked_prefill_size"] == -1  # chunked prefill off
    assert args["disable_radix_cache"] is False  # prefix caching on
    assert "enable_memory_saver" not in args  # its rollout GPUs are its own


def test_renamed_arguments_follow_the_installed_version():
    plan = plan_of(TEMPLATES / "rlinf-megatron-sglang.yaml")
    role = plan.experiment.role("rollout")
    older = S.server_args(role, plan, fields={"cuda_graph_max_bs", "cuda_graph_bs", "model_path"})
    assert older["cuda_graph_max_bs"] == 128 and "cuda_graph_max_bs_decode" not in older
    newer = S.server_args(role, plan, fields={"cuda_graph_max_bs_decode", "cuda_graph_max_bs"})
    assert newer["cuda_graph_max_bs_decode"] == 128 and "cuda_graph_max_bs" not in newer


def test_sampling_params_one_request_per_sample():
    assert S.sampling_params(Sampling(max_new_tokens=8, temperature=0.6, top_k=0, stop=("</s>",)), 7) == {
        "max_new_tokens": 8, "temperature": 0.6, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "stop": ["</s>"],
        "sampling_seed": 7}


def test_a_sampled_run_is_told_that_sglang_ignores_its_per_sample_seeds():
    plan = plan_of(TEMPLATES / "rlinf-megatron-sglang.yaml")  # actor.seed: 1234, sampled rollouts
    role = plan.experiment.role("rollout")
    args = S.server_args(role, plan)
    # The seed reaches SGLang as the frameworks give it, the engine's random_seed; deterministic inference (the
    # only mode in which SGLang samples with a request's sampling_seed) stays off, as in the framework.
    assert args["random_seed"] == 1234 and "enable_deterministic_inference" not in args
    warning = S.unseeded_sampling_warning(role, plan, args)
    assert warning.startswith("rlcfg: warning: ") and "\n" not in warning
    assert "enable_deterministic_inference" in warning and "random_seed 1234" in warning
    assert warning.endswith("for per-sample seeds, set `rollout.rollout_backend: vllm`")  # in RLinf's words


def test_greedy_decoding_needs_no_seed_warning():
    import dataclasses

    plan = plan_of(TEMPLATES / "rlinf-megatron-sglang.yaml")
    exp = plan.experiment
    greedy = dataclasses.replace(exp, sampling=dataclasses.replace(exp.sampling, temperature=0.0), eval_sampling=None)
    plan = dataclasses.replace(plan, experiment=greedy)
    role = greedy.role("rollout")
    assert S.unseeded_sampling_warning(role, plan, S.server_args(role, plan)) is None


# ---- memory release and resume, against SGLang's scheduler ------------------------------------------------------

# What release_memory_occupation() with no tags frees (sglang/srt/constants.py): 0.5.23's GPU_MEMORY_ALL_TYPES, and
# 0.5.1's two tags, from before that list existed.
SGLANG_0_5_23_TAGS = ("kv_cache", "weights", "cuda_graph")
SGLANG_0_5_1_TAGS = ("weights", "kv_cache")


class SchedulerStandIn:
    """sglang.Engine as far as memory goes, with its scheduler's bookkeeping (0.5.23,
    managers/scheduler_components/weight_updater.py): a set of released tags, no tags meaning every tag; a resume
    removes each tag from the set (KeyError for one not released); a release adds them, and pausing memory that is
    already paused ends the scheduler process (torch_memory_saver: "Cannot pause allocation that is not active").
    Loading weights into released weight memory, or generating with anything released, is an illegal memory
    access on a GPU: refused here too."""

    every_tag: tuple[str, ...] = SGLANG_0_5_23_TAGS

    def __init__(self, **server_args):
        self.server_args = server_args
        self.offload_tags: set[str] = set()
        self.weights = None

    def release_memory_occupation(self, tags=None):
        tags = tags or self.every_tag
        for tag in tags:
            if tag in self.offload_tags:
                raise RuntimeError(f"[torch_memory_saver.cpp] Cannot pause allocation that is not active ({tag})")
        self.offload_tags.update(tags)

    def resume_memory_occupation(self, tags=None):
        for tag in tags or self.every_tag:
            self.offload_tags.remove(tag)

    def update_weights_from_tensor(self, named_tensors, load_format=None, flush_cache=True):
        if "weights" in self.offload_tags:
            raise RuntimeError("illegal memory access: weights loaded into released memory")
        self.weights = dict(named_tensors)
        return True, "Success"

    def generate(self, input_ids, sampling_params, return_logprob=False):
        if self.offload_tags:
            raise RuntimeError(f"illegal memory access: generating with {sorted(self.offload_tags)} released")
        return [{"output_ids": [2], "meta_info": {"output_token_logprobs": [(-0.5, 2, None)],
                                                  "finish_reason": {"type": "stop"}}} for _ in input_ids]

    def shutdown(self):
        pass


@pytest.fixture(params=[SGLANG_0_5_23_TAGS, SGLANG_0_5_1_TAGS], ids=["sglang-0.5.23", "sglang-0.5.1"])
def sglang_engine(request, monkeypatch, tmp_path):
    """Builds the backend's own SGLangRolloutEngine from server args, on the stand-in for SGLang's engine of one
    release."""
    from rlcfg.runtime.quickstart import build_tokenizer

    tags = request.param
    stand_in = type("Engine", (SchedulerStandIn,), {"every_tag": tags})
    constants = types.ModuleType("sglang.srt.constants")
    constants.GPU_MEMORY_TYPE_WEIGHTS, constants.GPU_MEMORY_TYPE_KV_CACHE = "weights", "kv_cache"
    if "cuda_graph" in tags:
        constants.GPU_MEMORY_ALL_TYPES = list(tags)
    srt = types.ModuleType("sglang.srt")
    srt.constants = constants
    sglang = types.ModuleType("sglang")
    sglang.Engine, sglang.srt = stand_in, srt
    for name, module in (("sglang", sglang), ("sglang.srt", srt), ("sglang.srt.constants", constants)):
        monkeypatch.setitem(sys.modules, name, module)
    build_tokenizer(str(tmp_path))
    return lambda **args: S.SGLangRolloutEngine({"model_path": str(tmp_path), **args})


GREEDY = Sampling(max_new_tokens=2, temperature=0.0, n=1)
WEIGHTS = {"model.embed_tokens.weight": "new"}

ORDERS = {
    # HybridWorker: asleep after start, the first sync, then each step: generate, sleep, train, sync.
    "hybrid steps": ["sleep", "update_weights", "generate", "sleep", "update_weights", "generate", "sleep"],
    # the GPU test's order: a sync while asleep, then an explicit wake
    "sync asleep, wake_up": ["sleep", "update_weights", "wake_up", "generate"],
    # a sync while asleep, then back to sleep before any generation
    "sync asleep, sleep again": ["sleep", "update_weights", "sleep", "generate"],
    "repeated calls": ["sleep", "sleep", "wake_up", "wake_up", "update_weights", "update_weights", "generate"],
    "sync awake": ["update_weights", "generate", "sleep", "wake_up", "update_weights", "generate"],
}


@pytest.mark.parametrize("order", ORDERS.values(), ids=ORDERS.keys())
def test_colocated_engine_takes_turns_with_training(sglang_engine, order):
    engine = sglang_engine(enable_memory_saver=True)  # what server_args gives an engine colocated with training
    scheduler = engine.engine
    every = set(scheduler.every_tag)
    for call in order:
        if call == "generate":
            assert len(engine.generate([[3, 4]], GREEDY, seed=1)) == 1
            assert not scheduler.offload_tags
        elif call == "update_weights":
            asleep = bool(scheduler.offload_tags)
            assert engine.update_weights(WEIGHTS) == 1 and scheduler.weights == WEIGHTS
            # the weights come back for the sync; the KV cache stays with training until generation
            assert scheduler.offload_tags == (every - {"weights"} if asleep else set())
        elif call == "sleep":
            engine.sleep()
            assert scheduler.offload_tags == every  # all of the engine's memory is training's
        else:
            engine.wake_up()
            assert not scheduler.offload_tags


def test_an_engine_on_gpus_of_its_own_keeps_its_memory(sglang_engine):
    engine = sglang_engine()  # no enable_memory_saver: the driver still puts it to sleep after start
    engine.sleep()
    engine.update_weights(WEIGHTS)
    engine.generate([[3, 4]], GREEDY)
    engine.wake_up()
    assert not engine.engine.offload_tags


# ---- against SGLang's ServerArgs ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server_args_cls():
    module = pytest.importorskip("sglang.srt.server_args", reason=NO_SGLANG)
    return module.ServerArgs


def _field_types(cls) -> dict[str, typing.Any]:
    import dataclasses

    if dataclasses.is_dataclass(cls):
        return {f.name: f.type for f in dataclasses.fields(cls)}
    return dict(cls.__annotations__)  # msgspec Struct (0.5.23+): annotations resolved by SGLang itself


def _choices(annotation) -> list | None:
    for extra in getattr(annotation, "__metadata__", ()):
        choices = getattr(extra, "choices", None)
        if choices:
            return list(choices)
    return None


@pytest.mark.parametrize("path", TEMPLATES_WITH_SGLANG)
def test_server_args_are_sglang_server_args(path, server_args_cls):
    import msgspec

    plan = plan_of(path)
    args = S.server_args(plan.experiment.role("rollout"), plan, fields=S.installed_fields())
    types = _field_types(server_args_cls)
    unknown = sorted(set(args) - set(types))
    assert not unknown, f"not ServerArgs fields in this SGLang version: {unknown}"
    for name, value in args.items():
        msgspec.convert(value, type=types[name], strict=True)  # the field's own type, no coercion
        choices = _choices(types[name])
        if choices is not None:
            assert value in choices, (name, value, choices)
    constructed = server_args_cls(**args)  # SGLang's constructor (checks run later, in resolve_once, on a GPU)
    for name, value in args.items():
        assert getattr(constructed, name) == value


def test_server_args_refuses_a_misspelt_name(server_args_cls):
    with pytest.raises(TypeError, match="mem_fraction"):
        server_args_cls(model_path="m", mem_fraction=0.5)


# ---- GPU only -----------------------------------------------------------------------------------------------------

def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.skipif(not _has_gpu(), reason="SGLang's engine needs a CUDA GPU (sgl_kernel loads libcuda; "
                                          "ServerArgs.resolve_once checks the device)")
def test_engine_generates_and_takes_weights(tmp_path):  # pragma: no cover - needs a GPU
    pytest.importorskip("sglang", reason=NO_SGLANG)
    import torch
    from transformers import AutoModelForCausalLM

    from tests.runtime.test_vllm import PROMPTS, tiny_model

    first, second = tiny_model(str(tmp_path / "a"), 0), tiny_model(str(tmp_path / "b"), 1)
    engine = S.SGLangRolloutEngine({"model_path": first, "dtype": "float32", "mem_fraction_static": 0.3,
                                    "disable_cuda_graph": True, "enable_memory_saver": True, "log_level": "error"})
    greedy = Sampling(max_new_tokens=6, temperature=0.0, n=1)
    before = engine.generate(PROMPTS, greedy)
    assert all(len(g.logprobs) == len(g.token_ids) for g in before)
    state = AutoModelForCausalLM.from_pretrained(second, dtype=torch.float32).state_dict()
    engine.sleep()
    engine.update_weights(state)
    engine.wake_up()
    after = engine.generate(PROMPTS, greedy)
    assert [g.token_ids for g in after] != [g.token_ids for g in before]
    engine.shutdown()
