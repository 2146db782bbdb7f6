"""AReaL's entry scripts: where its reward function, dataset loader and rollout workflow live.

An AReaL run is a Python script launched with a config file (`python -m areal.launcher.local
examples/math/gsm8k_rl.py --config gsm8k_grpo.yaml`). The YAML holds the settings; the script picks the config class,
the dataset loader, the workflow and the reward. rlcfg reads the script a launch names (never runs it) and
recognises the scripts AReaL released by their code (rlcfg.source.project.module_fingerprint):

- GSM8K_RLVR: examples/math/gsm8k_rl.py of 0.5 and 1.0 (and 0.5's LoRA examples, GSM8K_RLVR_LORA and
  GSM8K_RLVR_LORA_VLLM, which run it in a loop of their own). RLVRWorkflow scores each
  response with areal.reward.gsm8k.gsm8k_reward_fn (MathVerifyWorker: math-verify with its expression and LaTeX
  extraction and six digits of precision; rlcfg's reward `areal_math_verify`), renders prompts with
  enable_thinking=False, and evaluates with gconfig's settings at temperature 0.6 (eval_gconfig is not read).
- GSM8K_MATH_PARSER: the GSM8K RL scripts of 0.3 and 0.4 (examples/math/gsm8k_grpo.py and gsm8k_ppo.py, the
  Megatron, LoRA, tracer, DAPO, Dr. GRPO and LitePPO variants), which differ from GSM8K_RLVR in their reward alone:
  gsm8k_reward_fn is areal.reward.math_parser.process_results (rlcfg's reward `areal_math_parser`). Their train loops
  differ in how the batch reaches the trainer, which the config's keys already say, and in the engines they build;
  the LoRA script (GSM8K_MATH_PARSER_LORA) raises unless the trainer is data-parallel only.
- BOBA_MATH_PARSER and BOBA_MATH_VERIFY: examples/math/boba_grpo.py of 0.4 (math_parser) and of 0.5 and 1.0
  (math-verify). It reads train_dataset.path as a JSON file of `prompt` and `solutions`, keeps the prompts of at most
  1024 tokens as written (max_length is not read), deletes DeepSeek's `<｜User｜>`, `<｜Assistant｜>` and `<think>`
  from them, renders the chat template with enable_thinking=True, scores a response 1 when it matches one of its
  solutions, and evaluates nothing (valid_dataset is not read).
- COUNTDOWN_EVALUATED and COUNTDOWN: examples/countdown/train.py, of 0.3 and 0.4 (the GSM8K script's loop of the same
  release) and of 0.5 and 1.0 (PPOTrainer). It reads train_dataset.path as JSON lines of `query`, `target` and
  `numbers`, with no length filter; tokenizes each query as written (no chat template, no special tokens); and scores
  a response's last `<answer>...</answer>` equation with examples/countdown/reward_score.py (rlcfg's reward
  `areal_countdown`: 1 when it uses each number once and equals the target, 0.1 for any other equation, 0 with
  none). 0.3 and 0.4 evaluate valid_dataset.path (which they need) with gconfig at temperature 1.0; 0.5 and 1.0
  evaluate nothing.
- SUPERVISED: the SFT and reward-model scripts, which train on AReaL's dataset loaders and score nothing.

The scripts of 0.3 and 0.4 (and 0.5's LoRA examples) build their trainer and their client of the generation servers
themselves, whatever the allocation says (BUILT_ENGINES): an FSDP trainer (Megatron in 0.4's
gsm8k_grpo_megatron.py, GSM8K_MATH_PARSER_MEGATRON) and SGLang's client (vLLM's in the vLLM LoRA example; boba of
0.4 picks by the allocation). `rlcfg run` refuses an allocation naming other backends with them.

Every other script is refused by `rlcfg run` at the launch's call (RLC118): the multi-turn, agent, tool and vision
examples bring workflows, loaders and rewards of their own; 0.3's experimental Megatron GRPO script
reads its dataset without the max_length filter, and 0.3's boba script scores with realhf's parser and reads a
batch per rank; an edited copy may do anything. A config file run alone names no script: rlcfg then scores and
prompts as GSM8K_RLVR does, and says so (areal/entry-script).
"""

from __future__ import annotations

from typing import Any

GSM8K_RLVR = "gsm8k_rlvr"  # CheckResult.entry_runs of examples/math/gsm8k_rl.py as released
GSM8K_RLVR_LORA = "gsm8k_rlvr_lora"  # and of 0.5's LoRA examples with SGLang
GSM8K_RLVR_LORA_VLLM = "gsm8k_rlvr_lora_vllm"  # and with vLLM
GSM8K_MATH_PARSER = "gsm8k_math_parser"  # CheckResult.entry_runs of the GSM8K RL scripts of 0.3 and 0.4
GSM8K_MATH_PARSER_MEGATRON = "gsm8k_math_parser_megatron"  # and of 0.4's Megatron one
GSM8K_MATH_PARSER_LORA = "gsm8k_math_parser_lora"  # and of their LoRA script
# The GSM8K RL scripts: one dataset loader, prompt and workflow, evaluated at GSM8K_RLVR_EVAL_TEMPERATURE.
GSM8K_SCRIPTS = frozenset({GSM8K_RLVR, GSM8K_RLVR_LORA, GSM8K_RLVR_LORA_VLLM, GSM8K_MATH_PARSER,
                           GSM8K_MATH_PARSER_MEGATRON, GSM8K_MATH_PARSER_LORA})
