"""Architecture figures of common model families, for a memory estimate when no config.json is at hand.

The numbers are those of each model's public Hugging Face `config.json` (num_hidden_layers, hidden_size,
num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size, tie_word_embeddings).
A model path is matched by its last component, case-insensitively, so `/mnt/models/Qwen2.5-7B-Instruct`,
`Qwen/Qwen2.5-Math-7B` and `qwen2.5-7b-mcore` all find the Qwen2.5-7B row: fine-tunes, instruct and Megatron
conversions keep their base model's shape. A path that matches no row gets no estimate (RLC501) rather than a
guess from the size in its name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class TableEntry:
    name: str
    pattern: str  # regular expression searched in the lower-cased last path component
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tied_embeddings: bool
    head_dim: int | None = None  # None: hidden / heads
    qkv_bias: bool = False
    qk_norm: bool = False


# A size must not run on into another digit or a decimal point: "3b" must not match "32b" or "3.5b".
_END = r"(?![0-9.])"


def _qwen25(size: str, **figures) -> TableEntry:
    return TableEntry(f"Qwen2.5-{size}", rf"qwen2\.5-(?:[a-z]+-)*{re.escape(size.lower())}{_END}", qkv_bias=True,
                      **figures)


def _qwen3(size: str, **figures) -> TableEntry:
    return TableEntry(f"Qwen3-{size}", rf"qwen3-(?:[a-z]+-)*{re.escape(size.lower())}{_END}", head_dim=128,
                      qk_norm=True, vocab=151936, **figures)


# Ordered: the distilled models come before the Qwen rows, whose patterns they would otherwise not reach anyway
# (their names contain "qwen-", not "qwen2.5-"), and more specific rows come first within a family.
TABLE: tuple[TableEntry, ...] = (
    # DeepSeek-R1-Distill-Qwen keeps Qwen2.5(-Math)'s shape but unties the output embedding even at 1.5B.
    TableEntry("DeepSeek-R1-Distill-Qwen-1.5B", rf"deepseek-r1-distill-qwen-1\.5b{_END}", layers=28, hidden=1536,
               heads=12, kv_heads=2, intermediate=8960, vocab=151936, tied_embeddings=False, qkv_bias=True),
    TableEntry("DeepSeek-R1-Distill-Qwen-7B", rf"deepseek-r1-distill-qwen-7b{_END}", layers=28, hidden=3584,
               heads=28, kv_heads=4, intermediate=18944, vocab=152064, tied_embeddings=False, qkv_bias=True),
    _qwen25("0.5B", layers=24, hidden=896, heads=14, kv_heads=2, intermediate=4864, vocab=151936,
            tied_embeddings=True),
    _qwen25("1.5B", layers=28, hidden=1536, heads=12, kv_heads=2, intermediate=8960, vocab=151936,
            tied_embeddings=True),
    _qwen25("3B", layers=36, hidden=2048, heads=16, kv_heads=2, intermediate=11008, vocab=151936,
            tied_embeddings=True),
    _qwen25("7B", layers=28, hidden=3584, heads=28, kv_heads=4, intermediate=18944, vocab=152064,
            tied_embeddings=False),
    _qwen25("14B", layers=48, hidden=5120, heads=40, kv_heads=8, intermediate=13824, vocab=152064,
            tied_embeddings=False),
    _qwen25("32B", layers=64, hidden=5120, heads=40, kv_heads=8, intermediate=27648, vocab=152064,
            tied_embeddings=False),
    _qwen25("72B", layers=80, hidden=8192, heads=64, kv_heads=8, intermediate=29568, vocab=152064,
            tied_embeddings=False),
    _qwen3("0.6B", layers=28, hidden=1024, heads=16, kv_heads=8, intermediate=3072, tied_embeddings=True),
    _qwen3("1.7B", layers=28, hidden=2048, heads=16, kv_heads=8, intermediate=6144, tied_embeddings=True),
    _qwen3("4B", layers=36, hidden=2560, heads=32, kv_heads=8, intermediate=9728, tied_embeddings=True),
    _qwen3("8B", layers=36, hidden=4096, heads=32, kv_heads=8, intermediate=12288, tied_embeddings=False),
    _qwen3("14B", layers=40, hidden=5120, heads=40, kv_heads=8, intermediate=17408, tied_embeddings=False),
    _qwen3("32B", layers=64, hidden=5120, heads=64, kv_heads=8, intermediate=25600, tied_embeddings=False),
    # Llama 3, 3.1 and 3.3 share the 8B and 70B shapes; 3.2 added the small tied ones.
    TableEntry("Llama-3.2-1B", rf"llama-3\.2-1b{_END}", layers=16, hidden=2048, heads=32, kv_heads=8,
               intermediate=8192, vocab=128256, tied_embeddings=True, head_dim=64),
    TableEntry("Llama-3.2-3B", rf"llama-3\.2-3b{_END}", layers=28, hidden=3072, heads=24, kv_heads=8,
               intermediate=8192, vocab=128256, tied_embeddings=True, head_dim=128),
    TableEntry("Llama-3.1-8B", rf"llama-?3(?:\.[0-9])?-8b{_END}", layers=32, hidden=4096, heads=32, kv_heads=8,
               intermediate=14336, vocab=128256, tied_embeddings=False),
    TableEntry("Llama-3.1-70B", rf"llama-?3(?:\.[0-9])?-70b{_END}", layers=80, hidden=8192, heads=64, kv_heads=8,
               intermediate=28672, vocab=128256, tied_embeddings=False),
)

_COMPILED = tuple((re.compile(e.pattern), e) for e in TABLE)


def last_component(path: str) -> str:
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def lookup(model_path: str) -> TableEntry | None:
    """The table row for a model path (its last component, case-insensitively), or None."""
    name = last_component(model_path).lower()
    if not name:
        return None
    for pattern, entry in _COMPILED:
        if pattern.search(name):
            return entry
    return None
