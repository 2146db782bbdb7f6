"""The ChatLearn dialect: `env_args`, `runtime_args` and `models.{policy_trainer, ref_policy, policy, reward, ...}`.

Spec: ChatLearn's own config dataclasses (chatlearn/configs/*.py and `GrpoConfig` in chatlearn/algorithm/grpo.py) at
the releases rlcfg claims, v1.2.0 and the newest commit ("main"); tests/inventory/chatlearn/ lists their fields.
ChatLearn's launcher hands `GrpoConfig` to Hydra as a structured config, merges the user's YAML (with the dotlist
overrides applied to it first) and builds the dataclasses, so:
- a key no dataclass has is an error everywhere. Under `runtime_args`, `env_args`, `models.policy`, `models.reward`
  and the rollout managers OmegaConf refuses it at merge; `models.policy_trainer` and `models.ref_policy` are `Any`
  there, and ChatLearn's own conversion to the backend's dataclass stops with a TypeError instead;
- a value left at OmegaConf's MISSING (`train_backend`, `output_dir`, `data_path`, `num_episode`,
  `sample_per_episode`, `train_micro_batch_size`, `train_global_batch_size`, `save_episode_interval`,
  `log_args_dict.log_dir`) must be given: the loader stops with MissingMandatoryValue;
- the training backend, `runtime_args.train_backend`, decides which dataclasses `policy_trainer` and `ref_policy`
  become (FSDP or Megatron-core), so the dialect has two roots.
The defaults are ChatLearn's dataclass defaults, not the values of its templates: a model section a user leaves
out gets 0 GPUs, as in ChatLearn.

Modules, each importing only those before it: overrides (how the launcher reads a command-line value); models and
models_megatron (the sections); derived (what ChatLearn computes from them); rules, lower (to the Experiment) and
emit (for `convert`), which never import each other; and this module, the dialect.
"""

from __future__ import annotations

from typing import Any

from rlcfg.dialects.chatlearn.derived import colocation_groups, trainer_dp
from rlcfg.dialects.chatlearn.models import ChatLearnFSDP, ChatLearnMegatron, FSDPPolicyTrainer
from rlcfg.dialects.chatlearn.rules import rules
from rlcfg.schema import entry
from rlcfg.schema.base import Dialect, Section, field_at, field_releases, key_paths

ENTRY = entry("chatlearn")


