"""AReaL's allocation mini-language: `allocation_mode` and the per-engine `backend` strings.

AReaL reads these strings with a Lark grammar that changed three times (research/config-mechanics.md):

- v0.3.x (the seed): `sglang.d4p1t1+d4p1t1`: an inference part (`sglang`/`vllm`, then `:` or `.`, then
  d/p/t sizes), a `+` (disaggregated) or `|` (colocated), and a training part whose backend may be left out
  (AReaL then picks megatron when p>1 or e>1, else fsdp); `sglang.d4p1t1+eval` / `+cpu` run evaluation
  beside inference; a training-only string such as `d8p1t1` is what SFT uses.
- v0.4.1 to v0.5: chains of any length joined by `+`, colocation groups joined by `|` (binding tighter
  than `+`), optional component names `fsdp[actor]:d4`, the `archon` backend and the hybrid MoE form
  `megatron:(attn:d1p2t4|ffn:d1p2e4)`; the `.` separator is gone.
- 1.0: one component per engine in `actor.backend`, `rollout.backend`, ... with an explicit backend.

`parse` accepts the union of these forms (a config written for any of them is read the way that version
reads it) and `format` prints the canonical text back, so that `parse(format(x)) == x`. Syntax errors are
`AllocationSyntaxError`s with the character position; `check` finds the semantic problems (duplicate names,
colocated members of different sizes, FSDP with pipeline parallelism, ...), each with its diagnostic code.
Nothing here evaluates the string: it is tokenized and parsed by hand.
"""

from __future__ import annotations

import re
from functools import lru_cache

from rlcfg.diagnostics import close_matches
from rlcfg.patterns import lazy
from rlcfg.records import record

INFERENCE_BACKENDS = ("sglang", "vllm")
TRAIN_BACKENDS = ("fsdp", "megatron", "archon")
EVAL_WORDS = ("eval", "cpu")
KEYWORDS = ("manual", "heuristic")  # pre-pattern allocation modes the seed still lists ("manual/heuristic")
INFERENCE_DIMS = "dtp"
TRAIN_DIMS = "dtpce"
HYBRID_ATTN_DIMS = "cdtp"
HYBRID_FFN_DIMS = "detp"

ACCEPTED_FORMS = (
    "accepted forms: `sglang:d4p1t1+fsdp:d4p1t1` (rollout + training on separate GPUs), "
    "`sglang.d4p1t1+d4p1t1` (AReaL v0.3 spelling), `sglang[rollout]:d4|fsdp[actor]:d4` (colocated), "
    "`d8p1t1` or `fsdp:d8` (training only), `megatron:(attn:d1p2t4|ffn:d1p2e4)` (hybrid MoE); a size is a "
    "positive integer after one of the letters d, p, t (training also c and e)"
)
BACKEND_FORMS = (
    "write `<backend>:<sizes>`, for example `fsdp:d4p1t1`, `megatron:d2p2t2`, `archon:d4` for training or "
    "`sglang:d4p1t1`, `vllm:d2t2` for rollout; the backend must be named (AReaL 1.0 no longer picks one)"
)


class AllocationSyntaxError(ValueError):
    def __init__(self, message: str, position: int, hint: str = ACCEPTED_FORMS):
        super().__init__(message)
        self.message = message
        self.position = position  # 0-based index into the text
        self.hint = hint


@record(frozen=True)
class Dims:
    """Parallel sizes in the order written: (("d", 4), ("p", 1), ("t", 1))."""

    items: tuple[tuple[str, int], ...]

    def get(self, letter: str) -> int:
        return next((size for name, size in self.items if name == letter), 1)

    @property
    def world(self) -> int:
        # GPUs = d·c·t·p; the expert size e re-uses the same GPUs and adds none.
        return self.get("d") * self.get("c") * self.get("t") * self.get("p")

    def text(self) -> str:
        return "".join(f"{name}{size}" for name, size in self.items)


