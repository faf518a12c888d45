"""Queued jobs wait in memory as their documents' compact bytes (daemon/jobs/job_index.c,
job_compact): a restart with thousands of them queued recovers every one intact, reads and
cancels of waiting jobs answer as before, and they still run in their order once resumed."""
import concurrent.futures
import threading

import pytest
import requests

from conftest import wait_job

N = 2000
ARGS = ["--queue-capacity", "100000", "--queue-capacity-per-device", "100000",
        "--jobs-per-token", "100000", "--http-threads", "8", "--log-level", "warning"]


def bodies(n):
    """Submissions of several shapes: labels, priorities, both devices, a busy policy, an
    idempotency key (and reals, whose digits must survive the bytes)."""
    out = []
    for k in range(n):
        b = {"benchmark": "copy", "device": k % 2,
             "params": {"size": f"{4 + k % 7}KiB", "iterations": 1, "warmup": 0}}
        if k % 3 == 0:
            b["labels"] = {"run": f"r{k}", "note": "é \"quoted\" \\ slash"}
        if k % 5 == 0:
            b["priority"] = ["high", "low"][k % 2]
        if k % 11 == 0:
            b = {**b, "devices": [0, 1]}
            del b["device"]
        if k % 13 == 0:
            b["busy_policy"] = "wait"
        if k % 17 == 0:
            b["params"]["fake_bandwidth_pct"] = 50
        out.append(b)
    return out


def submit_all(d, bs):
    local = threading.local()

    def one(k):
        if not hasattr(local, "s"):
            local.s = requests.Session()
        h = {"Idempotency-Key": f"queued-{k}"} if k % 29 == 0 else {}
        r = local.s.post(d.url("/v1/jobs"), json=bs[k], headers=h, timeout=60)
        assert r.status_code == 202, r.text
        return r.json()["id"]

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        return list(ex.map(one, range(len(bs))))


def read_all(d, ids):
    s = requests.Session()
    return {i: s.get(d.url(f"/v1/jobs/{i}"), timeout=10).json() for i in ids}


@pytest.mark.system  # thousands of jobs: half a minute
def test_a_restart_with_thousands_queued_recovers_every_job_intact(umd):
    d = umd(args=ARGS)
    for i in (0, 1):
        assert d.post(f"/v1/devices/{i}/pause", json={"reason": "queued test"}).status_code == 200
    bs = bodies(N)
    ids = submit_all(d, bs)
    before = read_all(d, ids)
    assert all(doc["state"] == "queued" for doc in before.values())
    # A read leaves a waiting job as it was: the same answer twice.
    assert read_all(d, ids[:50]) == {i: before[i] for i in ids[:50]}
    assert d.stop() == 0

    d = umd(args=ARGS, state_dir=d.state_dir)
    after = read_all(d, ids)
    assert after == before
    # The first submission answers again for its key, from the recovered job.
    r = d.post("/v1/jobs", json=bs[0], headers={"Idempotency-Key": "queued-0"})
    assert r.status_code == 200 and r.json()["id"] == ids[0]
    # A waiting job cancelled after the restart says so, as before.
    r = d.delete(f"/v1/jobs/{ids[1]}")
    assert r.status_code in (200, 202), r.text
    assert d.get(f"/v1/jobs/{ids[1]}").json()["state"] == "cancelled"

    # Resumed, the waiting jobs run (the high-priority ones first): their trees are made again
    # from the bytes.
    for i in (0, 1):
        assert d.post(f"/v1/devices/{i}/resume").status_code == 200
    for k in (10, 20, 30, 40):
        assert bs[k].get("priority") == "high"
        assert wait_job(d, ids[k], timeout=60)["state"] == "succeeded"
