"""The sandbox that runs code from the data (SkyRL's lcb programs): no network, no writes outside its own folder, no
look at the user's files, and nothing left running after its time is up."""

import os
import socket
import sys
import threading
import time

import pytest

from rlcfg.runtime import sandbox


@pytest.fixture(scope="module", autouse=True)
def bubblewrap():
    try:
        sandbox.check_available()
    except sandbox.SandboxUnavailable as err:
        if os.environ.get("RLCFG_REQUIRE_SANDBOX"):
            raise
        pytest.skip(f"no sandbox here: {err}")


def python(code: str, limits: sandbox.Limits = sandbox.Limits(wall_s=20)) -> sandbox.Completed:
    return sandbox.run({"program.py": code}, ["python", "program.py"], limits)


def test_a_program_runs_in_its_own_folder_with_this_python_and_its_packages():
    done = python("import os, sys, numpy\nopen('out.txt', 'w').write('kept')\n"
                  "print(os.getcwd(), open('out.txt').read(), sys.version_info[:2] == (%d, %d))" % sys.version_info[:2])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [sandbox.SANDBOX_DIR, "kept", "True"]


def test_python_in_a_folder_under_tmp_stays_visible(tmp_path, monkeypatch):
    """A virtualenv under the host's /tmp (CI's clones live there) is bound over the sandbox's own /tmp."""
    packages = tmp_path / "site-packages"
    packages.mkdir()
    (packages / "marker.txt").write_text("found")
    paths = sandbox._python_paths()
    monkeypatch.setattr(sandbox, "_python_paths", lambda: [*paths, str(packages)])
    done = python(f"print(open({str(packages / 'marker.txt')!r}).read())\nopen('/tmp/x', 'w').write('ok')")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "found"


def test_a_program_cannot_reach_the_network():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(5)
    port = server.getsockname()[1]
    accepted = []

    def accept():
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    waiter = threading.Thread(target=accept)
    waiter.start()
    done = python(f"""
import socket
for address in [("127.0.0.1", {port}), ("1.1.1.1", 53)]:
    try:
        socket.create_connection(address, timeout=2)
        print("reached", address)
    except OSError as err:
        print("blocked", type(err).__name__)
""")
    waiter.join()
    server.close()
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[::2] == ["blocked", "blocked"], done.stdout
    assert not accepted


def test_a_program_cannot_write_outside_its_folder_or_read_the_users_files(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's")
    done = python(f"""
import os
for path in [{str(tmp_path / 'planted.txt')!r}, "/usr/planted.txt", {os.path.expanduser('~/planted.txt')!r}]:
    try:
        open(path, "w").write("x")
        print("wrote", path)
    except OSError as err:
        print("refused", type(err).__name__)
try:
    print("read", open({str(secret)!r}).read())
except OSError as err:
    print("hidden", type(err).__name__)
open("/tmp/scratch.txt", "w").write("private")
""")
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    assert words[::2] == ["refused", "refused", "refused", "hidden"], done.stdout
    assert sorted(os.listdir(tmp_path)) == ["secret.txt"]
    assert not os.path.exists(os.path.expanduser("~/planted.txt"))
    assert not os.path.exists("/tmp/scratch.txt")  # its /tmp is its own


def _running(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def test_a_program_and_everything_it_starts_end_with_its_time_limit():
    marker = f"{time.time_ns() % 10**9}.5"  # a sleep nothing else on the machine runs
    started = time.monotonic()
    done = python(f"""
import subprocess
subprocess.Popen(["sleep", "{marker}"], start_new_session=True)
subprocess.Popen(["sleep", "{marker}"]).wait()
""", sandbox.Limits(wall_s=3))
    assert done.timed_out and time.monotonic() - started < 15
    deadline = time.monotonic() + 5
    while _running(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _running(marker) == []


def test_a_program_cannot_take_more_memory_than_its_limit():
    done = python("b = bytearray(3 << 30)\nprint('allocated')", sandbox.Limits(wall_s=20, memory_bytes=1 << 30))
    assert "allocated" not in done.stdout and "MemoryError" in done.stderr


def test_a_program_that_spins_is_stopped_by_its_cpu_limit():
    done = python("while True: pass", sandbox.Limits(wall_s=30, cpu_s=1))
    assert not done.timed_out and done.returncode != 0  # killed by SIGXCPU/SIGKILL long before the wall time


def test_a_missing_bubblewrap_is_named_with_how_to_install_it(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(sandbox.SandboxUnavailable, match="apt-get install bubblewrap"):
        sandbox.check_available()
