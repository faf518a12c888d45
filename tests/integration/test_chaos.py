"""What production does to a daemon (issue 14), kept as a standing test: signals from systemd
and operators (SIGTERM to umd and its workers together, in either order; SIGKILL at random
moments during concurrent submits; SIGSTOP of a worker), odd files in the state directory and
as configured files (FIFOs, sockets, directories, symlinks, huge files, bad JSON, valid JSON of
the wrong shape), a full disk, slow clients from several source addresses, and the header and
link tricks of the same report. Each case takes seconds; longer runs belong under bench/."""
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid

import pytest

from conftest import UMD_BIN
import requests
from conftest import FINAL, free_port, kill_while, submit, wait_job

pytestmark = pytest.mark.system

LEGAL = ("queued", "running") + FINAL
SLOW = {"benchmark": "copy", "devices": "all", "params": {"fake_delay_ms": 60000}}
TOKEN = "chaos-admin-token-0123456789"


def workers_of(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def wait_workers(d, n, timeout=15):
    deadline = time.monotonic() + timeout
    while len(workers_of(d.process.pid)) < n:
        assert time.monotonic() < deadline, f"fewer than {n} workers:\n{d.log()}"
        time.sleep(0.05)
    return workers_of(d.process.pid)


def jobs_dir(d):
    return d.state_dir / "jobs"


def a_stored_job(umd, labels):
    """A state dir holding one finished job with these labels as a file of the store before
    SQLite (jobs/<id>.json, written by umd itself with --export), which umd imports once at its
    next start: what is read back from files is checked there."""
    d = umd()
    jid = submit(d, {"benchmark": "copy", "device": 0, "labels": labels})["id"]
    wait_job(d, jid)
    assert d.stop() == 0
    legacy = d.state_dir.parent / f"legacy-{uuid.uuid4().hex[:8]}"
    legacy.mkdir()
    subprocess.run([UMD_BIN, "--state-dir", str(d.state_dir), "--export", str(legacy / "jobs")],
                   check=True, capture_output=True, timeout=30)
    return legacy, jid


def set_aside(jobs, name):
    """Was jobs/name set aside (renamed *.corrupt), before or after the import moved jobs/?"""
    for folder in (jobs, jobs.with_name("jobs.imported")):
        if folder.is_dir() and any(p.name.startswith(name + ".corrupt")
                                   for p in folder.iterdir()):
            return True
    return False


# -- 1. systemctl stop: SIGTERM to umd and its workers together --

@pytest.mark.parametrize("order", ["umd-first", "workers-first"])
def test_sigterm_to_umd_and_workers_interrupts_running_parts(umd, order):
    d = umd(args=["--shutdown-timeout-s", "2"])
    jid = submit(d, SLOW)["id"]
    wait_job(d, jid, states=("running",))
    time.sleep(0.2)  # both parts on their workers
    workers = wait_workers(d, 2)
    pids = [d.process.pid] + workers if order == "umd-first" else workers + [d.process.pid]
    subprocess.run(["kill", "-TERM", *map(str, pids)], check=True)
    assert d.stop(timeout=20) == 0
    log = d.log()
    assert "killed by signal SIGTERM" not in log, log

    again = umd(state_dir=d.state_dir)
    j = again.get("/v1/jobs/" + jid).json()
    assert j["state"] == "interrupted", j
    for p in j["parts"]:
        assert p["state"] == "interrupted", j
    # No crash was counted against either device.
    for dev in again.get("/v1/devices").json():
        assert dev["state"] != "faulted", dev


# -- SIGKILL at random moments during concurrent submits --

def test_sigkill_during_concurrent_submits_loses_no_acknowledged_job(umd, tmp_path):
    state = tmp_path / "state-kill"
    acked = set()
    rnd = random.Random(14)
    # bench/chaos runs this with many more cycles.
    for cycle in range(int(os.environ.get("UMD_CHAOS_KILL_CYCLES", "20"))):
        d = umd(state_dir=state)
        lock = threading.Lock()

        def client(stop):
            s = requests.Session()
            while not stop.is_set():
                try:
                    r = s.post(d.url("/v1/jobs"), json={"benchmark": "copy", "device": 0},
                               timeout=5)
                except requests.RequestException:
                    return
                if 200 <= r.status_code < 300:
                    with lock:
                        acked.add(r.json()["id"])

        kill_while(d, client, rnd.uniform(0.02, 0.4))
        d.close()
    assert len(acked) > 20
    d = umd(state_dir=state, args=["--list-limit-max", "500"])
    for jid in acked:
        r = d.get("/v1/jobs/" + jid)
        assert r.status_code == 200, (jid, r.text)
        assert r.json()["state"] in LEGAL, r.json()
    assert not list(jobs_dir(d).glob("*.corrupt")), d.log()


# -- SIGSTOP of a worker --

def test_sigstop_of_a_worker_fails_its_part_and_keeps_the_api_up(umd):
    d = umd(args=["--heartbeat-interval-ms", "100", "--heartbeat-timeout-ms", "1000"])
    jid = submit(d, {"benchmark": "copy", "device": 0, "params": {"fake_delay_ms": 60000}})["id"]
    wait_job(d, jid, states=("running",))
    # Workers start cold: wait for device 0's to have said hello (one stopped before hello is
    # judged by the start timeout, which allows for creating a CUDA context).
    deadline = time.monotonic() + 10
    while not d.get("/v1/devices").json()[0]["warm"]:
        assert time.monotonic() < deadline, d.log()
        time.sleep(0.05)
    workers = wait_workers(d, 1)
    stopped = []
    for w in workers:
        os.kill(w, signal.SIGSTOP)
        stopped.append(w)
    try:
        t0 = time.monotonic()
        j = wait_job(d, jid, timeout=15)
        assert j["state"] == "failed", j
        assert time.monotonic() - t0 < 10
        r = d.get("/v1/health", timeout=2)
        assert r.status_code in (200, 503)
        # A fresh worker takes over: the device runs jobs again.
        j2 = submit(d, {"benchmark": "copy", "device": 0})["id"]
        assert wait_job(d, j2)["state"] == "succeeded"
    finally:
        for w in stopped:
            try:
                os.kill(w, signal.SIGKILL)
            except ProcessLookupError:
                pass


# -- odd files: in the state directory, and as configured files --

def test_odd_files_in_the_state_dir_are_set_aside_and_start_up_never_hangs(umd, tmp_path):
    state, good = a_stored_job(umd, {"team": "x"})
    jobs = state / "jobs"
    doc = json.loads((jobs / f"{good}.json").read_text())
    names = {kind: f"{uuid.uuid4()}.json" for kind in
             ("fifo", "socket", "dir", "symlink", "huge", "badjson", "badshape")}
    os.mkfifo(jobs / names["fifo"])
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    short = tempfile.mkdtemp(dir="/tmp")  # a pytest path can pass sun_path's 108 bytes
    sock.bind(short + "/s")
    os.rename(short + "/s", jobs / names["socket"])
    os.rmdir(short)
    (jobs / names["dir"]).mkdir()
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps(dict(doc, id=names["symlink"][:-5])))
    (jobs / names["symlink"]).symlink_to(target)
    with open(jobs / names["huge"], "wb") as f:
        f.truncate(300 * 1024 * 1024)  # sparse: over the store's limit, costs no disk
    (jobs / names["badjson"]).write_text('{"id": ')
    (jobs / names["badshape"]).write_text(json.dumps(dict(doc, id=names["badshape"][:-5],
                                                          parts="none")))
    try:
        d = umd(state_dir=state, wait=False)
        d.wait_ready(timeout=10)  # a FIFO used to block here forever
        listed = d.get("/v1/jobs").json()["jobs"]
        assert [j["id"] for j in listed] == [good], listed
        for kind, name in names.items():
            assert set_aside(jobs, name), (kind, d.log())
        assert target.exists()  # the link was set aside, not followed
    finally:
        sock.close()


