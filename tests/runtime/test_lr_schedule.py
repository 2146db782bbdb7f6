"""The learning rate of each optimizer step, per dialect, against the framework's own scheduler.

Each dialect's config is lowered as a user would write it; rlcfg's one formula (rlcfg.runtime.algorithms.lr_at)
must then give the lr the framework's scheduler gives, step for step. Where the framework builds its scheduler from
transformers (transformers.optimization.get_scheduler) or megatron-core (OptimizerParamScheduler), the expected
sequence comes from that real class, driven as the framework drives it; where it writes its own (AReaL's cosine), the
test writes the framework's formula out, and a few values are also given as plain numbers worked out by hand."""

from __future__ import annotations

import dataclasses
import math

import pytest

torch = pytest.importorskip("torch")

from rlcfg.frontend import check_file  # noqa: E402
from rlcfg.ir import LrSchedule, Optimizer  # noqa: E402
from rlcfg.lower import lower  # noqa: E402
from rlcfg.runtime import algorithms as A  # noqa: E402
from tests.helpers import TEMPLATES  # noqa: E402

ENV = {"HOME": "/home/user"}


def lowered_optimizer(dialect: str, template: str, *overrides: str, role: str = "actor") -> Optimizer:
    result = check_file(str(TEMPLATES / template), list(overrides), env=ENV)
    errors = [f"{d.code} {d.path}: {d.message}" for d in result.diagnostics if d.severity.name == "ERROR"]
    assert result.config is not None and not errors, errors
    opt = lower(dialect, result.config).role(role).optimizer
    assert opt is not None
    return opt


def rlcfg_lrs(opt: Optimizer, length: int | None, steps) -> list[float]:
    schedule = A.lr_schedule(opt, length)
    return [A.lr_at(k, schedule) for k in steps]


def transformers_lrs(name: str, lr: float, warmup: int, total: int, steps, **kwargs) -> list[float]:
    """The lr of each optimizer step under transformers' get_scheduler, stepped once after each update (SkyRL's
    fsdp_strategy.optimizer_step, ROLL's fsdp2_strategy.train_step, AReaL's step_lr_scheduler)."""
    transformers = pytest.importorskip("transformers")
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=lr)
    scheduler = transformers.get_scheduler(name, optimizer, num_warmup_steps=warmup, num_training_steps=total,
                                           scheduler_specific_kwargs=kwargs or None)
    wanted, out = set(steps), {}
    for k in range(max(wanted) + 1):
        if k in wanted:
            out[k] = optimizer.param_groups[0]["lr"]
        optimizer.step()
        scheduler.step()
    return [out[k] for k in steps]


class _Groups:
    """What OptimizerParamScheduler reads and writes of a megatron optimizer: its parameter groups."""

    def __init__(self):
        self.param_groups = [{"params": [], "wd_mult": 1.0}]


def megatron_lrs(steps, increment: int = 1, **kwargs) -> list[float]:
    """The lr of each optimizer step under megatron-core's OptimizerParamScheduler (step(0) at construction,
    step(increment) after each update)."""
    module = pytest.importorskip("megatron.core.optimizer_param_scheduler")
    groups = _Groups()
    kwargs = {"start_wd": 0.0, "end_wd": 0.0, "wd_incr_steps": 1, "wd_incr_style": "constant", **kwargs}
    scheduler = module.OptimizerParamScheduler(groups, **kwargs)
    wanted, out = set(steps), {}
    for k in range(max(wanted) + 1):
        if k in wanted:
            out[k] = groups.param_groups[0]["lr"]
        scheduler.step(increment=increment)
    return [out[k] for k in steps]


FIRST = range(10)


# ---- the formula ----------------------------------------------------------------------------------------------


