"""Ends what a driver's private Ray instance leaves behind when the driver dies without shutting it down.

Ray ties the GCS and the raylet to the driver that started them, and rlcfg's workers watch the driver
(workers.watch_driver); but the raylet's helpers (the dashboard and runtime-env agents) outlived a SIGKILLed
driver by half a minute and more. This watcher is started by the driver in a session of its own (a kill of the
driver's process group spares it). While the driver lives it notes, twice a second, every process descended
from the driver or carrying the run's marker in its environment (the instance's processes inherit it; Ray's
agents rewrite their environment area for their process titles, hence the first criterion, and the children
of a dead raylet are no longer the driver's descendants, hence noting them beforehand). When the driver's end
of its stdin pipe closes, however the driver ended, it ends those processes: SIGTERM, then SIGKILL.

It is run as a script (`python reaper.py MARKER DRIVER_PID`) so it imports nothing of rlcfg.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state, start time) of a process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[1]), fields[0], int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _processes() -> dict[int, tuple[int, str, int]]:
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None:
                out[int(name)] = stat
    return out


def _carries(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def run_processes(driver: int, marker: bytes, procs: dict[int, tuple[int, str, int]]) -> dict[int, int]:
    """pid → start time of the driver's descendants and of the processes carrying `marker`."""
    me = os.getpid()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _state, _start) in procs.items():
        children.setdefault(ppid, []).append(pid)
    found = {}
    stack = [driver]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found and child != me:
                found[child] = procs[child][2]
                stack.append(child)
    for pid, (_ppid, state, start) in procs.items():
        if pid not in found and pid not in (me, driver) and state != "Z" and _carries(pid, marker):
            found[pid] = start
    return found


def reap(known: dict[int, int], driver: int, marker: bytes, grace_s: float = 0.5, quiet_s: float = 1.0,
         limit_s: float = 30.0) -> None:
    """End every process of `known` (pid → start time, so that a reused pid is spared) and whatever they or
    the driver started, until none has been seen for `quiet_s` (a dying raylet may still start a worker) or
    `limit_s` has passed."""
    start = time.monotonic()
    first_seen: dict[int, float] = {}
    last_seen = start
    while time.monotonic() - last_seen < quiet_s and time.monotonic() - start < limit_s:
        now = time.monotonic()
        procs = _processes()
        targets = {pid for pid, begun in known.items() if pid in procs and procs[pid][2] == begun}
        targets |= set(run_processes(driver, marker, procs))
        found = {}
        children: dict[int, list[int]] = {}
        for pid, (ppid, _state, _start) in procs.items():
            children.setdefault(ppid, []).append(pid)
        stack = list(targets)
        while stack:  # their own children too
            pid = stack.pop()
            if pid not in found:
                found[pid] = procs[pid]
                stack.extend(children.get(pid, []))
        alive = [pid for pid, (_ppid, state, _start) in found.items() if state != "Z"]
        if alive:
            last_seen = now
        for pid in alive:
            known.setdefault(pid, procs[pid][2])
            seen = first_seen.setdefault(pid, now)
            try:
                os.kill(pid, signal.SIGTERM if now - seen < grace_s else signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


def main() -> None:
    marker, driver = sys.argv[1].encode(), int(sys.argv[2])
    known: dict[int, int] = {}
    stdin = sys.stdin.buffer.raw if hasattr(sys.stdin.buffer, "raw") else sys.stdin.buffer
    while True:
        try:
            ready, _, _ = select.select([stdin], [], [], 0.5)
            if ready and not os.read(stdin.fileno(), 4096):  # nothing is ever written: EOF, the driver is gone
                break
        except (OSError, KeyboardInterrupt):
            break
        known.update(run_processes(driver, marker, _processes()))
    reap(known, driver, marker)


if __name__ == "__main__":
    main()
