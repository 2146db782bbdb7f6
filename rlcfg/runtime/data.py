"""Prompt datasets: JSONL, JSON, Parquet and CSV files; a prompt column holding text or chat messages; an
optional answer column for the verifier; the chat template; a prompt length limit; a seeded order that a
resumed run reproduces exactly.

Everything here runs in the driver before any worker starts, so a missing or malformed file is reported
with its path (and line, where there is one) instead of a traceback from inside a Ray actor.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".parquet": "parquet", ".csv": "csv"}


class DataError(Exception):
    """A data file that is missing, unreadable or does not hold what the config says."""


@dataclass(frozen=True)
class Example:
    prompt: Any  # a string, or a list of {"role", "content"} messages
    answer: str | tuple[str, ...] | None  # a tuple: the references of ir.Data.answer_list
    source: str  # "file:line" for error messages and logs


@dataclass(frozen=True)
class PromptSet:
    token_ids: tuple[tuple[int, ...], ...]
    texts: tuple[str, ...]  # the prompt as the model sees it (after the chat template)
    answers: tuple[str | tuple[str, ...] | None, ...]
    dropped: int  # prompts over the length limit, left out
    cut: int = 0  # prompts over the length limit, truncated to it

    def __len__(self) -> int:
        return len(self.token_ids)


def load_tokenizer(path: str) -> Any:
    """The model's tokenizer. A directory whose tokenizer_config.json names PreTrainedTokenizerFast is loaded
    with that class directly: AutoTokenizer would pick the model family's own class (Qwen2Tokenizer for a
    qwen2 model), which re-normalises a custom vocabulary and drops its spaces."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    config_file = os.path.join(path, "tokenizer_config.json")
    if os.path.isfile(config_file):
        with open(config_file, encoding="utf-8") as f:
            if json.load(f).get("tokenizer_class") == "PreTrainedTokenizerFast":
                return PreTrainedTokenizerFast.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _format(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise DataError(f"{path}: unsupported data file type `{ext or '(none)'}`; use .jsonl, .json, .parquet or .csv")
    return FORMATS[ext]


def read_records(path: str) -> list[tuple[dict[str, Any], str]]:
    """(record, "file:line") pairs from one data file."""
    if not os.path.exists(path):
        raise DataError(f"{path}: data file not found")
    if os.path.isdir(path):
        raise DataError(f"{path}: is a directory, not a data file")
    kind = _format(path)
    try:
        if kind == "jsonl":
            return _read_jsonl(path)
        if kind == "json":
            return _read_json(path)
        if kind == "csv":
            return _read_csv(path)
        return _read_parquet(path)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _read_jsonl(path: str) -> list[tuple[dict[str, Any], str]]:
    out = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{number}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(record, dict):
                raise DataError(f"{path}:{number}: each line must be a JSON object, got {type(record).__name__}")
            out.append((record, f"{path}:{number}"))
    return out


def _read_json(path: str) -> list[tuple[dict[str, Any], str]]:
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    if isinstance(data, dict):
        # Column-oriented ({"prompt": [...], "answer": [...]}), as pandas' to_json(orient="list") writes it.
        lengths = {len(v) for v in data.values() if isinstance(v, list)}
        if len(lengths) != 1 or not all(isinstance(v, list) for v in data.values()):
            raise DataError(f"{path}: a JSON object must map column names to lists of equal length; "
                            "or write a list of records")
        n = lengths.pop()
        data = [{k: v[i] for k, v in data.items()} for i in range(n)]
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise DataError(f"{path}: expected a list of JSON objects (one per prompt)")
    return [(r, f"{path}[{i}]") for i, r in enumerate(data)]


def _read_csv(path: str) -> list[tuple[dict[str, Any], str]]:
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        if not reader.fieldnames:
            raise DataError(f"{path}: the CSV file has no header row")
        out = []
        for record in reader:
            if None in record:
                raise DataError(f"{path}:{reader.line_num}: more fields than the header's {len(reader.fieldnames)}")
            out.append((dict(record), f"{path}:{reader.line_num}"))
        return out


def _read_parquet(path: str) -> list[tuple[dict[str, Any], str]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(f"{path}: reading Parquet needs pyarrow; install it (pip install pyarrow) or convert the "
                        "file to JSONL") from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises its own zoo of errors for a corrupt file
        raise DataError(f"{path}: not a readable Parquet file ({exc})") from None
    return [(r, f"{path}[{i}]") for i, r in enumerate(table.to_pylist())]


def _messages(value: Any, where: str, key: str) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise DataError(f"{where}: `{key}` must be a string or a non-empty list of chat messages")
    for m in value:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise DataError(f"{where}: each chat message in `{key}` needs string `role` and `content` fields")
    return value


def _all_records(files: Sequence[str]) -> Iterator[tuple[dict[str, Any], str]]:
    """Every record of every file, with where it came from; a file without records is an error."""
    for path in files:
        records = read_records(path)
        if not records:
            raise DataError(f"{path}: the file holds no records")
        yield from records


def _prompt(record: dict[str, Any], where: str, prompt_key: str) -> Any:
    """A record's prompt: non-empty text, or chat messages."""
    if prompt_key not in record:
        columns = ", ".join(sorted(record)[:8]) or "(none)"
        raise DataError(f"{where}: no `{prompt_key}` column (the prompt key); the record has: {columns}")
    prompt = record[prompt_key]
    if not isinstance(prompt, str):
        return _messages(prompt, where, prompt_key)
    if not prompt:
        raise DataError(f"{where}: `{prompt_key}` is empty")
    return prompt


def read_examples(files: Sequence[str], prompt_key: str, answer_key: str | None,
                  answer_list: bool = False, answer_fields: Sequence[str] = ()) -> list[Example]:
    """The examples of `files`; with `answer_list` each answer is a list of references (ir.Data.answer_list), kept as
    a tuple of strings; with `answer_fields` it is the record of those columns as JSON text (ir.Data.answer_fields)."""
    examples: list[Example] = []
    for record, where in _all_records(files):
        prompt = _prompt(record, where, prompt_key)
        answer: str | tuple[str, ...] | None = None
        if answer_fields:
            answer = _answer_record(record, where, answer_fields)
        elif answer_key is not None:
            value = _lookup(record, answer_key)
            if value is None:
                raise DataError(f"{where}: no `{answer_key}` value (the answer key)")
            if answer_list:
                if not isinstance(value, (list, tuple)) or not value:
                    raise DataError(f"{where}: `{answer_key}` is not a list of answers (the data's reference "
                                    "solutions, one of which a response must match)")
                answer = tuple(str(v) for v in value)
            else:
                answer = str(value)
        examples.append(Example(prompt, answer, where))
    return examples


def _answer_record(record: dict[str, Any], where: str, fields: Sequence[str]) -> str:
    values = {}
    for name in fields:
        value = _lookup(record, name)
        if value is None:
            raise DataError(f"{where}: no `{name}` value (the reward checks each response against "
                            f"{', '.join(f'`{f}`' for f in fields)})")
        values[name] = value
    try:
        return json.dumps(values, sort_keys=True)
    except (TypeError, ValueError):
        raise DataError(f"{where}: {', '.join(f'`{f}`' for f in fields)} do not hold plain numbers, text and "
                        "lists") from None


def _lookup(record: dict[str, Any], dotted: str) -> Any:
    """`reward_model.ground_truth`-style keys reach into nested records (verl-format data)."""
    value: Any = record
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def render_prompt(tokenizer: Any, prompt: Any, apply_chat_template: bool,
                  template_kwargs: Sequence[tuple[str, Any]] = ()) -> str:
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if apply_chat_template and has_template:
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                             **dict(template_kwargs))
    if isinstance(prompt, list):
        if apply_chat_template:
            raise DataError("the prompts are chat messages but the tokenizer has no chat template; give the "
                            "tokenizer one, or use plain-text prompts")
        return "\n".join(m["content"] for m in prompt)
    return prompt


def _content(prompt: Any) -> str:
    """A prompt's own text: the string, or its last message's content."""
    return prompt if isinstance(prompt, str) else str(prompt[-1]["content"])


def _edited(prompt: Any, removals: Sequence[str]) -> Any:
    """The prompt with each of `removals` deleted from its text (or its last message's)."""
    if not removals:
        return prompt
    text = _content(prompt)
    for removed in removals:
        text = text.replace(removed, "")
    return text if isinstance(prompt, str) else [*prompt[:-1], {**prompt[-1], "content": text}]


def _extended(prompt: Any, suffix: str) -> Any:
    if not suffix:
        return prompt
    if isinstance(prompt, str):
        return prompt + suffix
    return [*prompt[:-1], {**prompt[-1], "content": prompt[-1]["content"] + suffix}]


def load_prompts(files: Sequence[str], tokenizer: Any, prompt_key: str = "prompt", answer_key: str | None = None,
                 max_prompt_length: int | None = None, apply_chat_template: bool = True,
                 long_prompts: str = "drop", template_kwargs: Sequence[tuple[str, Any]] = (),
                 suffix: str = "", length_of: str = "rendered", removals: Sequence[str] = (),
                 answer_list: bool = False, answer_fields: Sequence[str] = ()) -> PromptSet:
    """Read, extend with `suffix` (appended to the text, or to the last message's), template (with
    `template_kwargs`) and tokenize every prompt; drop those longer than `max_prompt_length` tokens, or with
    `long_prompts="truncate"` keep their first `max_prompt_length` tokens. `length_of` (ir.Data.prompt_length_of):
    "rendered" measures the templated prompt, "message" the extended prompt's last message (or its text) before the
    template, "source" the prompt as read, before `removals` are deleted from it; both with the tokenizer's special
    tokens."""
    if not files:
        raise DataError("no training data files are configured")
    examples = read_examples(files, prompt_key, answer_key, answer_list, answer_fields)
    ids, texts, answers, dropped, cut = [], [], [], 0, 0
    for ex in examples:
        extended = _extended(_edited(ex.prompt, removals), suffix)
        try:
            text = render_prompt(tokenizer, extended, apply_chat_template, template_kwargs)
        except DataError as exc:
            raise DataError(f"{ex.source}: {exc}") from None
        tokens = tokenizer(text, add_special_tokens=False)["input_ids"]
        if not tokens:
            raise DataError(f"{ex.source}: the prompt tokenizes to nothing")
        measured = len(tokens) if length_of == "rendered" else \
            len(tokenizer(_content(ex.prompt if length_of == "source" else extended))["input_ids"])
        if max_prompt_length is not None and measured > max_prompt_length:
            if long_prompts != "truncate":
                dropped += 1
                continue
            tokens = tokens[:max_prompt_length]
            cut += 1
        ids.append(tuple(tokens))
        texts.append(text)
        answers.append(ex.answer)
    if not ids:
        raise DataError(f"all {len(examples)} prompts are longer than the prompt length limit "
                        f"({max_prompt_length} tokens); raise the limit")
    return PromptSet(tuple(ids), tuple(texts), tuple(answers), dropped, cut)


class PromptSampler:
    """Batches of prompt indices in a seeded order: one permutation per epoch, derived from (seed, epoch)
    alone, so the position (epoch, cursor) is all a checkpoint needs to replay the same order. A batch never
    straddles two epochs; the tail of an epoch shorter than a batch is skipped."""

    def __init__(self, size: int, batch: int, seed: int, shuffle: bool = True):
        if batch > size:
            raise DataError(f"a step needs {batch} prompts but the dataset has {size}")
        self.size, self.batch, self.seed, self.shuffle = size, batch, seed, shuffle
        self.epoch, self.cursor = 0, 0
        self._order: list[int] | None = None

    def _permutation(self) -> list[int]:
        if self._order is None:
            if self.shuffle:
                import torch

                g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
                self._order = torch.randperm(self.size, generator=g).tolist()
            else:
                self._order = list(range(self.size))
        return self._order

    def next(self) -> list[int]:
        if self.opens_epoch():
            self.epoch, self.cursor, self._order = self.epoch + 1, 0, None
        order = self._permutation()
        out = order[self.cursor:self.cursor + self.batch]
        self.cursor += self.batch
        return out

    def opens_epoch(self) -> bool:
        """Whether the next batch is the first of an epoch (after the first epoch)."""
        return self.cursor + self.batch > self.size

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "cursor": self.cursor, "size": self.size, "seed": self.seed}

    def epochs_done(self, state: dict[str, int]) -> int:
        """Epochs completed at the position `state`: the current one counts once its last whole batch is out."""
        return int(state["epoch"]) + (1 if int(state["cursor"]) + self.batch > self.size else 0)

    def after_draw(self, state: dict[str, int]) -> dict[str, int]:
        """The position one batch after `state`."""
        epoch, cursor = int(state["epoch"]), int(state["cursor"])
        if cursor + self.batch > self.size:
            epoch, cursor = epoch + 1, 0
        return dict(state, epoch=epoch, cursor=cursor + self.batch)

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state.get("size") not in (None, self.size):
            raise DataError(f"the checkpoint was taken with {state['size']} prompts but the data now has "
                            f"{self.size}; resuming would not replay the same order (start a new run, or "
                            "restore the original data)")
        self.epoch, self.cursor, self._order = int(state["epoch"]), int(state["cursor"]), None


