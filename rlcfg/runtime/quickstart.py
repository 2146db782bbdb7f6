"""The quickstart: GRPO that visibly learns on a laptop CPU in a couple of minutes, with nothing downloaded.

The task is the multiplication table up to 12 ("7*8=" → "56"): answers of one to three digit tokens, and a
response is right only when it gives the answer and then stops (EOS). The model is a tiny Qwen2-style network
(hidden 64, 2 layers, 4 heads, 2 KV heads) with a character-level tokenizer, built here with random weights and
then warm-started with a short supervised run (rlcfg's own SFT path, Experiment.kind "sft") on running text of
the task: documents like "7*8=56;3*4=12" of one to six products, each ending in EOS. That teaches the format
and much of the table, but not to stop after the answer: a warm-started model gives the right answer first
most of the time but stops there only about one time in six, so its mean reward starts near 0.15 with long
responses, most of them cut at the length limit. GRPO then teaches it to answer and stop: the reward climbs
past 0.8 while the responses shrink to the answer's length.

Everything is cached under the quickstart folder (`rlcfg-quickstart/` for the dialect templates) and built
atomically: a model folder is built under a temporary name and renamed when complete, and one whose files do not
match the stamp written with it (a kill, a damaged file, an older recipe) is rebuilt.

`experiment()` returns the canonical Experiment (what a dialect config would lower to), so the quickstart runs
through exactly the same plan and runtime as any config.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import shutil
import sys
from typing import Any, TextIO

from rlcfg.ir import (KL, Algorithm, Checkpointing, Cluster, Data, Experiment, Logging, Model, Optimizer, Resources,
                      Role, Sampling, Schedule)

# Every character the task uses, one token each; <pad> and <eos> first so their ids are stable.
SPECIAL = ("<pad>", "<eos>")
CHARS = tuple("0123456789+=*;")  # the first twelve keep the ids older quickstarts gave them
LARGEST = 12  # the table's factors run from 0 to this
SEPARATOR = ";"  # between the problems of one warm-start document
# Room for the longest answer (3 digits) and its EOS several times over: a model that does not stop runs on
# into the next problem until the limit cuts it, and learning to stop is half of what the run shows.
RESPONSE_LENGTH = 12

# The supervised warm start: enough steps to learn the format and much of the table, not to stop after the
# answer. Tuned (with the RL settings of experiment() and templates/quickstart-cpu.yaml) so that the RL run
# starts at a mean reward of about 0.15 (at most 0.35) and passes 0.8 within 100 steps.
WARM_START = {"steps": 140, "batch_size": 64, "lr": 3e-3, "documents": 4096, "max_problems": 6, "seed": 0}
# Written with each built model; a model whose stamp differs (another recipe, or files that changed) is rebuilt.
RECIPE = {"version": 2, "task": f"products 0..{LARGEST}", "vocab": "".join(CHARS), "warm_start": WARM_START}
# The random model alone (experiment(warm_start=False): tests of the loop's mechanics, which need no learning).
BASE_RECIPE = dict(RECIPE, warm_start=None)
STAMP = "rlcfg-quickstart.json"


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
                         # old matrix there); it costs 1,000 parameters.
                         tie_word_embeddings=False)
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = pad_id
    model.generation_config.eos_token_id = eos_id
    model.save_pretrained(directory)


# ------------------------------------------------------------------------------------------------ the task

def task_examples(seed: int = 0, largest: int = LARGEST) -> list[dict[str, str]]:
    """Every product of two numbers from 0 to `largest` (169 with the default 12: answers of 1 to 3 digits),
    each once, shuffled."""
    rows = [{"prompt": f"{a}*{b}=", "answer": str(a * b)} for a in range(largest + 1) for b in range(largest + 1)]
    random.Random(seed).shuffle(rows)
    return rows


def warm_start_examples(seed: int = 0, largest: int = LARGEST, documents: int = WARM_START["documents"],
                        max_problems: int = WARM_START["max_problems"]) -> list[dict[str, str]]:
    """Running text of the task for the supervised warm start, as prompt/answer pairs: the prompt is a
    document's first problem, the answer the rest of the document, that is its first answer followed by one to
    `max_problems` − 1 more solved problems ("7*8=" → "56;3*4=12;0*9=0"), or by nothing. The model learns
    the format and the table, and that an answer is followed by EOS only sometimes."""
    problems = task_examples(seed, largest)
    rng = random.Random(seed + 1)
    rows = []
    for _ in range(documents):
        first = rng.choice(problems)
        more = [p["prompt"] + p["answer"] for p in rng.sample(problems, rng.randint(0, max_problems - 1))]
        rows.append({"prompt": first["prompt"], "answer": SEPARATOR.join([first["answer"], *more])})
    return rows


def jsonl_text(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def write_jsonl(path: str, rows: list[dict[str, Any]]) -> None:
    from rlcfg.runtime.checkpoint import write_atomic

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    write_atomic(path, jsonl_text(rows))


def _file_is(path: str, text: str) -> bool:
    """Whether the file holds exactly `text`: a data file cut short, edited or written by an older recipe is
    rewritten."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read() == text
    except (OSError, UnicodeDecodeError):
        return False