def test_a_stored_label_that_is_not_a_string_is_set_aside_not_a_crash(umd):
    state, jid = a_stored_job(umd, {"team": "x"})
    path = state / "jobs" / f"{jid}.json"
    doc = json.loads(path.read_text())
    doc["labels"] = {"team": 5}
    path.write_text(json.dumps(doc))
    d = umd(state_dir=state)
    r = d.get("/v1/jobs?label=team:x")
    assert r.status_code == 200, r.text
    assert r.json()["jobs"] == []
    assert d.process.poll() is None
    assert d.get("/v1/jobs/" + jid).status_code == 404
    assert set_aside(state / "jobs", f"{jid}.json"), d.log()


@pytest.mark.parametrize("key", ["tokens_file", "tls_cert"])
def test_a_fifo_as_a_configured_file_is_refused_at_once(umd_run, tmp_path, key):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    args = ["--listen", "127.0.0.1:0", "--state-dir", str(tmp_path / "s"),
            "--fake-devices", "1", "--" + key.replace("_", "-"), str(fifo)]
    if key == "tls_cert":
        args += ["--tls-key", str(fifo)]
    t0 = time.monotonic()
    r = umd_run(args, timeout=10)  # used to hang in open() until killed
    assert r.returncode != 0
    assert time.monotonic() - t0 < 10
    assert key in r.stderr and "regular file" in r.stderr, r.stderr


