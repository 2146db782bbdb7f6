"""What a user sees of a run: one progress line per step, metrics.jsonl (always), TensorBoard and wandb (when
enabled and installed), PNG plots at the end (when matplotlib is installed) and a one-line summary."""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any, Iterable, TextIO


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Reporter:
    def __init__(self, output_dir: str, backends: Iterable[str] = ("jsonl",), project: str | None = None,
                 run_name: str | None = None, stream: TextIO | None = None, resume_step: int = 0,
                 config: dict[str, Any] | None = None, restore: dict[str, Any] | None = None):
        self.output_dir = output_dir
        self.stream = stream if stream is not None else sys.stderr
        self.path = os.path.join(output_dir, "metrics.jsonl")
        self.notes: list[str] = []
        os.makedirs(output_dir, exist_ok=True)
        self._truncate_after(resume_step)
        self.file = open(self.path, "a", encoding="utf-8")
        self.history: list[dict[str, Any]] = self._read_history()
        # The checkpoint of a step is committed before its line is written: a run killed in between left the
        # line out, and the checkpoint carries it (`restore`) so that every step still appears once.
        if restore and restore.get("step") == resume_step and not any(m.get("step") == resume_step
                                                                      for m in self.history):
            self.log(restore, quiet=True)
        self.tb = None
        self.wandb = None
        self._step_times: list[float] = []
        self._elapsed = 0.0
        backends = set(backends)
        if "tensorboard" in backends:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(os.path.join(output_dir, "tensorboard"))
            except ImportError:
                self.notes.append("TensorBoard logging is enabled but `tensorboard` is not installed; "
                                  "pip install tensorboard")
        if "wandb" in backends:
            try:
                import wandb

                # Without credentials, log offline (sync later with `wandb sync`) instead of failing the run.
                mode = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
                self.wandb = wandb.init(project=project or "rlcfg", name=run_name, dir=output_dir, mode=mode,
                                        config=config or {}, resume="allow")
            except ImportError:
                self.notes.append("wandb logging is enabled but `wandb` is not installed; pip install wandb")
        for note in self.notes:
            print(f"rlcfg: note: {note}", file=self.stream)

    def _truncate_after(self, step: int) -> None:
        """A resumed run replays the steps after its checkpoint; drop their old lines so each step appears once."""
        if not os.path.exists(self.path):
            return
        kept = []
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                try:
                    # A run starting at step 0 keeps nothing: an evaluation logged as step 0 by a run
                    # killed before its first checkpoint is logged again.
                    if step > 0 and json.loads(line).get("step", 0) <= step:
                        kept.append(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a kill
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(kept)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def _read_history(self) -> list[dict[str, Any]]:
        out = []
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a line cut short by a kill (a run that resumes from step 0 keeps none anyway)
        return out

    def log(self, metrics: dict[str, Any], quiet: bool = False) -> None:
        self.history.append(metrics)
        self.file.write(json.dumps(metrics, sort_keys=True) + "\n")
        self.file.flush()
        if quiet:
            return
        step = metrics["step"]
        numeric = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and k != "step"}
        if self.tb is not None:
            for k, v in numeric.items():
                self.tb.add_scalar(k, v, step)
        if self.wandb is not None:
            self.wandb.log(numeric, step=step)

    def progress(self, step: int, total: int, metrics: dict[str, Any], elapsed: float, steps_done: int) -> None:
        """One line per step. The ETA comes from the median of the recent steps' wall times, leaving out the
        first step of this invocation once there are others (it pays for warming up), and evaluations or
        checkpoints that make single steps long."""
        self._step_times.append(elapsed - self._elapsed)
        self._elapsed = elapsed
        recent = sorted((self._step_times[1:] or self._step_times)[-20:])
        eta = recent[len(recent) // 2] * (total - step) if steps_done else float("nan")
        parts = [f"step {step}/{total}", f"reward {metrics.get('reward/mean', float('nan')):.3f}"]
        if "kl" in metrics:
            parts.append(f"kl {metrics['kl']:.4f}")
        parts += [f"len {metrics.get('response/length_mean', 0):.1f}",
                  f"{metrics.get('throughput/samples_per_s', 0):.0f} samples/s", f"ETA {_duration(eta)}"]
        width = 30
        filled = int(width * step / max(total, 1))
        bar = "#" * filled + "." * (width - filled)
        print(f"[{bar}] " + " | ".join(parts), file=self.stream, flush=True)

    def plots(self) -> list[str]:
        """reward.png, kl.png, response_length.png under plots/; nothing (and a note) without matplotlib."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            return []
        series = {"reward": "reward/mean", "kl": "kl", "response_length": "response/length_mean"}
        out_dir = os.path.join(self.output_dir, "plots")
        os.makedirs(out_dir, exist_ok=True)
        written = []
        for name, key in series.items():
            points = [(m["step"], m[key]) for m in self.history if key in m]
            if not points:
                continue
            fig, ax = plt.subplots(figsize=(6, 3.5))
            ax.plot([p[0] for p in points], [p[1] for p in points])
            ax.set_xlabel("step")
            ax.set_ylabel(key)
            ax.grid(alpha=0.3)
            fig.tight_layout()
            path = os.path.join(out_dir, f"{name}.png")
            # Written aside and renamed: a plot is refreshed at every checkpoint, and a kill mid-write must
            # not leave a broken image behind.
            tmp = f"{path}.tmp-{os.getpid()}"
            fig.savefig(tmp, dpi=100, format="png")
            plt.close(fig)
            os.replace(tmp, path)
            written.append(path)
        return written

    def close(self) -> None:
        self.file.close()
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def summary_line(history: list[dict[str, Any]], elapsed: float, output_dir: str) -> str:
    if not history:
        return f"rlcfg run: no steps run; output in {output_dir}"
    last = history[-1]
    window = history[-min(5, len(history)):]
    head = history[:min(5, len(history))]
    start = sum(m.get("reward/mean", 0.0) for m in head) / len(head)
    end = sum(m.get("reward/mean", 0.0) for m in window) / len(window)
    rates = [m.get("throughput/samples_per_s", 0.0) for m in history]
    rate = sum(rates) / len(rates)
    return (f"rlcfg run: {last['step']} steps in {_duration(elapsed)}, mean reward {start:.2f} -> {end:.2f} "
            f"(first/last {len(head)} steps), {rate:.0f} samples/s; output in {output_dir}")
