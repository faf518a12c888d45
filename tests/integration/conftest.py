"""Fixtures that run the real umd on loopback for the integration tests.

`umd` is a factory: `d = umd()` starts umd on a free 127.0.0.1 port with a temporary state
directory, --fake-devices 2 and the built worker, binds a datagram socket for it as
NOTIFY_SOCKET, and returns once READY=1 arrived. Every daemon it started is killed at the end
of the test. `umd_run(args)` runs umd to completion (for flags that make it exit).

Every answer a Daemon's get/post/delete receives is checked against the OpenAPI document
(api/openapi.json, the contract): its route, method and status must be documented, and a JSON
body must validate against the documented schema (python3-jsonschema). A test fails on anything
umd sends that the document lacks.

Environment (set by tests/integration/meson.build): UMD_BIN, UMD_WORKER.

Two suites (tests/integration/meson.build): a test marked `system` (real Slurm or Prometheus,
or minutes on purpose: the soak, chaos) runs in 'system', once; every other test in 'fast', which
the sanitizer build runs too. Both spread tests over pytest-xdist workers, so a test shares
nothing with another but what an `xdist_group` marker names (kept on one worker): ports come
from free_port, directories from tmp_path.
"""
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests

UMD_BIN = os.environ.get("UMD_BIN", "")
UMD_WORKER = os.environ.get("UMD_WORKER", "")
REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 30
# The ports a umd the fixture chose the port of may try: free_port's port is free when asked, but
# another process (a test on another xdist worker, or any client's connection, whose local port
# comes from the same range) may bind it before umd does, which then exits saying so.
PORT_TRIES = 3
OPENAPI = REPO / "api" / "openapi.json"


class Contract:
    """The OpenAPI document as a checker of answers."""

    def __init__(self, path=OPENAPI):
        import jsonschema  # python3-jsonschema (packaging/install-deps --test)

        self.jsonschema = jsonschema
        self.doc = json.loads(Path(path).read_text())
        self.routes = [(re.compile("^" + re.sub(r"\\{[^/]+\\}", "[^/]+", re.escape(p)) + "$"), p)
                       for p in self.doc["paths"]]
        self.checked = 0

    def _deref(self, obj):
        while "$ref" in obj and obj["$ref"].startswith("#/"):
            node = self.doc
            for part in obj["$ref"][2:].split("/"):
                node = node[part]
            obj = node
        return obj

    def _validate(self, schema, body, where):
        # The schema inside a copy of the components: "#/components/..." resolves in place.
        root = dict(schema, components=self.doc["components"])
        v = self.jsonschema.Draft202012Validator(root)
        e = self.jsonschema.exceptions.best_match(v.iter_errors(body))
        if e is not None:
            path = "/".join(str(x) for x in e.absolute_path)
            raise AssertionError(f"{where}: the answer does not match openapi.json at "
                                 f"/{path}: {e.message[:500]}")

    def check(self, method, url, r):
        path = re.sub(r"^[a-z]+://[^/]+", "", url).split("?")[0]
        where = f"{method} {path} -> {r.status_code}"
        ctype = r.headers.get("Content-Type", "").split(";")[0].strip()
        problem = self.doc["components"]["schemas"]["Problem"]
        item = next((self.doc["paths"][p] for rx, p in self.routes if rx.match(path)), None)
        if item is None or method.lower() not in item:
            # No such path (404) or method (405): a problem, on any URL.
            assert r.status_code in (404, 405), f"{where}: not in openapi.json"
            assert ctype == "application/problem+json", where
            self._validate(problem, r.json(), where)
            self.checked += 1
            return
        op = item[method.lower()]
        resp = op["responses"].get(str(r.status_code))
        assert resp is not None, f"{where}: status {r.status_code} is not in openapi.json"
        resp = self._deref(resp)
        if method == "HEAD" or r.status_code == 304 or not r.content:
            assert "content" not in resp or method == "HEAD", f"{where}: documented with a body"
            self.checked += 1
            return
        content = resp.get("content", {})
        media = next((m for m in content if m.split(";")[0].strip() == ctype), None)
        assert media is not None, (f"{where}: Content-Type {ctype} is not documented "
                                   f"({', '.join(content)})")
        if ctype.endswith("json"):
            self._validate(content[media].get("schema", {}), r.json(), where)
        self.checked += 1


def pytest_configure(config):
    config.addinivalue_line("markers", "system: runs in the system suite, once, not under the "
                            "sanitizers (real Slurm or Prometheus, or minutes on purpose)")


_contract = None


