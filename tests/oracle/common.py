"""Shared pieces of the differential suite: run an oracle script, extract a framework's files at a commit, and
print the agreement table."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import io
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Verdict:
    accepted: bool | None  # None: the oracle itself failed (exit 2)
    detail: str


def run_oracle(oracle_dir: Path, script: str, *args: str, timeout: int = 300, stdin: str | None = None) -> Verdict:
    """Run one of the oracle scripts; its first ACCEPT/REJECT line is the verdict."""
    env = dict(os.environ)
    env.setdefault("ORACLE_HOME", "/tmp/oracle")
    proc = subprocess.run(["bash", str(oracle_dir / script), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, input=stdin)
    for line in proc.stdout.splitlines():
        if line.startswith("ACCEPT"):
            return Verdict(True, line)
        if line.startswith("REJECT"):
            return Verdict(False, line)
    return Verdict(None, (proc.stdout + proc.stderr)[-2000:])


def mirror(owner_repo: str) -> Path:
    return Path(os.environ["MIRROR_ROOT"]) / owner_repo / "repo"


def extract(owner_repo: str, rev: str, dest: Path, *paths: str) -> Path:
    """Write `paths` of the repository at `rev` under `dest` (git archive; the mirror is read-only)."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", f"--git-dir={mirror(owner_repo)}", "archive", rev, *paths],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest


@dataclass
class Agreement:
    """Counts of verdict pairs, per corpus (a release, a pipeline)."""

    rows: dict = field(default_factory=dict)
    disagreements: list = field(default_factory=list)

    def add(self, corpus: str, name: str, rlcfg_ok: bool, oracle_ok: bool | None, detail: str = "") -> None:
        row = self.rows.setdefault(corpus, {"files": 0, "both accept": 0, "both reject": 0, "rlcfg only": 0,
                                            "loader only": 0, "oracle failed": 0})
        row["files"] += 1
        if oracle_ok is None:
            row["oracle failed"] += 1
        elif rlcfg_ok and oracle_ok:
            row["both accept"] += 1
        elif not rlcfg_ok and not oracle_ok:
            row["both reject"] += 1
        elif rlcfg_ok:
            # rlcfg accepts what the loader rejects: a missed error
            row["loader only"] += 1
            self.disagreements.append((corpus, name, "rlcfg accepts, loader rejects", detail))
        else:
            row["rlcfg only"] += 1
            self.disagreements.append((corpus, name, "rlcfg rejects, loader accepts", detail))

    def table(self) -> str:
        head = ["corpus", "files", "both accept", "both reject", "rlcfg only", "loader only", "oracle failed"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for corpus, row in self.rows.items():
            lines.append("| " + " | ".join([corpus] + [str(row[h]) for h in head[1:]]) + " |")
        return "\n".join(lines)


def verdict_lines(stdout: str) -> dict[str, tuple[bool | None, str]]:
    """A batch oracle's JSON lines, {"id", "verdict": ACCEPT | REJECT | ERROR, "error"}: id -> (accepted, message);
    None where the harness could not judge the case."""
    out: dict[str, tuple[bool | None, str]] = {}
    for line in stdout.splitlines():
        try:
            found = json.loads(line)
        except json.JSONDecodeError:
            continue
        out[found["id"]] = ({"ACCEPT": True, "REJECT": False}.get(found["verdict"]), found.get("error", ""))
    return out


def compare(agreement: Agreement, both_reject: list, corpus: str, release: str, name: str, ok: bool, why: str,
            loader_ok: bool | None, loader_why: str) -> bool:
    """Record one case; True when the two verdicts disagree (the caller's allow-lists say whether on purpose)."""
    agreement.add(corpus, name, ok, loader_ok, f"rlcfg: {why} | loader: {loader_why}")
    if ok is False and loader_ok is False:
        both_reject.append((release, name, why[:160], loader_why[:160]))
    return loader_ok is not None and ok != loader_ok


def listed(table: dict, name: str, release: str) -> bool:
    """Whether an allow-list names the case, alone or at this release (`name@release`)."""
    return bool(table.get(name) or table.get(f"{name}@{release}"))


def report(agreement: Agreement, both_reject: list, unexpected: list) -> None:
    """Print the table, its disagreements and what both sides reject (to check by eye that both name the same
    cause); fail on the disagreements no allow-list explains."""
    print()
    print(agreement.table())
    for item in agreement.disagreements:
        print("  ", item)
    print("both reject:")
    for item in both_reject:
        print("  ", item)
    assert not unexpected, "\n".join(map(str, unexpected))
