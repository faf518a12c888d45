"""Limits not covered elsewhere: total connections, connections per address, and the size of
a worker's result. Each is configurable; past it clients get a clear refusal and nothing
stored changes."""
import socket
import time

import pytest

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


def test_result_larger_than_max_result_bytes_fails_the_job_and_says_why(umd):
    d = umd(fake_devices=1, args=["--max-result-bytes", "4096"])
    small = wait_job(d, submit(d, {"benchmark": "copy", "params": {"iterations": 2}})["id"])
    assert small["state"] == "succeeded"
    big = wait_job(d, submit(d, {"benchmark": "copy", "params": {"iterations": 1000}})["id"])
    assert big["state"] == "failed"
    assert "max_result_bytes" in big["parts"][0]["error"]
    assert big["parts"][0]["result"] is None
    # the device is fine afterwards
    again = wait_job(d, submit(d, {"benchmark": "copy", "params": {"iterations": 2}})["id"])
    assert again["state"] == "succeeded"
    assert len(job_files(d)) == 3