def test_warm_up_starts_at_zero_and_reaches_lr_at_the_warm_up_length():
    """Step k of a warm-up of W is k/W of the way: transformers' lambdas (step / max(1, warmup)) and Megatron's
    init_lr + (max_lr - init_lr)·step/warmup agree; the first update uses the warm-up's start, not a W-th of lr."""
    schedule = LrSchedule(lr=1.0, shape="constant", warmup_steps=4)
    assert [A.lr_at(k, schedule) for k in range(6)] == [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]


def test_decay_ends_at_min_lr_and_stays_there():
    schedule = LrSchedule(lr=1.0, shape="linear", warmup_steps=2, min_lr=0.1, decay_steps=4)
    assert [round(A.lr_at(k, schedule), 10) for k in range(9)] == [0.0, 0.5, 1.0, 0.775, 0.55, 0.325, 0.1, 0.1, 0.1]
    cosine = dataclasses.replace(schedule, shape="cosine")
    assert A.lr_at(4, cosine) == pytest.approx(0.55) and A.lr_at(6, cosine) == A.lr_at(60, cosine) == 0.1


# ---- SkyRL ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cosine", "linear", "constant_with_warmup", "constant"])
def test_skyrl_fsdp_follows_transformers(name):
    """skyrl_train/distributed/fsdp_strategy.py (prepare): get_scheduler(optimizer_config.scheduler, num_warmup_steps,
    num_training_steps = total_training_steps × policy steps per batch), stepped after each optimizer step. The
    constant schedule (get_constant_schedule) ignores the warm-up."""
    opt = lowered_optimizer("skyrl", "skyrl-fsdp-vllm.yaml", f"trainer.policy.optimizer_config.scheduler={name}",
                            "trainer.policy.optimizer_config.num_warmup_steps=3")
    total = 12
    expected = transformers_lrs(name, opt.lr, 3, total, range(total))
    assert rlcfg_lrs(opt, total, range(total)) == pytest.approx(expected, rel=1e-12, abs=1e-18)
    if name != "constant":
        assert rlcfg_lrs(opt, total, range(4)) == pytest.approx([0.0, opt.lr / 3, 2 * opt.lr / 3, opt.lr])


# ---- ROLL -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cosine", "linear", "polynomial", "constant_with_warmup", "constant"])
def test_roll_fsdp_follows_transformers_over_the_workers_max_steps(name):
    """roll/distributed/strategy/fsdp2_strategy.py: get_scheduler(lr_scheduler_type, num_warmup_steps =
    get_warmup_steps(max_steps), num_training_steps = max_steps), where max_steps is set_max_steps's
    (roll/configs/base_config.py) max(1, 300 steps × 32 prompts × 8 samples × 1 ppo_epoch // (4 × 16)) = 1200,
    divided by the data-parallel size 4 (8 GPUs / ulysses 2): 300. polynomial ends at transformers' lr_end 1e-7."""
    opt = lowered_optimizer("roll", "roll-fsdp2-vllm.yaml", f"++actor_train.training_args.lr_scheduler_type={name}")
    steps = [*FIRST, 10, 11, 150, 298, 299]
    warmup = 0 if name == "constant" else 10  # the template's warmup_steps
    expected = transformers_lrs(name, opt.lr, warmup, 300, steps)
    assert rlcfg_lrs(opt, None, steps) == pytest.approx(expected, rel=1e-9, abs=1e-18)


def test_roll_megatron_follows_mcore_adapter():
    """mcore_adapter/trainer/utils.py get_megatron_lr_scheduler: OptimizerParamScheduler(init_lr 0, max_lr
    learning_rate, min_lr 0, lr_warmup_steps = get_warmup_steps(max_steps), lr_decay_steps = max_steps), max_steps
    being the worker's (roll-megatron-vllm: 500 steps × 64 samples // 64 per rank... / DP: 500), warm-up 20, linear."""
    opt = lowered_optimizer("roll", "roll-megatron-vllm.yaml")
    steps = [*FIRST, 19, 20, 21, 250, 499, 500, 501]
    expected = megatron_lrs(steps, init_lr=0.0, max_lr=opt.lr, min_lr=0.0, lr_warmup_steps=20, lr_decay_steps=500,
                            lr_decay_style="linear")
    assert rlcfg_lrs(opt, None, steps) == pytest.approx(expected, rel=1e-9, abs=1e-18)
    assert rlcfg_lrs(opt, None, [0, 1, 2]) == pytest.approx([0.0, opt.lr / 20, opt.lr / 10])


