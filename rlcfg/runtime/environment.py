"""What the machine and the network can get wrong before a run starts, checked before any worker does:
folders the run cannot write, a disk too full for a checkpoint, a Ray cluster that is absent or unreachable.
Each is a RunEnvironmentError whose message is one line: the path or address, what is wrong, and what to do.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import socket
import uuid

from rlcfg.runtime.backends import PreflightError

# How long `--address host:port` may take to answer before the run gives up on it.
CONNECT_TIMEOUT_S = 10.0


class RunEnvironmentError(PreflightError):
    """The machine, its disks or the cluster cannot run this (not the config, not a bug in rlcfg)."""


def _existing_parent(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def check_writable(path: str, what: str) -> None:
    """Create `path` if needed and write (then remove) a probe file in it."""
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".rlcfg-probe-{uuid.uuid4().hex[:8]}")
        with open(probe, "wb") as f:
            f.write(b"x")
            f.flush()
            os.fsync(f.fileno())
        os.remove(probe)
    except OSError as exc:
        raise RunEnvironmentError(describe_os_error(exc, path, what)) from None


def describe_os_error(exc: OSError, path: str | None = None, what: str = "folder") -> str:
    """One line for an OSError of the file system, naming the path and what to do about it."""
    where = path or exc.filename or "?"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return (f"cannot write the {what} {where}: permission denied; choose a folder you can write (--output), "
                "or change its permissions")
    if exc.errno == errno.EROFS:
        return f"cannot write the {what} {where}: the file system is read-only; choose another folder (--output)"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (f"the disk holding the {what} {where} is full (or over quota); free space there or choose another "
                "folder (--output); the last complete checkpoint is kept")
    if exc.errno == errno.ENOTDIR or exc.errno == errno.EEXIST:
        return f"cannot use the {what} {where}: a file of that name is in the way; remove it or choose another folder"
    return f"cannot write the {what} {where}: {exc.strerror or exc}"


def directory_bytes(path: str) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, name))
            except OSError:
                pass
    return total


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def check_free_space(path: str, need: int, what: str) -> None:
    """Refuse to start when the disk of `path` has less room than one checkpoint is expected to take."""
    try:
        free = shutil.disk_usage(_existing_parent(path)).free
    except OSError:
        return  # nothing to measure: the writes will say what is wrong
    if free < need:
        raise RunEnvironmentError(
            f"the disk holding the {what} {path} has {_size(free)} free, and one checkpoint of this run needs about "
            f"{_size(need)}; free space there or choose another folder (--output)")


def _probe(host: str, port: int, timeout: float) -> str | None:
    """None when something listens at host:port; else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except socket.timeout:
        return f"no answer within {timeout:.0f} s"
    except socket.gaierror as exc:
        return f"the host name does not resolve ({exc.strerror or exc})"
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()



def looks_like_hub_id(path: str) -> bool:
    """Whether a model path that is not on this machine reads as a Hugging Face Hub id (`owner/name`)."""
    parts = path.split("/")
    return len(parts) == 2 and all(parts) and not path.startswith((".", "/", "~"))


def resolve_address(address: str, timeout: float = CONNECT_TIMEOUT_S) -> str:
    """The address to give ray.init for `--address`, checked to answer within `timeout`: `auto` must find a
    cluster this machine belongs to, host:port (or ray://host:port) must accept a connection. Ray's own
    connect loop would retry for minutes and print its logs meanwhile."""
    hint = ("start one with `ray start --head` (and `ray start --address <head>:6379` on the other nodes), or leave "
            "out --address to run on a private local instance")
    if address == "auto":
        try:
            from ray._private import services

            found = services.canonicalize_bootstrap_address_or_die("auto")
        except ConnectionError as exc:
            if "multiple" in str(exc):
                found = str(exc).split(": ", 1)[-1].split(". ", 1)[0]
                raise RunEnvironmentError(f"--address auto: several Ray clusters run on this machine ({found}); "
                                          "name one as --address host:port") from None
            raise RunEnvironmentError(f"--address auto: no running Ray cluster was found on this machine; {hint}") \
                from None
        except Exception as exc:  # several clusters, or an address file Ray cannot parse
            line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise RunEnvironmentError(f"--address auto: {line}; give the cluster's head as --address host:port") \
                from None
        target = found
    else:
        target = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise RunEnvironmentError(f"--address {address}: expected `auto`, host:port or ray://host:port")
    host = host.strip("[]")
    reason = _probe(host, int(port), timeout)
    if reason is None and not address.startswith("ray://"):
        reason = _probe_gcs(target, timeout)
    if reason is not None:
        raise RunEnvironmentError(f"cannot reach the Ray cluster at {target} ({reason}); check the address and that "
                                  f"its head node runs, or {hint.split(', or ', 1)[1]}")
    return address if address != "auto" else target


_PROBE_TIMED_OUT = 3
_GCS_PROBE = f"""
import os, sys, threading
from ray._raylet import GcsClient
def give_up():
    os._exit({_PROBE_TIMED_OUT})
# The clock starts once Ray is imported: on a loaded machine the import alone can take longer than the wait.
threading.Timer(float(sys.argv[2]), give_up).start()
GcsClient(address=sys.argv[1])
os._exit(0)
"""
# How long the probe may take to import Ray before its own clock starts: a cold import on a busy node.
_RAY_IMPORT_ALLOWANCE_S = 120.0


def _probe_gcs(address: str, timeout: float) -> str | None:
    """None when a Ray GCS answers at `address`; else why not. Something listening is not enough (a proxy, a
    cluster that wants a token): ray.init would then retry for tens of seconds, printing a line of Ray's C++
    log each second. The probe runs in a child process, so its log stays out of the user's terminal and a
    hung connection is ended at `timeout`."""
    import subprocess
    import sys

    waited = f"no Ray cluster answered within {timeout:.0f} s"
    try:
        proc = subprocess.run([sys.executable, "-c", _GCS_PROBE, address, str(timeout)], capture_output=True,
                              text=True, timeout=timeout + _RAY_IMPORT_ALLOWANCE_S)
    except subprocess.TimeoutExpired:
        return waited
    if proc.returncode == 0:
        return None
    if proc.returncode == _PROBE_TIMED_OUT:
        return waited
    return probe_failure(proc.stderr, proc.returncode)


# Ray's words when a cluster wants a token that this machine does not have: as a Python exception when this
# machine's RAY_AUTH_MODE is not `token`, as a fatal check of its C++ client when it is.
_NO_TOKEN = ("InvalidAuthToken", "couldn't find an authentication token")


def probe_failure(stderr: str, returncode: int) -> str:
    """Why the GCS probe failed, in a line, from what it wrote: Ray's exception, or the check that ended its C++
    client, not the stack trace after it."""
    if any(words in stderr for words in _NO_TOKEN):
        return ("the cluster asks for a Ray authentication token and none was found here; give it the cluster's "
                "token (RAY_AUTH_TOKEN, a file named by RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token)")
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    check = next((line.split("Check failed: ", 1)[1] for line in lines if "Check failed: " in line), None)
    # "ray.exceptions.RpcError: RPC error: Received http2 header ..." → what follows the exception's name, to
    # the end of its first sentence
    raised = next((line for line in reversed(lines) if re.match(r"^[\w.]*(Error|Exception): ", line)), None)
    last = check or raised or (lines[-1] if lines else f"exit {returncode}")
    detail = re.sub(r"^[\w.]*(Error|Exception): ", "", last).split(". ", 1)[0]
    return f"no Ray cluster answers there: {detail}"
