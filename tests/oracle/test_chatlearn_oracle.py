"""Differential tests: rlcfg's ChatLearn verdicts against ChatLearn's own loader, at each release rlcfg claims.

The corpus is ChatLearn's own: `template/grpo_fsdp.yaml` and `template/grpo_megatron.yaml` alone, and every
`scripts/**/*.sh` launch script, read as the template it names plus the dotlist overrides it passes (shell variables
expanded: paths become placeholders, `${num_device}` is one node of 8 GPUs). Mutations of the corpus add a typo'd
key, a wrong type, a broken divisibility, a bad enum value and a deleted required key.

The oracle is ChatLearn's launcher (`ChatlearnLauncher._run_algorithm`: Hydra compose of GrpoConfig, OmegaConf
merge, `to_object` with every `__post_init__`, `GrpoAlgorithm(cfg)`, `validate()`) from the shared oracle set-up
(`$ORACLE_HOME/venv/chatlearn`, sources under `$ORACLE_HOME/src/chatlearn{,_v120}`; `run_chatlearn.sh` builds them
the first time). To judge hundreds of files in one process, the driver below imports ChatLearn once and calls the
launcher per file, as chatlearn_oracle.py does per process. Two departures, both for configs ChatLearn cannot load
on a machine without Megatron-LM and the model's checkpoint:
- megatron-core is not installed, so ChatLearn's Megatron config classes are imported with two import-only stand-ins
  (Megatron's `moe_freq_type` and `AttnBackend`), and `update_cfg` (which fills `megatron_model_cfg` from the model's
  Hugging Face config.json) is skipped;
- ChatLearn 1.2.0's entrypoint crashes before loading when no `key=value` override is given (it unpacks an empty
  list); a file given alone is passed one override that restates its own `runtime_args.exp_name`.

Marked `oracle` (kept out of CI); skipped unless MIRROR_ROOT is set and the oracle venv exists. Run:

    MIRROR_ROOT=/work/.mirror ORACLE_HOME=/tmp/oracle python -m pytest -q -s -m oracle tests/oracle/test_chatlearn_oracle.py
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rlcfg.frontend import check_file
from rlcfg.source.yaml_loader import UsageError

pytestmark = pytest.mark.oracle

REPO = "alibaba+ChatLearn"
RELEASES = {"1.2.0": ("v1.2.0", "chatlearn_v120"), "main": ("HEAD", "chatlearn")}
HOST_ENV = {"HOME": "/home/user"}  # no WANDB_API_KEY; machine-dependent findings are warnings anyway

# Where rlcfg is knowingly stricter than ChatLearn's loader, by mutation tag -> why. Each such finding's message says
# "ChatLearn accepts this at load but ..." and where it fails (the test checks the wording).
STRICTER: dict[str, str] = {
    # ModelManager looks every colocated name up among the built models (`_name2distmodel[name]`): KeyError
    "stricter-colocation": "a colocation group names a model that does not exist",
    # GrpoAlgorithm.run() builds the rollout module only for vllm/sglang; any other name leaves it unbound
    "stricter-rollout-backend": "an unknown rollout backend",
}


@dataclass
class Case:
    id: str
    release: str
    file: str
    overrides: list[str] = field(default_factory=list)
    oracle: str = ""  # accept / reject
    oracle_message: str = ""
    rlcfg: str = ""
    rlcfg_message: str = ""
    after_load: bool = False  # every error rlcfg reports is a run-time failure the loader lets through


def _mirror() -> Path:
    root = os.environ.get("MIRROR_ROOT")
    if not root:
        pytest.skip("MIRROR_ROOT is not set")
    path = Path(root) / REPO / "repo"
    if not path.exists():
        pytest.skip(f"no ChatLearn mirror at {path}")
    return path


def _git(mirror: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={mirror}", *args], check=True, capture_output=True, text=True).stdout


# ---- the corpus ---------------------------------------------------------------------------------------------

_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_]\w*)=(\S*)\s*$")
_VAR = re.compile(r"\$\{?([A-Za-z_]\w*)\}?")
FIXED_VARS = {"CHATLEARN": "/chatlearn", "num_device": "8", "PYTHONPATH": "", "MEGATRON_PATH": "/megatron"}


def script_command(text: str, gpus: int = 8) -> tuple[str, list[str]] | None:
    """(config file, overrides) of the `python chatlearn/entrypoint.py grpo --config-file ...` line of a script, for a
    cluster of `gpus` GPUs."""
    variables = {**FIXED_VARS, "num_device": str(gpus)}
    joined = re.sub(r"\\\n", " ", text)
    for line in joined.splitlines():
        assigned = _ASSIGN.match(line)
        if assigned and assigned.group(1) not in FIXED_VARS:
            value = assigned.group(2).strip("\"'")
            if "$(" not in value:
                variables[assigned.group(1)] = _VAR.sub(lambda m: variables.get(m.group(1), f"/{m.group(1)}"), value)
        if "entrypoint.py" in line and "--config-file" in line:
            command = line.split("2>&1")[0].split("|")[0]
            expanded = _VAR.sub(lambda m: variables.get(m.group(1), f"/{m.group(1)}"), command)
            tokens = shlex.split(expanded)
            config = tokens[tokens.index("--config-file") + 1]
            return config, [t for t in tokens[tokens.index("--config-file") + 2:] if "=" in t]
    return None


def corpus(mirror: Path, release: str, workdir: Path) -> list[Case]:
    rev = RELEASES[release][0]
    tree = workdir / release
    names = _git(mirror, "ls-tree", "-r", "--name-only", rev).split()
    cases = []
    for name in names:
        if name.startswith("template/") and name.endswith(".yaml") and "/agent/" not in name:
            target = tree / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(_git(mirror, "show", f"{rev}:{name}"))
            cases.append(Case(f"{name}", release, str(target)))
    for name in names:
        if not (name.startswith("scripts/") and name.endswith(".sh")):
            continue
        text = _git(mirror, "show", f"{rev}:{name}")
        # `${num_device}` is the job's GPU count: one node of 8, and 8 nodes for the scripts of the largest models
        for gpus in (8, 64) if "num_device" in text else (8,):
            found = script_command(text, gpus)
            if found is not None:
                config, overrides = found
                cases.append(Case(f"{name}@{gpus}", release, str(tree / config), overrides))
    return cases


# ---- mutations ----------------------------------------------------------------------------------------------


def mutations(base: Case) -> list[Case]:
    """Typo, wrong type, broken divisibility, bad enum value and deleted required key, as extra overrides (a
    deletion is written as a copy of the file without the key)."""
    out = []
    add = [
        # mistakes both should refuse
        ("typo", ["runtime_args.sample_per_episod=512"]),
        ("typo-trainer", ["models.policy_trainer.gradient_checkpointng=true"]),
        ("wrong-type", ["runtime_args.num_episode=many"]),
        ("divisibility", ["runtime_args.sample_per_episode=500"]),
        ("global-batch", ["runtime_args.train_global_batch_size=96"]),
        ("bad-enum", ["runtime_args.train_backend=deepspeed"]),
        ("zero-gpus", ["models.policy.num_gpu=0"]),
        # values ChatLearn accepts: a quoted number OmegaConf converts, a length main derives, a key of one release
        # or of one backend only
        ("derived-capture", ["models.policy.max_seq_len_to_capture=16"]),
        ("main-key", ["runtime_args.use_partial_rollout=false"]),
        ("v120-key", ["models.policy.max_new_tokens=1024"]),
        ("fsdp-key", ["models.policy_trainer.gradient_checkpointing=false"]),
        ("megatron-key", ["models.policy_trainer.use_distributed_optimizer=true"]),
        # the kinds every differential suite covers: an enum value's case, boundary values, a key of a sibling
        # section
        ("enum-case", ["runtime_args.rollout_backend=VLLM"]),
        ("zero-episodes", ["runtime_args.num_episode=0"]),
        ("zero-micro-batch", ["runtime_args.train_micro_batch_size=0"]),
        ("sibling-key", ["runtime_args.num_gpu=8"]),
        # accepted at load, fails once the job starts: rlcfg says so (STRICTER)
        ("stricter-colocation", ["runtime_args.colocation=[policy,policy_trainr,ref_policy]"]),
        ("stricter-rollout-backend", ["runtime_args.rollout_backend=vlm"]),
    ]
    for tag, extra in add:
        out.append(Case(f"{base.id}+{tag}", base.release, base.file, base.overrides + extra))
    text = Path(base.file).read_text()
    # a quoted number in the file, which OmegaConf converts (in the file, not as an override: ChatLearn 1.2.0 parses
    # override values with the field's type from the raw text, quotes included, and the front end reads them as YAML)
    quoted = re.sub(r"(?m)^(\s+num_episode:\s*)(\d+)\s*$", r'\1"\2"', text, count=1)
    if quoted != text:
        target = Path(base.file).with_name(f"{Path(base.file).stem}.quoted.yaml")
        target.write_text(quoted)
        out.append(Case(f"{base.id}+quoted-number", base.release, str(target), list(base.overrides)))
    for key in ("num_episode", "data_path", "train_global_batch_size", "sample_per_episode"):
        # deleting the key from the file is enough when no override restates it
        if any(o.startswith(f"runtime_args.{key}=") for o in base.overrides):
            continue
        stripped = re.sub(rf"(?m)^\s+{key}:.*\n", "", text, count=1)
        if stripped == text:
            continue
        target = Path(base.file).with_name(f"{Path(base.file).stem}.without-{key}.yaml")
        target.write_text(stripped)
        out.append(Case(f"{base.id}-{key}", base.release, str(target), list(base.overrides)))
    return out


# ---- the two judges -----------------------------------------------------------------------------------------

DRIVER = r'''
import contextlib, enum, io, json, os, sys, types
repo = sys.argv[1]
sys.path.insert(0, os.path.join(repo, "chatlearn"))
with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
    import entrypoint
    launcher = entrypoint.ChatlearnLauncher()
    algo_cls, _ = launcher._load_algorithm("grpo")
    grpo = sys.modules[algo_cls.__module__]
    algo_cls.run = lambda self: None  # no chatlearn.init(), no training
    if not hasattr(grpo, "MegatronPolicyTrainerConfig"):  # megatron-core is absent: import-only stand-ins
        def stub(name, **attrs):
            module = types.ModuleType(name); module.__dict__.update(attrs); module.__path__ = []
            sys.modules[name] = module
        for name in ("megatron", "megatron.training", "megatron.core", "megatron.core.transformer"):
            stub(name)
        stub("megatron.training.arguments", moe_freq_type=lambda x: x)
        stub("megatron.core.transformer.enums", AttnBackend=enum.Enum("AttnBackend", "flash fused unfused local auto"))
        import chatlearn.configs.megatron_config as mc
        grpo.MegatronPolicyTrainerConfig = mc.MegatronPolicyTrainerConfig
        grpo.MegatronRefPolicyConfig = mc.MegatronRefPolicyConfig
        grpo.update_cfg = lambda cfg: cfg  # reads the model's config.json; not a config check
for line in sys.stdin:
    job = json.loads(line)
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            args = launcher.parser.parse_args(["grpo", "--config-file", job["file"], *job["overrides"]])
            launcher._run_algorithm(args)
        out = {"verdict": "accept", "message": ""}
    except BaseException as exc:  # noqa: BLE001 - every failure of the loader is its verdict
        out = {"verdict": "reject", "message": type(exc).__name__ + ": " + " ".join(str(exc).split())[:300]}
    print(json.dumps(out), flush=True)
'''


def run_oracle(cases: list[Case], release: str) -> None:
    home = Path(os.environ.get("ORACLE_HOME", "/tmp/oracle"))
    python = home / "venv" / "chatlearn" / "bin" / "python"
    source = home / "src" / RELEASES[release][1]
    if not python.exists() or not (source / ".ok").exists():
        pytest.skip("the ChatLearn oracle is not built: run shared/oracle/run_chatlearn.sh [--rev v1.2.0] on any file")
    stubs = Path(__file__).resolve().parents[3] / "shared" / "oracle" / "stubs" / "chatlearn"
    stubs = Path(os.environ.get("CHATLEARN_ORACLE_STUBS", stubs))
    with tempfile.TemporaryDirectory() as scratch:
        driver = Path(scratch) / "driver.py"
        driver.write_text(DRIVER)
        jobs = []
        for case in cases:
            overrides = case.overrides
            if release == "1.2.0" and not overrides:
                name = re.search(r"(?m)^\s+exp_name:\s*(\S+)", Path(case.file).read_text())
                overrides = [f"runtime_args.exp_name={name.group(1) if name else 'chatlearn'}"]
            jobs.append(json.dumps({"file": case.file, "overrides": overrides}))
        env = {**os.environ, "PYTHONPATH": f"{source}:{stubs}", "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
        done = subprocess.run([str(python), "-W", "ignore", str(driver), str(source)], input="\n".join(jobs) + "\n",
                              capture_output=True, text=True, env=env, cwd=scratch, timeout=1800)
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(answers) == len(cases), done.stderr[-3000:]
    for case, answer in zip(cases, answers):
        case.oracle, case.oracle_message = answer["verdict"], answer["message"]


def run_rlcfg(case: Case) -> None:
    try:
        result = check_file(case.file, case.overrides, dialect="chatlearn", release=case.release, env=HOST_ENV)
    except UsageError as exc:
        case.rlcfg, case.rlcfg_message = "reject", str(exc)
        return
    errors = [d for d in result.diagnostics if d.severity.value == "error"]
    case.rlcfg = "reject" if errors else "accept"
    case.rlcfg_message = "; ".join(f"{d.code} {d.path}: {d.message}" for d in errors)
    case.after_load = bool(errors) and all(AFTER_LOAD in d.message for d in errors)


# A check the loader does not make but the run fails on (read in that release's code) says so, and where: a file
# rlcfg rejects only for such findings is knowingly stricter, not a disagreement.
AFTER_LOAD = "accepts this at load but fails"


_IDENTIFIER = re.compile(r"[A-Za-z]+(?:_[A-Za-z0-9]+)+")


def same_cause(case: Case) -> bool:
    """Whether rlcfg's errors name a key that the loader's message names (a message that names no key, such as a
    ZeroDivisionError, cannot tell and counts as the same)."""
    named = set(_IDENTIFIER.findall(case.oracle_message)) - {"full_key", "reference_type", "object_type"}
    return not named or any(name in case.rlcfg_message for name in named)


# ---- the test -----------------------------------------------------------------------------------------------


def table(cases: list[Case]) -> str:
    lines = ["| release | files | both accept | both reject | (same cause) | rlcfg only | loader only |",
             "|---|---|---|---|---|---|---|"]
    for release in RELEASES:
        mine = [c for c in cases if c.release == release]
        groups = {"corpus": [c for c in mine if not _is_mutation(c)], "mutations": [c for c in mine if _is_mutation(c)]}
        for kind, subset in groups.items():
            count = lambda o, r: sum(1 for c in subset if c.oracle == o and c.rlcfg == r)  # noqa: E731
            same = sum(1 for c in subset if c.oracle == c.rlcfg == "reject" and same_cause(c))
            lines.append(f"| {release} {kind} | {len(subset)} | {count('accept', 'accept')} | "
                         f"{count('reject', 'reject')} | {same} | {count('accept', 'reject')} | "
                         f"{count('reject', 'accept')} |")
    return "\n".join(lines)


def _is_mutation(case: Case) -> bool:
    return "+" in case.id or re.search(r"(\.yaml|@\d+)-\w+$", case.id) is not None


def test_chatlearn_agrees_with_its_loader(tmp_path):
    mirror = _mirror()
    cases: list[Case] = []
    for release in RELEASES:
        base = corpus(mirror, release, tmp_path)
        assert base, f"no ChatLearn configs found at {release}"
        # every file as ChatLearn ships it; mutations of the templates and of each script on one node (the 64-GPU
        # variants add nothing a mutation would tell apart)
        mine = base + [m for b in base if not b.id.endswith("@64") for m in mutations(b)]
        run_oracle(mine, release)
        for case in mine:
            run_rlcfg(case)
        cases += mine
    print("\n" + table(cases))
    if os.environ.get("CHATLEARN_ORACLE_DUMP"):  # every verdict pair, for reading the causes side by side
        Path(os.environ["CHATLEARN_ORACLE_DUMP"]).write_text(json.dumps([c.__dict__ for c in cases], indent=1))
    stricter = [c for c in cases if c.id.split("+")[-1] in STRICTER
                or (c.oracle == "accept" and c.rlcfg == "reject" and c.after_load)]
    for c in stricter:  # the loader lets it through (unless the base config already failed); rlcfg says where it fails
        assert c.rlcfg == "reject" and "accepts this at load but" in c.rlcfg_message, (c.id, c.rlcfg_message)
    print(f"knowingly stricter (allow-listed): {sum(1 for c in stricter if c.oracle == 'accept')} of {len(stricter)}")
    disagreements = [c for c in cases if (c.oracle != c.rlcfg or not same_cause(c)) and c not in stricter]
    for c in disagreements:
        print(f"\n[{c.release}] {c.id} {' '.join(c.overrides[-2:])}\n  loader: {c.oracle} {c.oracle_message}\n"
              f"  rlcfg:  {c.rlcfg} {c.rlcfg_message[:600]}")
    assert not disagreements, \
        f"{len(disagreements)} of {len(cases)} verdicts (or their causes) differ from ChatLearn's loader"
