"""The quickstart: GRPO that visibly learns on a laptop CPU in about a minute, with nothing downloaded.

It writes, under the output folder, a tiny Qwen2-style model (hidden 64, 2 layers, 4 heads, 2 KV heads,
random weights) with a character-level tokenizer, and a synthetic task with a verifiable answer: additions of
two digits from 0 to 4 ("3+4=" → "7"), answered in one token. A random model answers right about one time in
14 (the size of its vocabulary); GRPO with 16 samples per prompt teaches it the table in about 60 steps.

`experiment()` returns the canonical Experiment (what a dialect config would lower to), so the quickstart runs
through exactly the same plan and runtime as any config.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

from rlcfg.ir import (Algorithm, Checkpointing, Cluster, Data, Experiment, Logging, Model, Optimizer, Resources, Role,
                      Sampling, Schedule)

# Every character the task uses, one token each; <pad> and <eos> first so their ids are stable.
SPECIAL = ("<pad>", "<eos>")
CHARS = tuple("0123456789+=")


def build_tokenizer(directory: str) -> Any:
    """A character-level WordLevel tokenizer, saved as a PreTrainedTokenizerFast (see data.load_tokenizer)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL + CHARS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    core.decoder = decoders.Fuse()  # characters join without spaces
    # padding_side goes to the constructor: set afterwards it is not saved with the tokenizer.
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>",
                                        padding_side="left")
    tokenizer.save_pretrained(directory)
    return tokenizer


def build_model(directory: str, vocab_size: int, pad_id: int, eos_id: int, seed: int = 0) -> None:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         pad_token_id=pad_id, eos_token_id=eos_id, bos_token_id=eos_id,
                         # Untied, so a vLLM engine on CPU can take weight updates (a tied head keeps its
                         # old matrix there); it costs 900 parameters.
                         tie_word_embeddings=False)
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = pad_id
    model.generation_config.eos_token_id = eos_id
    model.save_pretrained(directory)


def task_examples(seed: int = 0, largest: int = 4) -> list[dict[str, str]]:
    """Every addition of two digits up to `largest` (25 with the default 4: sums 0 to 8), each once."""
    rows = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a in range(largest + 1) for b in range(largest + 1)]
    random.Random(seed).shuffle(rows)
    return rows


def write_jsonl(path: str, rows: list[dict[str, Any]]) -> None:
    from rlcfg.runtime.checkpoint import write_atomic

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    write_atomic(path, "".join(json.dumps(row) + "\n" for row in rows))


# What a built quickstart model folder holds. Folders are built under a temporary name and renamed when
# complete, so one without these files is the leftover of a build that an older rlcfg did in place and that
# was killed half-way (the tokenizer written, the model not): it is rebuilt, not loaded.
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def model_complete(path: str) -> bool:
    return all(os.path.isfile(os.path.join(path, name)) for name in MODEL_FILES)


