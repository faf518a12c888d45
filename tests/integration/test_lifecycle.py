"""umd's life as systemd sees it: READY=1 only once the port answers, STOPPING=1 and exit 0 on
SIGTERM with in-flight requests finished, exit 2 with one clear message for bad flags and
config, a clear error for a port in use, socket activation, and restart on the same state."""
import json
import os
import select
import signal
import socket
import sqlite3
import subprocess
import time

import pytest
import requests

from conftest import UMD_BIN, free_port


def test_ready_only_once_the_port_accepts(umd):
    d = umd(wait=False)
    deadline = time.monotonic() + 30
    while not d.notified("READY=1"):
        assert d.process.poll() is None, d.log()
        assert time.monotonic() < deadline, "no READY=1"
        d.read_notify(0.05)
    # No retry: the moment READY=1 is out, the port must take a connection and answer.
    with socket.create_connection(("127.0.0.1", d.port), timeout=5) as s:
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert s.recv(64).startswith(b"HTTP/1.1 ")
    assert sum(m.split("\n").count("READY=1") for m in d.notify) == 1


def test_status_is_sent(umd):
    d = umd()
    d.read_notify(0.2)
    assert any(line.startswith("STATUS=") for m in d.notify for line in m.split("\n"))


def test_sigterm_is_graceful(umd):
    d = umd()
    assert d.get("/v1/health").status_code == 200
    assert d.stop(signal.SIGTERM) == 0
    assert d.notified("STOPPING=1")
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", d.port), timeout=2).close()


def test_sigint_is_graceful(umd):
    d = umd()
    assert d.stop(signal.SIGINT) == 0
    assert d.notified("STOPPING=1")


def test_sigterm_lets_an_in_flight_request_finish(umd):
    d = umd()
    body = b'{"benchmark": "copy", "device": 0}'
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
        s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body[:10])
        time.sleep(0.3)  # the request is now being read
        d.process.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert d.process.poll() is None, "umd exited with a request in flight"
        s.sendall(body[10:])
        status = s.recv(64)
    assert status.startswith(b"HTTP/1.1 "), status
    assert d.stop() == 0


def test_sigterm_answers_every_submit_waiting_for_its_commit(umd):
    """Submits suspended until their commit are answered before umd stops, however long past
    shutdown_timeout_s the commit takes (libmicrohttpd aborts a stop with a connection
    suspended), and every one answered 202 is stored."""
    d = umd(args=["--http-threads", "1", "--shutdown-timeout-s", "1"])
    for g in (0, 1):  # nothing runs: the only writes are the submits
        assert d.post(f"/v1/devices/{g}/pause", json={"reason": "test"}).status_code == 200
    body = b'{"benchmark":"copy"}'
    request = (b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
               b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
               % (len(body), body))
    # Another process holding the database's write lock keeps umd's writer from committing
    # (it waits, busy_timeout 5 s), so the submits stay suspended through the stop.
    db = sqlite3.connect(d.state_dir / "umd.db", isolation_level=None, timeout=10)
    db.execute("BEGIN IMMEDIATE")
    conns = [socket.create_connection(("127.0.0.1", d.port), timeout=30) for _ in range(16)]
    try:
        for s in conns:
            s.sendall(request)
        time.sleep(0.5)
        assert not select.select(conns, [], [], 0)[0], "answered before the commit"
        d.process.send_signal(signal.SIGTERM)
        time.sleep(2)  # past shutdown_timeout_s
        assert d.process.poll() is None, "umd stopped with submits unanswered: " + d.log()
        db.execute("COMMIT")
        replies = [s.makefile("rb").read() for s in conns]
    finally:
        db.close()
        for s in conns:
            s.close()
    assert all(r.startswith(b"HTTP/1.1 202") for r in replies), replies
    assert d.stop() == 0, d.log()
    d2 = umd(state_dir=d.state_dir)
    for r in replies:
        i = json.loads(r.partition(b"\r\n\r\n")[2])["id"]
        assert d2.get(f"/v1/jobs/{i}").json()["state"] == "queued", i


def test_bad_flag_exits_2(umd_run):
    r = umd_run(["--no-such-flag"])
    assert r.returncode == 2
    assert "--no-such-flag" in r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2, r.stderr


