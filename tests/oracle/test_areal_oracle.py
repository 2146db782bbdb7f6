"""AReaL: rlcfg's verdict against AReaL's own loader, on AReaL's example configs at v0.3.4, v0.4.1, v0.5.3 and v1.0.4
and on mutations of them.

The loader is what every AReaL training script runs first: `load_expr_config(["--config", F], <Class>)` (Hydra
compose, merge into `OmegaConf.structured(<Class>)`, `to_object`, the dataclasses' `__post_init__`), then what the
script does next with the placement: v0.3 parses `allocation_mode` (AllocationMode.from_str), 1.0's trainer parses
each engine's `backend` (ModelAllocation.from_str; ref only when actor.kl_ctl > 0). The ray/slurm launchers' own
cluster check is not part of it: the examples run under the local launcher.

One process per release loads every case (AReaL's imports take seconds), inside the oracle sandbox, with the
release's venv from ../shared/oracle (areal034 with the v0.3.4 or v0.4.1 tree on PYTHONPATH; areal104 with the
v0.5.3 or v1.0.4 tree; v0.5.3's one Python 3.12 signature made 3.11's, PY311). Each example is loaded
with the class its script uses (CLASSES). Run: MIRROR_ROOT=/work/.mirror python -m pytest -m oracle -s
tests/oracle/test_areal_oracle.py
"""

from __future__ import annotations

import functools

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from rlcfg.diagnostics import Severity
from rlcfg.frontend import check_file
from tests.oracle.common import Agreement

REPO = "inclusionAI+AReaL"
RELEASES = {"0.3": ("v0.3.4", "areal034"), "0.4": ("v0.4.1", "areal034"), "0.5": ("v0.5.3", "areal104"),
            "1.0": ("v1.0.4", "areal104")}
# What an older Python needs changed in a release's tree to import its config classes: 0.5 asks for Python 3.12 for
# one generic function's signature, whose type parameter is made an ordinary TypeVar (nothing else changes).
PY311 = {"0.5": [("areal/api/cli_args.py", "def load_expr_config[ConfigT](",
                  'ConfigT = __import__("typing").TypeVar("ConfigT")\n\n\ndef load_expr_config(')]}

