"""Running code that came with the data (a model's program, a test harness) where it can do no harm.

Each program runs under bubblewrap (`bwrap`, packaged by every major Linux distribution): in new user, network,
PID, IPC and UTS namespaces, so it has no network at all, sees only its own processes and dies with its parent; with
the system's and Python's files read-only and a private, empty working folder as the only place it can write; with
rlimits on CPU time, address space, file size and processes; and killed, with everything it started, when its wall
time runs out. bubblewrap was chosen over a container runtime because it needs no daemon and no image, starts in
milliseconds, and is what Flatpak relies on for the same job; over seccomp or rlimits alone because those leave the
network and the file system open.

Nothing here runs in rlcfg's own process: `run` starts one sandboxed interpreter per program.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass

SANDBOX_DIR = "/sandbox"  # the program's working folder, as it sees it
# Python and the system libraries it loads, read-only; the user's home, the run's outputs and rlcfg's own checkout
# stay out of sight unless Python itself lives there.
SYSTEM_PATHS = ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc/alternatives", "/etc/ld.so.cache",
                "/etc/ssl", "/etc/localtime")
INSTALL_HINT = "install bubblewrap (Debian and Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`)"


class SandboxUnavailable(ImportError):
    """bubblewrap is missing here, or cannot create the namespaces it needs: like a package that is not installed,
    what runs on it cannot run here."""


@dataclass(frozen=True)
class Limits:
    wall_s: float = 10.0
    cpu_s: int = 10
    memory_bytes: int = 4 << 30
    file_bytes: int = 64 << 20
    processes: int = 64


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool


def bwrap() -> str:
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailable(f"bubblewrap (`bwrap`) to run code from the data in a sandbox, and it is not on "
                                 f"PATH: {INSTALL_HINT}")
    return path


def _python_paths() -> list[str]:
    """The folders this interpreter and its packages live in, outside SYSTEM_PATHS."""
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, os.path.dirname(sys.executable))}
    roots |= {os.path.realpath(p) for p in sys.path if p and os.path.isdir(p) and "site-packages" in p}
    outside = [p for p in roots if not any(p == s or p.startswith(s + "/") for s in SYSTEM_PATHS)]
    # a folder inside another bound one needs no bind of its own
    return sorted(p for p in outside if not any(p != q and p.startswith(q + "/") for q in outside))


def command(workdir: str, argv: list[str], readonly: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """bwrap's command line; `readonly`: (host folder, where the program sees it) pairs it may read, not write."""
    cmd = [bwrap(), "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
           "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", SANDBOX_DIR,
           "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--setenv", "PYTHONHASHSEED", "0",
           "--setenv", "OMP_NUM_THREADS", "1", "--setenv", "OPENBLAS_NUM_THREADS", "1",
           "--setenv", "MKL_NUM_THREADS", "1", "--setenv", "LANG", "C.UTF-8"]
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            cmd += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            cmd += ["--ro-bind", path, path]
    # /tmp is a folder of the working one (run makes it), on disk and removed with it. It is mounted before
    # Python's folders, which may lie under the host's /tmp (a virtualenv there) and would be hidden by it otherwise.
    cmd += ["--proc", "/proc", "--dev", "/dev", "--bind", os.path.join(workdir, ".tmp"), "/tmp"]
    for path in _python_paths():
        cmd += ["--ro-bind", path, path]
    for host, seen in readonly:
        cmd += ["--ro-bind", host, seen]
    # The root bwrap builds the mount points in is made read-only last, so nothing else can be written anywhere.
    cmd += ["--bind", workdir, SANDBOX_DIR, "--remount-ro", "/", "--chdir", SANDBOX_DIR, "--", *argv]
    return cmd


def _user_processes() -> int:
    uid = os.getuid()
    count = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                count += os.stat(f"/proc/{pid}").st_uid == uid
            except OSError:
                pass
    return count


# The first program in the sandbox: it sets the limits on itself and becomes the program (exec keeps them). Setting
# them here rather than in a preexec_fn keeps Popen safe in a process with threads (the scorer grades in a pool).
_LAUNCHER = """import os, resource, sys
cpu, memory, size, processes = map(int, sys.argv[1:5])
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
if hard == resource.RLIM_INFINITY or hard > processes:
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
os.execvp(sys.argv[5], sys.argv[5:])
"""


def _limited(argv: list[str], limits: Limits) -> list[str]:
    # RLIMIT_NPROC counts every process of the user (the sandbox's user namespace maps to this one), so the cap is
    # what already runs plus the program's share; root is exempt from it, and the wall time still ends the rest.
    processes = _user_processes() + limits.processes
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(limits.cpu_s), str(limits.memory_bytes),
            str(limits.file_bytes), str(processes), *argv]


def run(files: dict[str, str], argv: list[str], limits: Limits = Limits(), stdin: str = "",
        readonly: tuple[tuple[str, str], ...] = ()) -> Completed:
    """Write `files` into a fresh folder, run `argv` there in the sandbox, and remove the folder. `argv[0]` may be
    `python`: this interpreter, which sees its own packages read-only. `readonly`: host folders the program may
    read, as (host folder, where it sees it)."""
    argv = [sys.executable if a == "python" and i == 0 else a for i, a in enumerate(argv)]
    with tempfile.TemporaryDirectory(prefix="rlcfg-sandbox-") as workdir:
        os.mkdir(os.path.join(workdir, ".tmp"))
        for name, text in files.items():
            with open(os.path.join(workdir, name), "w", encoding="utf-8") as f:
                f.write(text)
        proc = subprocess.Popen(command(workdir, _limited(argv, limits), readonly), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                                start_new_session=True)
        try:
            out, err = proc.communicate(stdin, timeout=limits.wall_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            # bwrap is the PID namespace's parent: killing it kills everything the program started
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            timed_out = True
    return Completed(proc.returncode, out, err, timed_out)


def check_available() -> None:
    """Raise SandboxUnavailable unless a sandboxed interpreter starts and answers here."""
    try:
        done = run({}, ["python", "-c", "print(1)"], Limits(wall_s=30))
    except OSError as err:
        raise SandboxUnavailable(f"bubblewrap to run code from the data in a sandbox, and it did not start: {err}; "
                                 f"{INSTALL_HINT}") from None
    if done.returncode != 0 or done.stdout.strip() != "1":
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SandboxUnavailable(f"bubblewrap to run code from the data in a sandbox, and it cannot create one "
                                 f"here ({why}); it needs user namespaces (sysctl "
                                 "kernel.unprivileged_userns_clone=1, or user.max_user_namespaces > 0)")


def run_json(files: dict[str, str], argv: list[str], limits: Limits, stdin: str = "",
             readonly: tuple[tuple[str, str], ...] = ()) -> tuple[object | None, Completed]:
    """Run a program that prints one JSON value as its last line; None when it printed none (it failed, was
    killed, or ran out of time)."""
    done = run(files, argv, limits, stdin, readonly)
    lines = done.stdout.strip().splitlines()
    if done.timed_out or not lines:
        return None, done
    try:
        return json.loads(lines[-1]), done
    except ValueError:
        return None, done