@record(frozen=True)
class Component:
    kind: str  # "inference", "train" or "eval"
    backend: str | None  # None: a training part whose backend AReaL picks itself
    name: str | None = None
    dims: Dims | None = None
    hybrid: tuple[Dims, Dims] | None = None  # (attention, FFN) of the hybrid MoE form
    separator: str = ":"  # ":" or the v0.3 "." after an inference backend

    @property
    def world(self) -> int:
        if self.kind == "eval":
            return 0
        if self.hybrid is not None:
            return self.hybrid[0].world
        return self.dims.world if self.dims else 0

    @property
    def effective_backend(self) -> str | None:
        """The backend that runs: AReaL's own choice for a bare training part (megatron when p>1 or e>1)."""
        if self.backend is not None or self.kind != "train":
            return self.backend
        if self.hybrid is not None:
            return "megatron"
        dims = self.dims
        return "megatron" if dims and (dims.get("p") > 1 or dims.get("e") > 1) else "fsdp"

    def text(self) -> str:
        if self.kind == "eval":
            return self.backend or "eval"
        head = self.backend or ""
        if self.name is not None:
            head += f"[{self.name}]"
        body = (f"(attn:{self.hybrid[0].text()}|ffn:{self.hybrid[1].text()})" if self.hybrid is not None
                else self.dims.text() if self.dims else "")
        if not head:
            return body
        return f"{head}{self.separator}{body}"


@record(frozen=True)
class Allocation:
    """`+`-separated groups (disaggregated), each a `|`-separated tuple of colocated components."""

    groups: tuple[tuple[Component, ...], ...] = ()
    keyword: str | None = None  # "manual" / "heuristic"

    def components(self) -> list[Component]:
        return [c for group in self.groups for c in group]

    @property
    def world(self) -> int:
        """GPUs the whole allocation occupies: colocated members share theirs."""
        return sum(max((c.world for c in group), default=0) for group in self.groups)

    def of_kind(self, kind: str) -> list[Component]:
        return [c for c in self.components() if c.kind == kind]

    def text(self) -> str:
        if self.keyword:
            return self.keyword
        return "+".join("|".join(c.text() for c in group) for group in self.groups)


# ---- tokenizer ---------------------------------------------------------------------------------------------

_TOKEN = lazy(r"\s*(?:(?P<word>[A-Za-z_][A-Za-z0-9_\-]*)|(?P<int>[0-9]+)|(?P<punct>[+|:.\[\]()]))")


@record
class _Token:
    kind: str  # word, int, punct, end
    text: str
    pos: int


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise AllocationSyntaxError(f"unexpected character `{text[pos]}` at position {pos + 1}", pos)
        kind = next(k for k in ("word", "int", "punct") if match.group(k) is not None)
        start = match.start(kind)
        tokens.append(_Token(kind, match.group(kind), start))
        pos = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


# ---- parser ------------------------------------------------------------------------------------------------