# ---- AReaL ----------------------------------------------------------------------------------------------------


def areal_cosine(k: int, lr: float, warmup: int, total: int, min_ratio: float) -> float:
    """areal/utils/fsdp/__init__.py (0.3.4; areal/engine/fsdp_utils in 1.0) get_cosine_schedule_with_warmup."""
    if k < warmup:
        return lr * (min_ratio + (1.0 - min_ratio) * k / max(1, warmup))
    progress = (k - warmup) / max(1, total - warmup)
    return lr * max(min_ratio, math.cos(math.pi * progress) * (1 - min_ratio) * 0.5 + (1 + min_ratio) * 0.5)


AREAL_COSINE = ("++actor.optimizer.lr_scheduler_type=cosine", "++actor.optimizer.min_lr_ratio=0.1")


def test_areal_fsdp_cosine_warms_up_from_and_decays_to_min_lr_ratio():
    """AReaL's FSDP engine (base_hf_engine.py create_optimizer) uses its own cosine: min_lr_ratio is both the start
    of the warm-up and the floor. Stepped once per training step over total_train_steps (gsm8k_grpo.py)."""
    opt = lowered_optimizer("areal", "areal-fsdp-sglang-grpo.yaml", *AREAL_COSINE)
    assert opt.schedule_unit == "train_step"
    with_warmup = dataclasses.replace(opt, warmup_steps=2)  # int(proportion × total_train_steps), a run's figure
    total = 10
    # Its training loop ends at total_train_steps (a step cap only ends it earlier): steps 0..total are all it asks.
    expected = [areal_cosine(k, opt.lr, 2, total, 0.1) for k in range(total + 1)]
    assert rlcfg_lrs(with_warmup, total, range(total + 1)) == pytest.approx(expected, rel=1e-12)
    assert rlcfg_lrs(with_warmup, total, [0, 1, 2, 10]) == pytest.approx([1e-7, 5.5e-7, 1e-6, 1e-7])


def test_areal_fsdp_linear_ignores_min_lr_ratio():
    """base_hf_engine.py: the linear schedule is transformers' get_linear_schedule_with_warmup, which decays to 0
    whatever min_lr_ratio says."""
    opt = lowered_optimizer("areal", "areal-fsdp-sglang-grpo.yaml", "++actor.optimizer.lr_scheduler_type=linear",
                            "++actor.optimizer.min_lr_ratio=0.1")
    assert opt.min_lr == 0.0
    with_warmup = dataclasses.replace(opt, warmup_steps=3)
    assert rlcfg_lrs(with_warmup, 10, range(12)) == pytest.approx(
        transformers_lrs("linear", opt.lr, 3, 10, range(12)), rel=1e-12, abs=1e-18)


def test_areal_megatron_decays_to_min_lr_ratio_in_both_shapes():
    """areal/engine/megatron_engine.py (1.0): OptimizerParamScheduler(init_lr 0 when warming up, min_lr
    min_lr_ratio × lr, lr_warmup_steps int(proportion × total), lr_decay_steps total_train_steps)."""
    from rlcfg.dialects.areal import lower as lowering

    result = check_file(str(TEMPLATES / "areal-fsdp-sglang-grpo.yaml"),
                        ["++actor.optimizer.lr_scheduler_type=linear", "++actor.optimizer.min_lr_ratio=0.1"], env=ENV)
    opt = dataclasses.replace(lowering._optimizer(result.config.actor, None, "megatron"), warmup_steps=2)
    assert opt.min_lr == pytest.approx(1e-7) and opt.warmup_start_lr == 0.0
    steps = [*FIRST, 10, 11]
    expected = megatron_lrs(steps, init_lr=0.0, max_lr=opt.lr, min_lr=1e-7, lr_warmup_steps=2, lr_decay_steps=10,
                            lr_decay_style="linear")
    assert rlcfg_lrs(opt, 10, steps) == pytest.approx(expected, rel=1e-12)


