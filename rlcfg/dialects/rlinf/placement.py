"""RLinf's `cluster.component_placement` language, parsed by a small recursive-descent grammar.

    component_placement := { components : spec }
    components          := name ("," name)*                    # a YAML key: "actor,rollout,reward"
    spec                := rank_map | INT                      # a YAML integer is read as its text
                         | { node_group: label | "l1,l2" | [l1, l2], placement: rank_map | INT }
    rank_map            := part? ("," part?)*                  # empty parts are skipped, as RLinf does
    part                := resources (":" processes)?
    resources           := "all" | range
    processes           := range                               # "all" is not allowed here
    range               := INT ("-" INT)?                      # inclusive, start <= end

RLinf splits the string on "," before it splits a part on ":", so one part holds one range on each side:
`0-1:0-3,4-5` is (GPUs 0-1 -> processes 0-3) then (GPUs 4-5 -> processes 4-5, numbered on implicitly).
Resource ranks count accelerators from 0 inside the selected node group(s). Across the parts of one string they
must ascend without overlapping; process ranks must run on from 0 without gaps; and in each part the number of
processes must be a multiple or a divisor of the number of GPUs (several processes share a GPU, or one process
owns several GPUs).

Nothing here reads a file or the machine: the cluster's size is passed in.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Iterable, Mapping

from rlcfg.records import record

ACCEPTED_FORMS = ("`all`, `0-7`, `3`, `0-3,4-7`, `0-1:0-3` (GPUs 0-1 running processes 0-3), or the mapping "
                  "`{node_group: <label>, placement: 0-3}`")


class PlacementSyntaxError(ValueError):
    """A rank string that does not follow the grammar; `position` is the 0-based character index."""

    def __init__(self, message: str, text: str, position: int | None = None):
        where = f" (at character {position + 1} of `{text}`)" if position is not None else ""
        super().__init__(message + where)
        self.text = text
        self.position = position


# Ranks are expanded into lists: a typo such as `0-5183723386` must be an error, not billions of ranks in memory.
MAX_RANK = (1 << 20) - 1


@record(frozen=True)
class Span:
    """An inclusive range of ranks."""

    start: int
    end: int

    def ranks(self) -> list[int]:
        return list(range(self.start, self.end + 1))

    def __len__(self) -> int:
        return self.end - self.start + 1

    def text(self) -> str:
        return str(self.start) if self.start == self.end else f"{self.start}-{self.end}"


@record(frozen=True)
class Part:
    resources: Span | None  # None means `all`
    processes: Span | None = None  # None means numbered on implicitly, one per resource

    def text(self) -> str:
        head = "all" if self.resources is None else self.resources.text()
        return head if self.processes is None else f"{head}:{self.processes.text()}"


@record(frozen=True)
class RankMap:
    parts: tuple[Part, ...]

    def text(self) -> str:
        return ",".join(part.text() for part in self.parts)

    @property
    def uses_all(self) -> bool:
        return any(part.resources is None for part in self.parts)


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def fail(self, message: str, position: int | None = None) -> PlacementSyntaxError:
        return PlacementSyntaxError(message, self.text, self.pos if position is None else position)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_ws(self) -> None:
        while self.peek() in (" ", "\t"):
            self.pos += 1

    def parse(self) -> RankMap:
        parts: list[Part] = []
        while True:
            self.skip_ws()
            if self.peek() not in (",", ""):
                parts.append(self.part())
                self.skip_ws()
            c = self.peek()
            if c == "":
                break
            if c != ",":
                raise self.fail(f"unexpected `{c}`; parts are separated by `,`")
            self.pos += 1
        if not parts:
            raise PlacementSyntaxError("the placement names no GPU ranks", self.text)
        return RankMap(tuple(parts))

    def part(self) -> Part:
        if self.text.startswith("all", self.pos) and not self.text[self.pos + 3:self.pos + 4].isalnum():
            self.pos += 3
            resources: Span | None = None
        else:
            resources = self.range("GPU ranks")
        self.skip_ws()
        processes = None
        if self.peek() == ":":
            self.pos += 1
            self.skip_ws()
            if self.text.startswith("all", self.pos):
                raise self.fail("process ranks (after `:`) cannot be `all`; give them as a range such as `0-7`")
            processes = self.range("process ranks")
        return Part(resources, processes)

    def integer(self, what: str) -> int:
        start = self.pos
        while self.peek().isdigit():
            self.pos += 1
        if start == self.pos:
            c = self.peek()
            found = f"`{c}`" if c else "the end of the text"
            raise self.fail(f"expected {what} (a number, a range `a-b`{', or `all`' if what == 'GPU ranks' else ''}), "
                            f"found {found}", start)
        number = int(self.text[start:self.pos])
        if number > MAX_RANK:
            raise self.fail(f"{what} go up to {MAX_RANK:,} here; {number:,} is beyond any cluster", start)
        return number

    def range(self, what: str) -> Span:
        begin = self.pos
        start = self.integer(what)
        self.skip_ws()
        if self.peek() != "-":
            return Span(start, start)
        self.pos += 1
        self.skip_ws()
        end = self.integer(what)
        if end < start:
            raise self.fail(f"the range `{start}-{end}` runs backwards; write `{end}-{start}`", begin)
        return Span(start, end)


def parse_rank_map(value: Any) -> RankMap:
    """Parse a placement value as RLinf reads it (a YAML integer counts as its text)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise PlacementSyntaxError(f"expected a rank string such as `0-3` or `all`, got {value!r}", str(value))
    text = str(value)
    if isinstance(value, int) and value < 0:
        raise PlacementSyntaxError(f"a GPU rank cannot be negative ({value})", text)
    return _Parser(text).parse()


