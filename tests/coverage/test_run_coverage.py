"""Run coverage (issue 25): does `rlcfg run` launch what `rlcfg validate` passes, on the frameworks' own configs?

The corpus is the differential suite's (tests/oracle), at the releases rlcfg claims, without its mutations: SkyRL's
base config and its example launch scripts read as Hydra overrides, ROLL's and RLinf's example configs, AReaL's
example configs, ChatLearn's templates and launch scripts. No framework loader runs here. Each case goes through
`rlcfg.preflight.dry_run` (which runs `validate` first) and is counted per dialect and release:

- validate accepts: no error;
- validate clean: accepted, and no RLC116 (a pipeline `run` does not run) and no RLC118 (a setting `run` refuses),
  so validate promised nothing that stops a run;
- dry-run passes: `rlcfg run --dry-run` would launch it on the cluster it describes;
- contradictions: validate clean, yet the dry run refuses for a reason validate did not give. These fail the test:
  either validate should have said so (RLC118 on the setting), or the lowering, plan or backend preflight refuses
  what it should run. A plan error whose code validate already reported (a warning that the framework's loader lets
  through what its run fails on) has been said;
- out of memory: validate clean, and the dry run's only objection is the memory estimate (RLC500): the config's own
  batch does not fit the GPU it names, or the H100 the plan assumes when it names none (`--gpu` changes it). Not a
  setting validate should refuse, nor one rlcfg fails to run: counted and listed apart, not failed;
- usage error: the file could not be read (UsageError); crashes: anything else raised, a bug in rlcfg.

The table, the contradictions grouped by reason and a tally of the dry run's refusals go to stdout and to
$RUN_COVERAGE_OUT (default /tmp/run-coverage.md).

Run: MIRROR_ROOT=/work/.mirror python -m pytest -m run_coverage tests/coverage -s -q
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from tests.oracle import test_areal_oracle as areal
from tests.oracle import test_chatlearn_oracle as chatlearn
from tests.oracle import test_rlinf_oracle as rlinf
from tests.oracle import test_roll_oracle as roll
from tests.oracle import test_skyrl_oracle as skyrl
from tests.oracle import test_skyrl_package_oracle as skyrl_package
from tests.oracle.common import extract

# The base configs of every framework log to wandb, and validate warns (SkyRL: errs) without a key; the oracle
# suite sets a dummy key the same way.
ENV = {"WANDB_API_KEY": "run-coverage-dummy-key"}
REFUSAL_WORDS = 12  # at most, of a refusal's message, to name its reason


@dataclass
class Case:
    dialect: str
    release: str | None  # passed to rlcfg as the release the corpus is at
    name: str
    path: Path
    overrides: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # variables the framework's run scripts export
    cwd: Path | None = None  # where the command runs (an example's entry module is found from there)


@dataclass
class Outcome:
    case: Case
    usage_error: str = ""
    crash: str = ""
    accepted: bool = False
    clean: bool = False
    launches: bool = False
    errors: list[str] = field(default_factory=list)  # validate's errors: "CODE key"
    refusals: list[str] = field(default_factory=list)  # the dry run's blockers: "CODE first words"
    details: list[str] = field(default_factory=list)  # the blockers in full, for the contradiction list
    unsaid: list[str] = field(default_factory=list)  # the blockers whose code validate did not report

    @property
    def out_of_memory(self) -> bool:
        return self.clean and bool(self.unsaid) and set(self.unsaid) == {"RLC500"}

    @property
    def contradiction(self) -> bool:
        # A plan check that validate already reports under the same code (ChatLearn 1.2.0's warning that its loader
        # lets a rollout size through that the run then fails on) has been said; anything else has not.
        return self.clean and bool(self.unsaid) and not self.out_of_memory


# ---- the corpus: the oracle suite's enumeration, less its mutations ----------------------------------------------


def skyrl_cases(work: Path) -> Iterator[Case]:
    mutated = {name for name, _overrides, _only in skyrl.MUTATIONS}
    for release, rev in skyrl.RELEASES.items():
        tree = extract(skyrl.REPO, rev, work / "skyrl" / release, "skyrl-train/skyrl_train/config",
                       "skyrl-train/examples")
        for name, overrides, entrypoint in skyrl.cases(release, tree):
            if name in mutated:
                continue
            if entrypoint == "main_base":
                yield Case("skyrl", release, name, tree / skyrl.BASE, overrides)
            else:  # an example's own entrypoint: judged with its module, as `rlcfg run SCRIPT` judges it
                module = _skyrl_train_module(tree / "skyrl-train" / "examples" / name, tree)
                yield Case("skyrl", release, name, Path("python"), ["-m", module, *overrides],
                           cwd=tree / "skyrl-train")
    yield from skyrl_package_cases(work)


def _skyrl_train_module(script: Path, tree: Path) -> str:
    """The module a skyrl-train example script's call runs (`examples.algorithms.dapo.main_dapo`)."""
    from rlcfg import schema
    from rlcfg.source.launch import read_launch

    env = {"HOME": "/home/user", "PWD": str(tree / "skyrl-train")}
    found = read_launch(script.read_text(errors="replace"), str(script), schema.launchers("skyrl"), env)
    return found.module


