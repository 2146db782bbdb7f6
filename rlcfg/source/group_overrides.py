"""Config groups chosen on the command line: `+group=option` with the group's folder on a `hydra.searchpath` that is
itself given on the command line (`hydra.searchpath=[file://examples/x]`), as skyrl-train's example scripts launch
their own entrypoints. Hydra appends such an override to the defaults list, so the file `group/option.yaml` of the
first search-path folder that has it is composed at the key `group`, and later overrides of the group's keys apply
on top of it. A relative `file://` folder is relative to the working directory, as Hydra reads it. An option with
no such file stays a plain value; a file that places itself elsewhere (`# @package`) is reported.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from rlcfg.diagnostics import Diagnostic, diagnostic
from rlcfg.source.compose import _expand_env, _header_package
from rlcfg.source.overrides import Override
from rlcfg.source.yaml_loader import load_yaml


def searchpath_folders(overrides: Sequence[Override], env: Mapping[str, str]) -> list[str]:
    """The `file://` folders of every `hydra.searchpath=...` override, in order."""
    folders: list[str] = []
    for o in overrides:
        if o.path != ("hydra", "searchpath") or not o.has_value:
            continue
        for entry in o.value if isinstance(o.value, list) else [o.value]:
            if not isinstance(entry, str):
                continue
            text, unset = _expand_env(entry, env)
            if not unset and text.startswith("file://"):
                folders.append(text[len("file://"):])
    return folders


def compose_group_overrides(overrides: list[Override], folders: Sequence[str]
                            ) -> tuple[list[Override], list[Diagnostic]]:
    """The overrides with each `+group=option` that names a file of a search-path folder replaced by that file's
    content (merged at its package)."""
    if not folders:
        return overrides, []
    out: list[Override] = []
    found: list[Diagnostic] = []
    for o in overrides:
        if o.op != "add" or not isinstance(o.value, str) or not o.value:
            out.append(o)
            continue
        relative = Path(*map(str, o.path), f"{o.value}.yaml")
        file = next((Path(f) / relative for f in folders if (Path(f) / relative).is_file()), None)
        if file is None:
            out.append(o)
            continue
        text = file.read_text(encoding="utf-8")
        tree, problems = load_yaml(text, str(file))
        found.extend(problems)
        if tree is None:
            continue
        content: Any = tree.data if tree.data is not None else {}
        if not isinstance(content, dict):
            found.append(diagnostic("RLC112", ".".join(map(str, o.path)), f"config group file {file} does not hold a "
                                    "mapping", origin=o.origin, hint="a config group option is a YAML mapping"))
            continue
        package = _header_package(text)
        if package in (None, ".".join(map(str, o.path))):
            out.append(replace(o, value=content))
        else:
            found.append(diagnostic("RLC112", ".".join(map(str, o.path)), f"config group file {file} places itself "
                                    f"at `{package}` (its `# @package` header), which rlcfg does not compose from the "
                                    "command line", origin=o.origin, hint="write its keys as overrides instead"))
            out.append(o)
    return out, found