# ---- ChatLearn ------------------------------------------------------------------------------------------------


def test_chatlearn_fsdp_keeps_lr():
    """chatlearn/models/fsdp_module.py: the FSDP trainer builds no scheduler."""
    opt = lowered_optimizer("chatlearn", "chatlearn-fsdp-vllm.yaml")
    assert rlcfg_lrs(opt, 200, FIRST) == [opt.lr] * 10


def test_chatlearn_megatron_decays_to_min_lr_after_the_first_step():
    """chatlearn/models/megatron_module.py runs Megatron with train_iters 1, so Megatron-LM's
    get_optimizer_param_scheduler decays linearly over lr_decay_iters = train_iters = 1 (in samples: one global
    batch), with no warm-up: lr for the first update, min_lr for all later ones."""
    opt = lowered_optimizer("chatlearn", "chatlearn-megatron-vllm.yaml",
                            "runtime_args.train_backend=megatron", "models.policy_trainer.optimizer.min_lr=1e-07")
    batch = 64
    expected = megatron_lrs(FIRST, increment=batch, init_lr=opt.lr, max_lr=opt.lr, min_lr=1e-7, lr_warmup_steps=0,
                            lr_decay_steps=batch, lr_decay_style="linear")
    assert rlcfg_lrs(opt, 100, FIRST) == pytest.approx(expected, rel=1e-12)
    assert rlcfg_lrs(opt, 100, [0, 1, 2]) == pytest.approx([opt.lr, 1e-7, 1e-7])


# ---- RLinf ----------------------------------------------------------------------------------------------------

RLINF_COSINE = ("actor.lr_sched.lr_decay_style=cosine", "++actor.lr_sched.start_weight_decay=0.01",
                "++actor.lr_sched.end_weight_decay=0.01", "actor.lr_sched.min_lr=1e-7")


def rlinf_megatron(opt_lr: float, sched: dict, steps, batch: int = 32) -> list[float]:
    """rlinf/utils/initialize.py hands lr_sched to Megatron-LM's get_optimizer_param_scheduler (training.py):
    lr_decay_steps = (lr_decay_iters or train_iters, which rlinf/config.py fixes at 100000) × global batch,
    lr_warmup_steps = lr_warmup_fraction × lr_decay_steps when the fraction is set, else lr_warmup_iters × batch;
    megatron_actor_worker.py steps it by the global batch after each update."""
    decay = (sched.get("lr_decay_iters") or 100000) * batch
    warmup = (sched["lr_warmup_fraction"] * decay if sched.get("lr_warmup_fraction") is not None
              else sched.get("lr_warmup_iters", 0) * batch)
    return megatron_lrs(steps, increment=batch, init_lr=sched.get("lr_warmup_init", 0.0), max_lr=opt_lr,
                        min_lr=sched["min_lr"], lr_warmup_steps=warmup, lr_decay_steps=decay,
                        lr_decay_style=sched["style"])


def test_rlinf_megatron_warms_up_from_lr_warmup_init_and_decays_until_lr_decay_iters():
    opt = lowered_optimizer("rlinf", "rlinf-megatron-sglang.yaml", *RLINF_COSINE,
                            "actor.lr_sched.lr_warmup_fraction=0.1", "actor.lr_sched.lr_warmup_init=1e-7")
    steps = [*FIRST, 99, 100, 101, 550, 999, 1000, 1001, 1500]
    expected = rlinf_megatron(opt.lr, {"lr_decay_iters": 1000, "lr_warmup_fraction": 0.1, "lr_warmup_init": 1e-7,
                                       "min_lr": 1e-7, "style": "cosine"}, steps)
    # The run's own length (here 5 steps) does not shorten RLinf's decay: it ends at lr_decay_iters.
    assert rlcfg_lrs(opt, 5, steps) == pytest.approx(expected, rel=1e-9)