def skyrl_package_cases(work: Path) -> Iterator[Case]:
    """The `skyrl` package's example scripts as command lines of their entrypoints (tests/oracle/
    test_skyrl_package_oracle.py reads them the same way)."""
    mutated = {name for name, _overrides, _only in skyrl_package.MUTATIONS}
    for release, (_rev, examples_rev) in skyrl_package.RELEASES.items():
        tree = extract(skyrl_package.REPO, examples_rev, work / "skyrl-package" / release, "examples/train")
        for name, overrides, entry in skyrl_package.cases(release, tree):
            if name not in mutated:
                yield Case("skyrl", f"skyrl-{release}", name, Path("python"), ["-m", entry, *overrides], cwd=tree)


def roll_cases(work: Path) -> Iterator[Case]:
    for release, rev in roll.RELEASES.items():
        tree = extract(roll.REPO, rev, work / "roll" / release, "examples")
        for path, _pipeline in roll.corpus(tree):
            yield Case("roll", release, str(path.relative_to(tree)), path)


def rlinf_cases(work: Path) -> Iterator[Case]:
    for release, (commit, _venv) in rlinf.RELEASES.items():
        root = extract(rlinf.REPO, commit, work / "rlinf" / release, "examples")
        env = {name: str(root / sub) for name, sub in rlinf.ENV_FOLDERS.items()}
        # every example, multi-node ones included: the oracle skips those only because its machine has one node
        for path in rlinf.entry_configs(root):
            yield Case("rlinf", release, str(path.relative_to(root)), path, env=env)


def areal_cases(work: Path) -> Iterator[Case]:
    """Each example config with the entry script AReaL launches it with (which holds its reward, dataset loader and
    workflow), as `python -m areal.launcher.local SCRIPT --config FILE`; alone where no script can be told."""
    for release, (tag, _venv) in areal.RELEASES.items():
        tree = extract(areal.REPO, tag, work / "areal" / release, "examples")
        for rel, path in areal.example_files(tree):
            script = areal_entry_script(tree, path)
            if script is None:
                yield Case("areal", release, rel, path)
            else:
                yield Case("areal", release, rel, Path("python"),
                           ["-m", "areal.launcher.local", str(script.relative_to(tree)), "--config",
                            str(path.relative_to(tree))], cwd=tree)


def areal_entry_script(tree: Path, config: Path) -> Path | None:
    """The script an AReaL example config is launched with, as its examples pair them: the entry script of the same
    name (in its folder or the one above), else the one whose name begins the config's, else its folder's only
    entry script, else, for a GSM8K RL config, the release's GSM8K RL script."""
    def scripts(folder: Path) -> list[Path]:
        return sorted(p for p in folder.glob("*.py") if "load_expr_config(" in p.read_text(errors="replace"))

    here, above = scripts(config.parent), scripts(config.parent.parent)
    stem = config.stem
    same = [p for p in here + above if p.stem == stem]
    if same:
        return same[0]
    prefix = sorted((p for p in here if stem.startswith(p.stem)), key=lambda p: -len(p.stem))
    if prefix:
        return prefix[0]
    if len(here) == 1:
        return here[0]
    if stem.startswith("gsm8k") and "sft" not in stem:
        for name in ("gsm8k_rl.py", "gsm8k_grpo.py"):
            if (tree / "examples" / "math" / name).is_file():
                return tree / "examples" / "math" / name
    return None


def chatlearn_cases(work: Path) -> Iterator[Case]:
    mirror = chatlearn._mirror()
    for release in chatlearn.RELEASES:
        for case in chatlearn.corpus(mirror, release, work / "chatlearn"):
            yield Case("chatlearn", release, case.id, Path(case.file), list(case.overrides))


CORPORA = {"skyrl": (skyrl.REPO, skyrl_cases), "roll": (roll.REPO, roll_cases), "rlinf": (rlinf.REPO, rlinf_cases),
           "areal": (areal.REPO, areal_cases), "chatlearn": (chatlearn.REPO, chatlearn_cases)}


