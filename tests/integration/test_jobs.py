"""The jobs API against the real daemon with fake devices: submit and results, validation,
capacity, idempotency, listing, cancel, timeouts, crashes, kill -9 recovery, retention."""
import json
import time

import pytest

from conftest import db_execute, stored_docs, stored_job, wait_job, run_job
from conftest import submit as conftest_submit

COPY = {"benchmark": "copy", "device": 0, "params": {"size": "4MiB"}}


def submit(d, body, headers=None, expect=202):
    return conftest_submit(d, body, expect=expect, headers=headers or {})


def wait_device(d, index, state, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        dev = d.get("/v1/devices").json()[index]
        if dev["state"] == state:
            return dev
        assert time.monotonic() < deadline, f"device {index} is {dev['state']}, not {state}"
        time.sleep(0.05)


def problem(r, status, field=None):
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"].startswith("application/problem+json")
    doc = r.json()
    assert doc["status"] == status and doc["title"] and doc["detail"]
    if field is not None:
        assert doc.get("field") == field, doc
    return doc


def job_files(d):
    """What the store holds, as the old store's file names: {"<id>.json": document bytes}."""
    return {i + ".json": doc for i, doc in stored_docs(d.state_dir).items()}


# -- submit and result --

def test_submit_returns_202_with_location_and_the_queued_job(umd):
    d = umd()
    r = d.post("/v1/jobs", json=COPY)
    assert r.status_code == 202, r.text
    job = r.json()
    assert r.headers["Location"] == "/v1/jobs/" + job["id"]
    assert job["state"] in ("queued", "running")
    assert job["benchmark"] == "copy"
    assert job["params"]["size"] == 4 * 1024 * 1024
    assert "request" not in job


def test_job_runs_to_success_with_a_fake_result(umd):
    d = umd()
    job = submit(d, COPY)
    done = wait_job(d, job["id"])
    assert done["state"] == "succeeded"
    assert done["fake"] is True
    part = done["parts"][0]
    assert part["state"] == "succeeded" and part["fake"] is True
    res = part["result"]
    assert res["fake"] is True
    m = res["measurements"][0]
    assert m["name"] == "h2d" and m["gbps"] > 0 and m["verified"] is True
    assert len(m["samples_ms"]) == done["params"]["iterations"]
    assert done["created"] <= done["started"] <= done["finished"]


def test_job_over_all_devices_runs_one_part_per_device(umd):
    d = umd()
    job = submit(d, {"benchmark": "copy", "devices": "all", "params": {"size": 65536}})
    done = wait_job(d, job["id"])
    assert done["state"] == "succeeded"
    assert sorted(p["device"] for p in done["parts"]) == [0, 1]


def test_device_can_be_named_by_uuid(umd):
    d = umd()
    uuid = d.get("/v1/devices").json()[1]["uuid"]
    job = submit(d, {"benchmark": "copy", "device": uuid})
    assert job["parts"][0]["device"] == 1


def test_result_is_on_disk_when_the_job_reads_finished(umd):
    d = umd()
    job = submit(d, COPY)
    done = wait_job(d, job["id"])
    on_disk = stored_job(d.state_dir, job["id"])
    assert on_disk["state"] == "succeeded"
    assert on_disk["parts"][0]["result"] == done["parts"][0]["result"]


# -- validation: every 400 rule names the field --

@pytest.mark.parametrize("body,field", [
    ({"benchmark": "nope"}, "benchmark"),
    ({}, "benchmark"),
    ({"benchmark": 7}, "benchmark"),
    ({"benchmark": "copy", "params": {"bogus": 1}}, "params.bogus"),
    ({"benchmark": "copy", "params": {"iterations": "many"}}, "params.iterations"),
    ({"benchmark": "copy", "params": {"iterations": 0}}, "params.iterations"),
    ({"benchmark": "copy", "params": {"iterations": 10**9}}, "params.iterations"),
    ({"benchmark": "copy", "params": {"size": "12 parsecs"}}, "params.size"),
    ({"benchmark": "copy", "params": {"size": "1TiB"}}, "params.size"),
    ({"benchmark": "copy", "params": {"size": -5}}, "params.size"),
    ({"benchmark": "copy", "params": {"direction": "sideways"}}, "params.direction"),
    ({"benchmark": "copy", "params": []}, "params"),
    ({"benchmark": "copy", "device": 9}, "device"),
    ({"benchmark": "copy", "device": "GPU-00000000-0000-0000-0000-000000000000"}, "device"),
    ({"benchmark": "copy", "device": 1.5}, "device"),
    ({"benchmark": "copy", "devices": [0, 0]}, "devices[1]"),
    ({"benchmark": "copy", "devices": []}, "devices"),
    ({"benchmark": "copy", "device": 0, "devices": [1]}, "devices"),
    ({"benchmark": "copy", "priority": "urgent"}, "priority"),
    ({"benchmark": "copy", "timeout_s": 0}, "timeout_s"),
    ({"benchmark": "copy", "timeout_s": 10**6}, "timeout_s"),
    ({"benchmark": "copy", "timeout_s": "soon"}, "timeout_s"),
    ({"benchmark": "copy", "labels": {"a b": "x"}}, "labels"),
    ({"benchmark": "copy", "labels": {"k": 5}}, "labels"),
    ({"benchmark": "copy", "labels": ["x"]}, "labels"),
    ({"benchmark": "copy", "colour": "blue"}, "colour"),
])
def test_bad_submission_is_400_naming_the_field(umd, body, field):
    d = umd()
    doc = problem(d.post("/v1/jobs", json=body), 400, field)
    assert doc["type"].startswith("https://")
    assert job_files(d) == {}


def test_size_limit_is_named_in_the_error(umd):
    # The canonical check's d2d copy (256 MiB by default) must fit too, or umd would not start.
    d = umd(args=["--max-buffer-bytes", "64MiB", "--health-d2d-size", "64MiB"])
    doc = problem(d.post("/v1/jobs", json={"benchmark": "copy", "params": {"size": "128MiB"}}),
                  400, "params.size")
    assert "64 MiB" in doc["detail"] and "max_buffer_bytes" in doc["detail"]


def test_too_many_labels_is_400(umd):
    d = umd(args=["--max-labels", "2"])
    problem(d.post("/v1/jobs", json={**COPY, "labels": {"a": "1", "b": "2", "c": "3"}}), 400,
            "labels")


def test_overlong_label_value_is_400(umd):
    d = umd(args=["--max-label-value-len", "4"])
    problem(d.post("/v1/jobs", json={**COPY, "labels": {"a": "12345"}}), 400, "labels")


def test_unknown_job_is_404_and_malformed_id_400(umd):
    d = umd()
    problem(d.get("/v1/jobs/01a229a5-0fd2-7786-989d-83b526c57196"), 404)
    problem(d.get("/v1/jobs/not-a-uuid"), 400)
    problem(d.delete("/v1/jobs/not-a-uuid"), 400)


def test_no_devices_means_503_on_submit(umd):
    d = umd(fake_devices=0)
    problem(d.post("/v1/jobs", json={"benchmark": "copy"}), 503)


# -- capacity and priority --

def test_queue_full_is_429_with_retry_after_and_stores_nothing(umd):
    d = umd(fake_devices=1, args=["--queue-capacity", "2"])
    slow = {"benchmark": "copy", "params": {"fake_delay_ms": 5000}}
    first = submit(d, slow)
    wait_job(d, first["id"], ("running",))
    submit(d, slow)
    submit(d, slow)
    before = job_files(d)
    r = d.post("/v1/jobs", json=slow)
    doc = problem(r, 429)
    assert int(r.headers["Retry-After"]) > 0
    assert "queue_capacity" in doc["detail"]
    assert job_files(d) == before


def test_per_device_queue_limit_is_429(umd):
    d = umd(fake_devices=2, args=["--queue-capacity-per-device", "1"])
    slow = {"benchmark": "copy", "device": 0, "params": {"fake_delay_ms": 5000}}
    first = submit(d, slow)
    wait_job(d, first["id"], ("running",))
    submit(d, slow)
    problem(d.post("/v1/jobs", json=slow), 429)
    submit(d, {**slow, "device": 1})  # the other device still takes work


def test_high_priority_runs_before_older_normal_jobs(umd):
    d = umd(fake_devices=1)
    blocker = submit(d, {"benchmark": "copy", "params": {"fake_delay_ms": 800}})
    wait_job(d, blocker["id"], ("running",))
    normal = submit(d, {"benchmark": "copy"})
    low = submit(d, {"benchmark": "copy", "priority": "low"})
    high = submit(d, {"benchmark": "copy", "priority": "high"})
    jobs = {k: wait_job(d, j["id"]) for k, j in
            (("normal", normal), ("low", low), ("high", high))}
    assert jobs["high"]["started"] < jobs["normal"]["started"] < jobs["low"]["started"]


# -- idempotency --

def test_same_idempotency_key_and_body_returns_the_first_job(umd):
    d = umd()
    h = {"Idempotency-Key": "nightly-42"}
    first = d.post("/v1/jobs", json=COPY, headers=h)
    assert first.status_code == 202
    again = d.post("/v1/jobs", json=COPY, headers=h)
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert len(job_files(d)) == 1


def test_same_idempotency_key_with_another_body_is_409(umd):
    d = umd()
    h = {"Idempotency-Key": "nightly-43"}
    submit(d, COPY, headers=h)
    problem(d.post("/v1/jobs", json={**COPY, "priority": "high"}, headers=h), 409)
    assert len(job_files(d)) == 1


def test_a_used_key_is_answered_before_what_is_wrong_with_the_body(umd):
    """umd validates a submission before it takes its lock, but says what is wrong with it only
    once the key is known not to name an earlier job: the answer stays the key's."""
    d = umd()
    h = {"Idempotency-Key": "nightly-44"}
    submit(d, COPY, headers=h)
    bad = {**COPY, "device": 7}  # two fake devices
    problem(d.post("/v1/jobs", json=bad, headers=h), 409)
    problem(d.post("/v1/jobs", json=bad, headers={"Idempotency-Key": "nightly-45"}), 400)
    assert len(job_files(d)) == 1


# -- listing --

def test_list_filters_and_paginates_over_hundreds_of_jobs(umd):
    d = umd(args=["--queue-capacity", "1000", "--queue-capacity-per-device", "1000"])
    ids = []
    for i in range(240):
        body = {"benchmark": "copy" if i % 3 else "latency", "device": i % 2,
                "params": {"size": 65536} if i % 3 else {},
                "labels": {"batch": "odd" if i % 2 else "even"}}
        ids.append(submit(d, body)["id"])
    for jid in ids[-4:]:
        wait_job(d, jid)

    seen, url = [], "/v1/jobs?limit=50"
    while url:
        page = d.get(url).json()
        assert len(page["jobs"]) <= 50
        seen += [j["id"] for j in page["jobs"]]
        url = page["next"]
    assert seen == list(reversed(ids)), "newest first, each job exactly once"

    lat = d.get("/v1/jobs?benchmark=latency&limit=500").json()["jobs"]
    assert len(lat) == 80 and all(j["benchmark"] == "latency" for j in lat)
    dev1 = d.get("/v1/jobs?device=1&limit=500").json()["jobs"]
    assert len(dev1) == 120 and all(j["parts"][0]["device"] == 1 for j in dev1)
    odd = d.get("/v1/jobs?label=batch:odd&limit=500").json()["jobs"]
    assert {j["id"] for j in odd} == set(ids[1::2])
    uuid1 = d.get("/v1/devices").json()[1]["uuid"]
    assert len(d.get(f"/v1/jobs?device={uuid1}&limit=500").json()["jobs"]) == 120
    for jid in ids:
        wait_job(d, jid)
    ok = d.get("/v1/jobs?status=succeeded&limit=500").json()["jobs"]
    assert len(ok) == 240
    paged = d.get("/v1/jobs?benchmark=copy&limit=7").json()
    assert "benchmark=copy" in paged["next"] and "before=" in paged["next"]


def _row(d, sql, params):
    """One row of the running umd's database (read-only: a WAL reader sees the last commit)."""
    import sqlite3
    con = sqlite3.connect(f"file:{d.state_dir / 'umd.db'}?mode=ro", uri=True, timeout=10)
    try:
        return con.execute(sql, params).fetchone()
    finally:
        con.close()


def _wait_first_part_written_alone(d, job_id):
    """Until part 0's end is stored as its own document (JOB_PERSIST_DELAY_MS after it)."""
    deadline = time.monotonic() + 20
    while not _row(d, "SELECT 1 FROM parts WHERE job_id = ? AND idx = 0 AND doc IS NOT NULL",
                   (job_id,)):
        assert time.monotonic() < deadline, "the first part's end was never written alone"
        time.sleep(0.1)


def test_a_job_between_its_parts_is_listed_as_running(umd):
    """A part that ends while its job's other part waits is written as the part's own document,
    leaving the job's row (which lists read) as it was; a list writes such a job whole first."""
    d = umd()
    r = d.post("/v1/devices/1/pause", json={"reason": "test: hold the second part"})
    assert r.status_code == 200, r.text
    job = submit(d, {"benchmark": "copy", "params": {"size": "4KiB"}})
    assert len(job["parts"]) == 2
    # No GET of the job meanwhile: an answer that shows a job writes it whole.
    _wait_first_part_written_alone(d, job["id"])
    assert _row(d, "SELECT state FROM jobs WHERE id = ?", (job["id"],)) == ("queued",)

    running = d.get("/v1/jobs?status=running").json()["jobs"]
    assert [j["id"] for j in running] == [job["id"]]
    assert running[0]["state"] == "running"
    assert [p["state"] for p in running[0]["parts"]] == ["succeeded", "queued"]
    assert d.get("/v1/jobs?status=queued").json()["jobs"] == []
    assert _row(d, "SELECT state FROM jobs WHERE id = ?", (job["id"],)) == ("running",)

    assert d.post("/v1/devices/1/resume").status_code == 200
    assert wait_job(d, job["id"])["state"] == "succeeded"


def test_a_stop_leaves_a_job_between_its_parts_written_whole(umd):
    """What a stopped store holds is read by more than the next start (umd --export): a job
    whose ended part was written as its own document is written whole at shutdown."""
    d = umd()
    assert d.post("/v1/devices/1/pause", json={"reason": "test"}).status_code == 200
    job = submit(d, {"benchmark": "copy", "params": {"size": "4KiB"}})
    _wait_first_part_written_alone(d, job["id"])
    d.stop()
    state, parts = db_execute(d.state_dir, "SELECT state, json_extract(doc, '$.parts') FROM jobs "
                              "WHERE id = ?", (job["id"],))[0]
    assert state == "running"
    assert [p["state"] for p in json.loads(parts)] == ["succeeded", "queued"]
    assert json.loads(parts)[0]["result"]["benchmark"] == "copy"
    assert db_execute(d.state_dir, "SELECT count(*) FROM parts WHERE job_id = ? AND doc IS NOT "
                      "NULL", (job["id"],)) == [(0,)]


@pytest.mark.parametrize("query,field", [
    ("status=sleeping", "status"), ("limit=0", "limit"), ("limit=100000", "limit"),
    ("before=nope", "before"), ("device=7", "device"), ("label=nocolon", "label"),
    ("benchmark=nope", "benchmark"),
])
def test_bad_list_query_is_400(umd, query, field):
    d = umd()
    problem(d.get("/v1/jobs?" + query), 400, field)


# -- cancel --

def test_cancel_queued_job_is_immediate(umd):
    d = umd(fake_devices=1)
    blocker = submit(d, {"benchmark": "copy", "params": {"fake_delay_ms": 3000}})
    wait_job(d, blocker["id"], ("running",))
    queued = submit(d, COPY)
    r = d.delete("/v1/jobs/" + queued["id"])
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "cancelled"
    assert stored_job(d.state_dir, queued["id"])["state"] == "cancelled"


def test_cancel_running_job_stops_it_and_the_device_takes_the_next(umd):
    d = umd(fake_devices=1)
    running = submit(d, {"benchmark": "copy", "params": {"fake_delay_ms": 60000}})
    wait_job(d, running["id"], ("running",))
    nxt = submit(d, COPY)
    t0 = time.monotonic()
    assert d.delete("/v1/jobs/" + running["id"]).status_code == 200
    assert wait_job(d, running["id"], timeout=10)["state"] == "cancelled"
    assert time.monotonic() - t0 < 5
    assert wait_job(d, nxt["id"])["state"] == "succeeded"


def test_cancel_of_a_hung_job_kills_the_worker_after_the_grace(umd):
    d = umd(fake_devices=1, args=["--cancel-grace-ms", "300"])
    hung = submit(d, {"benchmark": "copy", "params": {"fake_hang": True}})
    wait_job(d, hung["id"], ("running",))
    d.delete("/v1/jobs/" + hung["id"])
    assert wait_job(d, hung["id"], timeout=10)["state"] == "cancelled"
    assert wait_job(d, submit(d, COPY)["id"])["state"] == "succeeded"


def test_cancel_finished_job_is_409(umd):
    d = umd()
    job = submit(d, COPY)
    wait_job(d, job["id"])
    problem(d.delete("/v1/jobs/" + job["id"]), 409)


# -- timeouts and crashes --

def test_timeout_kills_a_hanging_worker_and_the_next_job_runs(umd):
    d = umd(fake_devices=1)
    hung = submit(d, {"benchmark": "copy", "timeout_s": 1, "params": {"fake_hang": True}})
    done = wait_job(d, hung["id"], timeout=15)
    assert done["state"] == "timed_out"
    assert "timed out" in done["parts"][0]["error"]
    assert wait_job(d, submit(d, COPY)["id"], timeout=15)["state"] == "succeeded"


def test_crashing_worker_fails_the_job_with_the_signal_and_is_respawned(umd):
    d = umd(fake_devices=1, args=["--respawn-backoff-ms", "50"])
    crash = submit(d, {"benchmark": "copy", "params": {"fake_crash": True}})
    done = wait_job(d, crash["id"])
    assert done["state"] == "failed"
    assert "signal" in done["parts"][0]["error"]
    assert wait_job(d, submit(d, COPY)["id"])["state"] == "succeeded"


def test_repeated_crashes_fault_the_device_and_fail_its_queue(umd):
    d = umd(fake_devices=2, args=["--max-crashes", "2", "--respawn-backoff-ms", "50",
                                  "--respawn-backoff-max-ms", "60000"])
    crash = {"benchmark": "copy", "device": 0, "params": {"fake_crash": True}}
    # A slow job ahead holds the queue until all three are in: else a fast worker can crash
    # twice and fault the device before the last submit, which then gets 503.
    submit(d, {**COPY, "params": {"fake_delay_ms": 1500}})
    first = submit(d, crash)
    second = submit(d, crash)
    waiting = submit(d, COPY)  # queued behind the crashes on device 0
    wait_job(d, first["id"])
    assert wait_job(d, second["id"])["state"] == "failed"
    dev = wait_device(d, 0, "faulted")
    assert dev["state_reason"]
    w = wait_job(d, waiting["id"])
    assert w["state"] == "failed" and "faulted" in w["parts"][0]["error"]
    h = d.get("/v1/health").json()
    assert h["devices"]["faulted"] == 1 and h["status"] == "ok"  # device 1 still serves
    problem(d.post("/v1/jobs", json=COPY), 503, "device")
    assert wait_job(d, submit(d, {**COPY, "device": 1})["id"])["state"] == "succeeded"


def test_every_device_faulted_makes_health_503(umd):
    d = umd(fake_devices=1, args=["--max-crashes", "1", "--respawn-backoff-ms", "50",
                                  "--respawn-backoff-max-ms", "60000"])
    wait_job(d, submit(d, {"benchmark": "copy", "params": {"fake_crash": True}})["id"])
    wait_device(d, 0, "faulted")
    r = d.get("/v1/health")
    assert r.status_code == 503
    assert "faulted" in r.json()["reason"]


# -- durability --

def test_kill_9_keeps_finished_results_interrupts_running_and_requeues_queued(umd, tmp_path):
    state = tmp_path / "state"
    d = umd(fake_devices=1, state_dir=state)
    done = submit(d, COPY)
    wait_job(d, done["id"])
    running = submit(d, {"benchmark": "copy", "params": {"fake_delay_ms": 30000}})
    wait_job(d, running["id"], ("running",))
    queued = [submit(d, COPY)["id"] for _ in range(3)]
    finished_bytes = stored_docs(state)[done["id"]]
    d.kill()

    d2 = umd(fake_devices=1, state_dir=state)
    assert stored_docs(state)[done["id"]] == finished_bytes
    # the stored document is what GET serves, byte for byte
    assert d2.get("/v1/jobs/" + done["id"]).content == finished_bytes
    assert d2.get("/v1/jobs/" + done["id"]).json()["state"] == "succeeded"
    r = d2.get("/v1/jobs/" + running["id"]).json()
    assert r["state"] == "interrupted" and r["parts"][0]["state"] == "interrupted"
    for jid in queued:
        assert wait_job(d2, jid)["state"] == "succeeded"
    # the queued jobs kept their order
    started = [d2.get("/v1/jobs/" + jid).json()["started"] for jid in queued]
    assert started == sorted(started)


def stopped_with_one_running_and_one_queued(umd, state):
    """A one-GPU daemon stopped (SIGTERM) while a slow job runs and another waits."""
    d = umd(fake_devices=1, state_dir=state)
    running = submit(d, {"benchmark": "copy", "params": {"fake_delay_ms": 30000}})
    wait_job(d, running["id"], ("running",))
    queued = submit(d, COPY)
    assert d.stop() == 0
    return running, queued


def test_sigterm_with_queued_jobs_keeps_them_for_the_next_start(umd, tmp_path):
    state = tmp_path / "state"
    running, queued = stopped_with_one_running_and_one_queued(umd, state)
    d2 = umd(fake_devices=1, state_dir=state)
    assert d2.get("/v1/jobs/" + running["id"]).json()["state"] == "interrupted"
    assert wait_job(d2, queued["id"])["state"] == "succeeded"


def test_old_job_files_are_imported_once_and_corrupt_ones_set_aside(umd, umd_run, tmp_path):
    state = tmp_path / "state"
    d = umd(state_dir=state)
    good = submit(d, COPY)
    wait_job(d, good["id"])
    d.stop()
    # The old store's layout, made by --export, beside a damaged file, a temp file, a directory
    # named like a temp file and a name too long to be a job.
    r = umd_run(["--state-dir", str(state), "--export", str(state / "jobs")])
    assert r.returncode == 0, r.stderr
    for f in state.glob("umd.db*"):
        f.unlink()
    jobs = state / "jobs"
    bad = jobs / "01a229a5-0fd2-7786-989d-83b526c57196.json"
    bad.write_text('{"id": "01a229a5-0fd2-7786-989d-83b526c57196", "state": ')
    (jobs / ".x.json.tmp.abc123").write_text("half")
    (jobs / ".y.json.tmp.abc123").mkdir()
    (jobs / ("x" * 250 + ".json")).write_text("{}")
    d2 = umd(state_dir=state)
    assert not jobs.exists()
    imported = state / "jobs.imported"
    assert list(imported.glob("*.corrupt*"))
    assert not list(imported.glob(".x*tmp*"))
    assert d2.get("/v1/jobs/" + good["id"]).json()["state"] == "succeeded"
    assert "imported 1 jobs" in d2.log()
    d2.stop()
    d3 = umd(state_dir=state)  # imported once only
    assert "imported" not in d3.log()
    assert [j["id"] for j in d3.get("/v1/jobs").json()["jobs"]] == [good["id"]]


def test_corrupt_database_is_set_aside_and_the_daemon_starts_empty(umd, tmp_path):
    state = tmp_path / "state"
    d = umd(state_dir=state)
    wait_job(d, submit(d, COPY)["id"])
    d.stop()
    for f in state.glob("umd.db-*"):
        f.unlink()
    (state / "umd.db").write_bytes(b"\0garbage" * 4096)
    d2 = umd(state_dir=state)
    assert list(state.glob("umd.db.corrupt-*"))
    assert "is unusable" in d2.log()
    assert d2.get("/v1/jobs").json()["jobs"] == []
    assert wait_job(d2, submit(d2, COPY)["id"])["state"] == "succeeded"
    d2.stop()
    umd(state_dir=state)  # and it stays up: no restart loop


def test_retention_keeps_at_most_max_jobs_finished(umd):
    d = umd(fake_devices=1, args=["--max-jobs", "3"])
    ids = [submit(d, COPY)["id"] for _ in range(6)]
    for jid in ids[-1:]:
        wait_job(d, jid)
    # Retention runs in the background, on the store's writer, between writes.
    deadline = time.monotonic() + 10
    while len(d.get("/v1/jobs").json()["jobs"]) > 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    listed = [j["id"] for j in d.get("/v1/jobs").json()["jobs"]]
    assert listed == list(reversed(ids[-3:]))
    assert sorted(job_files(d)) == sorted(i + ".json" for i in ids[-3:])


# -- device selection --

def test_devices_setting_picks_gpus_by_index_and_uuid(umd):
    d = umd(fake_devices=3, args=["--devices", "0,GPU-fa4e0000-0000-4000-8000-000000000002"])
    devs = d.get("/v1/devices").json()
    assert [x["uuid"][-1] for x in devs] == ["0", "2"]
    assert [x["index"] for x in devs] == [0, 1]
    assert [x["host_index"] for x in devs] == [0, 2]
    done = wait_job(d, submit(d, {**COPY, "device": 1})["id"])
    assert done["state"] == "succeeded"
    assert done["parts"][0]["uuid"].endswith("2")
    assert done["parts"][0]["result"]["context"]["device_uuid"].endswith("2")


def test_devices_setting_matching_nothing_makes_health_503_with_the_reason(umd):
    d = umd(fake_devices=2, args=["--devices", "7"])
    assert d.get("/v1/devices").json() == []
    r = d.get("/v1/health")
    assert r.status_code == 503
    assert "matches the 'devices' setting" in r.json()["reason"]


def test_retention_deletes_finished_jobs_older_than_retention_days(umd, tmp_path):
    state = tmp_path / "state"
    d = umd(fake_devices=1, state_dir=state)
    old, recent = (wait_job(d, submit(d, COPY)["id"]) for _ in range(2))
    d.stop()
    db_execute(state, "UPDATE jobs SET finished_ms = finished_ms - ? WHERE id = ?",
               (91 * 86400 * 1000, old["id"]))  # finished 91 days earlier
    d2 = umd(fake_devices=1, state_dir=state, args=["--retention-days", "90"])
    deadline = time.monotonic() + 10
    while d2.get("/v1/jobs/" + old["id"]).status_code != 404 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert d2.get("/v1/jobs/" + old["id"]).status_code == 404
    assert old["id"] not in stored_docs(state)
    assert d2.get("/v1/jobs/" + recent["id"]).json()["state"] == "succeeded"


# -- only: one measurement of a benchmark that takes several --

def measurement_names(job):
    return [m["name"] for m in job["parts"][0]["result"]["measurements"]]


def test_only_takes_one_measurement_of_latency(umd):
    d = umd(fake_devices=1)
    every = run_job(d, {"benchmark": "latency", "device": 0})
    assert len(measurement_names(every)) == 7
    one = run_job(d, {"benchmark": "latency", "device": 0, "params": {"only": "pinned_h2d"}})
    assert measurement_names(one) == ["pinned_h2d"]


def test_only_takes_one_measurement_of_managed_prefetch(umd):
    d = umd(fake_devices=1)
    one = run_job(d, {"benchmark": "managed_prefetch", "device": 0,
                      "params": {"only": "prefetch_to_host"}})
    assert measurement_names(one) == ["prefetch_to_host"]


def test_only_names_a_measurement_the_benchmark_has(umd):
    d = umd(fake_devices=1)
    p = problem(d.post("/v1/jobs", json={"benchmark": "latency", "device": 0,
                                          "params": {"only": "d2d"}}), 400, "params.only")
    assert "pinned_h2d" in p["detail"]
