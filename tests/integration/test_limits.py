"""Limits not covered elsewhere: total connections, connections per address, and the size of
a worker's result. Each is configurable; past it clients get a clear refusal and nothing
stored changes."""
import re
import selectors
import socket
import time

import pytest

from conftest import is_problem
from test_jobs import job_files, submit, wait_job


def idle_connections(port, n):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        socks.append(s)
    time.sleep(0.3)  # let the server accept them
    return socks


def refused(port):
    """True when a new connection gets no HTTP answer (closed or reset by the server)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return s.recv(64) == b""
    except (ConnectionResetError, BrokenPipeError, socket.timeout):
        return True


@pytest.mark.parametrize("flag", ["--max-connections", "--max-connections-per-ip"])
def test_connections_beyond_the_limit_are_refused_and_served_again_after(umd, flag):
    d = umd(args=[flag, "3", "--http-threads", "1"])
    socks = idle_connections(d.port, 3)
    try:
        assert refused(d.port)
    finally:
        for s in socks:
            s.close()
    time.sleep(0.3)
    assert d.get("/v1/health").status_code == 200


@pytest.mark.parametrize("threads", ["1", "4"])
def test_an_address_gets_max_connections_per_ip_over_every_http_thread(umd, threads):
    """Each HTTP thread runs its own libmicrohttpd daemon, whose own per-IP count is its
    alone: umd counts an address over all of them, so four threads do not give it four times
    the limit."""
    d = umd(args=["--max-connections-per-ip", "3", "--http-threads", threads])
    socks = idle_connections(d.port, 3)
    try:
        assert refused(d.port)
        assert refused(d.port)
    finally:
        for s in socks:
            s.close()
    time.sleep(0.3)
    assert d.get("/v1/health").status_code == 200


def _closed_loop(socks, request, seconds):
    """Like wrk: each connection sends its next request as soon as its answer is whole, for
    seconds; the answers, and the longest any request waited."""
    sel = selectors.DefaultSelector()
    state = {}
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        s.send(request)
        state[s] = [b"", time.monotonic()]
    answers, worst = 0, 0.0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for key, _ in sel.select(0.2):
            s = key.fileobj
            chunk = s.recv(65536)
            assert chunk, "a kept-alive connection was closed"
            buf = state[s][0] + chunk
            head, sep, body = buf.partition(b"\r\n\r\n")
            length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
            if sep and length and len(body) >= int(length.group(1)):
                assert buf.startswith(b"HTTP/1.1 200"), buf[:100]
                now = time.monotonic()
                worst = max(worst, now - state[s][1])
                answers += 1
                state[s] = [b"", now]
                s.send(request)
            else:
                state[s][0] = buf
        now = time.monotonic()
        worst = max([worst] + [now - v[1] for v in state.values()])
    sel.close()
    return answers, worst


def test_hundreds_of_kept_alive_connections_under_load_never_stall(umd):
    """libmicrohttpd 0.9.75's own epoll thread blocks in epoll_wait for the connection timeout
    after one call returns 128 events, with the connections it reported unanswered (server.c
    says where); 256 connections in a closed loop on one thread hit it within a second (every
    request then waited the whole run). umd's workers run that loop themselves and never
    stall."""
    d = umd(args=["--max-connections-per-ip", "1024", "--http-threads", "1",
                  "--connection-timeout-s", "30"])
    socks = idle_connections(d.port, 256)
    try:
        answers, worst = _closed_loop(socks, b"GET /v1/version HTTP/1.1\r\nHost: x\r\n\r\n", 4)
    finally:
        for s in socks:
            s.close()
    assert worst < 2.0, f"a request waited {worst:.1f} s ({answers} answers in 4 s)"
    assert answers > 2560


def test_result_larger_than_max_result_bytes_fails_the_job_and_says_why(umd):
    d = umd(fake_devices=1, args=["--max-result-bytes", "4096"])
    small = wait_job(d, submit(d, {"benchmark": "copy", "params": {"iterations": 2}})["id"])
    assert small["state"] == "succeeded"
    # 400 samples may fit 4096 bytes by umd's lower bound (8 bytes each), so it runs; written
    # out they take about 21 each.
    big = wait_job(d, submit(d, {"benchmark": "copy", "params": {"iterations": 400}})["id"])
    assert big["state"] == "failed"
    assert "max_result_bytes" in big["parts"][0]["error"]
    assert big["parts"][0]["result"] is None
    # the device is fine afterwards
    again = wait_job(d, submit(d, {"benchmark": "copy", "params": {"iterations": 2}})["id"])
    assert again["state"] == "succeeded"
    assert len(job_files(d)) == 3


def test_a_result_sure_to_pass_max_result_bytes_is_refused_at_submit(umd):
    """Issue 57: a sweep within every bound ran whole, then failed for its result's size. Where
    the params say the result's size (samples x sizes x modes), it is checked before the run."""
    d = umd(fake_devices=1, args=["--max-result-bytes", "64KiB"])
    r = d.post("/v1/jobs", json={"benchmark": "sweep", "params": {"iterations": 1000}})
    body = is_problem(r, 400)
    assert body["field"] == "params.iterations", body
    assert "max_result_bytes" in body["detail"] and "68000 samples" in body["detail"], body
    assert job_files(d) == {}