def test_rlinf_megatron_without_lr_decay_iters_decays_over_megatrons_train_iters():
    opt = lowered_optimizer("rlinf", "rlinf-megatron-sglang.yaml", *RLINF_COSINE, "actor.lr_sched.lr_decay_iters=null",
                            "actor.lr_sched.lr_warmup_fraction=0.0")
    steps = [*FIRST, 50000, 99999, 100000, 100001]
    expected = rlinf_megatron(opt.lr, {"lr_decay_iters": None, "lr_warmup_fraction": 0.0, "min_lr": 1e-7,
                                       "style": "cosine"}, steps)
    assert rlcfg_lrs(opt, 5, steps) == pytest.approx(expected, rel=1e-9)


def test_rlinf_megatron_fractional_warm_up_is_not_rounded():
    """lr_warmup_fraction 0.01 of 10 decay iterations is a warm-up of 0.1 iteration: Megatron's first update
    still runs at lr_warmup_init (0), the second already decays."""
    opt = lowered_optimizer("rlinf", "rlinf-megatron-sglang.yaml", "actor.lr_sched.lr_decay_style=linear",
                            "++actor.lr_sched.start_weight_decay=0.01", "++actor.lr_sched.end_weight_decay=0.01",
                            "actor.lr_sched.lr_decay_iters=10", "actor.lr_sched.lr_warmup_fraction=0.01")
    expected = rlinf_megatron(opt.lr, {"lr_decay_iters": 10, "lr_warmup_fraction": 0.01, "min_lr": 0.0,
                                       "style": "linear"}, [*FIRST, 10, 11])
    assert rlcfg_lrs(opt, 5, [*FIRST, 10, 11]) == pytest.approx(expected, rel=1e-9, abs=1e-18)
    assert expected[0] == 0.0


# ---- the backends ---------------------------------------------------------------------------------------------


def test_fsdp_backend_lambda_gives_lr_at_each_optimizer_step():
    opt = Optimizer(lr=0.5, scheduler="cosine", warmup_steps=3, min_lr=0.05)
    assert fsdp_lrs(opt, 12, 14) == pytest.approx(rlcfg_lrs(opt, 12, range(14)), rel=1e-12)


def fsdp_lrs(opt, length, steps):
    """The learning rate of each of `steps` optimizer steps under the FSDP backend's scheduler for the Experiment's
    optimizer `opt` over a schedule of `length` steps."""
    from rlcfg.runtime.backends.fsdp import lr_factor

    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=opt.lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor(opt, length))
    seen = []
    for _ in range(steps):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return seen


def test_megatron_backend_scheduler_sets_lr_at_each_optimizer_step():
    module = pytest.importorskip("megatron.core.optimizer_param_scheduler")
    from rlcfg.runtime.backends.megatron import follow_schedule

    schedule = LrSchedule(lr=0.5, shape="linear", warmup_steps=2, warmup_start_lr=0.1, min_lr=0.05, decay_steps=5)
    groups = _Groups()
    scheduler = module.OptimizerParamScheduler(groups, init_lr=0.0, max_lr=0.5, min_lr=0.05, lr_warmup_steps=2,
                                               lr_decay_steps=7, lr_decay_style="linear", start_wd=0.01, end_wd=0.01,
                                               wd_incr_steps=7, wd_incr_style="constant")
    follow_schedule(scheduler, schedule)
    seen = []
    for _ in range(10):
        seen.append(groups.param_groups[0]["lr"])
        scheduler.step(increment=1)
    assert seen == pytest.approx([A.lr_at(k, schedule) for k in range(10)], rel=1e-12)
    assert groups.param_groups[0]["weight_decay"] == 0.01  # megatron-core still sets the weight decay
