"""Reads as a contract: ?wait= on a job and on a list (held without a thread, bounded in
count, answered at shutdown), ETag and If-None-Match on finished jobs, unknown query
arguments refused on every route, Link headers and include=results on lists."""
import threading
import time

import pytest
import requests

from conftest import FINAL, is_problem
from conftest import submit as conftest_submit

QUICK = {"benchmark": "copy", "device": 0, "params": {"size": "1MiB"}}


def slow(ms, device=0):
    return {"benchmark": "copy", "device": device, "params": {"size": "1MiB", "fake_delay_ms": ms}}


def submit(d, body):
    return conftest_submit(d, body)["id"]


def test_wait_answers_when_the_job_is_final(umd):
    d = umd()
    jid = submit(d, slow(1500))
    t = time.monotonic()
    r = d.get(f"/v1/jobs/{jid}?wait=20s", timeout=30)
    took = time.monotonic() - t
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "succeeded"
    # One request: it came back once the job was done, not at the deadline.
    assert 0.5 < took < 10, took


def test_wait_answers_at_the_deadline_with_the_current_state(umd):
    d = umd()
    jid = submit(d, slow(20000))
    t = time.monotonic()
    r = d.get(f"/v1/jobs/{jid}?wait=600ms")
    took = time.monotonic() - t
    assert r.status_code == 200
    assert r.json()["state"] in ("queued", "running")
    assert 0.5 <= took < 3, took
    assert "ETag" not in r.headers  # not final: it may still change


def test_wait_is_cut_to_wait_max_s(umd):
    d = umd(args=["--wait-max-s", "1"])
    jid = submit(d, slow(20000))
    t = time.monotonic()
    r = d.get(f"/v1/jobs/{jid}?wait=30s", timeout=20)
    assert r.status_code == 200
    assert time.monotonic() - t < 5


@pytest.mark.parametrize("bad", ["", "x", "10h", "-1", "1.5s", "s"])
def test_wait_takes_only_durations(umd, bad):
    d = umd()
    jid = submit(d, QUICK)
    body = is_problem(d.get(f"/v1/jobs/{jid}?wait={bad}"), 400)
    assert body["field"] == "wait"


def start_waiters(d, jid, n):
    """n threads each waiting up to 3 s on the job; their statuses go into the list returned."""
    results = []

    def waiter():
        results.append(d.get(f"/v1/jobs/{jid}?wait=3s", timeout=20).status_code)

    ts = [threading.Thread(target=waiter) for _ in range(n)]
    for t in ts:
        t.start()
    return ts, results


def test_waiting_holds_no_http_thread(umd):
    # With one HTTP thread, more waits than threads are held while other reads are served.
    d = umd(args=["--http-threads", "1"])
    jid = submit(d, slow(20000))
    ts, results = start_waiters(d, jid, 4)
    time.sleep(0.5)
    t0 = time.monotonic()
    assert d.get("/v1/version").status_code == 200
    assert time.monotonic() - t0 < 1.0
    for t in ts:
        t.join()
    assert results == [200] * 4


def test_waiters_are_bounded(umd):
    d = umd(args=["--max-waiters", "2"])
    jid = submit(d, slow(20000))
    ts, results = start_waiters(d, jid, 2)
    time.sleep(0.7)
    r = d.get(f"/v1/jobs/{jid}?wait=3s")
    is_problem(r, 503)
    assert r.headers.get("Retry-After") == "1"
    for t in ts:
        t.join()
    assert results == [200, 200]


def test_shutdown_answers_every_waiter(umd):
    d = umd()
    jid = submit(d, slow(30000))
    out = []

    def waiter():
        try:
            out.append(d.get(f"/v1/jobs/{jid}?wait=60s", timeout=30).status_code)
        except requests.RequestException as e:
            out.append(repr(e))

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    assert d.stop() == 0
    t.join()
    assert out == [200]
    assert time.monotonic() - t0 < 15


def test_list_waits_for_anything_newer_than_the_cursor(umd):
    d = umd()
    first = submit(d, QUICK)
    r = d.get(f"/v1/jobs?after={first}&wait=500ms")
    assert r.status_code == 200 and r.json()["jobs"] == []
    got = {}

    def waiter():
        got["r"] = d.get(f"/v1/jobs?after={first}&wait=20s", timeout=30)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.5)
    second = submit(d, QUICK)
    t.join()
    assert [j["id"] for j in got["r"].json()["jobs"]] == [second]
    is_problem(d.get("/v1/jobs?wait=1s"), 400)


def test_finished_job_has_an_etag_and_answers_304(umd):
    d = umd()
    jid = submit(d, QUICK)
    j = d.get(f"/v1/jobs/{jid}?wait=20s", timeout=30)
    assert j.json()["state"] in FINAL
    tag = j.headers["ETag"]
    assert tag.startswith('"') and tag.endswith('"')
    r = d.get(f"/v1/jobs/{jid}", headers={"If-None-Match": tag})
    assert r.status_code == 304 and r.content == b""
    assert r.headers["ETag"] == tag
    r = d.get(f"/v1/jobs/{jid}", headers={"If-None-Match": f'"other", W/{tag}'})
    assert r.status_code == 304
    r = d.get(f"/v1/jobs/{jid}", headers={"If-None-Match": '"other"'})
    assert r.status_code == 200 and r.headers["ETag"] == tag
    # The text form is other bytes, so another tag.
    t = d.get(f"/v1/jobs/{jid}?format=text")
    assert t.headers["ETag"] != tag