def contract():
    global _contract
    if _contract is None:
        _contract = Contract()
    return _contract


def free_port(host="127.0.0.1", family=socket.AF_INET):
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def clean_env():
    """The test's environment minus anything that would change how umd starts."""
    env = dict(os.environ)
    for k in ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "NOTIFY_SOCKET", "WATCHDOG_USEC",
              "WATCHDOG_PID", "JOURNAL_STREAM", "STATE_DIRECTORY"):
        env.pop(k, None)
    return env


def stored_docs(state_dir):
    """{id: the stored public document's bytes} from STATE_DIR/umd.db (read-only; safe while
    umd runs: WAL readers see the last commit)."""
    path = Path(state_dir) / "umd.db"
    if not path.exists():
        return {}
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        return {i: d.encode() for i, d in con.execute("SELECT id, doc FROM jobs ORDER BY id")}
    finally:
        con.close()


def stored_job(state_dir, job_id):
    """The stored public document of job_id, parsed, or None."""
    import json
    doc = stored_docs(state_dir).get(job_id)
    return json.loads(doc) if doc is not None else None


def db_execute(state_dir, sql, params=()):
    """Run one statement on a stopped umd's database (tests that fake age or damage)."""
    con = sqlite3.connect(Path(state_dir) / "umd.db", timeout=10)
    try:
        with con:
            return con.execute(sql, params).fetchall()
    finally:
        con.close()