# ---- judging ------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def environ(extra: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# Openings that every refusal of one kind shares, so they say nothing about which reason it is.
_BOILERPLATE = re.compile(r"^(`rlcfg run` refuses |rlcfg cannot run this \w+ config as \w+ would: |role `\w+`: )")
_VALUE = re.compile(r"(` = )(?:\[[^\]]*\]?|\{[^}]*\}?|'[^']*/[^']*')")  # a list, a mapping or a path as the value
_PARENTHESES = re.compile(r" ?\([^()]*\)")


def reason(code: str, message: str, file: Path) -> str:
    """What a refusal is about, without the config's own values, so that the same reason on many files counts once
    per file: its code, the key or subject and the first words, numbers as N, the file's own path as FILE."""
    text = " ".join(message.replace(str(file), "FILE").split())
    text = _BOILERPLATE.sub("", text)
    text = _VALUE.sub(r"\1…", text)
    while _PARENTHESES.search(text):  # innermost first, so nested ones go too
        text = _PARENTHESES.sub("", text)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    # the first clause, past the key (`a.b`: ...) or the subject (the rollout has N GPUs, not ...)
    ends = [i for i in (text.find(mark, start) for mark, start in ((": ", 12), ("; ", 12), (", ", 30), (". ", 30)))
            if i >= 0]
    text = text[:min(ends)] if ends else text
    words = text.split(" ")
    return f"{code} {' '.join(words[:REFUSAL_WORDS])}{' …' if len(words) > REFUSAL_WORDS else ''}"


def judge(case: Case) -> Outcome:
    from rlcfg.diagnostics import Severity
    from rlcfg.preflight import dry_run
    from rlcfg.source.yaml_loader import UsageError

    outcome = Outcome(case)
    here = os.getcwd()
    try:
        if case.cwd is not None:
            os.chdir(case.cwd)
        with environ({**ENV, **case.env}):
            report = dry_run(str(case.path), case.overrides, dialect=case.dialect, release=case.release)
    except UsageError as exc:
        outcome.usage_error = str(exc)
        return outcome
    except Exception as exc:  # noqa: BLE001 - a bug in rlcfg, counted and listed rather than ending the survey
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/rlcfg/" in f.filename]
        where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
        outcome.crash = f"{type(exc).__name__}: {exc}{where}"
        return outcome
    finally:
        os.chdir(here)
    diagnostics = report.result.diagnostics
    outcome.errors = [f"{d.code} {d.path}" for d in diagnostics if d.severity is Severity.ERROR]
    outcome.accepted = report.result.ok
    outcome.clean = outcome.accepted and not any(d.code in ("RLC116", "RLC118") for d in diagnostics)
    outcome.launches = report.launches
    outcome.refusals = [reason(b.code, b.message, case.path) for b in report.blockers]
    outcome.details = [f"{b.code}{' `' + b.key + '`' if b.key else ''}: {b.message}" for b in report.blockers]
    said = {d.code for d in diagnostics}
    outcome.unsaid = [b.code for b in report.blockers if b.code not in said or b.code == "RLC119"]
    return outcome


# ---- the report ---------------------------------------------------------------------------------------------------

COLUMNS = ["files", "usage error", "crashes", "validate accepts", "validate clean", "dry-run passes",
           "out of memory", "contradictions"]


def counts(outcomes: list[Outcome]) -> list[int]:
    return [len(outcomes), sum(bool(o.usage_error) for o in outcomes), sum(bool(o.crash) for o in outcomes),
            sum(o.accepted for o in outcomes), sum(o.clean for o in outcomes), sum(o.launches for o in outcomes),
            sum(o.out_of_memory for o in outcomes), sum(o.contradiction for o in outcomes)]


def table(outcomes: list[Any], columns: list[str] = COLUMNS, count: Callable[[list[Any]], list[int]] = counts) -> str:
    """One row per dialect and release and one per dialect, of `count` over the outcomes (each with a `case`)."""
    lines = ["| dialect | release | " + " | ".join(columns) + " |", "|" + "---|" * (len(columns) + 2)]
    by_dialect: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for o in outcomes:
        by_dialect[o.case.dialect][o.case.release or "-"].append(o)
    for dialect, releases in by_dialect.items():
        for release, mine in releases.items():
            lines.append(f"| {dialect} | {release} | " + " | ".join(map(str, count(mine))) + " |")
        every = [o for mine in releases.values() for o in mine]
        lines.append(f"| **{dialect}** | all | " + " | ".join(f"**{n}**" for n in count(every)) + " |")
    return "\n".join(lines)