_DIMS = lazy(r"^(?:[A-Za-z][0-9]+)+$")
_NAME = lazy(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0

    @property
    def tok(self) -> _Token:
        return self.tokens[self.i]

    def take(self) -> _Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def expect(self, punct: str, what: str) -> _Token:
        if self.tok.kind == "punct" and self.tok.text == punct:
            return self.take()
        raise self.error(f"expected `{punct}` {what}")

    def error(self, message: str, hint: str = ACCEPTED_FORMS) -> AllocationSyntaxError:
        found = "the end of the string" if self.tok.kind == "end" else f"`{self.tok.text}`"
        return AllocationSyntaxError(f"{message} at position {self.tok.pos + 1}, found {found}", self.tok.pos, hint)

    # allocation := keyword | group ('+' group)*
    def allocation(self) -> Allocation:
        if self.tok.kind == "word" and self.tok.text in KEYWORDS and self.tokens[self.i + 1].kind == "end":
            return Allocation(keyword=self.take().text)
        if self.tok.kind == "end":
            raise AllocationSyntaxError("the allocation is empty", 0)
        groups = [self.group()]
        while self.tok.kind == "punct" and self.tok.text == "+":
            self.take()
            groups.append(self.group())
        if self.tok.kind != "end":
            raise self.error("expected `+`, `|` or the end of the allocation")
        return Allocation(tuple(groups))

    # group := single ('|' single)*
    def group(self) -> tuple[Component, ...]:
        members = [self.single()]
        while self.tok.kind == "punct" and self.tok.text == "|":
            self.take()
            members.append(self.single())
        return tuple(members)

    def single(self) -> Component:
        token = self.tok
        if token.kind == "punct" and token.text == "[":
            name = self.bracket_name()
            self.expect(":", f"after the component name `[{name}]`")
            return self.train_body(None, name)
        if token.kind == "punct" and token.text == "(":
            return Component("train", None, hybrid=self.hybrid())
        if token.kind != "word":
            raise self.error("expected a backend (sglang, vllm, fsdp, megatron, archon) or parallel sizes such as `d4p1t1`")
        word = token.text
        lower = word.lower()
        if lower in INFERENCE_BACKENDS:
            self.take()
            name = self.bracket_name() if self.tok.kind == "punct" and self.tok.text == "[" else None
            if self.tok.kind == "punct" and self.tok.text in (":", "."):
                separator = self.take().text
            else:
                raise self.error(f"expected `:` after `{word}`")
            dims = self.dims(INFERENCE_DIMS, f"the {word} part")
            return Component("inference", lower, name, dims, separator=separator)
        if lower in TRAIN_BACKENDS:
            self.take()
            name = self.bracket_name() if self.tok.kind == "punct" and self.tok.text == "[" else None
            if self.tok.kind == "punct" and self.tok.text == ".":
                rest = self.rest_after_separator()
                raise AllocationSyntaxError(
                    f"`{word}.{rest}` (position {token.pos + 1}): only an inference backend (sglang, vllm) takes "
                    f"the v0.3 `.` separator", self.tok.pos,
                    hint=f"use a colon: `{word}:{rest}`; " + ACCEPTED_FORMS)
            self.expect(":", f"after `{word}`")
            return self.train_body(lower, name)
        if lower in EVAL_WORDS:
            self.take()
            return Component("eval", lower)
        if _DIMS.match(word):
            return Component("train", None, dims=self.dims(TRAIN_DIMS, "the training part"))
        close = close_matches(lower, INFERENCE_BACKENDS + TRAIN_BACKENDS + EVAL_WORDS, n=1, cutoff=0.6)
        hint = (f"did you mean `{close[0]}`? " if close else "") + ACCEPTED_FORMS
        raise AllocationSyntaxError(
            f"`{word}` at position {token.pos + 1} is not a backend (sglang, vllm, fsdp, megatron, archon) "
            f"nor parallel sizes such as `d4p1t1`", token.pos, hint)

    def rest_after_separator(self) -> str:
        return self.text[self.tok.pos + 1:].split("+")[0].split("|")[0].strip()

    def train_body(self, backend: str | None, name: str | None) -> Component:
        if self.tok.kind == "punct" and self.tok.text == "(":
            return Component("train", backend, name, hybrid=self.hybrid())
        return Component("train", backend, name, dims=self.dims(TRAIN_DIMS, "the training part"))

    def bracket_name(self) -> str:
        self.expect("[", "before a component name")
        token = self.tok
        if token.kind != "word" or not _NAME.match(token.text):
            raise self.error("expected a component name such as `actor` inside `[...]`")
        self.take()
        self.expect("]", f"after the component name `{token.text}`")
        return token.text

    def hybrid(self) -> tuple[Dims, Dims]:
        self.expect("(", "to open the hybrid MoE form")
        self.hybrid_label("attn")
        attn = self.dims(HYBRID_ATTN_DIMS, "the attention part")
        self.expect("|", "between the attention and FFN parts of the hybrid MoE form")
        self.hybrid_label("ffn")
        ffn = self.dims(HYBRID_FFN_DIMS, "the FFN part")
        self.expect(")", "to close the hybrid MoE form")
        return attn, ffn

    def hybrid_label(self, label: str) -> None:
        if not (self.tok.kind == "word" and self.tok.text == label):
            raise self.error(f"expected `{label}:` in the hybrid MoE form `(attn:...|ffn:...)`")
        self.take()
        self.expect(":", f"after `{label}`")

    def dims(self, allowed: str, where: str) -> Dims:
        token = self.tok
        if token.kind != "word" or not _DIMS.match(token.text):
            raise self.error(f"expected parallel sizes such as `d4p1t1` for {where}")
        self.take()
        items: list[tuple[str, int]] = []
        for match in re.finditer(r"([A-Za-z])([0-9]+)", token.text):
            letter, digits = match.group(1), match.group(2)
            pos = token.pos + match.start()
            if letter not in allowed:
                letters = ", ".join(allowed)
                raise AllocationSyntaxError(
                    f"`{letter}{digits}` at position {pos + 1}: {where} takes only the sizes {letters}", pos,
                    "d = data, p = pipeline, t = tensor parallel; training parts also take c = context and "
                    "e = expert parallel; " + ACCEPTED_FORMS)
            if digits.startswith("0"):
                raise AllocationSyntaxError(
                    f"`{letter}{digits}` at position {pos + 1}: a size must be a positive integer without "
                    f"leading zeros", pos, ACCEPTED_FORMS)
            if any(name == letter for name, _ in items):
                raise AllocationSyntaxError(
                    f"`{letter}` is given twice in `{token.text}` (position {pos + 1})", pos, ACCEPTED_FORMS)
            items.append((letter, int(digits)))
        return Dims(tuple(items))


def parse(text: str) -> Allocation:
    """Parse an `allocation_mode` string in any of its historical forms."""
    if not isinstance(text, str):
        raise AllocationSyntaxError("the allocation must be a string", 0)
    return _parsed(text)


@lru_cache(maxsize=256)
def _parsed(text: str) -> Allocation:
    # a check's rules read the same string a dozen times; an Allocation is frozen, so they can share it
    return _Parser(text).allocation()


def parse_backend(text: str) -> Component:
    """Parse a 1.0 per-engine `backend` string: exactly one component with an explicit backend."""
    allocation = parse(text)
    if allocation.keyword is not None:
        raise AllocationSyntaxError(f"`{text}` is an allocation mode, not an engine backend", 0, BACKEND_FORMS)
    if len(allocation.groups) != 1 or len(allocation.groups[0]) != 1:
        separator = "+" if len(allocation.groups) > 1 else "|"
        raise AllocationSyntaxError(
            f"an engine backend is one component; `{separator}` (at position {text.find(separator) + 1}) joins "
            f"several, which only the deprecated top-level `allocation_mode` takes",
            max(text.find(separator), 0), BACKEND_FORMS)
    component = allocation.groups[0][0]
    if component.kind == "eval":
        raise AllocationSyntaxError(f"`{text}` names no engine backend", 0, BACKEND_FORMS)
    if component.backend is None:
        raise AllocationSyntaxError(
            f"`{text}` does not name its backend; AReaL 1.0 no longer selects one automatically", 0, BACKEND_FORMS)
    if component.separator == ".":
        raise AllocationSyntaxError(f"`{text}` uses the v0.3 `.` separator, which engine backends do not take",
                                    len(component.backend), f"write `{component.text().replace('.', ':', 1)}`")
    return component


def format_allocation(allocation: Allocation) -> str:
    return allocation.text()


# ---- semantic checks ---------------------------------------------------------------------------------------


@record(frozen=True)
class Problem:
    code: str
    message: str
    hint: str
    severity: str = "error"


def check(allocation: Allocation) -> list[Problem]:
    """What AReaL rejects about a well-formed allocation (AR-24, AR-26..28, AR-40)."""
    problems: list[Problem] = []
    if allocation.keyword:
        return problems
    components = allocation.components()
    names = [c.name for c in components if c.name is not None]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(Problem("RLC204", f"the component name `{name}` is used {names.count(name)} times",
                                "give each component its own name, e.g. `sglang[rollout]:d4+fsdp[actor]:d4`"))
    evals = [c for c in components if c.kind == "eval"]
    if evals:
        ok = (len(allocation.groups) == 2 and len(allocation.groups[1]) == 1 and allocation.groups[1][0].kind == "eval"
              and all(c.kind == "inference" for c in allocation.groups[0]))
        if not ok:
            problems.append(Problem("RLC204", f"`{evals[0].text()}` may only follow a single inference part, as in "
                                    f"`sglang:d4p1t1+{evals[0].text()}`", ACCEPTED_FORMS))
    if len(components) >= 3 and any(c.name is None for c in components if c.kind != "eval"):
        unnamed = ", ".join(f"`{c.text()}`" for c in components if c.name is None and c.kind != "eval")
        problems.append(Problem("RLC204", f"an allocation of {len(components)} components must name every one; "
                                f"{unnamed} has no name",
                                "name them, e.g. `sglang[rollout]:d2+fsdp[actor]:d4+fsdp[ref]:d2`"))
    for group in allocation.groups:
        if len(group) > 1:
            sizes = {c.world for c in group}
            if len(sizes) > 1:
                listing = ", ".join(f"`{c.text()}` = {c.world}" for c in group)
                problems.append(Problem("RLC402", f"colocated components (joined by `|`) must use the same number "
                                        f"of GPUs: {listing}",
                                        f"make their d·c·t·p products equal, e.g. all {max(sizes)}"))
    for c in components:
        problems.extend(check_component(c))
    return problems


def check_component(c: Component) -> list[Problem]:
    problems: list[Problem] = []
    if c.kind == "eval":
        return problems
    backend = c.effective_backend
    label = f"`{c.text()}`"
    if c.kind == "inference" and c.dims is not None and c.dims.get("p") > 1:
        problems.append(Problem("RLC306", f"{label}: {c.backend} generation with pipeline parallelism "
                                f"p{c.dims.get('p')} is not supported by AReaL's launchers",
                                "use p1 and raise d or t instead"))
    if c.kind == "train" and backend == "fsdp" and c.dims is not None:
        if c.dims.get("p") > 1 or c.dims.get("e") > 1:
            bad = " and ".join(f"{x}{c.dims.get(x)}" for x in "pe" if c.dims.get(x) > 1)
            problems.append(Problem("RLC306", f"{label}: the FSDP backend supports neither pipeline nor expert "
                                    f"parallelism, got {bad}",
                                    "use `megatron:` (or `archon:`) for p>1 / e>1, or set p1 and e1"))
    if c.kind == "train" and c.dims is not None and c.dims.get("e") > 1:
        world, p, e = c.dims.world, c.dims.get("p"), c.dims.get("e")
        if world % (p * e):
            problems.append(Problem("RLC400", f"{label}: with expert parallelism e{e}, the {world} GPUs "
                                    f"(d·c·t·p) must be a multiple of p·e = {p * e}",
                                    f"choose sizes whose product d·c·t·p is a multiple of {p * e}"))
    if c.hybrid is not None:
        attn, ffn = c.hybrid
        ffn_world = ffn.get("d") * ffn.get("e") * ffn.get("t") * ffn.get("p")
        if any(name == "p" for name, _ in ffn.items) and ffn.get("p") != attn.get("p"):
            problems.append(Problem("RLC305", f"{label}: the FFN pipeline size p{ffn.get('p')} must equal the "
                                    f"attention pipeline size p{attn.get('p')}",
                                    "leave p out of the FFN part (it is inherited) or make them equal"))
        if any(name == "d" for name, _ in ffn.items) and ffn_world != attn.world:
            problems.append(Problem("RLC402", f"{label}: the attention part uses {attn.world} GPUs but the FFN part "
                                    f"{ffn_world}", "make d·c·t·p of attention equal d·e·t·p of the FFN"))
        elif not any(name == "d" for name, _ in ffn.items):
            unit = ffn.get("e") * ffn.get("t") * attn.get("p")
            if attn.world % unit:
                problems.append(Problem("RLC400", f"{label}: the attention world {attn.world} is not a multiple of "
                                        f"e·t·p = {unit}, so the FFN data-parallel size cannot be derived",
                                        "give the FFN part an explicit d, or pick sizes that divide"))
    return problems