# Example file (relative to examples/) -> the config class its training script loads it with. Files not listed use
# GRPOConfig. A "<file>.py:Class" entry is imported from the extracted tree.
CLASSES = {
    "0.3": {
        "alignment/hhrlhf_rw.yaml": "areal.api.cli_args:RWConfig",
        "experimental/configs/gsm8k_sft_megatron.yaml": "areal.api.cli_args:SFTConfig",
        "math/gsm8k_ppo.yaml": "areal.api.cli_args:PPOConfig",
        "math/gsm8k_sft.yaml": "areal.api.cli_args:SFTConfig",
        "vlm/clevr_count_70k_sft.yaml": "areal.api.cli_args:SFTConfig",
        "multi-turn-math/config.yaml": "examples/multi-turn-math/train.py:AgentRLConfig",
        "search-agent/tongyi_deepresearch/config.yaml": "examples/search-agent/tongyi_deepresearch/train.py:AgentRLConfig",
        "tir/tir_math_config.yaml": "examples/tir/tir_workflow.py:TIRGRPOConfig",
    },
    "0.4": {
        "alignment/hhrlhf_rw.yaml": "areal.api.cli_args:RWConfig",
        "math/gsm8k_ppo.yaml": "areal.api.cli_args:PPOConfig",
        "math/gsm8k_sft.yaml": "areal.api.cli_args:SFTConfig",
        "math/gsm8k_sft_megatron.yaml": "areal.api.cli_args:SFTConfig",
        "vlm/clevr_count_70k_sft.yaml": "areal.api.cli_args:SFTConfig",
        "camel/config.yaml": "examples/camel/train.py:AgentRLConfig",
        "multi-turn-math/config.yaml": "examples/multi-turn-math/train.py:AgentRLConfig",
        "openai-agents/config.yaml": "examples/openai-agents/train_agents.py:AgentRLConfig",
        "search-agent/tongyi_deepresearch/config.yaml": "examples/search-agent/tongyi_deepresearch/train.py:AgentRLConfig",
        "tir/tir_math_config.yaml": "examples/tir/tir_workflow.py:TIRGRPOConfig",
    },
    "0.5": {
        "alignment/hhrlhf_rw.yaml": "areal.api.cli_args:RWConfig",
        "math/gsm8k_ppo.yaml": "areal.api.cli_args:PPOConfig",
        "math/gsm8k_ppo_megatron.yaml": "areal.api.cli_args:PPOConfig",
        "math/gsm8k_sft.yaml": "areal.api.cli_args:SFTConfig",
        "vlm/clevr_count_70k_sft.yaml": "areal.api.cli_args:SFTConfig",
        "camel/config.yaml": "examples/camel/train.py:AgentRLConfig",
        "experimental/proxy/config.yaml": "examples/experimental/proxy/configs.py:AgentConfig",
        "multi_turn_math/gsm8k_grpo_mt.yaml": "examples/multi_turn_math/gsm8k_rl_mt.py:MultiTurnGRPOConfig",
        "openai_agents/config.yaml": "examples/openai_agents/train_agents.py:AgentRLConfig",
        "search_agent/tongyi_deepresearch/config.yaml": "examples/search_agent/tongyi_deepresearch/train.py:AgentRLConfig",
        "tir/tir_math_config.yaml": "examples/tir/tir_workflow.py:TIRGRPOConfig",
    },
    "1.0": {
        "agent_workflow/config.yaml": "examples/agent_workflow/configs.py:AgentConfig",
        "agent_workflow/config_claude.yaml": "examples/agent_workflow/configs.py:AgentConfig",
        "alignment/hhrlhf_dpo.yaml": "areal.api.cli_args:DPOConfig",
        "alignment/hhrlhf_rw.yaml": "areal.api.cli_args:RWConfig",
        "camel/config.yaml": "examples/camel/train.py:AgentRLConfig",
        "experimental/inference_service/online_rollout.yaml": "areal.api.cli_args:PPOConfig",
        "experimental/inference_service/tau2_rollout.yaml":
            "examples/experimental/inference_service/tau2_rollout.py:Tau2GatewayRolloutConfig",
        "math/gsm8k_sft.yaml": "areal.api.cli_args:SFTConfig",
        "math/gsm8k_sft_archon_fp8.yaml": "areal.api.cli_args:SFTConfig",
        "vlm/clevr_count_70k_sft.yaml": "areal.api.cli_args:SFTConfig",
        "multi_turn_math/gsm8k_grpo_mt.yaml": "examples/multi_turn_math/config.py:MultiTurnGRPOConfig",
        "openai_agents/config.yaml": "examples/openai_agents/config.py:AgentRLConfig",
        "openclaw/config.yaml": "areal.api.cli_args:PPOConfig",
        "search_agent/tongyi_deepresearch/config.yaml": "examples/search_agent/tongyi_deepresearch/config.py:AgentRLConfig",
        "tau2/config_1.7b_airline.yaml": "examples/tau2/utils.py:Tau2PPOConfig",
        "tau2/config_235b_moe_airline.yaml": "examples/tau2/utils.py:Tau2PPOConfig",
        "tau2/config_30b_moe_airline.yaml": "examples/tau2/utils.py:Tau2PPOConfig",
        "tau2/config_8b_airline.yaml": "examples/tau2/utils.py:Tau2PPOConfig",
        "terminal_bench/config_tb_sglang.yaml": "examples/terminal_bench/agent_rl_config.py:AgentRLConfig",
        "terminal_bench/config_tb_vllm_npu.yaml": "examples/terminal_bench/agent_rl_config.py:AgentRLConfig",
        "tir/tir_math_config.yaml": "examples/tir/tir_workflow.py:TIRGRPOConfig",
    },
}
# Not AReaL experiment configs: SkyPilot task files, and a reference list of environment variables.
# search-agent/local_1.5b_example.yaml belongs to a training script outside the repository (ASearcher), whose config
# class adds `max_turns`: there is no class here to load it with.
SKIP = {"skypilot/ray_cluster.sky.yaml", "skypilot/single_node.sky.yaml", "environ_ref.yaml",
        "search-agent/local_1.5b_example.yaml", "search_agent/local_1.5b_example.yaml"}