BOBA_MATH_PARSER = "boba_math_parser"  # CheckResult.entry_runs of examples/math/boba_grpo.py of 0.4
BOBA_MATH_VERIFY = "boba_math_verify"  # and of 0.5 and 1.0
BOBA_SCRIPTS = frozenset({BOBA_MATH_PARSER, BOBA_MATH_VERIFY})
# The scripts that score with math_parser (rlcfg's reward `areal_math_parser`); the others with math-verify.
MATH_PARSER_SCRIPTS = frozenset({GSM8K_MATH_PARSER, GSM8K_MATH_PARSER_MEGATRON, GSM8K_MATH_PARSER_LORA,
                                  BOBA_MATH_PARSER})
# The boba script's prompts: kept when the prompt as written is at most this many tokens, and stripped of these
# texts (DeepSeek-R1's role markers and its opening `<think>`) before the chat template.
BOBA_PROMPT_TOKENS = 1024
BOBA_PROMPT_REMOVALS = ("<｜User｜>", "<｜Assistant｜>", "<think>")
COUNTDOWN_EVALUATED = "countdown_evaluated"  # CheckResult.entry_runs of examples/countdown/train.py of 0.3, 0.4
COUNTDOWN = "countdown"  # and of 0.5 and 1.0
COUNTDOWN_SCRIPTS = frozenset({COUNTDOWN_EVALUATED, COUNTDOWN})
# The countdown script's evaluation workflow (0.3, 0.4): `config.gconfig.new(temperature=1.0)`.
COUNTDOWN_EVAL_TEMPERATURE = 1.0
# The columns the countdown reward checks a response against (examples/countdown/countdown.py writes them).
COUNTDOWN_ANSWER_FIELDS = ("target", "numbers")
# The scripts that build their engines themselves, whatever the allocation says: the trainer's backend and the
# generation servers' (None: the allocation's). The others (PPOTrainer from 0.5) build what the allocation names.
BUILT_ENGINES = {
    GSM8K_MATH_PARSER: ("fsdp", "sglang"), GSM8K_MATH_PARSER_MEGATRON: ("megatron", "sglang"),
    GSM8K_MATH_PARSER_LORA: ("fsdp", "sglang"), COUNTDOWN_EVALUATED: ("fsdp", "sglang"),
    GSM8K_RLVR_LORA: ("fsdp", "sglang"), GSM8K_RLVR_LORA_VLLM: ("fsdp", "vllm"), BOBA_MATH_PARSER: ("fsdp", None),
}
SUPERVISED = "supervised"  # CheckResult.entry_runs of the SFT and reward-model scripts as released
REFUSED = "refused"  # CheckResult.entry_runs of any other script (its Extension.refused says why)
GSM8K_RLVR_SCRIPT = "examples/math/gsm8k_rl.py"
# gsm8k_rl.py's evaluation workflow: `config.gconfig.new(temperature=0.6)`.
GSM8K_RLVR_EVAL_TEMPERATURE = 0.6
# AReaL's GSM8K RL loader (areal/dataset/gsm8k.py, every release) appends this to each question.
GSM8K_PROMPT_SUFFIX = "\nPlease put your final answer within \\boxed{}."