class Daemon:
    """One umd process. Attributes: process, base_url, port, state_dir, notify (list of the
    datagrams received so far, each a str like "READY=1\\nSTATUS=...")."""

    def __init__(self, tmp_path, fake_devices=2, args=(), state_dir=None, listen=True,
                 activation_socket=None, env=None):
        self.tmp = tmp_path
        self.port = free_port()
        self.host = "127.0.0.1"
        self.base_url = f"http://127.0.0.1:{self.port}"
        if state_dir is None:
            state_dir = tmp_path / f"state-{uuid.uuid4().hex[:8]}"
        self.state_dir = Path(state_dir)
        self.notify = []
        # Abstract socket: a pytest tmp path can pass sun_path's 108 bytes.
        self._notify_name = f"umd-test-{uuid.uuid4().hex}"
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self._sock.bind("\0" + self._notify_name)
        self._log_path = tmp_path / f"umd-{self.port}.log"
        self._log = open(self._log_path, "wb")

        cmd = [UMD_BIN]
        if listen:
            cmd += ["--listen", f"127.0.0.1:{self.port}"]
        cmd += ["--state-dir", str(self.state_dir), "--worker-path", UMD_WORKER]
        if fake_devices is not None:
            cmd += ["--fake-devices", str(fake_devices)]
        cmd += list(args)
        self.cmd = cmd

        child_env = clean_env()
        child_env["NOTIFY_SOCKET"] = "@" + self._notify_name
        child_env.update(env or {})
        preexec = None
        if activation_socket is not None:
            fd = activation_socket.fileno()

            def preexec():  # runs in the child between fork and exec
                if fd != 3:
                    os.dup2(fd, 3)
                else:
                    os.set_inheritable(3, True)
                os.environ.clear()
                os.environ.update(child_env)
                os.environ["LISTEN_FDS"] = "1"
                os.environ["LISTEN_PID"] = str(os.getpid())

        self.process = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            env=None if preexec else child_env, preexec_fn=preexec,
            close_fds=preexec is None)

    # -- notifications --
    def read_notify(self, timeout=0.0):
        """Collect datagrams that arrive within timeout; returns the full list so far."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            self._sock.settimeout(max(left, 0.0) if left > 0 else None)
            if left <= 0:
                self._sock.setblocking(False)
            try:
                data = self._sock.recv(4096)
            except (BlockingIOError, socket.timeout):
                return self.notify
            self.notify.append(data.decode(errors="replace"))

    def notified(self, line):
        return any(line in m.split("\n") for m in self.notify)

    def wait_ready(self, timeout=READY_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while not self.notified("READY=1"):
            if self.process.poll() is not None:
                raise RuntimeError(f"umd exited with {self.process.returncode} before "
                                   f"READY=1:\n{self.log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no READY=1 within {timeout}s:\n{self.log()}")
            self.read_notify(0.1)
        return self

    def lost_its_port(self):
        """Did umd exit because another process bound the port free_port chose first?"""
        return (self.process.poll() is not None and
                f"cannot listen on 127.0.0.1:{self.port}: Address already in use" in self.log())

    # -- output --
    def log(self):
        self._log.flush()
        return self._log_path.read_text(errors="replace")

    # -- HTTP --
    def url(self, path):
        return self.base_url + path

    def _checked(self, method, path, kw):
        # contract=False: a test that damaged a stored document on purpose reads it back as
        # stored, which no contract describes.
        checked = kw.pop("contract", True)
        kw.setdefault("timeout", 10)
        r = requests.request(method, self.url(path), **kw)
        if checked:
            contract().check(method, self.url(path), r)
        return r

    def get(self, path, **kw):
        return self._checked("GET", path, kw)

    def head(self, path, **kw):
        return self._checked("HEAD", path, kw)

    def post(self, path, **kw):
        return self._checked("POST", path, kw)

    def delete(self, path, **kw):
        return self._checked("DELETE", path, kw)

    # -- stopping --
    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Send sig and wait for exit; returns the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            rc = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"umd did not exit within {timeout}s of {sig!r}:\n{self.log()}")
        self.read_notify(0.2)
        return rc

    def kill(self):
        """SIGKILL, as a crash would: nothing gets to clean up."""
        if self.process.poll() is None:
            self.process.kill()
        return self.process.wait()

    def close(self):
        if self.process.poll() is None:
            self.kill()
        self._sock.close()
        self._log.close()


@pytest.fixture
def umd(tmp_path):
    """Factory: umd(fake_devices=2, args=(), state_dir=None, wait=True, ...) -> Daemon."""
    if not UMD_BIN or not UMD_WORKER:
        pytest.fail("UMD_BIN and UMD_WORKER must point at the built umd and umd-worker")
    started = []

    def start(fake_devices=2, args=(), state_dir=None, wait=True, **kw):
        for tries_left in reversed(range(PORT_TRIES)):
            d = Daemon(tmp_path, fake_devices=fake_devices, args=args, state_dir=state_dir, **kw)
            started.append(d)
            if not wait:
                return d
            try:
                return d.wait_ready()
            except RuntimeError:
                if not (tries_left and kw.get("listen", True) and d.lost_its_port()):
                    raise

    yield start
    for d in started:
        d.close()


@pytest.fixture
def umd_run(tmp_path):
    """Run umd with args to completion: returns CompletedProcess (text, stderr captured)."""

    def run(args, timeout=20):
        return subprocess.run([UMD_BIN, *args], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout, env=clean_env(),
                              cwd=tmp_path)

    return run


def is_problem(r, status):
    """Assert r is an RFC 9457 problem with this status; returns its body."""
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["Content-Type"] == "application/problem+json", r.headers
    body = r.json()
    assert body["status"] == status
    assert body["type"].startswith("https://umd.dev/problems/")
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    return body


# -- helpers the test files share --

FINAL = ("succeeded", "failed", "cancelled", "timed_out", "interrupted")


def submit(d, body, expect=202, **kw):
    """POST body to /v1/jobs, assert the status, return the job."""
    r = d.post("/v1/jobs", json=body, **kw)
    assert r.status_code == expect, r.text
    return r.json()


def wait_job(d, jid, states=FINAL, timeout=30):
    """Poll the job until its state is one of states; return it."""
    deadline = time.monotonic() + timeout
    while True:
        r = d.get("/v1/jobs/" + jid)
        assert r.status_code == 200, r.text
        j = r.json()
        if j["state"] in states:
            return j
        assert time.monotonic() < deadline, f"job {jid} stuck in {j['state']}:\n{d.log()}"
        time.sleep(0.05)


def wait_for(cond, timeout=15, what="condition", step=0.05):
    """Call cond until it returns something true; return that."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(step)


def worker_argvs(umd_pid):
    """{pid: argv (list of bytes)} of umd's children, read from /proc."""
    out = {}
    for task in Path(f"/proc/{umd_pid}/task").iterdir():
        try:
            kids = [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:
            continue
        for pid in kids:
            try:
                out[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except FileNotFoundError:
                continue
    return out


def kill_while(d, client, delay, threads=4):
    """Run client(stop) on threads, SIGKILL the daemon after delay seconds, then set stop and
    join them: what a crash looks like to clients in flight."""
    stop = threading.Event()
    ts = [threading.Thread(target=client, args=(stop,)) for _ in range(threads)]
    for t in ts:
        t.start()
    time.sleep(delay)
    d.kill()
    stop.set()
    for t in ts:
        t.join(10)


def run_job(d, body):
    """Submit body, wait for the job, assert it succeeded; return it."""
    done = wait_job(d, submit(d, body)["id"])
    assert done["state"] == "succeeded", done
    return done