def test_a_fifo_as_the_config_file_is_refused_at_once(umd_run, tmp_path):
    fifo = tmp_path / "umd.conf"
    os.mkfifo(fifo)
    r = umd_run(["--config", str(fifo), "--check-config"], timeout=10)
    assert r.returncode == 2, r
    assert "not a regular file" in r.stderr, r.stderr


def test_a_tokens_file_owned_by_another_user_is_refused(umd_run, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    tokens = tmp_path / "tokens"
    tokens.write_text(f"admin admin {TOKEN}\n")
    tokens.chmod(0o600)
    os.chown(tokens, 65534, 65534)
    r = umd_run(["--listen", "127.0.0.1:0", "--state-dir", str(tmp_path / "s"),
                 "--fake-devices", "1", "--tokens-file", str(tokens)])
    assert r.returncode != 0
    assert "owned by uid 65534" in r.stderr, r.stderr


# -- a full disk --

def test_a_full_disk_refuses_submits_and_keeps_serving(umd, tmp_path):
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        d = umd(state_dir=mnt / "state")
        acked, refused = [], 0
        for _ in range(400):
            r = d.post("/v1/jobs", json={"benchmark": "copy", "device": 0,
                                         "labels": {"pad": "x" * 200}})
            if r.status_code == 202:
                acked.append(r.json()["id"])
            else:
                assert r.status_code in (503, 507), r.text
                refused += 1
                if refused > 5:
                    break
        assert refused > 0, "the disk never filled"
        assert d.get("/v1/health").status_code in (200, 503)
        for jid in acked:
            assert d.get("/v1/jobs/" + jid).status_code == 200
        assert d.process.poll() is None
        d.kill()
        # Everything acknowledged survived the full disk, as a restart reads it back.
        for p in (mnt / "state" / "jobs").glob(".*.tmp.*"):
            p.unlink()
        d2 = umd(state_dir=mnt / "state")
        for jid in acked:
            assert d2.get("/v1/jobs/" + jid).status_code == 200, jid
        d2.kill()
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


# -- slow clients --

def trickle(addr, port, stop, cut):
    """One slow client: a header line every 0.3 s, never the blank line that ends them.
    Reconnects when cut, as an attacker would; counts the cuts."""
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2,
                                         source_address=(addr, 0))
        except OSError:
            time.sleep(0.05)
            continue
        try:
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
            while not stop.is_set():
                s.sendall(b"X-Slow: 1\r\n")
                time.sleep(0.3)
        except OSError:
            cut.append(addr)
        finally:
            s.close()


