"""SkyRL: rlcfg's verdict against skyrl-train's own loader at every claimed release.

skyrl-train is started as `python -m skyrl_train.entrypoints.main_base key=value ...`: Hydra composes
`ppo_base_config.yaml` (struct mode) with the command-line overrides, then `validate_cfg` runs. So every case here is
a set of overrides onto the release's own base config, judged twice:

- rlcfg: `check_file(<release>/ppo_base_config.yaml, overrides, dialect="skyrl", release=<release>)`;
- the oracle: `run_skyrl_batch.sh --rev <tag>` (one process per release, Hydra compose + validate_cfg).

The cases, per release:
1. the base config alone;
2. every launch script under skyrl-train/examples/ that runs main_base or an example entrypoint, read as
   `rlcfg validate SCRIPT` reads it (rlcfg.source.launch): an argument that depends on a variable the script never
   sets is left out for both sides;
3. mutations of the base config: a typo'd key, a wrong type, broken divisibility, a bad enum, a deleted key, a key
   of another release, remote engines with logprobs, a `+key` the base config lacks.

WANDB_API_KEY is set for both sides: the base configs log to wandb, and both refuse that without the key.

Run: MIRROR_ROOT=/work/.mirror python -m pytest -m oracle tests/oracle/test_skyrl_oracle.py -s
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.oracle.common import Agreement, compare, extract, listed, report, verdict_lines

REPO = "NovaSky-AI+SkyRL"
# pre-0.1.0: the layout of SkyRL's mid-2025 reference document, the commit before #52 moved num_warmup_steps.
RELEASES = {"pre-0.1.0": "0b2b28216538e307f85e78876f214966e3edd117", "0.1.0": "skyrl_train-v0.1.0", "0.2.0": "skyrl_train-v0.2.0", "0.3.0": "skyrl_train-v0.3.0",
            "0.4.0": "skyrl_train-v0.4.0", "main": "27380cb"}
BASE = "skyrl-train/skyrl_train/config/ppo_base_config.yaml"
ENV = {"WANDB_API_KEY": "oracle-dummy-key"}

# Mutations of the base config, as overrides. Each is (name, overrides, releases it applies to or None for all).
# The first ones are the `skyrl` package's too (test_skyrl_package_oracle.py).
SHARED_MUTATIONS = [
    ("typo", ["trainer.eval_intreval=5"], None),
    ("wrong type: batch size", ["trainer.train_batch_size=abc"], None),
    ("wrong type: epochs", ["trainer.epochs=many"], None),
    ("divisibility", ["trainer.train_batch_size=1000"], None),
    ("bad enum: loss_reduction", ["trainer.algorithm.loss_reduction=token_sum"], None),
    ("bad enum: policy_loss_type", ["trainer.algorithm.policy_loss_type=regualr"], None),
]
MUTATIONS = [
    *SHARED_MUTATIONS,
    ("deleted key", ["~trainer.epochs"], None),
    ("deleted key read by validate_cfg", ["~trainer.max_ckpts_to_keep"], None),
    ("kl twice", ["trainer.algorithm.use_kl_in_reward=true"], None),
    ("removed key reward_num_nodes", ["trainer.placement.reward_num_nodes=2"], None),
    ("newer key log_path", ["trainer.log_path=/tmp/x"], None),
    ("remote engines", ["generator.run_engines_locally=false"], None),
    ("remote engines, logprobs off", ["generator.run_engines_locally=false",
                                      "generator.sampling_params.logprobs=null"], None),
    ("plus-added key", ["+trainer.my_flag=1"], None),
    ("plus onto existing key", ["+trainer.epochs=3"], None),
    ("colocate_all GPU mismatch", ["generator.num_inference_engines=3"], None),
    ("max_ckpts_to_keep 0", ["trainer.max_ckpts_to_keep=0"], None),
    ("off-policy tis sequence", ["trainer.algorithm.off_policy_correction.tis_ratio_type=sequence"], ("0.4.0", "main")),
    ("off-policy bad enum", ["trainer.algorithm.off_policy_correction.tis_ratio_type=tokn"], ("0.4.0", "main")),
    ("megatron kwargs plain unknown", ["trainer.policy.megatron_config.transformer_config_kwargs.num_layers=2"],
     ("0.2.0", "0.3.0", "0.4.0", "main")),
    ("megatron kwargs plus", ["+trainer.policy.megatron_config.transformer_config_kwargs.num_layers=2"],
     ("0.2.0", "0.3.0", "0.4.0", "main")),
    ("skyrl_gym search topk", ["environment.skyrl_gym.search.topk=5"], None),
    ("strategy megatron", ["trainer.strategy=megatron", "trainer.flash_attn=false"], None),
    ("strategy deepspeed", ["trainer.strategy=deepspeed"], None),
    ("megatron without colocate_all", ["trainer.strategy=megatron", "trainer.flash_attn=false",
                                       "trainer.placement.colocate_all=false"], ("0.2.0", "0.3.0", "0.4.0", "main")),
    ("remote engines under colocate_all", ["generator.run_engines_locally=false", "generator.num_inference_engines=2",
                                           "generator.sampling_params.logprobs=null",
                                           "generator.remote_inference_engine_urls=[a:8001,b:8001]"], None),
    ("logprobs without batched", ["generator.sampling_params.logprobs=0", "generator.batched=false"], None),
    ("tis without batched", ["trainer.algorithm.use_tis=true", "trainer.algorithm.tis_imp_ratio_cap=2.0",
                             "generator.batched=false"], None),
    ("engine_init_kwargs plus", ["+generator.engine_init_kwargs.max_model_len=4096"],
     ("0.2.0", "0.3.0", "0.4.0", "main")),
    # the kinds of issue 29: coerced types, boundary values, keys of a sibling section, `+`/`++`, enum case,
    # conflicting settings, nulls
    ("flag as 1", ["trainer.algorithm.use_kl_loss=1"], None),
    ("flag as null", ["trainer.algorithm.use_kl_loss=null"], None),
    ("flag as the string false", ["trainer.algorithm.use_kl_loss='false'"], None),
    ("number as a string", ["trainer.train_batch_size='1024'"], None),
    ("null batch size", ["trainer.micro_train_batch_size_per_gpu=null"], None),
    ("one dataset path", ["data.train_data=/tmp/train.parquet"], None),
    ("one sample per prompt", ["generator.n_samples_per_prompt=1"], None),
    ("zero epochs", ["trainer.epochs=0"], None),
    ("estimator in capitals", ["trainer.algorithm.advantage_estimator=GRPO"], None),
    ("sibling section key", ["trainer.ref.optimizer_config.lr=1e-6"], None),
    ("sibling section key, plus", ["+trainer.ref.optimizer_config.lr=1e-6"], None),
    ("double plus onto existing key", ["++trainer.epochs=2"], None),
    ("kl in loss and reward", ["trainer.algorithm.use_kl_loss=true", "trainer.algorithm.use_kl_in_reward=true"], None),
    # the keys v0.1.0 renamed or moved, at every release, and what only the release before it checked
    ("seed loss dual_clip", ["trainer.algorithm.ppo_loss_type=dual_clip"], None),
    ("seed loss bad enum", ["trainer.algorithm.ppo_loss_type=gspo"], ("pre-0.1.0",)),
    ("seed warmup", ["trainer.num_warmup_steps=10"], None),
    ("estimator rloo", ["trainer.algorithm.advantage_estimator=rloo"], None),
    ("sglang local engines", ["generator.backend=sglang", "generator.inference_engine_tensor_parallel_size=1",
                              "generator.num_inference_engines=4"], None),
    ("unbatched offline sglang", ["generator.backend=sglang", "generator.async_engine=false",
                                  "generator.batched=false", "generator.run_engines_locally=false",
                                  "generator.remote_inference_engine_urls=[a:1]", "generator.num_inference_engines=1",
                                  "trainer.placement.colocate_all=false"], None),
]

# Disagreements rlcfg makes on purpose (rlcfg rejects, the loader accepts), by case name or name@release; each says
# why, and rlcfg's message says so where it comes from a rule.
KNOWINGLY_STRICTER = {
    # skyrl-train's YAML nodes are untyped: Hydra takes `trainer.epochs=many` and validate_cfg never reads epochs,
    # so the loader accepts; the trainer fails when it counts the steps (`range(..., epochs)`).
    "wrong type: epochs": "untyped YAML node; the trainer fails when it reads epochs",
    # `~trainer.epochs`: validate_cfg never reads epochs, the trainer does (ConfigAttributeError at its first use).
    "deleted key": "the trainer stops with ConfigAttributeError when it reads the deleted key",
    # v0.1.0's validate_cfg does not compare the policy's GPUs with the engines'; trainer.py asserts it when it
    # builds the models. rlcfg's message: "skyrl-train 0.1.0 accepts this at load but fails when the trainer builds
    # the models".
    "colocate_all GPU mismatch@0.1.0": "trainer.py asserts num_policy_gpus == num_rollout_gpus at start-up",
    "colocate_all GPU mismatch@pre-0.1.0": "trainer.py asserts num_policy_gpus == num_rollout_gpus at start-up",
    # `override_existing_update_group=True`: before v0.1.0 nothing checks the value and the worker overrides for any
    # value but "disable"; v0.4.0 and later compare with "enable", so a bool then means disable. rlcfg asks for one
    # of the three words the base config documents at every release.
    "remote_inference_engine/run_remote.sh@pre-0.1.0": "a bool where the base config documents auto/enable/disable",
    # main_base picks the worker classes by strategy and raises "Unknown strategy type" for one the release lacks
    # (megatron arrived in v0.2.0, deepspeed left in v0.4.0); validate_cfg does not look. rlcfg's message: "... it
    # accepts this at load but fails when it creates the workers".
    "strategy megatron@0.1.0": "no megatron workers in v0.1.0",
    "strategy deepspeed@0.4.0": "no deepspeed workers from v0.4.0",
    "strategy deepspeed@main": "no deepspeed workers from v0.4.0",
    # trainer.py (not validate_cfg) asserts num_policy_gpus == num_critic_gpus under colocate_all when it builds the
    # models: v0.4.0 made the critic's default 1 GPU, and this example sets only the policy's and ref's counts.
    # rlcfg's message: "skyrl-train accepts this at load but fails when the trainer builds the models".
    "lora/run_qwen2_5_0.5b_gsm8k_ppo_lora.sh@0.4.0": "critic GPUs differ from the policy's under colocate_all",
    "lora/run_qwen2_5_0.5b_gsm8k_ppo_lora.sh@main": "critic GPUs differ from the policy's under colocate_all",
    # `if cfg.trainer.algorithm.use_kl_loss:` reads the string "false" as true; rlcfg's message: "... accepts this at
    # load but reads it as true when its code tests the flag, the opposite of what it says"
    "flag as the string false": "a truth test reads any non-empty string as true",
    # PromptDataset before v0.2.0 iterates the string's characters as files; rlcfg's message: "... accepts this at
    # load but fails when it reads the dataset"
    "one dataset path@pre-0.1.0": "PromptDataset takes each character for a file",
    "one dataset path@0.1.0": "PromptDataset takes each character for a file",
}

# Scripts whose own entrypoint (not main_base) registers a custom advantage estimator or policy loss in code before
# validate_cfg runs. The oracle composes and validates as main_base does, without that registration, so it rejects
# the name; the script's real entrypoint accepts it. rlcfg warns ("... unless your entrypoint registers it").
REGISTERED_IN_CODE = ("invalid advantage_estimator", "invalid policy_loss_type")

# Gaps in the shared front end, reported to the lead (rlcfg rejects what the loader accepts), by case-name prefix:
FRONT_END_GAPS = {
    # `+trainer.algorithm.overlong_buffer.len=..` adds a mapping the schema lacks; the front end matches the RLC115
    # note only when the unknown key's path starts with an added path, but pydantic reports the unknown key at
    # `trainer.algorithm.overlong_buffer`, a prefix of the added path. Fix in rlcfg/schema/validate.py
    # (_unknown_key_verdict): accept a path that is a prefix of an added one too.
    "overlong_buffer": "RLC115 prefix match",
    # `hydra.searchpath=[file://examples/terminal_bench] +terminal_bench_config=default`: an entrypoint-specific
    # config group composed from a search path given on the command line; rlcfg neither skips `hydra.*` overrides
    # nor composes group selections given as overrides.
    "terminal_bench/": "config group selected by an override",
    "harbor/": "config group selected by an override",
}


def cases(release: str, tree: Path) -> list[tuple[str, list[str], str]]:
    """(name, overrides, entrypoint): the base config, every example script as rlcfg reads it (the arguments of its
    call, less those that depend on what rlcfg cannot know), and the mutations."""
    from rlcfg import schema
    from rlcfg.source.launch import read_launch
    from rlcfg.source.yaml_loader import UsageError

    out = [("base config", [], "main_base")]
    examples = tree / "skyrl-train" / "examples"
    env = {"HOME": "/home/user", "PWD": str(tree / "skyrl-train")}
    for script in sorted(examples.rglob("*.sh")):
        try:
            found = read_launch(script.read_text(errors="replace"), str(script), schema.launchers("skyrl"), env)
        except UsageError:
            continue  # no call of main_base or an example's entrypoint
        name = str(script.relative_to(examples))
        out.append((name, [str(a) for a in found.arguments], _entry_module(script, found.line)))
    for name, overrides, only in MUTATIONS:
        if only is None or release in only:
            out.append((name, overrides, "main_base"))
    return out


def _entry_module(script: Path, line: int) -> str:
    """The last part of the module the call runs (`main_base`, `main_dapo`), which the oracle starts."""
    import re

    for text in script.read_text(errors="replace").splitlines()[line - 1:]:
        found = re.search(r"-m\s+([\w.]+)", text)
        if found:
            return found.group(1).rsplit(".", 1)[-1]
    return "main_base"


def rlcfg_verdict(base: Path, overrides: list[str], release: str) -> tuple[bool, str]:
    from rlcfg.diagnostics import Severity
    from rlcfg.frontend import check_file

    result = check_file(str(base), overrides, dialect="skyrl", release=release, env={**os.environ, **ENV})
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    return not errors, "; ".join(f"{d.code} {d.message}" for d in errors)[:300]


def oracle_verdicts(oracle_dir: Path, rev: str, batch: list) -> dict[str, tuple[bool | None, str]]:
    lines = "".join(json.dumps({"id": name, "overrides": overrides}) + "\n" for name, overrides, _entry in batch)
    env = {**os.environ, **ENV}
    env.setdefault("ORACLE_HOME", "/tmp/oracle")
    proc = subprocess.run(["bash", str(oracle_dir / "run_skyrl_batch.sh"), "--rev", rev], input=lines, text=True,
                          capture_output=True, env=env, timeout=1800)
    return verdict_lines(proc.stdout)


def test_skyrl_agrees_with_its_loader(oracle_dir: Path, tmp_path: Path) -> None:
    agreement = Agreement()
    unexpected = []
    both_reject = []  # printed, to check by eye that both name the same cause
    for release, rev in RELEASES.items():
        tree = extract(REPO, rev, tmp_path / release, "skyrl-train/skyrl_train/config", "skyrl-train/examples")
        batch = cases(release, tree)
        oracle = oracle_verdicts(oracle_dir, rev, batch)
        for name, overrides, entrypoint in batch:
            ok, why = rlcfg_verdict(tree / BASE, overrides, release)
            loader_ok, loader_why = oracle.get(name, (None, "no answer from the oracle"))
            corpus = f"{release} {'base' if name == 'base config' else 'mutation' if '/' not in name else 'scripts'}"
            if not compare(agreement, both_reject, corpus, release, name, ok, why, loader_ok, loader_why):
                continue
            if not ok and listed(KNOWINGLY_STRICTER, name, release):
                continue
            if ok and entrypoint != "main_base" and any(m in loader_why for m in REGISTERED_IN_CODE):
                continue
            if not ok and any(key in name or key in why for key in FRONT_END_GAPS):
                continue
            unexpected.append((release, name, ok, loader_ok, why, loader_why))
    report(agreement, both_reject, unexpected)
