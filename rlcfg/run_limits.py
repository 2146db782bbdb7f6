"""What `rlcfg run`'s runtime does not do, each said once.

The runtime's preflight (rlcfg.runtime.backends.check_plan) refuses a plan that asks for one of these, and each
dialect's run-refusal rule says so already in `rlcfg validate` (an RLC118 note at the dialect's own key), under the
same condition, so that `validate`, `run --dry-run` and `run` agree. Both build their messages from these sentences;
this module imports nothing of rlcfg, so `validate` can read it without the lowering, the plan or the runtime.
"""

from __future__ import annotations

EXPERT_PARALLEL = ("rlcfg's Megatron backend converts the weights of dense models only, so it runs no expert "
                   "parallelism")
CONTEXT_PARALLEL = ("rlcfg's Megatron backend does not split the RL update's batch along the sequence, so it runs no "
                    "context parallelism")
ULYSSES = "rlcfg's training backends run no Ulysses sequence parallelism"
FSDP_MODEL_PARALLEL = ("rlcfg's fsdp backend shards data-parallel only; tensor, pipeline, context and expert parallel "
                       "sizes need its Megatron backend")
MEGATRON_CRITIC = "rlcfg's Megatron backend has no value head, so it trains no critic"
# The prefixes name Hugging Face parameters (`model.embed_tokens.`); megatron-core names its modules otherwise.
MEGATRON_FROZEN = ("rlcfg freezes parameters by their Hugging Face names, which megatron-core's modules do not have, "
                   "so only its fsdp backend freezes them")
MEGATRON_SUPERVISED = "rlcfg runs SFT and reward-model training on its fsdp backend only"
DEEPSPEED = "the deepspeed backend is not wired into `rlcfg run`, which trains with fsdp or megatron"
HF_ROLLOUT_PARALLEL = ("rlcfg's `hf` rollout backend runs one whole model per engine, so tensor and pipeline parallel "
                       "sizes need vLLM or SGLang")
TRAINING_BACKENDS = ("rlcfg runs the models it does not roll out with (trained or not) on its fsdp or megatron "
                     "backend only")
ROLLOUT_BACKENDS = "rlcfg rolls out with its hf, vllm or sglang backend only"
SGLANG_ACROSS_NODES = "rlcfg starts each SGLang engine on one node, so its GPUs (tp × pp) must fit in one"
REWARD_MODEL = "rlcfg scores responses with a rule-based reward and runs no reward model"

# The hint of a parallel size the runtime does not run: the value that runs.
SIZE_THAT_RUNS = "set it to 1"
