"""Issue 57 (5): a local user cannot lock the node's own checks out. Other 127.x addresses (any
local user can connect from 127.0.0.2) are counted like remote peers: they cannot take the slots
kept for 127.0.0.1 and the unix socket, connections past the limits are closed at once instead
of waiting in the backlog, and a low open-file limit keeps descriptors for the unix socket.
Floods are bounded (a few hundred idle connections, loopback only) and end with each test."""
import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

import conftest
from test_limits import _get_health

UMDCTL = os.environ.get("UMDCTL", "")
# How long the node's own check may take to get its answer while the flood holds.
ANSWER_S = 5


def _flood(port, first, addresses, per_address):
    """Idle connections from 127.0.0.<first>.. (per_address each), kept open; those the server
    closed are dropped from the list by _held."""
    socks = []
    for i in range(addresses):
        for _ in range(per_address):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(2)
            s.bind((f"127.0.0.{first + i}", 0))
            try:
                s.connect(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            socks.append(s)
    time.sleep(0.5)  # let the server accept (or close) them all
    return socks


def _held(socks):
    """The flood's connections the server still holds (not closed or reset)."""
    held = 0
    for s in socks:
        s.setblocking(False)
        try:
            held += s.recv(1) != b""
        except BlockingIOError:
            held += 1
        except OSError:
            pass
    return held


def _close(socks):
    for s in socks:
        s.close()


def _health(family, addr, src=None):
    """One GET /v1/health on a fresh connection (5 s at most): (status or None, seconds)."""
    t0 = time.monotonic()
    status = _get_health(family, addr, src)
    return status, time.monotonic() - t0


def _umdctl_health(*where):
    p = subprocess.run([UMDCTL, *where, "health", "--cached", "--timeout", f"{ANSWER_S}s"],
                       capture_output=True, text=True, timeout=ANSWER_S + 5)
    return p.returncode, p.stdout + p.stderr


def _socket_path(tmp_path):
    path = tmp_path / "umd.sock"
    if len(str(path)) >= 108:
        pytest.skip("tmp path too long for a unix socket")
    return path


def _node_checks_answer(d, path):
    """127.0.0.1 and the unix socket, by raw GET and by umdctl: each answered in time."""
    for _ in range(5):
        status, took = _health(socket.AF_INET, ("127.0.0.1", d.port))
        assert status == 200 and took < ANSWER_S, (status, took)
        status, took = _health(socket.AF_UNIX, str(path))
        assert status == 200 and took < ANSWER_S, (status, took)
    if UMDCTL:
        for where in (["--url", d.base_url], ["--unix-socket", str(path)]):
            rc, out = _umdctl_health(*where)
            assert rc != 3 and "GPU" in out, (where, rc, out)


def test_a_flood_from_other_loopback_addresses_leaves_127_0_0_1_and_the_unix_socket(umd, tmp_path):
    path = _socket_path(tmp_path)
    # 64 slots, 8 kept; 12 addresses x 8 would take 96. A request deadline past the test, so
    # the flood is not cut for being idle while the checks are asked.
    d = umd(fake_devices=1, args=["--unix-socket", str(path), "--max-connections", "64",
                                  "--max-connections-per-ip", "8", "--request-timeout-s", "120",
                                  "--connection-timeout-s", "120"])
    flood = _flood(d.port, 2, 12, 8)
    try:
        _node_checks_answer(d, path)
        # The flood holds all but the reserve, and the checks were not served by cutting it.
        assert _held(flood) == 56
    finally:
        _close(flood)


def test_connections_past_the_limit_are_closed_at_once_not_left_in_the_backlog(umd):
    d = umd(fake_devices=1, args=["--max-connections", "16", "--max-connections-per-ip", "64",
                                  "--request-timeout-s", "120", "--connection-timeout-s", "120"])
    full = _flood(d.port, 1, 1, 16)  # every slot, the reserve too
    try:
        for src in ("127.0.0.1", "127.0.0.3"):
            status, took = _health(socket.AF_INET, ("127.0.0.1", d.port), src=src)
            assert status is None and took < 2, f"{src}: closed after {took:.1f} s, not at once"
        assert _held(full) == 16
    finally:
        _close(full)
    time.sleep(0.3)
    assert _health(socket.AF_INET, ("127.0.0.1", d.port), src="127.0.0.3")[0] == 200


def test_with_256_open_files_a_flood_leaves_the_unix_socket_and_startup_says_so(
        umd, tmp_path, monkeypatch):
    """ulimit -n 256 under the default max_connections (4096): umd says what the limit allows,
    and keeps descriptors back so that a flood cannot starve the unix socket or 127.0.0.1."""
    path = _socket_path(tmp_path)
    wrapper = tmp_path / "umd-256"
    wrapper.write_text(f"#!/bin/sh\nulimit -n 256 || exit 99\nexec {conftest.UMD_BIN} \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setattr(conftest, "UMD_BIN", str(wrapper))
    d = umd(fake_devices=1, args=["--unix-socket", str(path), "--request-timeout-s", "120",
                                  "--connection-timeout-s", "120"])
    flood = _flood(d.port, 2, 5, 64)  # 320, more than 256 descriptors
    try:
        _node_checks_answer(d, path)
    finally:
        _close(flood)
    log = d.log()
    assert "open files: at most 256" in log, log
    assert "below the 8192 that max_connections (4096 on 2 listener(s))" in log, log


_UNIX_FLOOD = """
import select, socket, sys, time
socks = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(sys.argv[1])
    except OSError:
        continue
    socks.append(s)
time.sleep(0.5)
# umd sends nothing unasked: a socket that is readable was closed by it.
p = select.poll()
for s in socks:
    p.register(s, select.POLLIN)
print(len(socks) - len(p.poll(0)), flush=True)
sys.stdin.read()
"""


def test_another_local_user_on_the_unix_socket_cannot_take_roots_slots(umd, tmp_path):
    """Any local user may open the unix socket: one that is not root or umd's user is counted
    by its uid (max_connections_per_ip) and gets no more than the shared slots."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to connect as another user")
    sockdir = tempfile.mkdtemp(prefix="umd-conn-")
    os.chmod(sockdir, 0o755)
    path = os.path.join(sockdir, "umd.sock")
    try:
        d = umd(fake_devices=1, args=["--unix-socket", path, "--unix-socket-mode", "0666",
                                      "--max-connections", "16", "--max-connections-per-ip",
                                      "12", "--request-timeout-s", "120",
                                      "--connection-timeout-s", "120"])
        flood = subprocess.Popen(["/usr/bin/python3", "-c", _UNIX_FLOOD, path, "40"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                 preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)))
        try:
            held = int(flood.stdout.readline())
            assert held == 12, f"user nobody holds {held} of 16 slots, its limit is 12"
            for _ in range(5):
                status, took = _health(socket.AF_UNIX, path)
                assert status == 200 and took < ANSWER_S, (status, took)
        finally:
            flood.stdin.close()
            flood.wait(10)
    finally:
        shutil.rmtree(sockdir, ignore_errors=True)
