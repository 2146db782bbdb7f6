"""Diagnostics: what rlcfg tells a user about a config, and how it is printed.

Every problem rlcfg finds becomes one `Diagnostic` with a stable code (see `CODES`), the dotted key it
belongs to, where that key's value came from, a message that names the keys and their values, and a hint.
The text renderer shows the offending source line with a caret; the JSON renderer emits the structure
documented in docs/diagnostics.md (`JSON_FORMAT_VERSION`).
"""

from __future__ import annotations

from dataclasses import field
from enum import Enum
from typing import Any, Iterable, Mapping, Sequence

from rlcfg.records import record

JSON_FORMAT_VERSION = 1


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


@record(frozen=True)
class Origin:
    """Where a value came from.

    kind is one of: ``file`` (a YAML file, with line and column), ``override`` (a command-line override,
    numbered from 1 in the order given), ``env`` (an environment variable read by ``${oc.env:...}``),
    ``default`` (the dialect's documented default; ``default_of`` holds the interpolation when the default
    is one) and ``derived`` (computed by rlcfg from other values).
    """

    kind: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    end_column: int | None = None
    override_index: int | None = None
    override_text: str | None = None
    env_var: str | None = None
    default_of: str | None = None
    via: tuple["Origin", ...] = ()

    def describe(self) -> str:
        if self.kind == "file":
            return f"{self.file}:{self.line}:{self.column}"
        if self.kind == "override":
            if self.file is not None:  # an argument of a launch script, where the script writes it
                return f"{self.file}:{self.line}:{self.column}"
            return f"<override {self.override_index}: {self.override_text}>"
        if self.kind == "env":
            return f"<environment variable {self.env_var}>"
        if self.kind == "default":
            return f"<default {self.default_of}>" if self.default_of else "<default>"
        return "<derived>"

    def sort_key(self) -> tuple:
        rank = {"file": 0, "override": 1, "env": 2, "default": 3, "derived": 4}.get(self.kind, 5)
        return (rank, self.file or "", self.line or 0, self.column or 0, self.override_index or 0)

    def to_json(self) -> dict:
        out: dict = {"kind": self.kind}
        for name in ("file", "line", "column", "end_column", "override_index", "override_text", "env_var", "default_of"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.via:
            out["via"] = [o.to_json() for o in self.via]
        return out


# The origins of values the user wrote, as opposed to defaults and values rlcfg derived.
WRITTEN_BY_USER = frozenset({"file", "override", "env"})


@record(frozen=True)
class CodeInfo:
    title: str
    severity: Severity
    example: str


# The stable diagnostic codes. 1xx: syntax, sources and unknown keys; 2xx: types and ranges; 3xx: cross-field
# rules; 4xx: placement and resources; 5xx: memory. A code's meaning never changes once released.
CODES: dict[str, CodeInfo] = {
    "RLC100": CodeInfo("malformed YAML", Severity.ERROR, "found character '\\t' that cannot start any token"),
    "RLC101": CodeInfo("duplicate key", Severity.ERROR, "key `num_gpu` appears twice in the same mapping (first at grpo.yaml:12:5)"),
    "RLC102": CodeInfo("unknown key", Severity.ERROR, "unknown key `models.policy.tempreature`; did you mean `temperature`?"),
    "RLC103": CodeInfo("document is not a mapping", Severity.ERROR, "the file is empty; a config is a YAML mapping of sections"),
    "RLC104": CodeInfo("malformed command-line override", Severity.ERROR, "override `actor.lr` has no `=`"),
    "RLC105": CodeInfo("override of a key that does not exist", Severity.ERROR, "could not override `trainer.epoch`: no such key (use `+trainer.epoch=...` to add one)"),
    "RLC106": CodeInfo("unresolved interpolation", Severity.ERROR, "`${models.policy.lod}` refers to a key that does not exist"),
    "RLC107": CodeInfo("environment variable not set", Severity.ERROR, "`${oc.env:DATA_DIR}` needs the environment variable DATA_DIR, which is not set"),
    "RLC108": CodeInfo("interpolation cycle", Severity.ERROR, "`${a.b}` and `${a.c}` refer to each other"),
    "RLC109": CodeInfo("malformed interpolation", Severity.ERROR, "`${runtime_args.output_dir` is not a valid interpolation"),
    "RLC110": CodeInfo("unknown dialect", Severity.ERROR, "the document's shape fits no dialect (closest: skyrl, which needs a `generator` section)"),
    "RLC111": CodeInfo("renamed key", Severity.WARNING, "`trainer.num_warmup_steps` was renamed to `trainer.policy.optimizer_config.num_warmup_steps`"),
    "RLC112": CodeInfo("config composition failed", Severity.ERROR, "defaults list entry `model/qwen2` names a file that does not exist"),
    "RLC113": CodeInfo("key not in the framework release the config is judged by", Severity.ERROR, "`actor.group_size` does not exist in AReaL 1.0 (it is a key of AReaL 0.3)"),
    "RLC114": CodeInfo("unknown key the framework ignores", Severity.WARNING, "ROLL ignores the unknown key `my_notes`: its loader drops keys it does not define"),
    "RLC115": CodeInfo("key added with a `+` override", Severity.NOTE, "`+trainer.my_flag=1` adds a key rlcfg does not know; it is passed on for your own code to read"),
    "RLC116": CodeInfo("pipeline rlcfg does not model", Severity.WARNING, "this is a ROLL SFT pipeline config; rlcfg checked its YAML, interpolations and the keys it shares with the RL pipelines only"),
    "RLC117": CodeInfo("deleted key the framework reads", Severity.ERROR, "`~trainer.epochs` deletes a key skyrl-train reads; it stops with ConfigAttributeError"),
    "RLC118": CodeInfo("setting `rlcfg run` does not run", Severity.NOTE, "`trainer.algorithm.off_policy_correction.outlier_token_is_threshold_low` (0.001): rlcfg run refuses it; it runs no outlier masking"),
    "RLC119": CodeInfo("what `rlcfg run` cannot launch on the planned cluster", Severity.NOTE, "role `actor`: LoRA (rank 8) on the megatron backend, `trainer.policy.model.lora.dropout` = 0.1: rlcfg's Megatron adapters apply no dropout; set it to 0"),
    "RLC120": CodeInfo("launch-script argument rlcfg cannot know", Severity.WARNING, "`trainer.policy.model.path=?` depends on $MODEL_PATH, which rlcfg cannot know without running the script; this argument was left out of the check"),
    "RLC121": CodeInfo("launch script with several runs", Severity.NOTE, "the script calls skyrl-train's main_base 2 times; rlcfg checked the first call (the other is on line 40)"),
    "RLC122": CodeInfo("key in a layout the release reads only sometimes", Severity.WARNING, "`generator.backend` is in skyrl-train's layout: skyrl 0.1.0 reads that layout only from a source checkout"),
    "RLC123": CodeInfo("two layouts mixed", Severity.ERROR, "`generator.backend` is in skyrl-train's layout while other keys are in generator.inference_engine: skyrl 0.2.0 then replaces those with the old layout's values"),
    "RLC124": CodeInfo("what `rlcfg run` runs that the config does not name", Severity.NOTE, "AReaL's reward function is in the entry script a launch names, which a config file alone does not: `rlcfg run` scores responses as examples/math/gsm8k_rl.py does"),
    "RLC200": CodeInfo("wrong type", Severity.ERROR, "models.policy.num_gpu: expected an integer, got 8.5 (a float)"),
    "RLC201": CodeInfo("value out of range", Severity.ERROR, "models.policy.temperature: must be >= 0, got -1"),
    "RLC202": CodeInfo("not one of the allowed values", Severity.ERROR, "runtime_args.train_backend: `fdsp` is not one of fsdp, megatron; did you mean `fsdp`?"),
    "RLC203": CodeInfo("missing required value", Severity.ERROR, "runtime_args.train_micro_batch_size has no default and must be set"),
    "RLC204": CodeInfo("malformed value in a config mini-language", Severity.ERROR, "device_mapping `list(range(0,8)` is missing a closing parenthesis"),
    "RLC300": CodeInfo("batch sizes do not divide", Severity.ERROR, "runtime_args.sample_per_episode (500) is not a multiple of runtime_args.train_global_batch_size (512)"),
    "RLC301": CodeInfo("mutually exclusive options", Severity.ERROR, "trainer.algorithm.use_kl_in_reward and trainer.algorithm.use_kl_loss are both true"),
    "RLC302": CodeInfo("option requires another", Severity.ERROR, "advantage_estimator `gae` needs a critic: set trainer.critic.model.path"),
    "RLC303": CodeInfo("sequence lengths are inconsistent", Severity.ERROR, "models.policy.max_seq_len_to_capture (1024) is smaller than models.policy.seq_length (2048)"),
    "RLC304": CodeInfo("value the framework silently rewrites", Severity.WARNING, "ChatLearn ignores models.policy_trainer.fsdp_size (4) and uses num_gpu (8)"),
    "RLC305": CodeInfo("linked values disagree", Severity.ERROR, "generator.max_input_length (1024) must equal trainer.max_prompt_length (512) for single-turn generation"),
    "RLC306": CodeInfo("unsupported combination", Severity.ERROR, "strategy `fsdp` cannot offload parameters to CPU; use `fsdp2`"),
    "RLC307": CodeInfo("value has no effect", Severity.WARNING, "models.policy_trainer.train_micro_batch_size is ignored because packing is enabled"),
    "RLC308": CodeInfo("depends on the machine that runs the job", Severity.WARNING, "the wandb logger needs WANDB_API_KEY in the environment of the job"),
    "RLC400": CodeInfo("parallel size does not divide the GPU count", Severity.ERROR, "models.policy.num_gpu (6) is not a multiple of tensor_model_parallel_size (4)"),
    "RLC401": CodeInfo("placements overlap", Severity.ERROR, "actor (GPUs 0-3) and rollout (GPUs 2-5) overlap without being colocated"),
    "RLC402": CodeInfo("colocated roles have different sizes", Severity.ERROR, "colocate_all needs the policy's 8 GPUs to equal the rollout engines' 4"),
    "RLC403": CodeInfo("placement exceeds the cluster", Severity.ERROR, "rollout asks for GPUs 8-15 but the cluster has 8 GPUs"),
    "RLC404": CodeInfo("idle GPUs", Severity.WARNING, "GPUs 6-7 of node 0 are assigned to no role"),
    "RLC500": CodeInfo("does not fit in GPU memory", Severity.ERROR, "GPUs 0-7 (actor+rollout+reference) need about 92.3 GiB at their peak but H100 80GB has 79.6 GiB"),
    "RLC501": CodeInfo("memory estimate is approximate or the architecture is unknown", Severity.NOTE, "no memory estimate for actor: its model `/mnt/models/my-model` matches no model family rlcfg knows"),
    "RLC502": CodeInfo("fits in GPU memory only when samples are shorter than their maximum", Severity.WARNING, "GPUs 0-7 need about 85.7 GiB with every sample at its longest (6,144 tokens); a micro-batch fits while its samples average up to about 4,900 tokens"),
}


@record(frozen=True)
class Edit:
    """A hint that is a concrete change: give `key` (dotted, in the dialect's own names) the value `value`.

    `origin` is where the value it replaces came from. An edit whose old value was written in the checked file is
    written there by `rlcfg validate --fix`; one whose value came from an override, a default or another file is
    given as the override to pass instead (`override`, in the dialect's override grammar).
    """

    key: str
    value: Any
    old_value: Any
    origin: Origin | None
    override: str
    in_file: bool
    # A rename gives the key at `key` the name `value` (its last part), keeping its value; `old_value` is the name
    # written. Otherwise the edit sets the value.
    rename: bool = False
    # Why the edit may change what the experiment computes (the group size, the prompts per step, ...): `--fix`
    # applies it only with `--unsafe-fixes`. Empty for a safe edit.
    unsafe: str = ""
    restores: bool = False  # the new value is the one the file has in its last git commit

    def describe(self) -> str:
        if self.rename and self.in_file:
            return f"rename `{self.key}` to `{self.value}`"
        if self.in_file:
            import json  # a clean check needs no JSON: its import is a millisecond of every `validate`

            back = " (its value in the last commit)" if self.restores else ""
            return f"set `{self.key}` to {json.dumps(self.value)}{back}"
        if self.origin is not None and self.origin.kind == "override":
            if self.origin.file is not None:  # an argument of a launch script
                return f"change the argument at {self.origin.describe()} to `{self.override}`"
            return f"change override {self.origin.override_index} to `{self.override}`"
        return f"pass the override `{self.override}`"

    def to_json(self) -> dict:
        return {
            "key": self.key,
            "kind": "rename" if self.rename else "set",
            "value": self.value,
            "old_value": self.old_value,
            "safe": not self.unsafe,
            "unsafe_because": self.unsafe or None,
            "restores": self.restores,
            "apply": "file" if self.in_file else "override",
            "override": self.override,
            "location": self.origin.to_json() if self.origin else None,
        }


@record(frozen=True)
class Constraint:
    """The arithmetic a batch or parallel-size error states, as data the fix solver can solve for any one key:
    `kind` "divides" (the product of `left` divides the product of `right`) or "equal" (the two products are
    equal). A factor is (dotted key, value), or (None, value) for a number no single integer key sets, such as a
    data-parallel size derived from a placement."""

    kind: str
    left: tuple[tuple[str | None, int], ...]
    right: tuple[tuple[str | None, int], ...]

    @classmethod
    def divides(cls, left: Iterable[tuple[str | None, int]], right: Iterable[tuple[str | None, int]]) -> "Constraint":
        return cls("divides", tuple(left), tuple(right))

    @classmethod
    def equal(cls, left: Iterable[tuple[str | None, int]], right: Iterable[tuple[str | None, int]]) -> "Constraint":
        return cls("equal", tuple(left), tuple(right))


@record
class Diagnostic:
    code: str
    severity: Severity
    path: str
    message: str
    hint: str | None = None
    origin: Origin | None = None
    related: list[tuple[str, Origin | None]] = field(default_factory=list)
    rule: str | None = None
    # Concrete edits that clear this diagnostic without causing another (see rlcfg.fix); empty when none is known.
    edits: list[Edit] = field(default_factory=list)
    constraint: Constraint | None = None  # what the rule states, for the fix solver; not shown

    def sort_key(self) -> tuple:
        origin_key = self.origin.sort_key() if self.origin else (9,)
        return (origin_key, self.path, self.code)

    def to_json(self) -> dict:
        return {
            "code": self.code,
            "severity": self.severity.value,
            "path": self.path,
            "message": self.message,
            "hint": self.hint,
            "rule": self.rule,
            "location": self.origin.to_json() if self.origin else None,
            "related": [
                {"path": path, "location": origin.to_json() if origin else None} for path, origin in self.related
            ],
            "edits": [e.to_json() for e in self.edits],
        }


def diagnostic(code: str, path: str, message: str, *, hint: str | None = None, origin: Origin | None = None,
               severity: Severity | None = None, related: Sequence[tuple[str, Origin | None]] = (),
               rule: str | None = None, constraint: Constraint | None = None) -> Diagnostic:
    """Build a diagnostic whose severity defaults to the one its code is registered with."""
    if code not in CODES:
        raise KeyError(f"diagnostic code {code} is not registered in rlcfg.diagnostics.CODES")
    return Diagnostic(code, severity or CODES[code].severity, path, message, hint, origin, list(related), rule,
                      constraint=constraint)


def close_matches(word: str, possibilities: Iterable[str], n: int = 1, cutoff: float = 0.6) -> list[str]:
    """difflib.get_close_matches, imported only when a value is wrong: a clean check never needs difflib."""
    from difflib import get_close_matches

    return get_close_matches(word, list(possibilities), n=n, cutoff=cutoff)


def fix_line(edits: Sequence[Edit]) -> str:
    """How a report shows the edits that clear a diagnostic: a safe fix, or an unsafe one with why it is unsafe."""
    described = "; ".join(e.describe() for e in edits)
    reasons = list(dict.fromkeys(e.unsafe for e in edits if e.unsafe))
    if not reasons:
        return f"fix: {described}"
    return f"unsafe fix: {described} ({'; '.join(reasons)}; `--fix --unsafe-fixes` applies it)"


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    unique: dict[tuple, Diagnostic] = {}
    for d in diagnostics:
        unique.setdefault((d.code, d.path, d.message), d)
    return sorted(unique.values(), key=Diagnostic.sort_key)


def count(diagnostics: Iterable[Diagnostic]) -> tuple[int, int]:
    errors = warnings = 0
    for d in diagnostics:
        if d.severity is Severity.ERROR:
            errors += 1
        elif d.severity is Severity.WARNING:
            warnings += 1
    return errors, warnings


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class TextRenderer:
    """Renders diagnostics for a terminal: header, location arrow, the source line with a caret, notes, hint."""

    def __init__(self, sources: Mapping[str, str], color: bool = False):
        self._lines = {name: text.splitlines() for name, text in sources.items()}
        self._color = color

    def _paint(self, text: str, style: str) -> str:
        if not self._color:
            return text
        codes = {"error": "1;31", "warning": "1;33", "note": "1;36", "bold": "1", "dim": "2", "caret": "1;32"}
        return f"\033[{codes[style]}m{text}\033[0m"

    def render(self, d: Diagnostic) -> str:
        out = [f"{self._paint(d.severity.value, d.severity.value)}{self._paint(f'[{d.code}]', 'bold')}: {d.message}"]
        if d.origin is not None:
            out.append(f"  --> {_clip(d.origin.describe())}")
            out.extend(self._snippet(d.origin))
        for path, origin in d.related:
            where = f" ({origin.describe()})" if origin else ""
            out.append(f"   = note: `{path}` is involved{where}")
        # A safe fix is the hint's concrete form, checked by the validator: shown instead of the rule's own
        # suggestion, so the hint and what `--fix` writes never disagree. Beside an unsafe fix, which `--fix` does
        # not apply, the rule's hint still says what else would do.
        if d.hint and not (d.edits and not any(e.unsafe for e in d.edits)):
            out.append(f"   = hint: {d.hint}")
        if d.edits:
            out.append(f"   = {fix_line(d.edits)}")
        return "\n".join(out)

    def brief(self, d: Diagnostic) -> str:
        """One line: severity, code, message and where."""
        where = f" ({_clip(d.origin.describe())})" if d.origin is not None else ""
        return f"{self._paint(d.severity.value, d.severity.value)}{self._paint(f'[{d.code}]', 'bold')}: {d.message}{where}"

    def _snippet(self, origin: Origin) -> list[str]:
        if origin.kind not in ("file", "override") or origin.file not in self._lines or not origin.line:
            if origin.kind == "default" and origin.via:
                return [f"   = note: via {o.describe()}" for o in origin.via]
            return []
        lines = self._lines[origin.file]
        if origin.line > len(lines):
            return []
        text = lines[origin.line - 1].replace("\t", " ")
        col = max(origin.column or 1, 1)
        width = max((origin.end_column or col + 1) - col, 1) if origin.end_column and origin.end_column > col else 1
        width = min(width, max(len(text) - col + 1, 1))
        if len(text) > SNIPPET_WIDTH:  # a line of thousands of characters would bury the message
            start = max(0, min(col - 1 - 20, len(text) - SNIPPET_WIDTH))
            text = ("..." if start else "") + text[start:start + SNIPPET_WIDTH] + "..."
            col = col - start + (3 if start else 0)
            width = max(1, min(width, SNIPPET_WIDTH - (col - 1)))
        gutter = " " * len(str(origin.line))
        return [
            f" {gutter} |",
            f" {origin.line} | {text}",
            f" {gutter} | {' ' * (col - 1)}{self._paint('^' * width, 'caret')}",
        ]


SNIPPET_WIDTH = 160  # characters of a source line or an override shown in text output
# Warnings and notes of one code shown in full; the rest of that code get one line each, so that a config with two
# dozen ignored keys does not bury its errors.
SHOWN_IN_FULL = 2
_SEVERITY_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.NOTE: 2}


