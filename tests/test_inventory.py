"""Every field each framework release defines or reads is known to rlcfg for that release.

tests/inventory/<dialect>/<release>.json hold facts read from the frameworks' own sources (config classes, base
YAML files, keys their code reads) by the scripts under tools/inventory/. A key a user can write for a release
the dialect claims must be a key of the dialect's schema at that release, or be listed as knowingly not modelled,
with the reason, in the same file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlcfg import schema
from rlcfg.schema.base import field_at, field_releases

INVENTORY = Path(__file__).parent / "inventory"
FILES = sorted(INVENTORY.glob("*/*.json"))


def _covered(key: str, reasons: dict) -> bool:
    parts = key.split(".")
    return any(".".join(parts[:n]) in reasons for n in range(1, len(parts) + 1))


def test_there_is_an_inventory_for_every_claimed_release():
    for name in schema.names():
        dialect = schema.load(name)
        have = {p.stem for p in (INVENTORY / name).glob("*.json")}
        assert set(dialect.releases) <= have, f"{name}: no inventory for releases {set(dialect.releases) - have}"


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}-{p.stem}" for p in FILES])
def test_every_inventoried_key_is_known_at_its_release(path: Path):
    data = json.loads(path.read_text())
    dialect = schema.load(data["dialect"])
    release = data["release"]
    assert release in dialect.releases, f"{path}: {release} is not a release {data['dialect']} claims"
    assert len(data.get("commit", "")) == 40 or data.get("wheel", "").partition(" sha256:")[2], \
        f"{path}: name the framework commit (or the PyPI wheel and its digest) the facts were read from"
    unmodelled = data.get("unmodelled", {})
    skipped_pipelines = data.get("unmodelled_pipelines", {})
    roots = list(dialect.variants().values())
    # keys of the release that the schema does not model but checks by their type (the release's own extension)
    extension = dialect.release_keys(release)
    declared = {key.path for key in extension.keys} if extension is not None else set()
    missing = []
    for pipeline, keys in data["pipelines"].items():
        if pipeline in skipped_pipelines:
            continue
        for key in keys:
            if _covered(key, unmodelled):
                continue
            path_parts = dialect.schema_path(tuple(key.split(".")), release)
            if path_parts in declared:
                continue
            infos = [field_at(root, path_parts)[0] for root in roots]
            known = [i for i in infos if i is not None]
            if not known:
                missing.append(f"{pipeline}: {key} (unknown to the schema)")
            elif all(field_releases(i) is not None and release not in field_releases(i) for i in known):
                missing.append(f"{pipeline}: {key} (the schema marks it as not in {release})")
    assert not missing, f"{len(missing)} inventoried keys are not modelled:\n  " + "\n  ".join(missing[:60])
