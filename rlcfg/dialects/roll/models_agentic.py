"""ROLL's agentic pipeline (`AgenticConfig`, examples/start_agentic_pipeline.py): multi-turn rollouts in
environments run by env managers instead of a prompt dataset.

Kept apart from models.py so that an RLVR config, the pipeline of most ROLL examples, is checked without
declaring these sections: the ROLL dialect imports this module for agentic documents, the docs and the JSON
Schema only.
"""

# Annotations are evaluated as the classes are defined, not postponed: see `Section` in rlcfg.schema.base.
from typing import Any, Literal

from rlcfg.schema.base import Section, declare_fates, declare_release_table, field_fate, inert, param, section
from rlcfg.dialects.roll import models as _roll_models
from rlcfg.dialects.roll.models import LOGS, RELEASE_TABLE, Worker, _PpoRoot

class RewardNormalization(Section):
    grouping: str = param("batch", description="Over which samples rewards are normalised: batch, or state / "
                                               "inductive (both per group).")
    method: str = param(
        "identity", description="Deprecated in ROLL: only used to derive norm_mean_type / norm_std_type when those "
                                "are unset (identity, mean, mean_std, asym_clip; anything else means identity).")
    norm_mean_type: Literal["batch", "group"] | None = param(
        None, description="Subtract the batch or group mean; null: derived from method and grouping.")
    norm_std_type: Literal["batch", "group"] | None = param(
        None, description="Divide by the batch or group std; null: derived from method and grouping.")
    global_scale_factor: float | None = param(None, description="Multiply every reward by this after normalising.")
    global_shift_value: float | None = param(None, description="Add this to every reward after scaling.")


class LlmProxy(Section):
    proxy_type: str = param("policy", description="Who answers the environment's turns: policy (the model being "
                                                  "trained), openai or random.")
    proxy_config: dict[str, Any] = param({}, description="Options of the proxy (endpoint, model name, ...).")


class EnvManager(Worker):
    """A pool of environment workers (train_env_manager / val_env_manager)."""

    llm_proxy: LlmProxy = section(LlmProxy, description="Where the environments' LLM calls go.")
    num_env_groups: int = param(128, description="Environment groups; each group shares one env config and seed.",
                                ge=1)
    group_size: int = param(1, description="Environments per group (the rollouts compared with each other).", ge=1)
    group_size_redundancy: int = param(0, description="Extra environments per group, started in case some fail.",
                                       ge=0)
    tags: list[str] = param(["SimpleSokoban"], description="Names of the custom_envs entries this manager runs.")
    num_groups_partition: list[int] = param(
        [128], description="Groups per tag, in the order of `tags`; they must add up to num_env_groups.")
    max_traj_per_env: int = param(
        -1, description="Trajectories each environment may roll out per step; -1 derives it from the batch size.")
    format_penalty: float = param(0, description="Reward penalty for a badly formatted action.")
    worker_cls: str | None = param("roll.pipeline.agentic.environment_worker.EnvironmentWorker",
                                   description="Python class of the environment worker (dotted path).")
    max_env_num_per_worker: int = param(
        0, description="Environments per worker process (one thread each); 0 puts them all in one worker.")
    group_filter_cls: str = param("roll.pipeline.agentic.agentic_pipeline.GroupFilter",
                                  description="Dotted path of the filter that may drop whole groups.")


class AgenticReward(Worker):
    llm_proxy: LlmProxy = section(LlmProxy, description="Where the reward model's LLM calls go.")


class EnvMonitor(Section):
    enable: bool = param(True, description="Watch environments for activity.")
    monitor_interval: int = param(30, description="Seconds between checks.", ge=1)
    hung_timeout: int = param(3600, description="Seconds without activity after which an environment is hung.",
                              ge=1)


class AgenticConfig(_PpoRoot):
    """An agentic pipeline config (`examples/start_agentic_pipeline.py`: AgenticConfig): multi-turn rollouts in
    environments run by env managers instead of a prompt dataset."""

    custom_envs: dict[str, dict[str, Any]] = param(
        {}, description="Environment definitions by tag: env_type, env_config, env_manager_cls, ... The env "
                        "managers' `tags` name them.")
    train_env_manager: EnvManager = section(EnvManager, description="Environments for training rollouts.")
    val_env_manager: EnvManager = section(EnvManager, description="Environments for validation rollouts.")
    render_save_dir: str = param(None, description="Where rendered frames are saved (ROLL appends exp_name and a "
                                                   "timestamp).")
    reward: AgenticReward = param(None, description="A reward-inference worker (optional).")
    reward_normalization: RewardNormalization = section(RewardNormalization,
                                                        description="How rewards are normalised.")
    env_monitor: EnvMonitor = section(EnvMonitor, description="Detection of hung environments.")
    dirty_data_mask: bool = param(False, description="Mask trajectories marked as dirty data.")
    open_feedback_turn: bool = param(False, description="Feed the environment's feedback back as a turn.")
    use_token_reward: bool = param(False, description="Use token-level rewards.")
    batch_adjust_mode: Literal["copy", "delete", "auto", "random_sample"] = param(
        "copy", description="How a batch is brought to its expected size: copy, delete, auto or random_sample.")
    episode_reward_weight: float = param(1.0, description="Weight of the episode reward (GiGPO).")
    step_reward_weight: float = param(1.0, description="Weight of the step reward (GiGPO).")
    step_reward_gamma: float = param(0.95, description="Discount of the step reward.")
    ratio_type: Literal["token", "segment"] = param("token", description="Importance ratio per token or per "
                                                                         "segment.")
    exp_mode: str = param("train", description="train, eval_gt (ground-truth validation) or eval_test.")
    partial_gpu_mode: bool = param(
        True, description="Let the pipeline derive partial-GPU mode from the device mappings; false turns it off.")
    parse_tool_call_parameter_to_dict: bool = param(False, description="Parse tool-call parameters into mappings.")
    skip_mock_system_prompt: bool = param(
        False, description="Set when the chat template adds no system prompt of its own (Qwen3.5).")

# The agentic pipeline validates but does not run: lower.py refuses every agentic config as a whole
# (plan and run stop with a usage error: rlcfg's runtime has no environment managers). Its keys therefore change
# nothing rlcfg computes: the ones RLVR honors, and the agentic pipeline's own, are inert with that reason; a key
# RLVR refuses keeps its refusal.
AGENTIC = inert("rlcfg validates ROLL agentic configs but plan and run refuse them as a whole (rlcfg's runtime has "
                "no environment managers); run them with ROLL's examples/start_agentic_pipeline.py")


def _agentic_fates(model: type[Section]) -> None:
    for name, info in model.model_fields.items():
        fate = field_fate(info, model)
        if fate is None or fate.kind == "honored":
            declare_fates(model, **{name: AGENTIC})


declare_fates(AgenticConfig, render_save_dir=LOGS, env_monitor=inert("watches environments for hangs: nothing computed "
                                                              "changes"))
for _model in (AgenticConfig, EnvManager, AgenticReward):
    _agentic_fates(_model)
declare_fates(LlmProxy, default=AGENTIC)
declare_fates(RewardNormalization, default=AGENTIC)
declare_fates(EnvMonitor, default=inert("watches environments for hangs: nothing computed changes"))
declare_fates(EnvManager, worker_cls=AGENTIC)
# again with this module's sections: the agentic workers and root inherit fields models.py declares
declare_release_table({**vars(_roll_models), **globals()}, RELEASE_TABLE["fields"])