@pytest.mark.parametrize("path", ["/", "/metrics", "/v1/health", "/v1/devices", "/v1/version",
                                  "/v1/benchmarks", "/v1/openapi.json", "/v1/jobs",
                                  "/v1/jobs/01a22ebc-e988-7058-99f8-ce8d1fab443b"])
def test_unknown_query_arguments_are_refused_everywhere(umd, path):
    d = umd()
    body = is_problem(d.get(path + "?bogus=1"), 400)
    assert body["field"] == "bogus"
    assert "bogus" in body["detail"]


def test_list_pages_carry_a_link_header(umd):
    d = umd()
    ids = [submit(d, QUICK) for _ in range(3)]
    r = d.get("/v1/jobs?limit=2")
    link = r.headers["Link"]
    nxt = r.json()["next"]
    assert link == f'<{nxt}>; rel="next"'
    r2 = d.get(nxt)
    assert "Link" not in r2.headers
    seen = [j["id"] for j in r.json()["jobs"] + r2.json()["jobs"]]
    assert seen == ids[::-1]


def test_include_results_is_bounded_by_bytes(umd):
    d = umd(args=["--list-results-max-bytes", "4096"])
    ids = [submit(d, QUICK) for _ in range(3)]
    for jid in ids:
        d.get(f"/v1/jobs/{jid}?wait=20s", timeout=30)
    plain = d.get("/v1/jobs").json()["jobs"]
    assert all("result" not in p for j in plain for p in j["parts"])
    r = d.get("/v1/jobs?include=results")
    page = r.json()
    # Each stored document is over 4 KiB with its samples: one a page, then a next link.
    assert len(page["jobs"]) >= 1 and page["next"]
    assert "include=results" in page["next"]
    assert page["jobs"][0]["parts"][0]["result"]["measurements"]
    assert page["jobs"][0] == d.get(f"/v1/jobs/{page['jobs'][0]['id']}").json()
    is_problem(d.get("/v1/jobs?include=everything"), 400)


def test_health_history_in_one_request(umd):
    d = umd()
    for _ in range(2):
        jid = submit(d, {"benchmark": "health", "device": 0})
        d.get(f"/v1/jobs/{jid}?wait=30s", timeout=40)
    uuid = d.get("/v1/devices").json()[0]["uuid"]
    page = d.get(f"/v1/jobs?benchmark=health&device={uuid}&include=results").json()
    assert len(page["jobs"]) == 2
    for j in page["jobs"]:
        assert j["parts"][0]["verdict"]["verdict"] in ("pass", "warn", "fail", "unknown")


def churn_and_wait(d, seconds, waiters=24, churners=3):
    """Jobs submitted and finishing without pause on GPU 1 while waiters ask, each with a short
    ?wait=, for a job that never finishes in time and for anything newer on the list: every
    change moves the generation the waiters check. Returns (answered, unanswered, statuses
    other than 200)."""
    long_job = submit(d, slow(600000))
    stop = threading.Event()
    lock = threading.Lock()
    count = {"answered": 0, "unanswered": 0, "other": []}
    newest = [long_job]

    def churn():
        body = {"benchmark": "copy", "device": 1, "params": {"size": "4KiB"}}
        while not stop.is_set():
            r = requests.post(d.url("/v1/jobs"), json=body, timeout=30)
            if r.status_code == 202:
                newest[0] = r.json()["id"]
            else:
                time.sleep(0.01)  # 429: the queue is full; let it drain

    def wait(i):
        while not stop.is_set():
            path = (f"/v1/jobs/{long_job}?wait=200ms" if i % 2 else
                    f"/v1/jobs?after={newest[0]}&wait=200ms&limit=1")
            try:
                r = requests.get(d.url(path), timeout=30)
            except requests.ConnectionError as e:
                with lock:
                    count["unanswered"] += 1
                    count["other"].append(repr(e)[:200])
                continue
            with lock:
                count["answered"] += 1
                if r.status_code != 200:
                    count["other"].append(r.status_code)

    ts = ([threading.Thread(target=churn) for _ in range(churners)] +
          [threading.Thread(target=wait, args=(i,)) for i in range(waiters)])
    for t in ts:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in ts:
        t.join(60)
    return count["answered"], count["unanswered"], count["other"]


def test_a_waiter_that_keeps_seeing_changes_is_answered_with_its_last_read(umd):
    d = umd()
    answered, unanswered, other = churn_and_wait(d, 8)
    assert unanswered == 0, (unanswered, answered, other[:5])
    assert answered > 100, answered
    assert other == [], other[:5]
    assert d.process.poll() is None