def format_rank_map(rank_map: RankMap) -> str:
    return rank_map.text()


def parse_components(key: str) -> list[str]:
    """`"actor, rollout"` -> ["actor", "rollout"]; an empty name is a syntax error."""
    names = [name.strip() for name in str(key).split(",")]
    if any(not name for name in names):
        raise PlacementSyntaxError("the key lists an empty component name (two commas in a row, or a trailing comma)",
                                   str(key))
    return names


# ---- resolving a rank map against the resources it may use ----------------------------------------------


class PlacementRangeError(ValueError):
    """Ranks beyond the GPUs the placement may use (RLC403, not a syntax error)."""

    def __init__(self, message: str, highest: int, available: int, hint: str | None = None):
        super().__init__(message)
        self.highest = highest
        self.available = available
        self.hint = hint


@record
class Expanded:
    """What one rank string means: each process's GPU ranks (relative to its node group)."""

    parts: list[tuple[list[int], list[int]]] = field(default_factory=list)  # (resource ranks, process ranks)

    @property
    def resources(self) -> list[int]:
        return [r for res, _ in self.parts for r in res]

    @property
    def world_size(self) -> int:
        return sum(len(procs) for _, procs in self.parts)


def expand(rank_map: RankMap, available: int | None) -> Expanded:
    """Check a rank map's own rules and number its processes.

    `available` is how many GPUs the node group has (None when unknown: `all` then cannot be expanded and
    bounds are not checked; a PlacementSyntaxError says so only for `all` mixed with other parts).
    Raises PlacementSyntaxError for a broken rule of the language, PlacementRangeError for ranks beyond `available`.
    """
    text = rank_map.text()
    out = Expanded()
    last_resource = -1
    next_process = 0
    for part in rank_map.parts:
        if part.resources is None:
            if len(rank_map.parts) > 1:
                raise PlacementSyntaxError("`all` must stand alone; it already names every GPU", text)
            if available is None:
                raise _Unknown()
            resources = list(range(available))
        else:
            resources = part.resources.ranks()
            if resources[0] <= last_resource:
                raise PlacementSyntaxError(
                    f"GPU ranks `{part.resources.text()}` come after rank {last_resource}; the parts of a placement "
                    f"must name ascending, non-overlapping GPU ranks", text)
            if available is not None and resources[-1] >= available:
                raise PlacementRangeError(
                    f"GPU rank {resources[-1]} is beyond the {available} GPU{'s' if available != 1 else ''} "
                    f"available (ranks 0-{available - 1})" if available else "no GPUs are available",
                    resources[-1], available)
        last_resource = resources[-1]
        if part.processes is None:
            processes = list(range(next_process, next_process + len(resources)))
        else:
            processes = part.processes.ranks()
            if processes[0] != next_process:
                raise PlacementSyntaxError(
                    f"process ranks `{part.processes.text()}` should start at {next_process}; process ranks run on "
                    f"from 0 without gaps across the parts", text)
        n_res, n_proc = len(resources), len(processes)
        if n_proc % n_res and n_res % n_proc:
            label = "all" if part.resources is None else part.resources.text()
            raise PlacementSyntaxError(
                f"`{part.text()}` puts {n_proc} processes on {n_res} GPUs ({label}); the process count must be a "
                f"multiple or a divisor of the GPU count", text)
        next_process = processes[-1] + 1
        out.parts.append((resources, processes))
    return out


class _Unknown(Exception):
    """`all` with an unknown cluster size: the caller treats the component as taking every GPU."""


def expand_or_none(rank_map: RankMap, available: int | None) -> Expanded | None:
    """`expand`, but None instead of an exception when `all` cannot be counted."""
    try:
        return expand(rank_map, available)
    except _Unknown:
        return None


# ---- node groups ------------------------------------------------------------------------------------------