def _jsonl_complete(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return False
    return bool(rows) and all(isinstance(r, dict) and "prompt" in r for r in rows)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def build_model_dir(path: str, seed: int = 0) -> bool:
    """Build the tiny model and its tokenizer at `path` atomically: into `<path>.tmp-<pid>`, flushed to disk,
    then renamed. A half-built folder at `path` is replaced; a complete one (another run built it meanwhile)
    is kept. Returns whether this call built it."""
    import shutil

    from rlcfg.runtime.checkpoint import fsync_dir, fsync_tree

    path = os.path.normpath(path)
    parent, name = os.path.split(path)
    os.makedirs(parent or ".", exist_ok=True)
    for leftover in os.listdir(parent or "."):  # builds killed half-way
        stem, _, pid = leftover.rpartition(".tmp-")
        if stem == name and pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(os.path.join(parent, leftover), ignore_errors=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = build_tokenizer(tmp)
    build_model(tmp, len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id, seed)
    fsync_tree(tmp)
    if os.path.exists(path):
        if model_complete(path):
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        broken = f"{path}.broken-{os.getpid()}"
        os.rename(path, broken)
        shutil.rmtree(broken, ignore_errors=True)
    try:
        os.rename(tmp, path)
    except OSError:  # another process published it between our check and our rename
        shutil.rmtree(tmp, ignore_errors=True)
        if not model_complete(path):
            raise
        return False
    fsync_dir(parent or ".")
    return True


def prepare(directory: str, seed: int = 0) -> dict[str, str]:
    """Write the model, tokenizer and data under `directory` (once; reused when already there)."""
    model_dir = os.path.join(directory, "model")
    train = os.path.join(directory, "data", "train.jsonl")
    if not model_complete(model_dir):
        build_model_dir(model_dir, seed)
    if not _jsonl_complete(train):
        write_jsonl(train, task_examples(seed))
    return {"model": model_dir, "train": train}


QUICKSTART_DIR = "rlcfg-quickstart"


def materialize(exp: Experiment, seed: int = 0) -> list[str]:
    """Build the quickstart's model and data where a config names them and they do not exist yet (or are
    the half-built leftovers of a killed build): a model path `.../rlcfg-quickstart/tiny-qwen2` and a data file
    `.../rlcfg-quickstart/<name>.jsonl` (columns `prompt`, `answer` and `ground_truth`). This is how a dialect
    template of the quickstart runs with nothing downloaded. Returns what was written."""
    written = []
    paths = {r.model.path for r in exp.roles if r.model and r.model.path}
    for path in sorted(paths):
        parent, name = os.path.split(os.path.normpath(path))
        if os.path.basename(parent) == QUICKSTART_DIR and name == "tiny-qwen2" and not model_complete(path):
            if build_model_dir(path, seed):
                written.append(path)
    for path in exp.data.train_files + exp.data.eval_files:
        parent = os.path.basename(os.path.dirname(os.path.normpath(path)))
        if parent == QUICKSTART_DIR and path.endswith(".jsonl") and not _jsonl_complete(path):
            write_jsonl(path, [dict(row, ground_truth=row["answer"]) for row in task_examples(seed)])
            written.append(path)
    return written


def experiment(output_dir: str, *, steps: int = 100, prompts_per_step: int = 16, group_size: int = 16,
               lr: float = 2e-3, actor_ranks: int = 1, checkpoint_interval: int | None = 25, keep_last: int | None = 2,
               seed: int = 0, kl_coef: float = 0.0) -> Experiment:
    """The quickstart as an Experiment; prepares its files under `<output_dir>/quickstart/`."""
    files = prepare(os.path.join(output_dir, "quickstart"), seed)
    model = Model(path=files["model"], dtype="float32")
    samples = prompts_per_step * group_size
    roles = [
        Role(name="actor", backend="fsdp", resources=Resources(gpus=actor_ranks), model=model,
             optimizer=Optimizer(lr=lr, weight_decay=0.0, grad_clip=1.0), micro_batch_size=samples // actor_ranks),
        Role(name="rollout", backend="hf", resources=Resources(gpus=actor_ranks), model=model),
        Role(name="reward", backend="rule", resources=Resources(gpus=0, cpus=1)),
    ]
    colocated = [("actor", "rollout")]
    if kl_coef > 0:
        roles.insert(2, Role(name="reference", backend="fsdp", resources=Resources(gpus=actor_ranks), model=model,
                             forward_micro_batch_size=samples // actor_ranks))
        colocated = [("actor", "rollout", "reference")]
    from rlcfg.ir import KL

    return Experiment(
        name="quickstart", dialect="rlcfg", variant=None, cluster=Cluster(nodes=1),
        roles=tuple(roles), colocation=tuple(colocated),
        algorithm=Algorithm(advantage="grpo", group_size=group_size,
                            kl=KL(placement="loss" if kl_coef > 0 else "none", coef=kl_coef, estimator="k3")),
        sampling=Sampling(max_new_tokens=1, temperature=1.0, n=group_size),
        eval_sampling=None,
        data=Data(train_files=(files["train"],), prompt_key="prompt", answer_key="answer", max_prompt_length=16,
                  shuffle=True, seed=seed, apply_chat_template=False),
        schedule=Schedule(prompts_per_step=prompts_per_step, samples_per_step=samples,
                          samples_per_optimizer_step=samples, total_steps=steps),
        checkpointing=Checkpointing(directory=None, interval=checkpoint_interval, keep_last=keep_last,
                                    resume="latest", save_hf=True),
        logging=Logging(directory=output_dir, project="rlcfg", run_name="quickstart", backends=("jsonl", "console")),
        seed=seed, reward_function="arithmetic",
    )


def plan_for(exp: Experiment) -> Any:
    """The quickstart's ExecutionPlan on this machine."""
    from rlcfg.runtime.driver import plan_here

    plan, errors = plan_here(exp)
    if errors:
        raise ValueError("; ".join(errors))
    return plan
