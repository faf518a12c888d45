"""Who may reach umd and how: bearer tokens and their roles, the tokens file's checks,
listening beyond loopback, the unix socket, and TLS; against the real daemon with fake
devices."""
import http.client
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import time

import pytest
import requests

from conftest import free_port, is_problem, stored_docs

READ = "read-token-0123456789abcdef"
SUBMIT = "submit-token-0123456789abcdef"
SUBMIT2 = "other-submit-token-0123456789"
ADMIN = "admin-token-0123456789abcdef"
ALL_TOKENS = (READ, SUBMIT, SUBMIT2, ADMIN)
SLOW = {"benchmark": "copy", "device": 0, "params": {"fake_delay_ms": 30000}}
QUICK = {"benchmark": "copy", "device": 0, "params": {"size": "1MiB"}}


def bearer(token):
    return {"Authorization": "Bearer " + token}


def tokens_file(tmp_path, mode=0o600, text=None):
    path = tmp_path / "tokens"
    if text is None:
        text = ("# name role token\n"
                f"reader read {READ}\n"
                "\n"
                f"alice submit {SUBMIT}\n"
                f"bob submit {SUBMIT2}\n"
                f"root admin {ADMIN}\n")
    path.write_text(text)
    os.chmod(path, mode)
    return path


def with_tokens(umd, tmp_path, *more, **kw):
    return umd(args=["--tokens-file", str(tokens_file(tmp_path)), *more], **kw)


def assert_no_token_anywhere(d):
    """No secret in the daemon's log or any file in its state directory."""
    log = d.log()
    for t in ALL_TOKENS:
        assert t not in log
    for root, _, files in os.walk(d.state_dir):
        for name in files:
            try:
                data = open(os.path.join(root, name), "rb").read()
            except FileNotFoundError:
                continue  # a temp file renamed into place while we walked
            for t in ALL_TOKENS:
                assert t.encode() not in data, (name, t)


def refused(d, timeout=30):
    """Wait for a daemon that must not start; returns (exit status, log)."""
    rc = d.process.wait(timeout)
    d.read_notify(0.1)
    assert not d.notified("READY=1")
    return rc, d.log()


# -- tokens and roles --

def test_no_token_is_401_with_www_authenticate(umd, tmp_path):
    d = with_tokens(umd, tmp_path)
    r = d.post("/v1/jobs", json=QUICK)
    body = is_problem(r, 401)
    assert r.headers["WWW-Authenticate"].startswith('Bearer realm="umd"')
    assert "submit" in body["detail"]
    # Another scheme is no token either.
    r = d.post("/v1/jobs", json=QUICK, headers={"Authorization": "Basic YWxpY2U6eA=="})
    is_problem(r, 401)
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    assert d.get("/v1/jobs").json()["jobs"] == []


def test_unknown_token_is_401(umd, tmp_path):
    d = with_tokens(umd, tmp_path)
    for t in ("not-a-token-at-all-0000000", SUBMIT + "x", SUBMIT[:-1], "", READ.upper()):
        r = d.post("/v1/jobs", json=QUICK, headers={"Authorization": "Bearer " + t})
        is_problem(r, 401)
        assert r.headers["WWW-Authenticate"].startswith('Bearer realm="umd"')
    r = d.delete("/v1/jobs/01890a5d-ac96-774b-bcce-b302099a8057",
                 headers=bearer("nope-nope-nope-nope-nope"))
    is_problem(r, 401)
    assert d.get("/v1/jobs").json()["jobs"] == []


def test_read_token_cannot_submit(umd, tmp_path):
    d = with_tokens(umd, tmp_path)
    body = is_problem(d.post("/v1/jobs", json=QUICK, headers=bearer(READ)), 403)
    assert "reader" in body["detail"] and "submit" in body["detail"]
    assert READ not in body["detail"]
    assert d.get("/v1/jobs").json()["jobs"] == []