def test_flags_getopt_would_guess_at_exit_2(umd_run):
    """umd names an option exactly: no abbreviations, no run-together short options, no
    operands; each is one line naming what was refused."""
    for args, said in ((["--max-job", "3"], "unknown option '--max-job'"),
                       (["-hV"], "unknown option '-hV'"),
                       (["stray"], "unknown option 'stray'"),
                       (["--"], "unknown option '--'"),
                       (["--state-dir"], "--state-dir needs a value"),
                       (["-c"], "-c needs a file")):
        r = umd_run(args)
        assert r.returncode == 2, (args, r.stderr)
        assert said in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert r.stdout == "", (args, r.stdout)


def test_bad_flag_values_exit_2(umd_run, tmp_path):
    for args, word in ((["--listen", "nonsense"], "nonsense"),
                       (["--listen", "127.0.0.1:99999"], "99999"),
                       (["--fake-devices", "many"], "fake"),
                       (["--max-body-bytes", "-1"], "max")):
        r = umd_run([*args, "--state-dir", str(tmp_path / "s")])
        assert r.returncode == 2, (args, r.stderr)
        assert word in r.stderr, (args, r.stderr)


def test_unreadable_config_exits_2(umd_run, tmp_path):
    missing = tmp_path / "nope.conf"
    r = umd_run(["--config", str(missing)])
    assert r.returncode == 2
    assert str(missing) in r.stderr


def test_unknown_config_key_exits_2(umd_run, tmp_path):
    conf = tmp_path / "umd.conf"
    conf.write_text("[umd]\nlisten = 127.0.0.1:1\nno_such_key = 1\n")
    r = umd_run(["--config", str(conf)])
    assert r.returncode == 2
    assert "no_such_key" in r.stderr


def test_help_and_version_exit_0(umd_run):
    assert umd_run(["--help"]).returncode == 0
    v = umd_run(["--version"])
    assert v.returncode == 0 and v.stdout.strip()


def test_version_names_the_allocator_umd_is_linked_with(umd_run):
    """`umd --version` says "malloc jemalloc" exactly when the binary links libjemalloc (a build
    with -Djemalloc, the .deb's), else "malloc glibc" (the sanitizer builds)."""
    linked = subprocess.run(["ldd", UMD_BIN], capture_output=True,
                            text=True).stdout
    v = umd_run(["--version"])
    assert v.returncode == 0
    want = "malloc jemalloc" if "libjemalloc" in linked else "malloc glibc"
    assert want in v.stdout, v.stdout


def test_version_names_the_commit_it_was_built_from(umd_run):
    """The build id is `git describe` of the tree when umd was built, not when meson last
    configured (a build directory never configured again said an old commit). A test run after
    a commit without a rebuild fails here: rebuild (ninja) first."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        git = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty", "--tags"],
                             capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        pytest.skip("no git")
    if git.returncode != 0:
        pytest.skip("not a git checkout: the build id is 'unknown'")
    v = umd_run(["--version"])
    assert v.returncode == 0
    assert f"(build {git.stdout.strip()}," in v.stdout, (v.stdout, git.stdout)


def test_port_in_use_is_a_clear_error(umd):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        d = umd(wait=False, listen=False, args=["--listen", f"127.0.0.1:{port}"])
        rc = d.process.wait(30)
    assert rc != 0
    assert f"127.0.0.1:{port}" in d.log()
    assert "in use" in d.log()
    assert not d.notified("READY=1")


def test_socket_activation(umd):
    act = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    act.bind(("127.0.0.1", 0))
    act.listen(16)
    port = act.getsockname()[1]
    try:
        d = umd(activation_socket=act)
    finally:
        act.close()  # umd has its own copy as fd 3
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert s.recv(64).startswith(b"HTTP/1.1 200")
    assert "fd 3 from systemd" in d.log()
    # The .socket unit decides where umd listens: its own --listen would collide with it.
    assert "ignored" in d.log()
    with pytest.raises(requests.exceptions.ConnectionError):
        d.get("/v1/health")
    assert d.stop() == 0


def test_restart_on_the_same_state_dir(umd):
    d = umd()
    assert d.stop() == 0
    d2 = umd(state_dir=d.state_dir)
    assert d2.get("/v1/health").status_code == 200
    assert d2.state_dir == d.state_dir
