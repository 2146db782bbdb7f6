"""The weight sync `rlcfg run` does after every update when the rollout engines have GPUs (slots) of their own, timed
on this CPU machine for a few sizes of a Qwen2-style model (float32, with the quickstart's vocabulary):

1. gather: trainer rank 0 copies the whole model into CPU memory (`FSDPEngine.full_state_dict`);
2. put: Ray stores that state dict in its object store (torch tensors are pickled into it);
3. get: each engine's process reads it back (unpickled, a second copy);
4. load: the engine copies it into its own model (`update_weights`).

Parts 1 and 2 run once per sync, parts 3 and 4 in every engine, in parallel. Then the same model trains in the
quickstart's loop for a few steps, with the rollout on a slot of its own (the layout that syncs this way), and the
sync's share of that loop's step is printed.

    python bench/weight_sync.py [--sizes 256x4,768x8,1280x12] [--repeats 3] [--steps 4]

A size is hidden size x layers. Each part is the median of --repeats syncs after one warm-up. Seconds per GB
are the sync's whole time over the state dict's size. The GPU path adds a GPU -> CPU copy to the gather and a
CPU -> GPU copy to the load, and runs every step for every engine the same way. Numbers on a shared machine are
noisy: compare runs taken back to back.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PARTS = ("gather", "put", "get", "load")


def build_model(base: str, directory: str, hidden: int, layers: int) -> int:
    """The quickstart's model folder (tokenizer, generation settings) with a random model of this size in it.
    Returns its number of parameters."""
    import torch
    from transformers import AutoConfig, Qwen2Config, Qwen2ForCausalLM

    from rlcfg.runtime import quickstart

    shutil.copytree(base, directory, ignore=shutil.ignore_patterns(quickstart.STAMP))
    tiny = AutoConfig.from_pretrained(base)
    heads = max(1, hidden // 64)
    config = Qwen2Config(vocab_size=tiny.vocab_size, hidden_size=hidden, intermediate_size=hidden * 8 // 3 // 64 * 64,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=max(1, heads // 4),
                         max_position_embeddings=tiny.max_position_embeddings, pad_token_id=tiny.pad_token_id,
                         eos_token_id=tiny.eos_token_id, bos_token_id=tiny.bos_token_id, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(directory)
    return sum(p.numel() for p in model.parameters())


def measure_sync(model_dirs: list[str], repeats: int) -> list[dict[str, float]]:
    """Per model: the median seconds of each part of the sync, and the state dict's bytes."""
    import ray

    @ray.remote(num_cpus=1)
    class Trainer:
        def __init__(self, path: str):
            from rlcfg.runtime.backends.fsdp import FSDPEngine, init_distributed
            from rlcfg.runtime.backends.vllm import free_port  # vLLM's module imports no vLLM at the top

            init_distributed(0, 1, "127.0.0.1", free_port(), "cpu")
            self.engine = FSDPEngine("actor", path, dtype="float32", device="cpu")

        def gather_and_put(self):
            t0 = time.perf_counter()
            weights = self.engine.full_state_dict()
            t1 = time.perf_counter()
            ref = ray.put(weights)
            t2 = time.perf_counter()
            size = sum(t.numel() * t.element_size() for t in weights.values())
            return {"gather": t1 - t0, "put": t2 - t1, "bytes": size}, [ref]  # a list, so the driver leaves it

    @ray.remote(num_cpus=1)
    class Engine:
        def __init__(self, path: str):
            from rlcfg.runtime.backends.hf import HFRolloutEngine

            self.rollout = HFRolloutEngine(path, device="cpu", dtype="float32")

        def get_and_load(self, refs):
            t0 = time.perf_counter()
            weights = ray.get(refs[0])
            t1 = time.perf_counter()
            self.rollout.update_weights(weights)
            return {"get": t1 - t0, "load": time.perf_counter() - t1}

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    results = []
    try:
        for path in model_dirs:
            trainer, engine = Trainer.remote(path), Engine.remote(path)
            samples = []
            for _ in range(repeats + 1):  # the first one warms up
                sent, refs = ray.get(trainer.gather_and_put.remote())
                samples.append({**sent, **ray.get(engine.get_and_load.remote(refs))})
                del refs
            results.append({k: statistics.median(s[k] for s in samples[1:]) for k in (*PARTS, "bytes")})
            ray.kill(trainer)
            ray.kill(engine)
    finally:
        ray.shutdown()
    return results


def measure_step(model_dir: str, workdir: str, steps: int) -> dict[str, float]:
    """The quickstart's loop with this model and the rollout on a slot of its own: median seconds of a step,
    and of the gather and load it timed itself (the object store's part is not timed by the loop)."""
    from rlcfg.runtime import quickstart
    from rlcfg.runtime.driver import RunOptions, run

    base = quickstart.experiment(os.path.join(workdir, "run"), steps=steps, prompts_per_step=2, group_size=4,
                                 max_new_tokens=4, checkpoint_interval=None,
                                 files_dir=os.path.join(workdir, "quickstart"))
    model = dataclasses.replace(base.role("actor").model, path=model_dir)
    roles = tuple(dataclasses.replace(r, model=model) if r.model is not None else r for r in base.roles)
    exp = dataclasses.replace(base, roles=roles, colocation=())
    out = tempfile.mkdtemp(dir=workdir)
    result = run(quickstart.plan_for(exp), RunOptions(output_dir=out, resume=None, stream=io.StringIO()))
    steady = result.history[1:]  # the first step warms up
    return {key: statistics.median(m.get(f"time/{key}", 0.0) for m in steady)
            for key in ("step", "train_gather", "weight_load")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="256x4,768x8,1280x12", help="hidden size x layers, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4, help="steps of the loop per size (the first warms up)")
    args = parser.parse_args()

    from rlcfg.runtime import quickstart

    sizes = [tuple(int(x) for x in size.split("x")) for size in args.sizes.split(",") if size]
    workdir = tempfile.mkdtemp(prefix="rlcfg-weight-sync-bench-")
    try:
        base = quickstart.prepare(os.path.join(workdir, "quickstart"), 0, warm_start=False)["model"]
        dirs, params = [], []
        for hidden, layers in sizes:
            dirs.append(os.path.join(workdir, f"model-{hidden}x{layers}"))
            params.append(build_model(base, dirs[-1], hidden, layers))
        syncs = measure_sync(dirs, args.repeats)
        print(f"{'model':>10} {'params':>7} {'GB':>5} | " + " ".join(f"{p:>6}" for p in PARTS) +
              f" {'sync':>6} {'s/GB':>5} | loop: {'step':>6} {'gather':>6} {'load':>6} {'sync share':>10}")
        for (hidden, layers), path, count, sync in zip(sizes, dirs, params, syncs):
            total = sum(sync[p] for p in PARTS)
            gb = sync["bytes"] / 1e9
            loop = measure_step(path, workdir, args.steps)
            # The loop times its gather and load; the object store's part comes from the syncs above.
            in_loop = loop["train_gather"] + sync["put"] + sync["get"] + loop["weight_load"]
            print(f"{hidden:>5}x{layers:<4} {count / 1e6:6.1f}M {gb:5.2f} | " +
                  " ".join(f"{sync[p]:6.3f}" for p in PARTS) + f" {total:6.3f} {total / gb:5.2f} | loop: "
                  f"{loop['step']:6.2f} {loop['train_gather']:6.3f} {loop['weight_load']:6.3f} "
                  f"{in_loop / loop['step']:10.1%}", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
