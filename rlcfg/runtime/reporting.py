"""What a user sees of a run: one progress line per step, a few sample responses with their rewards at the start
and at the end, metrics.jsonl (always, every step), TensorBoard and wandb (when enabled and installed: every
numeric metric of every step), PNG plots refreshed at every checkpoint and at the end (when matplotlib is
installed) and a one-line summary."""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Sequence, TextIO


@dataclass(frozen=True)
class Plot:
    """One figure of plots/: lines of metrics against the step; optionally a band of ± `band` around the line
    of `band_around`, and a fraction (0 to 1) on a second axis."""

    name: str
    title: str
    lines: tuple[tuple[str, str], ...]  # (metric, label)
    band_around: str | None = None
    band: str | None = None
    band_label: str = ""
    twin: tuple[str, str] | None = None  # (metric, label)


# The figures a run's plots/ folder gets, each written when the run recorded any of its metrics (a supervised
# run has no reward; a run without a KL term no KL).
PLOTS = (
    Plot("reward", "reward", (("reward/mean", "mean"), ("eval/reward", "evaluation")),
         band_around="reward/mean", band="reward/group_std", band_label="± std inside a group"),
    Plot("response_length", "response length (tokens)",
         (("response/length_mean", "mean"), ("response/length_max", "max")),
         twin=("response/truncated_frac", "cut at the limit (fraction)")),
    Plot("policy_loss", "policy loss", (("actor/pg_loss", "policy loss"),)),
    Plot("kl", "KL to the reference", (("kl", "KL"), ("actor/kl_loss", "KL in the loss"))),
    Plot("entropy", "entropy (nats per token)",
         (("rollout/entropy", "sampled tokens (rollout)"), ("actor/entropy", "trainer"))),
    Plot("clip_fraction", "fraction of tokens clipped", (("actor/clip_frac", "clip fraction"),)),
    Plot("grad_norm", "gradient norm (before clipping)", (("actor/grad_norm", "actor"), ("grad_norm", "model"))),
    Plot("learning_rate", "learning rate", (("actor/lr", "actor"), ("lr", "model"))),
    Plot("throughput", "samples per second", (("throughput/samples_per_s", "samples/s"),)),
    Plot("staleness", "asynchronous rollouts",
         (("async/staleness_max", "staleness, max (updates)"), ("async/staleness_mean", "staleness, mean"),
          ("async/max_staleness", "bound"), ("async/steps_ahead", "steps started ahead"))),
    Plot("waiting", "seconds waited per step",
         (("time/rollout_wait", "trainer, for rollouts"), ("time/rollout_idle", "rollout engines, for work"))),
    Plot("loss", "supervised loss", (("sft/loss", "train"), ("rw/loss", "train"), ("eval/loss", "evaluation"))),
)
# A supervised step's loss, for the progress line and the summary (rlcfg.runtime.supervised_step.step_metrics).
LOSS_KEYS = ("sft/loss", "rw/loss")


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
                                  "pip install 'rlcfg[logging]'")
        if "wandb" in backends:
            try:
                import wandb

                # Without credentials, log offline (sync later with `wandb sync`) instead of failing the run.
                mode = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
                self.wandb = wandb.init(project=project or "rlcfg", name=run_name, dir=output_dir, mode=mode,
                                        config=config or {}, resume="allow")
            except ImportError:
                self.notes.append("wandb logging is enabled but `wandb` is not installed; pip install 'rlcfg[logging]'")
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
        parts = [f"step {step}/{total}"]
        loss = next((k for k in LOSS_KEYS if k in metrics), None)
        if "reward/mean" in metrics or loss is None:  # an RL step
            parts.append(f"reward {metrics.get('reward/mean', float('nan')):.3f}")
            if "kl" in metrics:
                parts.append(f"kl {metrics['kl']:.4f}")
            parts.append(f"len {metrics.get('response/length_mean', 0):.1f}")
        else:  # a supervised step
            parts.append(f"loss {metrics[loss]:.4f}")
        parts += [f"{metrics.get('throughput/samples_per_s', 0):.0f} samples/s", f"ETA {_duration(eta)}"]
        width = 30
        filled = int(width * step / max(total, 1))
        bar = "#" * filled + "." * (width - filled)
        print(f"[{bar}] " + " | ".join(parts), file=self.stream, flush=True)

    def show_samples(self, metrics: dict[str, Any], prompts: Sequence[str] | None = None) -> None:
        """A few of the step's responses with their rewards (metrics["samples"], step.rollout_metrics), each
        after its prompt when `prompts` (the train prompts' texts) are given; a response that stopped ends
        in <eos>, one the length limit cut in "...". Nothing for a step without samples."""
        samples = metrics.get("samples") or []
        if not samples:
            return
        lines = [f"rlcfg: sample responses at step {metrics['step']} (prompt, response, reward):"]
        for sample in samples:
            index = sample.get("prompt_index")
            prompt = prompts[index] if prompts is not None and isinstance(index, int) and index < len(prompts) else ""
            end = "<eos>" if sample.get("finished") else "..."
            lines.append(f"  {_one_line(prompt, 40)}  {_one_line(sample['response'], 60)}{end}  "
                         f"{sample['reward']:g}")
        print("\n".join(lines), file=self.stream, flush=True)

    def plots(self) -> list[str]:
        """One PNG per figure of PLOTS under plots/, for the figures whose metrics the run recorded; nothing
        without matplotlib. Each is written aside and renamed: plots are refreshed at every checkpoint, and a
        kill mid-write must not leave a broken image behind."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            return []
        out_dir = os.path.join(self.output_dir, "plots")
        os.makedirs(out_dir, exist_ok=True)
        written = []
        for plot in PLOTS:
            lines = [(key, label, self._series(key)) for key, label in plot.lines]
            lines = [line for line in lines if line[2][0]]
            if not lines:
                continue
            fig, ax = plt.subplots(figsize=(6, 3.5))
            for key, label, (steps, values) in lines:
                ax.plot(steps, values, label=label, linewidth=1.2)
                if key == plot.band_around:
                    band = dict(zip(*self._series(plot.band)))
                    at = [(x, v, band[x]) for x, v in zip(steps, values) if x in band]
                    if at:
                        ax.fill_between([a[0] for a in at], [a[1] - a[2] for a in at], [a[1] + a[2] for a in at],
                                        alpha=0.2, label=plot.band_label)
            twin_steps, twin_values = self._series(plot.twin[0]) if plot.twin else ([], [])
            if twin_steps:
                right = ax.twinx()
                right.plot(twin_steps, twin_values, color="tab:red", linestyle="--", linewidth=1.0,
                           label=plot.twin[1])
                right.set_ylabel(plot.twin[1])
                right.set_ylim(-0.02, 1.02)
                right.legend(loc="upper right", fontsize=8)
            ax.set_title(plot.title)
            ax.set_xlabel("step")
            ax.grid(alpha=0.3)
            if len(lines) > 1 or plot.band_around:
                ax.legend(loc="upper left" if twin_steps else "best", fontsize=8)
            fig.tight_layout()
            path = os.path.join(out_dir, f"{plot.name}.png")
            tmp = f"{path}.tmp-{os.getpid()}"
            fig.savefig(tmp, dpi=100, format="png")
            plt.close(fig)
            os.replace(tmp, path)
            written.append(path)
        return written

    def _series(self, key: str | None) -> tuple[list[int], list[float]]:
        points = [(m["step"], m[key]) for m in self.history
                  if key and isinstance(m.get(key), (int, float)) and "step" in m]
        return [p[0] for p in points], [float(p[1]) for p in points]

    def close(self) -> None:
        self.file.close()
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def summary_line(history: list[dict[str, Any]], elapsed: float, output_dir: str) -> str:
    """The run in one line: its steps and time, how the reward (a supervised run: the loss) and the response
    length moved between the first and the last five steps, and its throughput."""
    steps = [m for m in history if "step" in m and ("reward/mean" in m or any(k in m for k in LOSS_KEYS))]
    if not steps:
        return f"rlcfg run: no steps run; output in {output_dir}"
    # Up to five steps at each end, never overlapping: a short run compares its first and last halves.
    window = max(1, min(5, len(steps) // 2))
    head, tail = steps[:window], steps[-window:]

    def mean(rows: list[dict[str, Any]], key: str) -> float:
        return sum(m.get(key, 0.0) for m in rows) / len(rows)

    loss = next((k for k in LOSS_KEYS if k in steps[-1]), None)
    if "reward/mean" in steps[-1] or loss is None:
        moved = f"mean reward {mean(head, 'reward/mean'):.2f} -> {mean(tail, 'reward/mean'):.2f}"
        if "response/length_mean" in steps[-1]:
            moved += (f", response length {mean(head, 'response/length_mean'):.1f} -> "
                      f"{mean(tail, 'response/length_mean'):.1f}")
    else:
        moved = f"loss {mean(head, loss):.3f} -> {mean(tail, loss):.3f}"
    rate = mean(steps, "throughput/samples_per_s")
    return (f"rlcfg run: {steps[-1]['step']} steps in {_duration(elapsed)}, {moved} (first/last {window} "
            f"step{'s' if window != 1 else ''}), "
            f"{rate:.0f} samples/s; output in {output_dir}")


def _one_line(text: str, width: int) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= width else text[:width - 3] + "..."