# ------------------------------------------------------------------------------------------------ the model

# What a built quickstart model folder holds besides its stamp.
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_complete(path: str, warm_start: bool = True) -> bool:
    """Whether `path` holds a quickstart model built by this recipe (warm-started or not) and intact: every
    file there, and the weights' hash the one its stamp recorded when it was built."""
    if not all(os.path.isfile(os.path.join(path, name)) for name in MODEL_FILES):
        return False
    try:
        with open(os.path.join(path, STAMP), encoding="utf-8") as f:
            stamp = json.load(f)
        return (isinstance(stamp, dict) and stamp.get("recipe") == (RECIPE if warm_start else BASE_RECIPE)
                and stamp.get("sha256") == _sha256(os.path.join(path, "model.safetensors")))
    except (OSError, ValueError):
        return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def warm_start(base: str, corpus: str, out: str, seed: int = 0, stream: TextIO | None = None,
               address: str | None = None) -> str:
    """The supervised warm start: rlcfg's SFT run (Experiment.kind "sft") of the model at `base` on the
    prompt/answer pairs of `corpus`, in the run folder `out`, on the Ray cluster at `address` when the run that
    needs it goes there (one process joins one Ray). Returns the trained model's folder."""
    from rlcfg.runtime.driver import RunOptions, plan_here, run
    from rlcfg.runtime.supervised import sft_experiment

    w = WARM_START
    exp = sft_experiment(base, corpus, steps=w["steps"], batch_size=w["batch_size"], lr=w["lr"],
                         grad_clip=None, seed=w["seed"] + seed, name="quickstart-warm-start")
    plan, errors = plan_here(exp, address)
    if errors:
        raise ValueError("; ".join(errors))
    run(plan, RunOptions(output_dir=out, resume=None, threads=1, stream=stream or io.StringIO(), address=address))
    return os.path.join(out, "hf_model")


def warm_started(base: str, work: str, seed: int = 0, stream: TextIO | None = None,
                 address: str | None = None) -> str:
    """The model at `base` (a Hugging Face folder with the quickstart's tokenizer) after the quickstart's warm
    start, run in the folder `work`; returns the warm-started model's folder (under `work`)."""
    corpus = os.path.join(work, "warm-start.jsonl")
    write_jsonl(corpus, warm_start_examples(seed))
    built = warm_start(base, corpus, os.path.join(work, "run"), seed, stream, address)
    # The export holds the weights and the tokenizer; the generation settings come from the base model.
    if os.path.isfile(os.path.join(base, "generation_config.json")):
        shutil.copy2(os.path.join(base, "generation_config.json"), built)
    return built


def build_model_dir(path: str, seed: int = 0, stream: TextIO | None = None, warm_start: bool = True,
                    address: str | None = None) -> bool:
    """Build the quickstart model at `path` atomically: the random model, its warm start (unless `warm_start`
    is False) and the stamp go into `<path>.tmp-<pid>`, flushed to disk, then the model is renamed into place.
    A folder at `path` that is not a complete model of this recipe is replaced; a complete one (another run
    built it meanwhile) is kept. Returns whether this call built it."""
    from rlcfg.runtime.checkpoint import fsync_dir, fsync_tree

    path = os.path.normpath(path)
    parent, name = os.path.split(path)
    os.makedirs(parent or ".", exist_ok=True)
    for leftover in os.listdir(parent or "."):  # builds killed half-way
        stem, _, pid = leftover.rpartition(".tmp-")
        if stem == name and pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(os.path.join(parent, leftover), ignore_errors=True)
    work = f"{path}.tmp-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    try:
        base = os.path.join(work, "base")
        tokenizer = build_tokenizer(base)
        build_model(base, len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id, seed)
        if warm_start:
            built = warm_started(base, os.path.join(work, "sft"), seed, stream, address)
        else:
            built = base
        stamp = {"recipe": RECIPE if warm_start else BASE_RECIPE,
                 "sha256": _sha256(os.path.join(built, "model.safetensors"))}
        with open(os.path.join(built, STAMP), "w", encoding="utf-8") as f:
            json.dump(stamp, f, indent=1)
        fsync_tree(built)
        if os.path.exists(path):
            if model_complete(path, warm_start):
                return False
            broken = f"{path}.broken-{os.getpid()}"
            os.rename(path, broken)
            shutil.rmtree(broken, ignore_errors=True)
        try:
            os.rename(built, path)
        except OSError:  # another process published it between our check and our rename
            if not model_complete(path, warm_start):
                raise
            return False
        fsync_dir(parent or ".")
        return True
    finally:
        shutil.rmtree(work, ignore_errors=True)