def node_group_labels(value: Any) -> list[str]:
    """A `node_group` value: a label, "l1,l2", or a list of labels."""
    if isinstance(value, str):
        labels = [v.strip() for v in value.split(",")]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        labels = [v.strip() for v in value]
    else:
        raise PlacementSyntaxError(f"`node_group` must be a label or a list of labels, got {value!r}", str(value))
    if not labels or any(not label for label in labels):
        raise PlacementSyntaxError("`node_group` names an empty label", str(value))
    return labels


def node_ranks(value: Any, num_nodes: int) -> list[int]:
    """A node group's `node_ranks` (a rank string, an integer or a list of integers) as a list of node ranks."""
    if value is None:
        return list(range(num_nodes))
    if isinstance(value, list):
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise PlacementSyntaxError(f"`node_ranks` must list node numbers, got {value!r}", str(value))
        return list(value)
    ranks: list[int] = []
    for part in parse_rank_map(value).parts:
        ranks.extend(range(num_nodes) if part.resources is None else part.resources.ranks())
    return ranks


def describe_ranks(ranks: Iterable[int]) -> str:
    """[0,1,2,3,6,7] -> "0-3,6-7"."""
    ordered = sorted(set(ranks))
    spans: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        spans.append(Span(ordered[i], ordered[j]).text())
        i = j + 1
    return ",".join(spans)


def is_contiguous(ranks: Iterable[int]) -> bool:
    ordered = sorted(set(ranks))
    return not ordered or ordered == list(range(ordered[0], ordered[-1] + 1))


# ---- a whole `component_placement` mapping ----------------------------------------------------------------

@record
class Issue:
    code: str  # RLC204 (malformed), RLC403 (beyond the cluster), RLC401 (placed twice)
    key: tuple  # path under cluster.component_placement, e.g. ("actor,rollout",) or ("actor", "placement")
    message: str
    hint: str | None = None


@record
class Component:
    name: str
    key: str  # the YAML key that places it
    gpus: frozenset | None  # global GPU ids (node * gpus_per_node + local); None when they cannot be known
    world_size: int | None  # processes; None when `all` of a cluster of unknown size
    node_groups: tuple[str, ...] = ()
    on_hardware: bool = False  # placed on a node group of non-GPU hardware (robots, nodes): not GPUs
    takes_all: bool = False  # `all` of the whole cluster (comparable even when the cluster's size is unknown)


@record
class Analysis:
    components: dict[str, Component] = field(default_factory=dict)
    issues: list[Issue] = field(default_factory=list)
    explicit_ranks: bool = False  # some placement names GPU ranks (not only `all`)


# The labels RLinf's scheduler defines itself (NodeGroupInfo.RESERVED_LABELS, tags v0.1 on): `cluster` is every node
# with its accelerators, `node` every node as a CPU-only resource whose ranks are node ranks (agent or environment
# processes placed per node). A node group of `cluster.node_groups` may not take either label.
CLUSTER_LABEL = "cluster"
NODE_LABEL = "node"
RESERVED_LABELS = (CLUSTER_LABEL, NODE_LABEL)


def analyze(placement: Mapping[str, Any], num_nodes: int, gpus_per_node: int | None,
            node_groups: list[dict] | None = None) -> Analysis:
    """Parse every entry of `cluster.component_placement` and place each component on global GPU ids."""
    out = Analysis()
    groups: dict[str, dict] = {label: {} for label in RESERVED_LABELS}
    for entry in node_groups or []:
        if isinstance(entry, dict) and isinstance(entry.get("label"), str) \
                and entry["label"] not in RESERVED_LABELS:
            groups[entry["label"]] = entry
    placed_by: dict[str, str] = {}
    for key, spec in placement.items():
        try:
            names = parse_components(key)
        except PlacementSyntaxError as exc:
            out.issues.append(Issue("RLC204", (key,), f"component list `{key}`: {exc}",
                                    "write the components as `actor,rollout: 0-7`"))
            continue
        for name in names:
            if names.count(name) > 1 or name in placed_by:
                where = f"`{placed_by[name]}`" if name in placed_by else "the same key"
                out.issues.append(Issue(
                    "RLC401", (key,), f"component `{name}` is placed twice (in {where} and in `{key}`); RLinf "
                    f"accepts this at load but fails when the entry script builds the component placement (it "
                    f"refuses duplicate components)",
                    f"remove `{name}` from one of the two keys (a Hydra child config adds its placement keys to "
                    f"the base config's rather than replacing them)"))
        try:
            component = _place(key, spec, num_nodes, gpus_per_node, groups, out)
        except PlacementSyntaxError as exc:
            path = (key, "placement") if isinstance(spec, dict) and "placement" in spec else (key,)
            out.issues.append(Issue("RLC204", path, f"`cluster.component_placement.{key}`: {exc}",
                                    f"accepted forms: {ACCEPTED_FORMS}"))
            continue
        except PlacementRangeError as exc:
            path = (key, "placement") if isinstance(spec, dict) else (key,)
            out.issues.append(Issue("RLC403", path, f"`{key}` is placed on `{_spec_text(spec)}`, but {exc}",
                                    _range_hint(exc, gpus_per_node, num_nodes)))
            continue
        for name in names:
            placed_by.setdefault(name, key)
            if name not in out.components:
                out.components[name] = Component(name, key, component.gpus, component.world_size,
                                                 component.node_groups, component.on_hardware, component.takes_all)
    return out