# Where rlcfg is knowingly stricter than the loader: (release, example or mutation id) -> why. Each such rlcfg
# message says "AReaL accepts this at load but fails ...".
STRICTER: dict[tuple[str, str], str] = {
    # v0.3.4 checks adv_norm.mean_level only when the actor builds its normalizer (areal/utils/data.py), after
    # load; rlcfg's Literal type reports it up front (its RLC202 message is the generic one).
    ("0.3", "mut:enum-adv-norm"): "v0.3.4 raises when the actor builds its normalizer",
    ("0.4", "mut:enum-adv-norm"): "v0.4.1 raises when the actor builds its normalizer",
    ("0.5", "mut:enum-adv-norm"): "v0.5.3 raises when the actor builds its normalizer",
}

# The batch driver run inside the oracle sandbox with the release's venv: one JSON line in, one out, per case.
DRIVER = r'''
import importlib, importlib.util, json, os, sys
os.environ.setdefault("RANK", "1")
from areal.api.cli_args import load_expr_config
try:
    from areal.api.alloc_mode import AllocationMode
except ImportError:
    AllocationMode = None
try:
    from areal.api.alloc_mode import ModelAllocation
except ImportError:
    ModelAllocation = None
_cache = {}
def load_cls(spec, root):
    if spec in _cache: return _cache[spec]
    m, c = spec.rsplit(":", 1)
    if m.endswith(".py"):
        path = os.path.join(root, m); sys.path.insert(0, os.path.dirname(path))
        s = importlib.util.spec_from_file_location(f"oracle_mod_{len(_cache)}", path)
        mod = importlib.util.module_from_spec(s); sys.modules[s.name] = mod; s.loader.exec_module(mod)
    else:
        mod = importlib.import_module(m)
    _cache[spec] = getattr(mod, c); return _cache[spec]
for line in sys.stdin:
    case = json.loads(line)
    stage = "import"
    try:
        Cls = load_cls(case["cls"], case["root"])
        stage = "load_expr_config"
        cfg, _ = load_expr_config(["--config", case["path"], *case.get("overrides", [])], Cls)
        placed = False  # by the engines' backends (1.0); otherwise by allocation_mode, as 0.3 to 0.5 place them
        if ModelAllocation is not None:
            stage = "ModelAllocation.from_str(backend)"
            for name in ("actor", "rollout", "ref", "critic"):
                eng = getattr(cfg, name, None)
                if eng is None or not isinstance(getattr(eng, "backend", None), str) or ":" not in eng.backend:
                    continue
                placed = True
                if name == "ref" and not (getattr(cfg.actor, "kl_ctl", 0) > 0): continue
                ModelAllocation.from_str(eng.backend, name=name)
        if not placed and AllocationMode is not None and getattr(cfg, "allocation_mode", ""):
            stage = "AllocationMode.from_str(allocation_mode)"
            AllocationMode.from_str(cfg.allocation_mode)
        out = dict(id=case["id"], verdict="ACCEPT", stage=stage, error="")
    except BaseException as e:  # noqa
        if isinstance(e, KeyboardInterrupt): raise
        verdict = "FAILED" if stage == "import" else "REJECT"
        out = dict(id=case["id"], verdict=verdict, stage=stage, error=f"{type(e).__name__}: {' '.join(str(e).split())[:300]}")
    print("@@RESULT " + json.dumps(out), flush=True)
'''