def ensure_model(path: str, seed: int = 0, stream: TextIO | None = None, warm_start: bool = True,
                 address: str | None = None) -> bool:
    """Build the model at `path` unless a complete one is there; returns whether it was built. Says so on
    `stream` (stderr) first: the warm start takes several seconds."""
    if model_complete(path, warm_start):
        return False
    if warm_start:
        print(building_message(path), file=stream if stream is not None else sys.stderr, flush=True)
    return build_model_dir(path, seed, warm_start=warm_start, address=address)


def building_message(path: str) -> str:
    return (f"rlcfg: building the quickstart's model at {path}: a random tiny model, then a supervised warm start "
            f"({WARM_START['steps']} steps of rlcfg's SFT on text of the task)")


def prepare(directory: str, seed: int = 0, stream: TextIO | None = None, warm_start: bool = True) -> dict[str, str]:
    """Write the model, tokenizer and data under `directory` (once; reused when already there and intact):
    the warm-started model in `model/`, or the random one in `base-model/`."""
    model_dir = os.path.join(directory, "model" if warm_start else "base-model")
    train = os.path.join(directory, "data", "train.jsonl")
    ensure_model(model_dir, seed, stream, warm_start)
    text = jsonl_text(task_examples(seed))
    if not _file_is(train, text):
        write_jsonl(train, task_examples(seed))
    return {"model": model_dir, "train": train}


QUICKSTART_DIR = "rlcfg-quickstart"
MODEL_NAME = "tiny-qwen2"


def _roll_rows(seed: int) -> list[dict[str, str]]:
    # `ground_truth` is the answer column ROLL's math rule reads.
    return [dict(row, ground_truth=row["answer"]) for row in task_examples(seed)]


def builds(path: str) -> str | None:
    """"model" or "data" when `path` names what `materialize` builds (a `.../rlcfg-quickstart/tiny-qwen2` model, a
    `.../rlcfg-quickstart/<name>.jsonl` data file), else None."""
    parent, name = os.path.split(os.path.normpath(path))
    if os.path.basename(parent) != QUICKSTART_DIR:
        return None
    return "model" if name == MODEL_NAME else "data" if name.endswith(".jsonl") else None


def materialize(exp: Experiment, seed: int = 0, stream: TextIO | None = None, address: str | None = None) -> list[str]:
    """Build the quickstart's model and data where a config names them and they are not there (or are not
    intact, or come from an older recipe): a model path `.../rlcfg-quickstart/tiny-qwen2` and a data file
    `.../rlcfg-quickstart/<name>.jsonl` (columns `prompt`, `answer` and `ground_truth`). This is how a dialect
    template of the quickstart runs with nothing downloaded. Returns what was written."""
    written = []
    paths = {r.model.path for r in exp.roles if r.model and r.model.path}
    for path in sorted(paths):
        if builds(path) == "model" and ensure_model(path, seed, stream, address=address):
            written.append(path)
    for path in exp.data.train_files + exp.data.eval_files:
        if builds(path) == "data":
            rows = _roll_rows(seed)
            if not _file_is(path, jsonl_text(rows)):
                write_jsonl(path, rows)
                written.append(path)
    return written


def experiment(output_dir: str, *, steps: int = 100, prompts_per_step: int = 16, group_size: int = 16,
               lr: float = 5e-4, actor_ranks: int = 1, checkpoint_interval: int | None = 20, keep_last: int | None = 2,
               seed: int = 0, kl_coef: float = 0.0, max_new_tokens: int = RESPONSE_LENGTH,
               temperature: float = 1.0, warm_start: bool = False, files_dir: str | None = None) -> Experiment:
    """The quickstart as an Experiment; prepares its files under `files_dir` (by default
    `<output_dir>/quickstart/`; runs that share one build the model once). The model is the random one unless
    `warm_start` (what `rlcfg run --quickstart` and the templates train): the warm start is an SFT run of its
    own, which what only plans or inspects the loop does without (a random model's rewards are all 0, so its
    updates are empty)."""
    files = prepare(files_dir or os.path.join(output_dir, "quickstart"), seed, warm_start=warm_start)
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
    return Experiment(
        name="quickstart", dialect="rlcfg", variant=None, cluster=Cluster(nodes=1),
        roles=tuple(roles), colocation=tuple(colocated),
        algorithm=Algorithm(advantage="grpo", group_size=group_size,
                            kl=KL(placement="loss" if kl_coef > 0 else "none", coef=kl_coef, estimator="k3")),
        sampling=Sampling(max_new_tokens=max_new_tokens, temperature=temperature, n=group_size),
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