# By release, as tagged: v0.5.3, v1.0.4.
GSM8K_RLVR_FINGERPRINTS = frozenset({"3514e51c9553b281", "618e01a081af4251"})
# 0.5's LoRA examples (examples/lora/gsm8k_grpo_lora.py and gsm8k_grpo_lora_vllm.py), which run the same workflow,
# reward, prompts and evaluation in a loop of their own.
GSM8K_RLVR_LORA_FINGERPRINTS = frozenset({"4e0f8878d5a27ce5"})
GSM8K_RLVR_LORA_VLLM_FINGERPRINTS = frozenset({"6687157b596026db"})
# By release, as tagged (v0.3.4, v0.4.1): examples/math/gsm8k_grpo.py (its copy experimental/dapo/gsm8k_dapo.py is
# the same code), gsm8k_ppo.py, 0.4's tracer/gsm8k_grpo.py, and the Dr. GRPO and LitePPO scripts (one code).
GSM8K_MATH_PARSER_FINGERPRINTS = frozenset({
    "d0c424bfc78586bd", "77c67995c22a4502", "1dc4092f49b346db",  # 0.3
    "e10ead538baaa3f7", "0de5141385e297f6", "bbd30356f820785a", "3ad52a11b5919701",  # 0.4
})
GSM8K_MATH_PARSER_MEGATRON_FINGERPRINTS = frozenset({"244019fe99240649"})  # 0.4's math/gsm8k_grpo_megatron.py
# examples/math/boba_grpo.py: v0.4.1 (math_parser); v0.5.3 and v1.0.4 (math-verify).
BOBA_MATH_PARSER_FINGERPRINTS = frozenset({"434166f67c39549f"})
BOBA_MATH_VERIFY_FINGERPRINTS = frozenset({"e51f5ef47cc5df1a", "9ce15a6fda0a89e5"})
# examples/countdown/train.py: v0.3.4, v0.4.1; v0.5.3, v1.0.4.
COUNTDOWN_EVALUATED_FINGERPRINTS = frozenset({"dffa67d07ca57d04", "2855a6a156ac07fa"})
COUNTDOWN_FINGERPRINTS = frozenset({"931849a0f524ad6c", "d8ca7851c21e5a33"})
# examples/lora/gsm8k_grpo_lora.py, v0.3.4 and v0.4.1.
GSM8K_MATH_PARSER_LORA_FINGERPRINTS = frozenset({"1bd32df08d8df50e", "16c94868a08b09dc"})
# examples/math/gsm8k_sft.py, examples/alignment/hhrlhf_rw.py and the Megatron SFT examples, v0.3.4 to v1.0.4.
SUPERVISED_FINGERPRINTS = frozenset({
    "203989ea83a3951a", "750b86b955c6768f", "89fdfddbcbcd223e",  # 0.3
    "e9d9c91ed54367a4", "4959033196931f8a", "a355de7d43596b0e",  # 0.4
    "48340c3c9c903b53", "bb03687f5b453c48",  # 0.5
    "d9d7f82cec946de9", "0b2fa40bd9f94cbe",  # 1.0
})

_RUNS = "rlcfg runs AReaL's GSM8K RL scripts as released (examples/math/gsm8k_rl.py of 0.5 and 1.0; " \
        "gsm8k_grpo.py, gsm8k_ppo.py and their variants of 0.3 and 0.4), its boba script of 0.4 to 1.0, its " \
        "countdown script of 0.3 to 1.0, and its SFT and reward-model scripts"


def entry_extension(source: str | None, script: str) -> Any:
    """What the entry script `script` (its text `source`, None where it cannot be read here) runs, as an extension
    with no keys: `runs` (GSM8K_RLVR, GSM8K_MATH_PARSER, BOBA_MATH_VERIFY, COUNTDOWN, SUPERVISED, ...) for a script
    AReaL released, `refused` (why, hint) otherwise."""
    import ast

    from rlcfg.source.project import Extension, module_fingerprint

    def refused(why: str, hint: str) -> Extension:
        return Extension(script, (), source="entry", runs=REFUSED,
                         refused=(f"`rlcfg run` refuses this launch: {why}", hint))

    try:
        tree = ast.parse(source) if source is not None else None
    except SyntaxError:
        tree = None
    if tree is None:
        why = "cannot be read here (no such file, or not text)" if source is None else "does not parse as Python"
        return refused(f"its entry script {script} {why}, so rlcfg cannot tell which reward, dataset loader and "
                       "workflow it runs", "run rlcfg from the directory the script runs from (AReaL's source "
                                           "tree), where the entry script is")
    fingerprint = module_fingerprint(tree)
    released = ((GSM8K_RLVR, GSM8K_RLVR_FINGERPRINTS), (GSM8K_RLVR_LORA, GSM8K_RLVR_LORA_FINGERPRINTS),
                (GSM8K_RLVR_LORA_VLLM, GSM8K_RLVR_LORA_VLLM_FINGERPRINTS),
                (GSM8K_MATH_PARSER, GSM8K_MATH_PARSER_FINGERPRINTS),
                (GSM8K_MATH_PARSER_MEGATRON, GSM8K_MATH_PARSER_MEGATRON_FINGERPRINTS),
                (GSM8K_MATH_PARSER_LORA, GSM8K_MATH_PARSER_LORA_FINGERPRINTS),
                (BOBA_MATH_PARSER, BOBA_MATH_PARSER_FINGERPRINTS), (BOBA_MATH_VERIFY, BOBA_MATH_VERIFY_FINGERPRINTS),
                (COUNTDOWN_EVALUATED, COUNTDOWN_EVALUATED_FINGERPRINTS), (COUNTDOWN, COUNTDOWN_FINGERPRINTS),
                (SUPERVISED, SUPERVISED_FINGERPRINTS))
    for runs, fingerprints in released:
        if fingerprint in fingerprints:
            return Extension(script, (), source="entry", runs=runs)
    return refused(f"its entry script {script} is not one rlcfg recognises, so its reward, dataset loader or "
                   f"workflow may differ from what rlcfg would run ({_RUNS})",
                   f"launch the config with one of those scripts as its release has it ({GSM8K_RLVR_SCRIPT} from "
                   "0.5), or give rlcfg run the config file alone, which it runs as that script does")