def test_submit_token_records_its_name_and_never_the_token(umd, tmp_path):
    d = with_tokens(umd, tmp_path)
    r = d.post("/v1/jobs", json=QUICK, headers=bearer(SUBMIT))
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["client"] == "alice"
    deadline = time.monotonic() + 30
    while d.get("/v1/jobs/" + job["id"]).json()["state"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    done = d.get("/v1/jobs/" + job["id"]).json()
    assert done["state"] == "succeeded" and done["client"] == "alice"
    stored = stored_docs(d.state_dir)[job["id"]].decode()
    assert '"alice"' in stored
    # An admin token submits too, under its own name.
    r = d.post("/v1/jobs", json=QUICK, headers=bearer(ADMIN))
    assert r.status_code == 202 and r.json()["client"] == "root"
    assert d.stop() == 0
    assert_no_token_anywhere(d)


def test_cancel_own_job_but_not_another_clients_unless_admin(umd, tmp_path):
    d = with_tokens(umd, tmp_path, fake_devices=1)
    a1 = d.post("/v1/jobs", json=SLOW, headers=bearer(SUBMIT)).json()
    a2 = d.post("/v1/jobs", json=SLOW, headers=bearer(SUBMIT)).json()
    a3 = d.post("/v1/jobs", json=SLOW, headers=bearer(SUBMIT)).json()

    is_problem(d.delete("/v1/jobs/" + a1["id"]), 401)
    is_problem(d.delete("/v1/jobs/" + a1["id"], headers=bearer(READ)), 403)
    body = is_problem(d.delete("/v1/jobs/" + a1["id"], headers=bearer(SUBMIT2)), 403)
    assert "admin" in body["detail"]
    assert d.get("/v1/jobs/" + a1["id"]).json()["state"] in ("queued", "running")

    r = d.delete("/v1/jobs/" + a2["id"], headers=bearer(SUBMIT))
    assert r.status_code == 200, r.text
    r = d.delete("/v1/jobs/" + a3["id"], headers=bearer(ADMIN))
    assert r.status_code == 200, r.text
    r = d.delete("/v1/jobs/" + a1["id"], headers=bearer(ADMIN))
    assert r.status_code == 200, r.text
    assert_no_token_anywhere(d)


READS = ("/v1/jobs", "/v1/devices", "/v1/benchmarks", "/v1/version", "/metrics", "/v1/health")


def test_reads_are_open_without_auth_reads(umd, tmp_path):
    d = with_tokens(umd, tmp_path)
    for path in READS:
        r = d.get(path)
        assert r.status_code == 200, (path, r.status_code, r.text)
    # A token is no hindrance to a read, even a bad one.
    assert d.get("/v1/jobs", headers=bearer(READ)).status_code == 200
    assert d.get("/v1/jobs", headers=bearer("unknown-unknown-unknown")).status_code == 200


def test_auth_reads_needs_a_read_token(umd, tmp_path):
    d = with_tokens(umd, tmp_path, "--auth-reads", "true")
    for path in READS:
        r = d.get(path)
        is_problem(r, 401)
        assert r.headers["WWW-Authenticate"].startswith('Bearer realm="umd"'), path
        is_problem(d.get(path, headers=bearer("unknown-unknown-unknown")), 401)
        for t in (READ, SUBMIT, ADMIN):
            r = d.get(path, headers=bearer(t))
            assert r.status_code == 200, (path, r.status_code, r.text)
    # The API's own description stays readable.
    assert d.get("/v1/openapi.json").status_code == 200


def test_without_tokens_everyone_is_an_anonymous_admin(umd):
    d = umd(fake_devices=1)
    job = d.post("/v1/jobs", json=SLOW).json()
    assert job.get("client") is None
    assert d.delete("/v1/jobs/" + job["id"]).status_code == 200


def test_jobs_per_token_is_429(umd, tmp_path):
    d = with_tokens(umd, tmp_path, "--jobs-per-token", "2", fake_devices=1)
    for _ in range(2):
        assert d.post("/v1/jobs", json=SLOW, headers=bearer(SUBMIT)).status_code == 202
    before = d.get("/v1/jobs").json()["jobs"]
    body = is_problem(d.post("/v1/jobs", json=SLOW, headers=bearer(SUBMIT)), 429)
    assert "jobs_per_token" in body["detail"] and SUBMIT not in body["detail"]
    assert d.get("/v1/jobs").json()["jobs"] == before
    # Another token has its own allowance.
    assert d.post("/v1/jobs", json=SLOW, headers=bearer(SUBMIT2)).status_code == 202


# -- the tokens file --

@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644])
def test_tokens_file_others_can_read_is_refused(umd, tmp_path, mode):
    path = tokens_file(tmp_path, mode=mode)
    d = umd(args=["--tokens-file", str(path)], wait=False)
    rc, log = refused(d)
    assert rc == 1
    assert str(path) in log and f"mode {mode:04o}" in log