def _spec_text(spec: Any) -> str:
    if isinstance(spec, dict):
        return str(spec.get("placement"))
    return str(spec)


def _range_hint(exc: PlacementRangeError, gpus_per_node: int | None, num_nodes: int) -> str:
    if exc.hint:
        return exc.hint
    if exc.available and gpus_per_node:
        return (f"use ranks 0-{exc.available - 1}, or grow the cluster: {exc.highest + 1} GPUs need "
                f"cluster.num_nodes × cluster.num_gpus_per_node ≥ {exc.highest + 1}")
    return "check cluster.num_nodes, cluster.num_gpus_per_node and the node group's node_ranks"


def _place(key: str, spec: Any, num_nodes: int, gpus_per_node: int | None, groups: dict, out: Analysis) -> Component:
    labels: tuple[str, ...] = ()
    if isinstance(spec, dict):
        unknown = sorted(str(k) for k in spec if k not in ("node_group", "placement"))
        if unknown:
            raise PlacementSyntaxError(f"unknown key `{unknown[0]}` in a placement mapping; it takes `node_group` "
                                       f"and `placement`", str(spec))
        if "placement" not in spec:
            raise PlacementSyntaxError("a placement mapping needs `placement:` (the GPU ranks)", str(spec))
        rank_map = parse_rank_map(spec["placement"])
        if "node_group" in spec:
            labels = tuple(node_group_labels(spec["node_group"]))
    else:
        rank_map = parse_rank_map(spec)
    out.explicit_ranks = out.explicit_ranks or not rank_map.uses_all
    # Resource rank r of the selected node groups -> a global GPU id (None: not GPUs, or unknown).
    global_ids: list[int] | None
    on_hardware = False
    if labels:
        missing = [label for label in labels if label not in groups]
        if missing:
            known = ", ".join(sorted(groups))
            raise PlacementSyntaxError(f"node group `{missing[0]}` is not defined (known labels: {known}; "
                                       f"`{CLUSTER_LABEL}` and `{NODE_LABEL}` are RLinf's own)",
                                       str(spec.get("node_group")))
        if NODE_LABEL in labels:
            expanded = expand_or_none(rank_map, None if not rank_map.uses_all else num_nodes)
            if expanded is not None and expanded.resources and max(expanded.resources) >= num_nodes:
                raise PlacementRangeError(f"the `{NODE_LABEL}` group's resources are the cluster's nodes, and it "
                                          f"has {num_nodes}", max(expanded.resources), num_nodes,
                                          f"use node ranks 0-{num_nodes - 1}, or raise cluster.num_nodes")
            return Component("", key, None, expanded.world_size if expanded else None, labels, True)
        global_ids = []
        for label in labels:
            group = groups[label]
            if group.get("hardware") is not None:
                on_hardware = True
                global_ids = None
                break
            nodes = node_ranks(group.get("node_ranks"), num_nodes)
            bad = [n for n in nodes if n >= num_nodes]
            if bad:
                raise PlacementRangeError(f"node group `{label}` lists node {bad[0]}, and the cluster has "
                                          f"{num_nodes} node{'s' if num_nodes != 1 else ''}", bad[0], num_nodes)
            if gpus_per_node is None:
                global_ids = None
                break
            for node in nodes:
                global_ids.extend(range(node * gpus_per_node, (node + 1) * gpus_per_node))
        available = len(global_ids) if global_ids is not None else None
    else:
        available = num_nodes * gpus_per_node if gpus_per_node is not None else None
        global_ids = list(range(available)) if available is not None else None
    if on_hardware:
        expanded = expand_or_none(rank_map, None)
        return Component("", key, None, expanded.world_size if expanded else None, labels, True)
    takes_all = rank_map.uses_all and not labels
    expanded = expand_or_none(rank_map, available)
    if expanded is None:
        return Component("", key, None, None, labels, takes_all=takes_all)
    if global_ids is None:
        gpus = frozenset(expanded.resources) if not labels else None
    else:
        gpus = frozenset(global_ids[r] for r in expanded.resources)
    return Component("", key, gpus, expanded.world_size, labels, takes_all=takes_all)
