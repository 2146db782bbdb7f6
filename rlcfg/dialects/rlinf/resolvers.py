"""RLinf's custom OmegaConf resolvers, reimplemented without torch.

RLinf registers `multiply`, `int_div`, `subtract`, `not` and `torch.dtype` when `rlinf` is imported; its
example configs use them (`max_new_tokens: ${subtract:${runner.seq_length}, ${data.max_prompt_length}}`,
`return_logprobs: ${not:${algorithm.recompute_logprobs}}`). Without them a checker would reject valid
configs. The core registers these functions with OmegaConf; an exception raised here becomes a diagnostic
at the key that holds the interpolation, so each message names the resolver and the bad argument.
"""

from __future__ import annotations

from typing import Any

# Names RLinf's configs use for precisions, mapped to the dtype a `${torch.dtype:...}` stands for. The value
# is the dtype's name as text: rlcfg never imports torch, and a later stage turns the text into the dtype.
TORCH_DTYPES = {
    "bf16": "torch.bfloat16", "bfloat16": "torch.bfloat16", "bf16-mixed": "torch.bfloat16",
    "fp16": "torch.float16", "float16": "torch.float16", "half": "torch.float16", "16": "torch.float16",
    "16-mixed": "torch.float16",
    "fp32": "torch.float32", "float32": "torch.float32", "float": "torch.float32", "32": "torch.float32",
    "32-true": "torch.float32",
    "fp64": "torch.float64", "float64": "torch.float64", "double": "torch.float64",
}


def _number(resolver: str, value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            return int(value) if str(value).strip().lstrip("+-").isdigit() else float(value)
        except (TypeError, ValueError):
            raise ValueError(f"`{resolver}` needs numbers, got {value!r}") from None
    return value


def subtract(a: Any, b: Any) -> int | float:
    return _number("subtract", a) - _number("subtract", b)


def multiply(a: Any, b: Any) -> int | float:
    return _number("multiply", a) * _number("multiply", b)


def int_div(a: Any, b: Any) -> int:
    x, y = _number("int_div", a), _number("int_div", b)
    if y == 0:
        raise ValueError(f"`int_div` divides {x} by zero")
    return int(x // y)


def logical_not(value: Any) -> bool:
    if isinstance(value, bool):
        return not value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "false"
    raise ValueError(f"`not` needs true or false, got {value!r}")


def torch_dtype(name: Any) -> str:
    key = str(name).strip()
    if key.startswith("torch."):
        key = key[len("torch."):]
    if key.lower() in TORCH_DTYPES:
        return TORCH_DTYPES[key.lower()]
    raise ValueError(f"`torch.dtype` does not know the precision {name!r}; use one of bf16, bfloat16, fp16, "
                     f"float16, fp32, float32")


RESOLVERS = {
    "subtract": subtract,
    "multiply": multiply,
    "int_div": int_div,
    "not": logical_not,
    "torch.dtype": torch_dtype,
}