def test_a_job_estimated_far_over_its_timeout_is_refused_with_the_estimate(umd):
    """Issue 57: valid pipeline params that would need months held a GPU until timeout_s."""
    d = umd(fake_devices=1)
    huge = {"benchmark": "pipeline", "params": {"size": "4GiB", "iterations": 1000,
                                                "intensity": 1048576, "steps": 100}}
    body = is_problem(d.post("/v1/jobs", json=huge), 400)
    assert body["field"] == "params", body
    assert "estimated at least" in body["detail"] and "limit of 6000 s" in body["detail"], body
    assert "job_estimate_factor" in body["detail"], body
    # The bound is the job's own timeout_s: a copy of 4 GiB x 1003 takes at least 34 s.
    copy = {"benchmark": "copy", "params": {"size": "4GiB", "iterations": 1000}}
    is_problem(d.post("/v1/jobs", json=dict(copy, timeout_s=1)), 400)
    assert job_files(d) == {}
    r = d.post("/v1/jobs", json=dict(copy, timeout_s=600))
    assert r.status_code == 202, r.text
    d.delete(r.headers["Location"])


@pytest.mark.parametrize("body,field", [
    ('{"benchmark": "copy", "params": {"size": 9223372036854775808}}', "params.size"),
    ('{"benchmark": "copy", "params": {"iterations": 18446744073709551615}}', "params.iterations"),
    ('{"benchmark": "copy", "devices": [0, -9223372036854775809]}', "devices[1]"),
    ('{"benchmark": "copy", "timeout_s": 1e999}', "timeout_s"),
    ('{"benchmark": "copy", "labels": {"team": "a\\u0000b"}}', "labels.team"),
])
def test_json_beyond_umds_range_names_the_parameter(umd, body, field):
    """Issue 57: valid JSON umd cannot hold was answered "invalid JSON" with no field."""
    d = umd(fake_devices=1)
    r = d.post("/v1/jobs", data=body, headers={"Content-Type": "application/json"})
    doc = is_problem(r, 400)
    assert doc["field"] == field, doc
    assert "invalid JSON" not in doc["detail"], doc


def test_job_estimate_factor_0_refuses_nothing(umd):
    d = umd(fake_devices=1, args=["--job-estimate-factor", "0"])
    r = d.post("/v1/jobs", json={"benchmark": "copy", "timeout_s": 1,
                                 "params": {"size": "4GiB", "iterations": 1000}})
    assert r.status_code == 202, r.text
    d.delete(r.headers["Location"])


def _get_health(sock_family, addr, src=None):
    """One GET /v1/health on a fresh connection: its status, or None when no answer came."""
    try:
        with socket.socket(sock_family, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            if src:
                s.bind((src, 0))
            s.connect(addr)
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else None
    except (OSError, ValueError, IndexError):
        return None


def test_four_addresses_at_their_limit_leave_a_fifth_and_the_unix_socket_served(umd, tmp_path):
    """Issue 23: four addresses each hold max_connections_per_ip slow (header-trickling)
    connections; a fifth address and the unix socket are served every time meanwhile, and
    the slow ones are still held (the fifth was not served by cutting them)."""
    from hostile import SlowClients

    path = tmp_path / "umd.sock"
    if len(str(path)) >= 108:
        pytest.skip("tmp path too long for a unix socket")
    per_ip = 64
    # Default max_connections and threads; a request deadline past the test, so nothing is
    # cut for being slow while the fifth is asked.
    d = umd(args=["--unix-socket", str(path), "--max-connections-per-ip", str(per_ip),
                  "--request-timeout-s", "120"])
    addr = ("127.0.0.1", d.port)
    slow = [SlowClients(f"127.0.0.{2 + i}", addr, per_ip) for i in range(4)]
    try:
        for s in slow:
            s.__enter__()
        time.sleep(0.5)  # let the server accept them all
        assert [s.open for s in slow] == [per_ip] * 4
        # Each address is at its limit: one more from it is refused.
        assert _get_health(socket.AF_INET, addr, "127.0.0.2") is None
        fifth = [_get_health(socket.AF_INET, addr, "127.0.0.6") for _ in range(40)]
        local = [_get_health(socket.AF_UNIX, str(path)) for _ in range(40)]
        assert fifth == [200] * 40, fifth
        assert local == [200] * 40, local
        assert [s.open for s in slow] == [per_ip] * 4
    finally:
        for s in slow:
            s.__exit__(None, None, None)
    assert d.get("/v1/health").status_code == 200