def report_lines(renderer: "TextRenderer", diagnostics: Iterable[Diagnostic]) -> list[str]:
    """The text report of a check: errors first, then warnings, then notes, each in the order of their locations;
    every error in full, and past SHOWN_IN_FULL of a code, a warning or note on one line."""
    lines: list[str] = []
    shown: dict[str, int] = {}
    briefs = False
    for d in sorted(diagnostics, key=lambda d: _SEVERITY_ORDER[d.severity]):
        shown[d.code] = shown.get(d.code, 0) + 1
        if d.severity is not Severity.ERROR and shown[d.code] > SHOWN_IN_FULL:
            lines.append(renderer.brief(d))
            briefs = True
            continue
        if briefs:
            lines.append("")
            briefs = False
        lines.append(renderer.render(d))
        lines.append("")
    if briefs:
        lines.append("")
    return lines


def tally(diagnostics: Iterable[Diagnostic], severity: Severity) -> str:
    """`8 × RLC114, 2 × RLC304, RLC404`: how many of each code, most first, for the summary line."""
    counts: dict[str, int] = {}
    for d in diagnostics:
        if d.severity is severity:
            counts[d.code] = counts.get(d.code, 0) + 1
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{n} × {code}" if n > 1 else code for code, n in ranked)


def _clip(text: str) -> str:
    return text if len(text) <= SNIPPET_WIDTH else text[:SNIPPET_WIDTH] + "...>"


def render_json(payload: dict) -> str:
    import json

    return json.dumps({"format_version": JSON_FORMAT_VERSION, **payload}, indent=2, sort_keys=False)