def label(o: Outcome) -> str:
    overrides = f" ({len(o.case.overrides)} overrides)" if o.case.overrides else ""
    return f"{o.case.dialect} {o.case.release}: {o.case.name}{overrides}"


def report(outcomes: list[Outcome]) -> str:
    parts = ["# rlcfg run coverage", "", table(outcomes), ""]
    contradictions = [o for o in outcomes if o.contradiction]
    parts += [f"## Contradictions ({len(contradictions)}): validate clean, the dry run refuses", ""]
    grouped: dict[str, list[Outcome]] = defaultdict(list)
    for o in contradictions:
        for why in dict.fromkeys(o.refusals):
            grouped[why].append(o)
    for why, mine in sorted(grouped.items(), key=lambda item: -len(item[1])):
        parts.append(f"### {why} ({len(mine)})")
        for o in mine:
            detail = next(d for d, r in zip(o.details, o.refusals) if r == why)
            parts.append(f"- {label(o)}\n  - {detail}")
        parts.append("")
    short = [o for o in outcomes if o.out_of_memory]
    parts += [f"## Out of memory ({len(short)}): validate clean, the batch does not fit the GPU", ""]
    parts += [f"- {label(o)}\n  - {next(d for d in o.details if d.startswith('RLC500'))}" for o in short] + [""]
    parts += ["## The dry run's refusals, per dialect (files of validate accepts)", ""]
    for dialect in dict.fromkeys(o.case.dialect for o in outcomes):
        tally = Counter(r for o in outcomes if o.case.dialect == dialect for r in dict.fromkeys(o.refusals))
        parts.append(f"### {dialect}")
        parts += [f"- {n} × {why}" for why, n in tally.most_common()] or ["- none"]
        parts.append("")
    parts += ["## One refusal from launching, per dialect (files of validate accepts that the dry run refuses for one "
              "reason only)", ""]
    for dialect in dict.fromkeys(o.case.dialect for o in outcomes):
        # RLC118 names the key and RLC119 the capability behind it: one key refused is one reason.
        alone = Counter(reasons[0] for o in outcomes if o.case.dialect == dialect and o.accepted
                        for reasons in [[r for r in dict.fromkeys(o.refusals) if not r.startswith("RLC119")]
                                        or list(dict.fromkeys(o.refusals))] if len(reasons) == 1)
        parts.append(f"### {dialect}")
        parts += [f"- {n} × {why}" for why, n in alone.most_common()] or ["- none"]
        parts.append("")
    parts += ["## validate's errors, per dialect (files it rejects)", ""]
    for dialect in dict.fromkeys(o.case.dialect for o in outcomes):
        tally = Counter(e.split(" ")[0] for o in outcomes if o.case.dialect == dialect for e in dict.fromkeys(
            e.split(" ")[0] for e in o.errors))
        parts.append(f"- {dialect}: " + (", ".join(f"{code} × {n}" for code, n in tally.most_common()) or "none"))
    parts.append("")
    for title, attribute in (("Usage errors", "usage_error"), ("Crashes (bugs in rlcfg)", "crash")):
        found = [o for o in outcomes if getattr(o, attribute)]
        if found:
            parts += [f"## {title} ({len(found)})", ""]
            parts += [f"- {label(o)}: {getattr(o, attribute)[:300]}" for o in found]
            parts.append("")
    return "\n".join(parts)


def test_validate_clean_configs_launch(mirror_root: Path, tmp_path: Path) -> None:
    outcomes: list[Outcome] = []
    missing = [repo for repo, _cases in CORPORA.values() if not (mirror_root / repo / "repo").is_dir()]
    assert not missing, f"no mirror of {', '.join(missing)} under {mirror_root}"
    for dialect, (_repo, enumerate_cases) in CORPORA.items():
        started = time.monotonic()
        mine = []
        for case in enumerate_cases(tmp_path):
            mine.append(judge(case))
            if len(mine) % 50 == 0:
                print(f"  {dialect}: {len(mine)} files ({time.monotonic() - started:.0f} s)", flush=True)
        outcomes += mine
        print(f"{dialect}: {len(mine)} files in {time.monotonic() - started:.0f} s, "
              f"{sum(o.contradiction for o in mine)} contradictions", flush=True)
    text = report(outcomes)
    out = Path(os.environ.get("RUN_COVERAGE_OUT", "/tmp/run-coverage.md"))
    out.write_text(text)
    print("\n" + text + f"\n(written to {out})")
    bad = [label(o) for o in outcomes if o.contradiction or o.crash]
    assert not bad, f"{len(bad)} configs validate clean (or crash rlcfg) and the dry run refuses them; see {out}"
