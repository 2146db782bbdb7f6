"""The SGLang rollout backend. Its lowering is tested everywhere; against SGLang's own ServerArgs (every name a
field, every value of the field's type and among its choices, the object constructed for real) where
`sglang.srt.server_args` imports. SGLang's engine needs a GPU (its kernels load libcuda), so generation,
weight updates and memory release are skipped without one.
"""

from __future__ import annotations

import typing

import pytest

from rlcfg.frontend import check_file
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
    assert S.sampling_params({"max_new_tokens": 8, "temperature": 0.6, "top_k": 0, "stop": ["</s>"]}, 7) == {
        "max_new_tokens": 8, "temperature": 0.6, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "stop": ["</s>"],
        "sampling_seed": 7}


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
    greedy = {"max_new_tokens": 6, "temperature": 0.0, "n": 1}
    before = engine.generate(PROMPTS, greedy)
    assert all(len(g.logprobs) == len(g.token_ids) for g in before)
    state = AutoModelForCausalLM.from_pretrained(second, dtype=torch.float32).state_dict()
    engine.sleep()
    engine.update_weights(state)
    engine.wake_up()
    after = engine.generate(PROMPTS, greedy)
    assert [g.token_ids for g in after] != [g.token_ids for g in before]
    engine.shutdown()