@pytest.mark.parametrize("text, line, why", [
    (f"alice submit {SUBMIT}\nbob writer {SUBMIT2}\n", 2, "role must be read, submit or admin"),
    (f"# c\n\nalice submit\n", 3, "expected NAME ROLE TOKEN"),
    ("alice submit short\n", 1, "token must be 16 to 256 characters long"),
    (f"alice submit {SUBMIT}\nbob read {SUBMIT}\n", 2, "same token"),
])
def test_bad_tokens_file_line_is_refused(umd, tmp_path, text, line, why):
    path = tokens_file(tmp_path, text=text)
    d = umd(args=["--tokens-file", str(path)], wait=False)
    rc, log = refused(d)
    assert rc == 1
    assert f"{path}:{line}: {why}" in log, log
    assert SUBMIT not in log


def test_missing_tokens_file_is_refused(umd, tmp_path):
    d = umd(args=["--tokens-file", str(tmp_path / "nope")], wait=False)
    rc, log = refused(d)
    assert rc == 1 and "nope" in log


# -- beyond loopback --

def test_listening_beyond_loopback_without_tokens_warns(umd):
    port = free_port("0.0.0.0")
    d = umd(listen=False, args=["--listen", f"0.0.0.0:{port}"])
    log = d.log()
    assert "WARNING" in log and f"0.0.0.0:{port} is beyond loopback" in log
    assert requests.get(f"http://127.0.0.1:{port}/v1/health", timeout=10).status_code == 200


def test_loopback_only_does_not_warn(umd):
    d = umd()
    assert "beyond loopback" not in d.log()


def test_require_auth_off_loopback_refuses_to_start(umd):
    port = free_port("0.0.0.0")
    d = umd(listen=False, wait=False,
            args=["--listen", f"127.0.0.1:{free_port()}", "--listen", f"0.0.0.0:{port}",
                  "--require-auth-off-loopback", "true"])
    rc, log = refused(d)
    assert rc == 1
    assert f"0.0.0.0:{port}" in log and "require_auth_off_loopback" in log


def test_require_auth_off_loopback_starts_with_tokens(umd, tmp_path):
    port = free_port("0.0.0.0")
    with_tokens(umd, tmp_path, "--listen", f"0.0.0.0:{port}", "--require-auth-off-loopback",
                "true", listen=False)
    r = requests.post(f"http://127.0.0.1:{port}/v1/jobs", json=QUICK, timeout=10)
    assert r.status_code == 401


# -- unix socket --

class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(self.path)


