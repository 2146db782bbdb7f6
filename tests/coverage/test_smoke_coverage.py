"""Smoke coverage (issue 25): does `rlcfg run --smoke --steps 2` exit 0 on every framework example config that
validates and is not a pipeline rlcfg does not run (RLC116)?

The corpus is the run-coverage suite's (test_run_coverage.CORPORA): the frameworks' example configs and launch
scripts at the releases rlcfg claims. A config that `validate` accepts without RLC116 is smoke-run as a user would
run it, through the CLI in its own process and folder, with the config's own overrides. RLC118 configs are in:
`--smoke` sets each refused setting to the value rlcfg runs and lists it.

Per dialect and release it prints: files, eligible (accepted, no RLC116), distinct runs, smoke runs that exit 0, and
failures. A failure is listed with its exit code and the last lines it printed; the test fails on any.

Each eligible config is first prepared in this process the way `rlcfg run --smoke` prepares it (the refused settings
set to values rlcfg runs, the lowering, the smoke substitutions, the tiny model and data built): a failure there is a
failure of that config. Configs whose smoke Experiment is the same, up to the labels that only name things (the run's
name, folders, the config keys quoted in messages), make the same run; by default one of each such group is run
through the CLI and its exit code is every member's, so the table also gives how many distinct runs were made.
SMOKE_EVERY=1 runs every config instead (hours). Runs take 20-60 s each, mostly waiting on Ray to start and stop, so
they run SMOKE_JOBS at a time (default 3 on this project's 2-core machines). SMOKE_DIALECTS (comma-separated)
restricts the dialects.

Run: MIRROR_ROOT=/work/.mirror python -m pytest -m smoke_coverage tests/coverage -s -q
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.coverage.test_run_coverage import CORPORA, ENV, Case, environ, table

STEPS = 2
TIMEOUT_S = 900  # a smoke run's whole life, the first one's model warm start included
TAIL_LINES = 6
SMOKE_JOBS = int(os.environ.get("SMOKE_JOBS", "3"))
EVERY = os.environ.get("SMOKE_EVERY") == "1"


@dataclass
class Outcome:
    case: Case
    eligible: bool = False
    exit_code: int | None = None  # None: not run (not eligible), or killed at the timeout
    seconds: float = 0.0
    tail: str = ""
    run_by: str = ""  # the config whose identical smoke run stands for this one's
    ran: bool = False  # it was smoke-run itself, through the CLI

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


# Experiment fields that label rather than decide what runs.
LABELS = frozenset({"name", "section", "keys", "directory", "project", "run_name"})


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name not in LABELS}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value if value is None or isinstance(value, (bool, int, float, str)) else repr(value)


def prepare(case: Case) -> tuple[str | None, str]:
    """What `rlcfg run --smoke` does before Ray starts, in this process: (the smoke Experiment's fingerprint, "") or
    (None, the end of what it printed) when it stops there."""
    import typer

    from rlcfg.cli.run import _smoke
    from rlcfg.runtime.backends import MEGATRON_ON_CPU_ENV

    printed = io.StringIO()
    megatron_on_cpu = os.environ.get(MEGATRON_ON_CPU_ENV)
    with environ({**ENV, **case.env}):
        try:
            with contextlib.redirect_stderr(printed), contextlib.redirect_stdout(printed):
                experiment = _smoke(str(case.path), case.overrides, case.dialect, case.release)
        except typer.Exit as stop:
            lines = printed.getvalue().splitlines()
            return None, f"(exit {stop.exit_code} before the run)\n" + "\n".join(lines[-TAIL_LINES:])
        finally:  # the CLI sets it for its own workers; the next config's run must not inherit it from here
            if megatron_on_cpu is None:
                os.environ.pop(MEGATRON_ON_CPU_ENV, None)
    text = json.dumps(_plain(experiment), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest(), ""


def eligible(case: Case) -> bool:
    from rlcfg.frontend import check_file
    from rlcfg.source.yaml_loader import UsageError

    with environ({**ENV, **case.env}):
        try:
            result = check_file(str(case.path), case.overrides, dialect=case.dialect, release=case.release)
        except UsageError:
            return False
    return result.ok and not any(d.code == "RLC116" for d in result.diagnostics)


def command(case: Case, output: Path) -> list[str]:
    return [sys.executable, "-m", "rlcfg", "run", str(case.path), *case.overrides, "--dialect", case.dialect,
            *(["--framework-version", case.release] if case.release else []), "--smoke", "--steps", str(STEPS),
            "--output", str(output)]


def smoke(case: Case, folder: Path) -> Outcome:
    folder.mkdir(parents=True)
    argv = command(case, folder / "run")
    started = time.monotonic()
    env = {**os.environ, **ENV, **case.env}
    with open(folder / "log", "w") as log:
        log.write(shlex.join(argv) + "\n")
        log.flush()
        try:
            code: int | None = subprocess.run(argv, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, timeout=TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            code = None
    lines = (folder / "log").read_text(errors="replace").splitlines()
    tail = "\n".join(lines[-TAIL_LINES:]) if code != 0 else ""
    if code is None:
        tail = f"(killed after {TIMEOUT_S} s)\n{tail}"
    return Outcome(case, True, code, time.monotonic() - started, tail, ran=True)


COLUMNS = ["files", "eligible", "distinct runs", "smoke exits 0", "failures"]


def counts(outcomes: list[Outcome]) -> list[int]:
    chosen = [o for o in outcomes if o.eligible]
    return [len(outcomes), len(chosen), sum(o.ran for o in chosen), sum(o.passed for o in chosen),
            sum(not o.passed for o in chosen)]


def report(outcomes: list[Outcome], elapsed: float) -> str:
    chosen = [o for o in outcomes if o.eligible]
    ran = [o for o in chosen if o.ran]
    failures = [o for o in chosen if not o.passed]
    parts = ["# rlcfg smoke coverage", "", f"`rlcfg run --smoke --steps {STEPS}` on {len(chosen)} configs: {len(ran)} "
             f"distinct runs in {elapsed / 60:.0f} min ({SMOKE_JOBS} at a time), median run "
             f"{sorted(o.seconds for o in ran)[len(ran) // 2] if ran else 0:.0f} s", "",
             table(outcomes, COLUMNS, counts), "",
             f"## Failures ({len(failures)})", ""]
    for o in failures:
        overrides = f" ({len(o.case.overrides)} overrides)" if o.case.overrides else ""
        shared = f" (the run of {o.run_by})" if o.run_by else ""
        parts.append(f"- {o.case.dialect} {o.case.release}: {o.case.name}{overrides}: exit {o.exit_code}{shared}")
        parts += [f"    {line}" for line in o.tail.splitlines()]
    return "\n".join(parts) + "\n"


def test_every_eligible_config_smoke_runs(mirror_root: Path, tmp_path: Path) -> None:
    missing = [repo for repo, _cases in CORPORA.values() if not (mirror_root / repo / "repo").is_dir()]
    assert not missing, f"no mirror of {', '.join(missing)} under {mirror_root}"
    only = {d for d in os.environ.get("SMOKE_DIALECTS", "").split(",") if d}
    outcomes: list[Outcome] = []
    for dialect, (_repo, enumerate_cases) in CORPORA.items():
        if not only or dialect in only:
            outcomes += [Outcome(case, eligible(case)) for case in enumerate_cases(tmp_path / "corpus")]
    eligible_ones = [i for i, o in enumerate(outcomes) if o.eligible]
    started = time.monotonic()
    # One run per distinct smoke Experiment (every config with SMOKE_EVERY=1); the others share its outcome.
    first_of: dict[str, int] = {}
    stand_in: dict[int, int] = {}
    to_run: list[int] = []
    for i in eligible_ones:
        fingerprint, stopped = prepare(outcomes[i].case)
        if fingerprint is None:
            outcomes[i] = Outcome(outcomes[i].case, True, 1, 0.0, stopped)
        elif fingerprint in first_of and not EVERY:
            stand_in[i] = first_of[fingerprint]
        else:
            first_of.setdefault(fingerprint, i)
            to_run.append(i)
    print(f"{len(eligible_ones)} of {len(outcomes)} configs are eligible; prepared in "
          f"{time.monotonic() - started:.0f} s; smoke-running {len(to_run)} distinct runs {SMOKE_JOBS} at a time", flush=True)
    done: dict[int, Outcome] = {}
    with ThreadPoolExecutor(SMOKE_JOBS) as pool:
        futures = {pool.submit(smoke, outcomes[i].case, tmp_path / "runs" / f"{i:04d}"): i for i in to_run}
        for future in as_completed(futures):
            outcome = outcomes[futures[future]] = done[futures[future]] = future.result()
            if not outcome.passed:
                print(f"  FAILED {outcome.case.dialect} {outcome.case.release} {outcome.case.name}: exit "
                      f"{outcome.exit_code}", flush=True)
            if len(done) % 20 == 0:
                print(f"  {len(done)}/{len(to_run)} runs ({time.monotonic() - started:.0f} s, "
                      f"{sum(not o.passed for o in done.values())} failed)", flush=True)
    for i, j in stand_in.items():
        ran = outcomes[j]
        outcomes[i] = Outcome(outcomes[i].case, True, ran.exit_code, 0.0, ran.tail,
                              f"{ran.case.dialect} {ran.case.release}: {ran.case.name}")
    text = report(outcomes, time.monotonic() - started)
    out = Path(os.environ.get("SMOKE_COVERAGE_OUT", "/tmp/smoke-coverage.md"))
    out.write_text(text)
    print("\n" + text + f"\n(written to {out}; each run's folder and log under {tmp_path / 'runs'})")
    failed = [o for o in outcomes if o.eligible and not o.passed]
    assert not failed, f"{len(failed)} eligible configs fail `rlcfg run --smoke`; see {out}"
