"""A worker's result kept as its bytes (issue 23): umd stores the bytes the worker wrote when they
are exactly what jansson would write, and parses anything else as before. A relay between umd
and the real umd-worker rewrites the worker's result frames (a mode file says how), so each path
is driven through the real daemon: the worker's own canonical frame, a valid frame written
otherwise (indented: parsed, stored canonically), and broken ones (a frame that is not JSON, a
result that is not an object), which fail the part with the reason, as before, storing nothing
broken."""

import json
import os
import stat
import sys

import pytest

import conftest

RELAY = r'''#!{python}
import os, select, socket, struct, subprocess, sys
REAL = {real!r}
MODE = {mode!r}
SEEN = {seen!r}
args = sys.argv[1:]
if "--ipc-fd" not in args:
    os.execv(REAL, [REAL] + args)
i = args.index("--ipc-fd")
up = socket.socket(fileno=int(args[i + 1]))
a, b = socket.socketpair()
args[i + 1] = str(b.fileno())
child = subprocess.Popen([REAL] + args, pass_fds=[b.fileno()])
b.close()
buf = b""


def rewrite(payload):
    mode = open(MODE).read().strip()
    if b'"type":"result"' not in payload or b'"ok":true' not in payload:
        return payload
    with open(SEEN, "ab") as f:
        f.write(payload + b"\n")
    if mode == "indent":
        import json
        return json.dumps(json.loads(payload), indent=1).encode()
    if mode == "garbage":
        return payload[:-1]  # the closing brace gone: not JSON
    if mode == "string":
        import json
        m = json.loads(payload)
        m["result"] = "not an object"
        return json.dumps(m).encode()
    return payload


try:
    while True:
        r, _, _ = select.select([up, a], [], [])
        if up in r:
            data = up.recv(65536)
            if not data:
                break
            a.sendall(data)
        if a in r:
            data = a.recv(65536)
            if not data:
                break
            buf += data
            while len(buf) >= 4:
                n = struct.unpack(">I", buf[:4])[0]
                if len(buf) < 4 + n:
                    break
                p = rewrite(buf[4:4 + n])
                buf = buf[4 + n:]
                up.sendall(struct.pack(">I", len(p)) + p)
finally:
    child.kill()
    child.wait()
'''


@pytest.fixture
def relayed(tmp_path):
    mode = tmp_path / "mode"
    seen = tmp_path / "seen"
    mode.write_text("as-is")
    relay = tmp_path / "relay-worker"
    relay.write_text(RELAY.replace("{python}", sys.executable).format(
        real=conftest.UMD_WORKER, mode=str(mode), seen=str(seen)))
    relay.chmod(relay.stat().st_mode | stat.S_IXUSR)
    d = conftest.Daemon(tmp_path, fake_devices=1, args=["--worker-path", str(relay)])
    d.wait_ready(30)
    yield d, mode, seen
    d.close()


BODY = {"benchmark": "copy", "params": {"size": "4KiB", "iterations": 2, "warmup": 0}}


def run_one(d, mode_file, mode):
    mode_file.write_text(mode)
    job = conftest.submit(d, BODY)
    return conftest.wait_job(d, job["id"])


def last_seen(seen):
    return json.loads(seen.read_bytes().splitlines()[-1])["result"]


def stored_body(d, jid):
    # Out of memory once its final write committed: then served from the store's bytes.
    def from_store():
        r = d.get("/v1/jobs/" + jid)
        return r if r.headers.get("ETag") else None
    return conftest.wait_for(from_store, what="the stored document").content


def test_the_workers_bytes_are_stored_as_they_came(relayed):
    d, mode, seen = relayed
    j = run_one(d, mode, "as-is")
    assert j["state"] == "succeeded", j
    assert j["parts"][0]["result"] == last_seen(seen)
    sent = seen.read_bytes().splitlines()[-1]
    body = stored_body(d, j["id"])
    # The worker's result bytes, verbatim, inside the stored document.
    start = sent.index(b'"result":') + len(b'"result":')
    raw = sent[start:sent.rindex(b',"type":"result"}')]
    assert b'"result":' + raw + b',"started"' in body
    # Metrics read what they need of it without the tree.
    m = d.get("/metrics").text
    assert 'benchmark="copy",mode="h2d"' in m


def test_an_answer_from_memory_has_the_same_bytes(relayed):
    d, mode, seen = relayed
    job = conftest.submit(d, BODY)
    # A waiter is answered at the final change, while the job is still in memory: its answer
    # is made from the tree there, the result parsed from the bytes after core_lock.
    r = d.get(f"/v1/jobs/{job['id']}?wait=10s", timeout=20)
    assert r.status_code == 200 and r.json()["state"] == "succeeded", r.text
    sent = seen.read_bytes().splitlines()[-1]
    start = sent.index(b'"result":') + len(b'"result":')
    raw = sent[start:sent.rindex(b',"type":"result"}')]
    assert b'"result":' + raw + b',"started"' in r.content
    assert r.content == stored_body(d, job["id"])


def test_a_valid_result_written_otherwise_is_parsed_and_stored_canonically(relayed):
    d, mode, seen = relayed
    j = run_one(d, mode, "indent")
    assert j["state"] == "succeeded", j
    assert j["parts"][0]["result"] == last_seen(seen)
    body = stored_body(d, j["id"])
    assert b"\n" not in body and b'": ' not in body
    assert json.loads(body)["parts"][0]["result"] == last_seen(seen)


@pytest.mark.parametrize("how", ["garbage", "string"])
def test_a_broken_result_fails_the_part_with_the_reason(relayed, how):
    d, mode, seen = relayed
    j = run_one(d, mode, how)
    assert j["state"] == "failed", j
    part = j["parts"][0]
    assert "result" not in part or part["result"] is None
    assert "protocol" in part["error"], part["error"]
    body = stored_body(d, j["id"])
    assert json.loads(body)["parts"][0]["error"] == part["error"]
    # The next result, as the worker writes it, is taken again.
    j = run_one(d, mode, "as-is")
    assert j["state"] == "succeeded", j