# ---- supervised data (Experiment.kind "sft" and "reward_model") ------------------------------------------------

@dataclass(frozen=True)
class SequenceSet:
    """Token sequences to train on with a mask of the tokens the loss reads. SFT: the prompt followed by its
    answer and EOS, the answer's tokens (and EOS) in the loss. Preference pairs: each record gives two rows, the
    chosen text then the rejected one (rows 2i and 2i+1), each ending in EOS; the mask marks every token."""

    token_ids: tuple[tuple[int, ...], ...]
    loss_masks: tuple[tuple[int, ...], ...]
    too_long: int  # records left out for exceeding the length limit
    rows_per_example: int = 1  # 2 for preference pairs

    def __len__(self) -> int:
        return len(self.token_ids) // self.rows_per_example

    def rows(self, index: int) -> range:
        """The rows of example `index`."""
        return range(index * self.rows_per_example, (index + 1) * self.rows_per_example)


def _encode(tokenizer: Any, text: str, templated: bool) -> list[int]:
    # A chat template writes its own BOS into the text; plain text gets the tokenizer's special tokens as
    # AReaL's `tokenizer.encode(text)` adds them.
    return list(tokenizer(text, add_special_tokens=not templated)["input_ids"])


def _eos(tokenizer: Any) -> list[int]:
    return [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []


def _text(record: dict[str, Any], key: str, where: str, role: str) -> str:
    value = _lookup(record, key)
    if value is None:
        columns = ", ".join(sorted(record)[:8]) or "(none)"
        raise DataError(f"{where}: no `{key}` column ({role}); the record has: {columns}")
    if not isinstance(value, str) or not value:
        raise DataError(f"{where}: `{key}` ({role}) must be a non-empty string")
    return value


def load_sft(files: Sequence[str], tokenizer: Any, prompt_key: str = "prompt", answer_key: str = "answer",
             max_length: int | None = None, apply_chat_template: bool = False) -> SequenceSet:
    """Prompt/answer pairs for supervised fine-tuning, as AReaL's SFT loaders build them: the tokens of
    prompt + answer followed by EOS; the loss covers what follows the prompt's own tokens (the answer and EOS);
    a sequence longer than `max_length` is left out. With `apply_chat_template` (and a tokenizer that has one)
    the prompt is rendered as a user turn first; AReaL's loaders use the plain text."""
    if not files:
        raise DataError("no training data files are configured")
    ids, masks, too_long = [], [], 0
    for record, where in _all_records(files):
        prompt = _prompt(record, where, prompt_key)
        answer = _text(record, answer_key, where, "the answer key")
        try:
            text = render_prompt(tokenizer, prompt, apply_chat_template)
        except DataError as exc:
            raise DataError(f"{where}: {exc}") from None
        templated = apply_chat_template and bool(getattr(tokenizer, "chat_template", None))
        prompt_tokens = _encode(tokenizer, text, templated)
        tokens = _encode(tokenizer, text + answer, templated) + _eos(tokenizer)
        answer_tokens = len(tokens) - len(prompt_tokens)
        if answer_tokens <= 0:
            raise DataError(f"{where}: the answer adds no tokens to the prompt")
        if max_length is not None and len(tokens) > max_length:
            too_long += 1
            continue
        ids.append(tuple(tokens))
        masks.append((0,) * len(prompt_tokens) + (1,) * answer_tokens)
    if not ids:
        raise DataError(f"all {too_long} examples are longer than the length limit ({max_length} tokens); raise it")
    return SequenceSet(tuple(ids), tuple(masks), too_long)


def load_pairs(files: Sequence[str], tokenizer: Any, chosen_key: str = "chosen", rejected_key: str = "rejected",
               max_length: int | None = None) -> SequenceSet:
    """Preference pairs for reward-model training, as AReaL's reward-model loader builds them: the chosen and
    the rejected text, each followed by EOS; a pair with either side longer than `max_length` is left out."""
    if not files:
        raise DataError("no training data files are configured")
    ids, masks, too_long = [], [], 0
    for record, where in _all_records(files):
        pair = [_encode(tokenizer, _text(record, key, where, role), False) + _eos(tokenizer)
                for key, role in ((chosen_key, "the chosen text"), (rejected_key, "the rejected text"))]
        if max_length is not None and max(len(p) for p in pair) > max_length:
            too_long += 1
            continue
        for tokens in pair:
            ids.append(tuple(tokens))
            masks.append((1,) * len(tokens))
    if not ids:
        raise DataError(f"all {too_long} pairs are longer than the length limit ({max_length} tokens); raise it")
    return SequenceSet(tuple(ids), tuple(masks), too_long, rows_per_example=2)