def _home() -> Path:
    return Path(os.environ.get("ORACLE_HOME", "/tmp/oracle"))


def _tree(oracle_dir: Path, release: str) -> Path:
    """The framework tree at the release's tag, where the oracle can see it (under ORACLE_HOME)."""
    tag = RELEASES[release][0]
    git_dir = Path(os.environ["MIRROR_ROOT"]) / REPO / "repo"
    commit = subprocess.run(["git", f"--git-dir={git_dir}", "rev-parse", f"{tag}^{{commit}}"], capture_output=True,
                            text=True, check=True).stdout.strip()
    dest = _home() / "trees" / REPO / commit[:12]
    if not (dest / "examples").is_dir():
        subprocess.run([sys.executable, str(oracle_dir / "extract_tree.py"), str(git_dir), commit, str(dest)],
                       check=True, capture_output=True)
    for file, old, new in PY311.get(release, []):
        text = (dest / file).read_text()
        if old in text:
            (dest / file).write_text(text.replace(old, new))
    return dest


def _run_loader(oracle_dir: Path, release: str, tree: Path, cases: list[dict]) -> dict[str, dict]:
    venv_name = RELEASES[release][1]
    env = dict(os.environ, ORACLE_HOME=str(_home()))
    venv = subprocess.run(["bash", "-c", f". {oracle_dir}/common.sh; ensure_venv {venv_name}"], capture_output=True,
                          text=True, env=env, check=True).stdout.strip().splitlines()[-1]
    run_dir = _home() / "run" / f"areal-oracle-{release}"
    run_dir.mkdir(parents=True, exist_ok=True)
    driver = run_dir / "driver.py"
    driver.write_text(DRIVER)
    # AReaL runs from the release's own tree, ahead of the venv's copy: areal034 has none, and the areal==1.0.4
    # wheel in areal104 was built from a later commit than the v1.0.4 tag (its TeacherConfig differs).
    pythonpath = [str(tree), str(oracle_dir / "stubs" / "areal")]
    env.update(PYTHONPATH=":".join(pythonpath), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", WANDB_MODE="disabled")
    proc = subprocess.run([str(oracle_dir / "sandbox.sh"), f"{venv}/bin/python", "-W", "ignore", str(driver)],
                          input="".join(json.dumps(c) + "\n" for c in cases), capture_output=True, text=True,
                          env=env, cwd=run_dir, timeout=1800)
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("@@RESULT "):
            found = json.loads(line[len("@@RESULT "):])
            out[found["id"]] = found
    return out


def _shim(tree: Path, spec: str, out_dir: Path) -> str:
    """An example script's config class, without the script: its training code imports packages the oracle venv
    lacks (torchdata, tau2, ...), so the class and the dataclasses it uses are copied out of the script's source
    (ast, unchanged text) into a small module that imports only AReaL's cli_args."""
    import ast

    module, name = spec.rsplit(":", 1)
    if not module.endswith(".py"):
        return spec
    source = (tree / module).read_text()
    parsed = ast.parse(source)
    classes = {node.name: node for node in parsed.body if isinstance(node, ast.ClassDef)}
    wanted, todo = [], [name]
    while todo:
        current = todo.pop()
        if current in wanted or current not in classes:
            continue
        wanted.append(current)
        todo.extend(n.id for n in ast.walk(classes[current]) if isinstance(n, ast.Name) and n.id in classes)
    lines = source.splitlines()
    decorated = ["\n".join(lines[min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1:node.end_lineno])
                 for node in parsed.body if isinstance(node, ast.ClassDef) and node.name in wanted]
    header = ("from __future__ import annotations\nimport dataclasses\nfrom dataclasses import dataclass, field\n"
              "from typing import *\nfrom areal.api.cli_args import *\n\n")
    out_dir.mkdir(parents=True, exist_ok=True)
    shim = out_dir / (module.replace("/", "__"))
    shim.write_text(header + "\n\n".join(decorated) + "\n")
    return f"{shim}:{name}"


def _rlcfg(path: Path, release: str, overrides=()) -> tuple[bool, str]:
    result = check_file(str(path), list(overrides), dialect="areal", release=release)
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    return not errors, "; ".join(f"{d.code} {d.path}: {d.message}" for d in errors[:3])


def _all_late(path: Path, release: str) -> bool:
    """Whether every error rlcfg reports says that AReaL accepts the value at load and fails later: a knowingly
    stricter verdict, as in the other differential suites."""
    result = check_file(str(path), [], dialect="areal", release=release)
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    return bool(errors) and all("accepts this at load but fails" in d.message for d in errors)


def _yaml() -> YAML:
    yaml = YAML()
    yaml.preserve_quotes = True
    return yaml


def _set(data: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        data = data[part]
    data[last] = value


def _mutations(tree: Path, release: str, out_dir: Path) -> list[tuple[str, Path, str, str]]:
    """(id, file, class, what) of mutated copies of a GRPO and an SFT example."""
    out_dir.mkdir(parents=True, exist_ok=True)
    found = []

    def write(name: str, base: str, cls: str, change) -> None:
        data = _yaml().load((tree / "examples" / base).read_text())
        change(data)
        path = out_dir / f"{name}.yaml"
        with path.open("w") as handle:
            _yaml().dump(data, handle)
        found.append((f"mut:{name}", path, cls, name))

    grpo, sft = "math/gsm8k_grpo.yaml", "math/gsm8k_sft.yaml"
    grpo_cls, sft_cls = "areal.api.cli_args:GRPOConfig", "areal.api.cli_args:SFTConfig"
    trained = "model" if release in ("0.3", "0.4") else "actor"  # SFT's engine: 0.5 renamed it

    def typo(d):
        d["actor"]["kl_clt"] = d["actor"].pop("kl_ctl", 0.0)

    def wrong_type(d):
        d["gconfig"]["n_samples"] = "four"

    def wrong_type_float(d):
        d["train_dataset"]["batch_size"] = 2.5

    def delete_required(d):
        del d["experiment_name"]

    def delete_nested_required(d):
        del d["actor"]["experiment_name"]

    def bad_enum_norm(d):
        d["actor"]["adv_norm"] = {"mean_level": "global", "std_level": "batch"}

    def bad_total_epochs(d):
        d["total_train_epochs"] = 0

    def sft_typo(d):
        d[trained]["pathh"] = d[trained].get("path", "x")

    def sft_unknown_top(d):
        d["gconfig"] = {"n_samples": 2}

    # The kinds every differential suite covers: a value the loader coerces (OmegaConf converts a quoted number or
    # boolean to the field's type), boundary values, a key written in a sibling section, an enum value's case, a
    # null where a value or a section is expected, and settings that contradict each other. Each sets one key.
    for name, dotted, value in (("coerced-int", "gconfig.n_samples", "4"),
                                ("coerced-bool", "actor.recompute_logprob", "true"),
                                ("coerced-float", "actor.optimizer.lr", 1),
                                ("zero-samples", "gconfig.n_samples", 0),
                                ("zero-minibatches", "actor.ppo_n_minibatches", 0),
                                ("sibling-key", "actor.n_samples", 4),
                                ("enum-case", "actor.optimizer.type", "Adam"),
                                ("null-value", "gconfig.max_new_tokens", None),
                                ("null-section", "actor.optimizer", None),
                                ("greedy-and-temperature", "gconfig.greedy", True)):
        write(name, grpo, grpo_cls, functools.partial(_set, dotted=dotted, value=value))
    write("typo-kl", grpo, grpo_cls, typo)
    write("type-n-samples", grpo, grpo_cls, wrong_type)
    write("type-batch-size", grpo, grpo_cls, wrong_type_float)
    write("delete-experiment-name", grpo, grpo_cls, delete_required)
    write("delete-actor-experiment-name", grpo, grpo_cls, delete_nested_required)
    write("enum-adv-norm", grpo, grpo_cls, bad_enum_norm)
    write("zero-epochs", grpo, grpo_cls, bad_total_epochs)
    write("sft-typo", sft, sft_cls, sft_typo)
    write("sft-gconfig", sft, sft_cls, sft_unknown_top)
    if release != "1.0":  # the releases placed by allocation_mode
        def launcher_ok(d):
            d["launcher"] = {"trainer_cpus_per_gpu": 8}

        def v1_backend_key(d):
            d["actor"]["rejection_sampling"] = {"level": "token", "action": "mask", "metric": "ratio", "upper": 5.0}

        def bad_allocation(d):
            d["allocation_mode"] = "sglang.d4p1t1+d4x1t1"

        def no_ref(d):
            d.pop("ref", None)

        def behave_cap(d):
            d["actor"]["behave_imp_weight_cap"] = 5.0

        write("launcher", grpo, grpo_cls, launcher_ok)
        write("v1-rejection-sampling", grpo, grpo_cls, v1_backend_key)
        write("bad-allocation", grpo, grpo_cls, bad_allocation)
        write("no-ref", grpo, grpo_cls, no_ref)
        write("behave-cap", grpo, grpo_cls, behave_cap)
    else:
        def launcher(d):
            d["launcher"] = {"trainer_cpus_per_gpu": 8}

        def behav_cap(d):
            d["actor"]["behav_imp_weight_cap"] = 5.0

        def behave_cap(d):
            d["actor"]["behave_imp_weight_cap"] = 5.0

        def group_size(d):
            d["actor"]["group_size"] = 4

        def async_training(d):
            d["async_training"] = True

        def recover_fault(d):
            d.setdefault("recover", {})["mode"] = "fault"

        def bad_backend(d):
            d["actor"]["backend"] = "fsdp:d4x1t1"

        def rs_ratio(d):
            d["actor"]["use_decoupled_loss"] = True
            d["actor"]["rejection_sampling"] = {"level": "token", "action": "mask", "metric": "ratio", "upper": 0.5}

        def sapo_decoupled(d):
            d["actor"]["use_sapo_loss"] = True
            d["actor"]["use_decoupled_loss"] = True

        def bad_megatron_key(d):
            d["actor"]["megatron"] = {"virtual_pipeline_size": 2}

        def cpu_cluster(d):
            d["cluster"]["n_gpus_per_node"] = 0

        def eps_zero(d):
            d["actor"]["eps_clip"] = 0.0

        def underscore_name(d):
            d["experiment_name"] = "gsm8k_grpo"

        def no_ref_kl0(d):
            d["actor"]["kl_ctl"] = 0.0

        write("launcher", grpo, grpo_cls, launcher)
        write("behav-cap", grpo, grpo_cls, behav_cap)
        write("behave-cap", grpo, grpo_cls, behave_cap)
        write("group-size", grpo, grpo_cls, group_size)
        write("async-training", grpo, grpo_cls, async_training)
        write("recover-fault", grpo, grpo_cls, recover_fault)
        write("bad-backend", grpo, grpo_cls, bad_backend)
        write("rs-ratio-upper", grpo, grpo_cls, rs_ratio)
        write("sapo-decoupled", grpo, grpo_cls, sapo_decoupled)
        write("megatron-typo", grpo, grpo_cls, bad_megatron_key)
        write("cpu-cluster", grpo, grpo_cls, cpu_cluster)
        write("eps-clip-zero", grpo, grpo_cls, eps_zero)
        write("underscore-name", grpo, grpo_cls, underscore_name)
        write("kl-zero", grpo, grpo_cls, no_ref_kl0)

        def no_rollout_backend(d):
            del d["rollout"]["backend"]

        def sft_in_grpo_layout(d):
            d["actor"]["pathh"] = "x"

        write("delete-rollout-backend", grpo, grpo_cls, no_rollout_backend)
    return found


def example_files(tree: Path) -> list[tuple[str, Path]]:
    """(path relative to examples/, file) of every AReaL experiment config in a release's tree; also the corpus of
    tests/coverage."""
    examples = tree / "examples"
    found = ((str(path.relative_to(examples)), path) for path in sorted(examples.rglob("*.yaml")))
    return [(rel, path) for rel, path in found if rel not in SKIP]


def _agreement(oracle_dir: Path) -> Agreement:
    agreement = Agreement()
    agreement.causes = []  # (corpus, id, rlcfg's errors, the loader's error) of the files both reject
    agreement.stricter = []  # (corpus, id, why) of the knowingly stricter verdicts counted as agreement
    for release in RELEASES:
        tree = _tree(oracle_dir, release)
        cases, local = [], {}
        for rel, path in example_files(tree):
            cls = _shim(tree, CLASSES[release].get(rel, "areal.api.cli_args:GRPOConfig"),
                        _home() / "run" / f"areal-shims-{release}")
            cases.append(dict(id=rel, path=str(path), cls=cls, root=str(tree)))
            local[rel] = ("examples", path)
        for ident, path, cls, _what in _mutations(tree, release, _home() / "run" / f"areal-mutations-{release}"):
            cases.append(dict(id=ident, path=str(path), cls=cls, root=str(tree)))
            local[ident] = ("mutations", path)
        verdicts = _run_loader(oracle_dir, release, tree, cases)
        for case in cases:
            corpus, path = local[case["id"]]
            found = verdicts.get(case["id"])
            oracle_ok = None if found is None or found["verdict"] == "FAILED" else found["verdict"] == "ACCEPT"
            ok, why = _rlcfg(path, release)
            if not ok and oracle_ok and ((release, case["id"]) in STRICTER or _all_late(path, release)):
                ok = True  # knowingly stricter, counted as agreement (see STRICTER)
                agreement.stricter.append((f"AReaL {release} {corpus}", case["id"],
                                           STRICTER.get((release, case["id"]), "every error says when AReaL fails")))
            detail = f"rlcfg: {why or 'accepts'} | loader: {found['error'] if found else 'no answer'}"
            if not ok and oracle_ok is False:
                agreement.causes.append((f"AReaL {release} {corpus}", case["id"], why, found["error"]))
            agreement.add(f"AReaL {release} {corpus}", case["id"], ok, oracle_ok, detail)
    return agreement


@pytest.fixture(scope="module")
def agreement(oracle_dir):
    return _agreement(oracle_dir)


def test_rlcfg_agrees_with_areals_loader(agreement):
    print()
    print(agreement.table())
    print("knowingly stricter (counted as agreement):")
    for corpus, name, why in agreement.stricter:
        print(f"- {corpus} {name}: {why}")
    print("both reject (rlcfg's first errors | the loader's):")
    for corpus, name, mine, theirs in agreement.causes:
        print(f"- {corpus} {name}\n    rlcfg:  {mine[:200]}\n    loader: {theirs[:200]}")
    for corpus, name, what, detail in agreement.disagreements:
        print(f"- {corpus} {name}: {what}\n    {detail}")
    assert not agreement.disagreements


def test_stricter_rules_say_so(oracle_dir):
    """Every knowingly stricter verdict names the failure AReaL meets after load."""
    for (release, ident), _why in STRICTER.items():
        if ident.startswith("mut:"):
            continue
        tree = _tree(oracle_dir, release)
        result = check_file(str(tree / "examples" / ident), [], dialect="areal", release=release)
        errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
        assert errors and all("AReaL accepts this at load but fails" in d.message for d in errors), ident