def test_slow_clients_from_several_addresses_do_not_starve_a_fifth(umd):
    d = umd(args=["--max-connections", "8", "--max-connections-per-ip", "2",
                  "--connection-timeout-s", "30", "--request-timeout-s", "2",
                  "--http-threads", "1"])
    stop, cut = threading.Event(), []
    threads = [threading.Thread(target=trickle, args=(f"127.0.0.{2 + i}", d.port, stop, cut))
               for i in range(4) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)  # every slot is taken
        t0 = time.monotonic()
        s = socket.create_connection(("127.0.0.1", d.port), timeout=10,
                                     source_address=("127.0.0.6", 0))
        s.sendall(b"GET /v1/version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        reply = s.recv(100)
        s.close()
        waited = time.monotonic() - t0
        assert reply.startswith(b"HTTP/1.1 200"), reply
        assert waited < 6, waited
        deadline = time.monotonic() + 3
        while not cut and time.monotonic() < deadline:
            time.sleep(0.1)  # a trickler notices at its next send
        assert cut, "no slow client was cut off"
    finally:
        stop.set()
        for t in threads:
            t.join(5)


def non_loopback_ipv4():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            a = s.getsockname()[0]
        except OSError:
            return None
    return None if a.startswith("127.") or a == "0.0.0.0" else a


def test_remote_clients_cannot_take_the_slots_kept_for_local_ones(umd):
    remote = non_loopback_ipv4()
    if not remote:
        pytest.skip("no non-loopback IPv4 address to connect from")
    port = free_port("0.0.0.0")
    d = umd(listen=False, args=["--listen", f"0.0.0.0:{port}", "--max-connections", "8",
                                "--max-connections-per-ip", "8", "--request-timeout-s", "60",
                                "--http-threads", "1"])
    held = []
    try:
        for _ in range(8):
            s = socket.socket()
            s.settimeout(2)
            s.bind((remote, 0))
            try:
                s.connect((remote, port))
                s.sendall(b"GET /v1/health HTTP/1.1\r\n")
            except OSError:
                pass
            held.append(s)
        time.sleep(0.5)
        r = requests.get(f"http://127.0.0.1:{port}/v1/version", timeout=3)
        assert r.status_code == 200
    finally:
        for s in held:
            s.close()


# -- header and link tricks --

def test_a_bearer_token_with_a_nul_and_junk_is_refused(umd, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"admin admin {TOKEN}\n")
    tokens.chmod(0o600)
    d = umd(args=["--tokens-file", str(tokens), "--auth-reads", "true"])

    def status(value, after=b"", eol=b"\r\n"):
        with socket.create_connection(("127.0.0.1", d.port), timeout=5) as s:
            s.sendall(b"GET /v1/jobs HTTP/1.1" + eol + b"Host: x" + eol + b"Connection: close" +
                      eol + b"Authorization: " + value + eol + after + eol)
            return s.recv(64).split(b" ")[1]

    good = b"Bearer " + TOKEN.encode()
    for eol in (b"\r\n", b"\n"):
        for after in (b"", b"Accept: */*" + eol):
            assert status(good, after, eol) == b"200", (after, eol)
            # (Behind the last header, LF line ends and two or more NULs cannot be told from
            # a body: see header_hides_bytes in api/server.c.)
            nuls = (b"\0junk", b"\0\0junk") if after or eol == b"\r\n" else (b"\0junk",)
            for junk in nuls:
                assert status(good + junk, after, eol) == b"401", (junk, after, eol)


def test_the_next_link_is_whole_however_long_the_query(umd):
    d = umd(args=["--max-label-value-len", "1000"])
    value = " " * 600  # 1,800 bytes once percent-encoded
    ids = [submit(d, {"benchmark": "copy", "device": 0, "labels": {"k": value}})["id"]
           for _ in range(2)]
    page = d.get("/v1/jobs", params={"label": "k:" + value, "limit": 1}).json()
    assert len(page["jobs"]) == 1 and page["next"], page
    assert len(page["next"]) > 1023
    r = d.get(page["next"])
    assert r.status_code == 200, r.text
    assert [j["id"] for j in page["jobs"] + r.json()["jobs"]] == ids[::-1]