class ChatLearnDialect(Dialect):
    name = ENTRY.name
    algorithm_keys = {
        "runtime_args.sample_per_episode": "the samples per step",
        "runtime_args.num_inference_per_prompt": "the group size",
        "models.*.num_inference_per_prompt": "the group size",
        "models.*.optimizer.lr": "the learning rate",
        "models.*.optimizer.min_lr": "the learning rate",
        "models.policy_trainer.*clip_ratio": "the loss",
        "models.policy_trainer.kl_coef": "the KL term",
        "models.policy_trainer.entropy_coef": "the loss",
        "models.policy_trainer.use_group_sequence_policy": "the loss",
        "models.policy_trainer.calculate_per_token_loss": "the loss",
    }
    title = "ChatLearn"
    documents = "ChatLearn v1.2.0 and main (the Hydra-structured `runtime_args` + `models` config)"
    override_grammar = ENTRY.override_grammar
    variant_key = "runtime_args.train_backend"
    rules = rules
    releases = ENTRY.releases
    # Structured dataclasses refuse unknown keys at merge; the untyped trainer and reference sections refuse them
    # when ChatLearn builds their dataclass (`cls(**values)`), so every mapping is "error".
    unknown_keys = "error"
    ledger_complete = True

    def variants(self) -> dict[str, type[Section]]:
        return {"fsdp": ChatLearnFSDP, "megatron": ChatLearnMegatron}

    def typed_overrides(self, overrides: list, root: type[Section], release: str | None) -> tuple[list, list]:
        from rlcfg.dialects.chatlearn.overrides import typed_overrides

        return typed_overrides(overrides, root, release)

    def root(self, data: dict) -> type[Section]:
        runtime = data.get("runtime_args")
        backend = runtime.get("train_backend") if isinstance(runtime, dict) else None
        return ChatLearnMegatron if backend == "megatron" else ChatLearnFSDP

    def defaults(self, root: type[Section], release: str | None = None) -> dict:
        """ChatLearn's defaults, except under `models.policy_trainer` and `models.ref_policy`: GrpoConfig types those
        `Any`, so OmegaConf holds only what the user wrote there, and an interpolation such as
        `${models.policy_trainer.seq_length}` to an unwritten key fails (the dataclass defaults arrive later, when
        ChatLearn builds the backend's dataclass). The schema still fills them in for validation."""
        tree = super().defaults(root)
        for name in ("policy_trainer", "ref_policy"):
            tree.get("models", {}).pop(name, None)
        return tree

    def infer_release(self, data: dict) -> tuple[str | None, str]:
        """The release whose keys the document uses: keys only one release has (1.2.0's `models.policy.max_new_tokens`
        and Megatron attention options; main's prompt/response lengths, rollout managers, `use_partial_rollout`, ...)
        decide; the release with fewer foreign keys wins, the newest on a tie."""
        only: dict[str, list[str]] = {release: [] for release in self.releases}
        for path in _written_paths(data):
            info, _owner = field_at(self.root(data), path)
            have = field_releases(info) if info is not None else None
            if have is not None and len(have) == 1:
                only[have[0]].append(".".join(path))
        old, new = only["1.2.0"], only["main"]
        if not old and not new:
            # ChatLearn main derives these lengths from max_prompt/response_tokens_length and overwrites what is
            # written, so a document that sets them (and nothing of main's) is written for 1.2.0, as its templates are.
            lengths = [".".join(p) for p in _written_paths(data) if p in _V120_LENGTHS]
            if lengths:
                return "1.2.0", f"it sets {_some(lengths)}, which ChatLearn main derives, and no key of main"
            return "main", "no key tells ChatLearn 1.2.0 and main apart; assuming main"
        if len(old) > len(new):
            return "1.2.0", f"it uses {_some(old)}, which only ChatLearn 1.2.0 has"
        return "main", f"it uses {_some(new)}, which only ChatLearn main has"

    def describe(self, config: Any) -> str:
        t, p = config.models.policy_trainer, config.models.policy
        backend = "FSDP" if isinstance(t, FSDPPolicyTrainer) else (
            f"Megatron (TP {t.tensor_model_parallel_size} × PP {t.pipeline_model_parallel_size}"
            + (f", EP {t.expert_model_parallel_size}" if t.expert_model_parallel_size > 1 else "") + ")")
        engines = p.num_gpu // p.tensor_model_parallel_size
        rollout = {"vllm": "vLLM", "sglang": "SGLang"}.get(config.runtime_args.rollout_backend,
                                                           config.runtime_args.rollout_backend)
        gpus = f"{t.num_gpu} GPU{'s' if t.num_gpu != 1 else ''}"
        text = (f"{backend} training on {gpus} (DP {trainer_dp(config)}), {rollout} rollout "
                f"({engines} engine{'s' if engines != 1 else ''} × TP {p.tensor_model_parallel_size})")
        groups = [g for g in colocation_groups(config) if len(g) > 1]
        if groups:
            text += "; colocated: " + "; ".join(", ".join(g) for g in groups)
        return text


_V120_LENGTHS = {("models", "policy", "seq_length"), ("models", "policy", "max_seq_len_to_capture"),
                 ("models", "policy_trainer", "seq_length"), ("models", "ref_policy", "seq_length")}


def _written_paths(data: Any) -> list[tuple]:
    """Every key path of the user's tree, its keys as text."""
    return [tuple(map(str, path)) for path in key_paths(data)]


def _some(paths: list[str], limit: int = 2) -> str:
    shown = ", ".join(f"`{p}`" for p in paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


DIALECT = ChatLearnDialect()