def unix_get(path, url, headers=None):
    c = UnixHTTPConnection(path)
    try:
        c.request("GET", url, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


@pytest.fixture
def short_dir():
    # sun_path holds 108 bytes; pytest's tmp_path can be longer.
    d = tempfile.mkdtemp(prefix="umd-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_unix_socket_serves_with_its_mode(umd, short_dir):
    path = os.path.join(short_dir, "umd.sock")
    d = umd(args=["--unix-socket", path, "--unix-socket-mode", "0600"])
    st = os.stat(path)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600
    status, body = unix_get(path, "/v1/health")
    assert status == 200 and b'"status"' in body
    # TCP still serves beside it.
    assert d.get("/v1/health").status_code == 200
    if shutil.which("curl"):
        out = subprocess.run(["curl", "-sS", "--unix-socket", path, "http://x/v1/version"],
                             capture_output=True, text=True, timeout=10)
        assert out.returncode == 0 and '"version"' in out.stdout, out.stderr
    assert d.stop() == 0
    assert not os.path.exists(path)


def test_unix_socket_alone_with_default_mode_and_a_stale_file(umd, short_dir):
    path = os.path.join(short_dir, "umd.sock")
    # What a killed daemon leaves: a socket file nobody listens on.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()
    assert os.path.exists(path)
    umd(listen=False, args=["--listen", "", "--unix-socket", path])
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o660
    status, _ = unix_get(path, "/v1/devices")
    assert status == 200


def test_unix_socket_in_use_is_not_taken_over(umd, short_dir):
    path = os.path.join(short_dir, "umd.sock")
    umd(args=["--unix-socket", path])
    second = umd(args=["--unix-socket", path], wait=False)
    rc, log = refused(second)
    assert rc == 1 and "another process" in log
    assert unix_get(path, "/v1/health")[0] == 200


def test_unix_socket_follows_tokens(umd, tmp_path, short_dir):
    path = os.path.join(short_dir, "umd.sock")
    with_tokens(umd, tmp_path, "--unix-socket", path, "--auth-reads", "true")
    assert unix_get(path, "/v1/jobs")[0] == 401
    assert unix_get(path, "/v1/jobs", bearer(READ))[0] == 200


# -- TLS --

def make_cert(tmp_path, name="tls"):
    d = tmp_path / name
    d.mkdir()
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.mark.skipif(not shutil.which("openssl"), reason="openssl is not installed")
def test_tls_serves_https_and_not_plain_http(umd, tmp_path):
    cert, key = make_cert(tmp_path)
    d = umd(args=["--tls-cert", str(cert), "--tls-key", str(key)])
    url = f"https://127.0.0.1:{d.port}"
    r = requests.get(url + "/v1/health", verify=str(cert), timeout=10)
    assert r.status_code == 200 and "status" in r.json()
    r = requests.post(url + "/v1/jobs", json=QUICK, verify=str(cert), timeout=10)
    assert r.status_code == 202, r.text
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"http://127.0.0.1:{d.port}/v1/health", timeout=10)
    # Someone else's certificate is not trusted.
    other, _ = make_cert(tmp_path, "other")
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(url + "/v1/health", verify=str(other), timeout=10)
    assert f"https://127.0.0.1:{d.port}" in d.log()


@pytest.mark.skipif(not shutil.which("openssl"), reason="openssl is not installed")
def test_tls_with_tokens(umd, tmp_path):
    cert, key = make_cert(tmp_path)
    d = with_tokens(umd, tmp_path, "--tls-cert", str(cert), "--tls-key", str(key))
    url = f"https://127.0.0.1:{d.port}/v1/jobs"
    assert requests.post(url, json=QUICK, verify=str(cert), timeout=10).status_code == 401
    r = requests.post(url, json=QUICK, verify=str(cert), headers=bearer(SUBMIT), timeout=10)
    assert r.status_code == 202 and r.json()["client"] == "alice"


@pytest.mark.skipif(not shutil.which("openssl"), reason="openssl is not installed")
def test_tls_bad_files_are_refused(umd, tmp_path):
    cert, key = make_cert(tmp_path)
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    d = umd(args=["--tls-cert", str(junk), "--tls-key", str(key)], wait=False)
    rc, log = refused(d)
    assert rc == 1 and "junk.pem" in log and "PEM" in log

    d = umd(args=["--tls-cert", str(cert), "--tls-key", str(tmp_path / "absent.pem")],
            wait=False)
    rc, log = refused(d)
    assert rc == 1 and "absent.pem" in log

    # Both are PEM, but the key is not the certificate's.
    other_cert, other_key = make_cert(tmp_path, "other")
    d = umd(args=["--tls-cert", str(cert), "--tls-key", str(other_key)], wait=False)
    rc, log = refused(d)
    assert rc == 1 and "not a valid PEM certificate and its private key" in log
