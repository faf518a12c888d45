"""The SQLite job store under failure: SIGKILL at random points while clients submit, a full
disk, a second instance on one state directory, a tampered queued job, history queries."""
import os
import random
import sqlite3
import subprocess
import time

import pytest
import requests

from conftest import db_execute, kill_while, wait_for
from test_jobs import COPY, stopped_with_one_running_and_one_queued, submit, wait_job

STATES = {"queued", "running", "succeeded", "failed", "cancelled", "timed_out", "interrupted"}
QUICK = {"benchmark": "copy", "params": {"size": "64KiB", "iterations": 1}}


def integrity(state_dir):
    con = sqlite3.connect(f"file:{state_dir / 'umd.db'}?mode=ro", uri=True, timeout=10)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def stored_states(state_dir):
    con = sqlite3.connect(f"file:{state_dir / 'umd.db'}?mode=ro", uri=True, timeout=10)
    try:
        return dict(con.execute("SELECT id, state FROM jobs"))
    finally:
        con.close()


def submitter(d, acked, stop):
    """POST until the daemon dies or stop is set; every 2xx id goes into acked."""
    s = requests.Session()
    while not stop.is_set():
        try:
            r = s.post(d.url("/v1/jobs"), json=QUICK, timeout=5)
        except requests.RequestException:
            return
        if r.status_code in (200, 202):
            acked.append(r.json()["id"])
        elif r.status_code == 429:
            time.sleep(0.01)


# Retention off for the kill -9 test: a job pruned is not a job lost. No finished job is deleted
# by count (max_jobs at its largest, far beyond what 20 cycles of under a second can submit:
# a few hundred a second here; 10 million would take hours), by age (retention_days 0) or by the
# documents' size (max_store_bytes 0), so every acknowledged id missing after a restart was lost.
NO_RETENTION_MAX_JOBS = 10_000_000  # daemon/config.c's upper bound for max_jobs
NO_RETENTION = ["--max-jobs", str(NO_RETENTION_MAX_JOBS), "--retention-days", "0",
                "--max-store-bytes", "0"]


def test_sigkill_at_random_points_loses_no_acknowledged_job(umd, tmp_path):
    state = tmp_path / "state"
    rng = random.Random(1313)
    acked = []
    cycles = 20
    for cycle in range(cycles):
        d = umd(state_dir=state, args=NO_RETENTION)
        # Everything acknowledged before is there, in a legal state, after every restart.
        have = stored_states(state)
        # the premise of "missing means lost": the store never reached max_jobs
        assert len(have) < NO_RETENTION_MAX_JOBS
        missing = [j for j in acked if j not in have]
        assert not missing, f"cycle {cycle}: {len(missing)} acknowledged jobs lost"
        assert all(have[j] in STATES for j in acked)
        assert integrity(state) == "ok"
        if acked:
            sample = rng.choice(acked)
            assert d.get("/v1/jobs/" + sample).json()["state"] in STATES
        kill_while(d, lambda stop: submitter(d, acked, stop), rng.uniform(0.05, 0.8))
    d = umd(state_dir=state, args=NO_RETENTION)
    have = stored_states(state)
    assert len(acked) > cycles  # the clients did get answers
    assert all(j in have for j in acked)
    assert integrity(state) == "ok"
    # nothing is left running after recovery but what runs now
    time.sleep(0.5)
    assert "interrupted" in d.log() or all(have[j] != "running" for j in acked)


def test_a_second_instance_on_the_same_state_directory_is_refused(umd, tmp_path):
    state = tmp_path / "state"
    d = umd(state_dir=state)
    job = submit(d, COPY)
    d2 = umd(state_dir=state, wait=False)
    rc = d2.process.wait(30)
    assert rc != 0
    assert "refusing to start a second one" in d2.log()
    # the first one is untouched and still serves
    assert wait_job(d, job["id"])["state"] == "succeeded"


def test_a_tampered_queued_job_is_failed_with_a_reason_and_the_gpu_keeps_working(umd, tmp_path):
    state = tmp_path / "state"
    _, queued = stopped_with_one_running_and_one_queued(umd, state)
    db_execute(state, "UPDATE jobs SET doc = json_set(doc, '$.timeout_s', 'abc') WHERE id = ?",
               (queued["id"],))
    d2 = umd(fake_devices=1, state_dir=state)
    bad = d2.get("/v1/jobs/" + queued["id"], contract=False).json()
    assert bad["state"] == "failed"
    assert "timeout_s" in bad["parts"][0]["error"]
    assert wait_job(d2, submit(d2, COPY)["id"])["state"] == "succeeded"


def test_a_tampered_queued_job_no_one_reads_is_failed_soon_after_start(umd, tmp_path):
    """Waiting jobs are queued from their columns and checked after READY: one whose document
    no longer passes is failed by that check, without a read or a dispatch reaching it."""
    state = tmp_path / "state"
    d = umd(fake_devices=1, state_dir=state)
    assert d.post("/v1/devices/0/pause", json={"reason": "tamper test"}).status_code == 200
    ids = [submit(d, COPY)["id"] for _ in range(5)]
    assert d.stop() == 0
    db_execute(state, "UPDATE jobs SET doc = json_set(doc, '$.params.iterations', -3) WHERE id = ?",
               (ids[2],))
    d2 = umd(fake_devices=1, state_dir=state)
    deadline = time.monotonic() + 30
    while True:
        failed = d2.get("/v1/jobs", params={"status": "failed"}).json()["jobs"]
        if failed or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert [j["id"] for j in failed] == [ids[2]]
    bad = d2.get("/v1/jobs/" + ids[2], contract=False).json()
    assert "iterations" in bad["parts"][0]["error"], bad
    assert "no longer a valid job" in bad["parts"][0]["error"], bad
    # The others still wait, and run once the device is resumed.
    assert d2.post("/v1/devices/0/resume").status_code == 200
    for i in ids[:2] + ids[3:]:
        assert wait_job(d2, i)["state"] == "succeeded"


def indexes(state):
    return {r[0] for r in db_execute(state, "SELECT name FROM sqlite_master WHERE type = 'index'")}


def as_schema_4(state):
    """The file as schema 4 left it: no part has a document of its own."""
    db_execute(state, "ALTER TABLE parts DROP COLUMN doc")
    db_execute(state, "PRAGMA user_version = 4")


def as_schema_3(state):
    """The file as schema 3 left it: every job indexed by its state."""
    as_schema_4(state)
    db_execute(state, "DROP INDEX jobs_state_final")
    db_execute(state, "CREATE INDEX jobs_state ON jobs(state, id)")
    db_execute(state, "PRAGMA user_version = 3")


def as_schema_2(state):
    """The file as schema 2 left it: the open jobs indexed by id alone."""
    as_schema_3(state)
    db_execute(state, "DROP INDEX jobs_open_cols")
    db_execute(state, "CREATE INDEX jobs_open ON jobs(id) WHERE finished_ms IS NULL")
    db_execute(state, "PRAGMA user_version = 2")


def test_a_store_of_schema_2_gets_the_covering_index_and_keeps_its_queue(umd, tmp_path):
    """Schema 3 reads the open jobs' columns from one index: a schema 2 file gets it in place of
    its own, and every job, waiting or finished, reads back as before and runs."""
    state = tmp_path / "state"
    d = umd(fake_devices=1, state_dir=state)
    done = wait_job(d, submit(d, COPY)["id"])
    assert d.post("/v1/devices/0/pause", json={"reason": "migration test"}).status_code == 200
    waiting = [submit(d, COPY)["id"] for _ in range(3)]
    before = {i: d.get("/v1/jobs/" + i).json() for i in waiting + [done["id"]]}
    assert d.stop() == 0
    as_schema_2(state)
    d2 = umd(fake_devices=1, state_dir=state)
    assert {i: d2.get("/v1/jobs/" + i).json() for i in before} == before
    assert db_execute(state, "PRAGMA user_version") == [(5,)]
    assert "jobs_open_cols" in indexes(state) and "jobs_open" not in indexes(state)
    plan = db_execute(state, "EXPLAIN QUERY PLAN SELECT id, state, priority, cancel_requested, "
                             "client, idempotency_key, created_ms FROM jobs WHERE finished_ms IS "
                             "NULL ORDER BY id")
    assert "COVERING INDEX jobs_open_cols" in plan[0][-1], plan
    assert d2.post("/v1/devices/0/resume").status_code == 200
    assert [wait_job(d2, i)["state"] for i in waiting] == ["succeeded"] * 3


def ids_by_status(d, status):
    return [j["id"] for j in d.get(f"/v1/jobs?status={status}&limit=500").json()["jobs"]]


def test_a_store_of_schema_4_gets_the_parts_own_documents_and_keeps_its_queue(umd, tmp_path):
    """Schema 5 adds parts.doc (a part's own document): a schema 4 file gets the column, NULL in
    every row, and every job, waiting or finished, reads back as before and runs."""
    state = tmp_path / "state"
    d = umd(fake_devices=1, state_dir=state)
    done = wait_job(d, submit(d, COPY)["id"])
    assert d.post("/v1/devices/0/pause", json={"reason": "migration test"}).status_code == 200
    waiting = [submit(d, COPY)["id"] for _ in range(2)]
    before = {i: d.get("/v1/jobs/" + i).json() for i in waiting + [done["id"]]}
    assert d.stop() == 0
    as_schema_4(state)
    assert "doc" not in [r[1] for r in db_execute(state, "PRAGMA table_info(parts)")]
    d2 = umd(fake_devices=1, state_dir=state)
    assert {i: d2.get("/v1/jobs/" + i).json() for i in before} == before
    assert db_execute(state, "PRAGMA user_version") == [(5,)]
    assert "doc" in [r[1] for r in db_execute(state, "PRAGMA table_info(parts)")]
    assert db_execute(state, "SELECT count(*) FROM parts WHERE doc IS NOT NULL") == [(0,)]
    assert d2.post("/v1/devices/0/resume").status_code == 200
    assert [wait_job(d2, i)["state"] for i in waiting] == ["succeeded"] * 2


def test_a_store_of_schema_3_gets_the_final_state_index_and_lists_by_state_as_before(umd,
                                                                                      tmp_path):
    """Schema 4 indexes only final jobs by state: a schema 3 file loses jobs_state, gets
    jobs_state_final, and lists by an open or a final state say what they said."""
    state = tmp_path / "state"
    d = umd(fake_devices=1, state_dir=state)
    done = [wait_job(d, submit(d, COPY)["id"])["id"] for _ in range(2)]
    assert d.post("/v1/devices/0/pause", json={"reason": "migration test"}).status_code == 200
    waiting = [submit(d, COPY)["id"] for _ in range(3)]
    cancelled = submit(d, COPY)["id"]
    assert d.delete("/v1/jobs/" + cancelled).status_code == 200
    before = {s: ids_by_status(d, s) for s in ("queued", "succeeded", "cancelled", "running")}
    assert sorted(before["queued"]) == sorted(waiting) and sorted(before["succeeded"]) == done
    assert before["cancelled"] == [cancelled] and before["running"] == []
    assert d.stop() == 0
    as_schema_3(state)
    d2 = umd(fake_devices=1, state_dir=state)
    assert {s: ids_by_status(d2, s) for s in before} == before
    assert db_execute(state, "PRAGMA user_version") == [(5,)]
    assert "jobs_state_final" in indexes(state) and "jobs_state" not in indexes(state)


def test_lists_by_state_take_the_partial_index_of_their_kind(umd, tmp_path):
    """The statements store_read.c makes for a state filter, planned on umd's own file: a final
    state walks jobs_state_final, an open one jobs_open_cols, neither the whole table."""
    state = tmp_path / "state"
    d = umd(fake_devices=1, state_dir=state)
    wait_job(d, submit(d, COPY)["id"])
    assert d.stop() == 0
    final = db_execute(state, "EXPLAIN QUERY PLAN SELECT j.summary, j.id FROM jobs j WHERE 1 AND "
                              "j.state = 'failed' AND j.state NOT IN ('queued', 'running') ORDER "
                              "BY j.id DESC LIMIT 50")
    assert "jobs_state_final" in final[0][-1], final
    open_ = db_execute(state, "EXPLAIN QUERY PLAN SELECT j.summary, j.id FROM jobs j WHERE 1 AND "
                              "j.state = 'queued' AND j.finished_ms IS NULL ORDER BY j.id DESC "
                              "LIMIT 50")
    assert "jobs_open_cols" in open_[0][-1], open_


def test_a_store_of_schema_1_is_migrated_and_its_queue_recovered_in_order(umd, tmp_path):
    """A database written before the recovery columns existed: they are added, its rows keep
    NULL there and are recovered from their documents, priorities and all."""
    state = tmp_path / "state"
    d = umd(fake_devices=1, state_dir=state)
    assert d.post("/v1/devices/0/pause", json={"reason": "migration test"}).status_code == 200
    low = submit(d, {**COPY, "priority": "low"})["id"]
    normal = submit(d, COPY)["id"]
    high = submit(d, {**COPY, "priority": "high"})["id"]
    before = {i: d.get("/v1/jobs/" + i).json() for i in (low, normal, high)}
    assert d.stop() == 0
    as_schema_2(state)
    db_execute(state, "ALTER TABLE jobs DROP COLUMN priority")
    db_execute(state, "ALTER TABLE jobs DROP COLUMN cancel_requested")
    db_execute(state, "PRAGMA user_version = 1")
    d2 = umd(fake_devices=1, state_dir=state)
    assert {i: d2.get("/v1/jobs/" + i).json() for i in before} == before
    cols = [r[1] for r in db_execute(state, "PRAGMA table_info(jobs)")]
    assert "priority" in cols and "cancel_requested" in cols
    assert db_execute(state, "PRAGMA user_version") == [(5,)]
    assert indexes(state) >= {"jobs_open_cols", "jobs_state_final"}
    assert not indexes(state) & {"jobs_open", "jobs_state"}
    assert d2.post("/v1/devices/0/resume").status_code == 200
    done = [wait_job(d2, i) for i in (low, normal, high)]
    started = sorted(done, key=lambda j: j["parts"][0]["started"])
    assert [j["id"] for j in started] == [high, normal, low]


def test_history_queries_by_device_time_and_state(umd):
    d = umd()
    devs = d.get("/v1/devices").json()
    first = [submit(d, {**QUICK, "device": 0})["id"] for _ in range(3)]
    t = int(time.time() * 1000) + 5
    time.sleep(0.02)
    health = submit(d, {"benchmark": "health", "device": 1})
    later = [submit(d, {**QUICK, "device": 1})["id"] for _ in range(2)]
    for j in first + later + [health["id"]]:
        wait_job(d, j)
    uuid1 = devs[1]["uuid"]
    r = d.get("/v1/jobs", params={"device": uuid1, "since": str(t)}).json()
    assert [j["id"] for j in r["jobs"]] == list(reversed(later)) + [health["id"]]
    r = d.get("/v1/jobs", params={"benchmark": "health", "device": uuid1}).json()
    assert [j["id"] for j in r["jobs"]] == [health["id"]]
    r = d.get("/v1/jobs", params={"until": str(t), "limit": "2"}).json()
    assert [j["id"] for j in r["jobs"]] == list(reversed(first))[:2]
    nxt = d.get(r["next"]).json()
    assert [j["id"] for j in nxt["jobs"]] == [first[0]]
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t // 1000)) + ".%03dZ" % (t % 1000)
    r = d.get("/v1/jobs", params={"since": iso, "status": "succeeded"}).json()
    assert {j["id"] for j in r["jobs"]} >= set(later)
    bad = d.get("/v1/jobs", params={"since": "yesterday"})
    assert bad.status_code == 400 and bad.json()["field"] == "since"


def can_mount_tmpfs(path):
    if os.geteuid() != 0:
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(path)],
                       capture_output=True)
    return r.returncode == 0


def test_full_disk_gives_507_and_loses_nothing_stored(umd, tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if not can_mount_tmpfs(mnt):
        pytest.skip("needs root and permission to mount a small tmpfs for a full disk")
    try:
        state = mnt / "state"
        d = umd(fake_devices=1, state_dir=state)
        done = [wait_job(d, submit(d, QUICK)["id"])["id"] for _ in range(5)]
        blocker = submit(d, {"benchmark": "copy", "params": {"fake_delay_ms": 60000}})
        wait_job(d, blocker["id"], ("running",))
        queued = submit(d, QUICK)
        fill(mnt / "filler")
        codes = set()
        acked = []
        for _ in range(300):
            r = d.post("/v1/jobs", json=QUICK)
            codes.add(r.status_code)
            if r.status_code == 507:
                assert r.headers["Content-Type"].startswith("application/problem+json")
                break
            if r.status_code in (200, 202):
                acked.append(r.json()["id"])
        assert 507 in codes, codes
        # A cancel that cannot be stored is not made.
        r = d.delete("/v1/jobs/" + queued["id"])
        if r.status_code == 507:
            assert d.get("/v1/jobs/" + queued["id"]).json()["state"] == "queued"
        # Nothing stored was lost, and umd still serves.
        for j in done:
            assert d.get("/v1/jobs/" + j).json()["state"] == "succeeded"
        (mnt / "filler").unlink()
        acked.append(submit(d, QUICK)["id"])
        d.kill()
        d2 = umd(fake_devices=1, state_dir=state)
        have = stored_states(state)
        assert all(j in have for j in done + acked)
        assert integrity(state) == "ok"
        d2.kill()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(path):
    """Write path until the disk is full; returns it (unlink it to give the space back)."""
    # Unbuffered: a write cut short raises here, not again when the file is closed.
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
    return path


def finished_while_the_disk_was_full(umd, mnt, args=()):
    """A umd on the tmpfs at mnt, whose job finished while its final write could not be
    committed: served as the store holds it (running), saying it ended and why it is not stored,
    never as final (issue 57). Returns (daemon, job as served, filler file)."""
    d = umd(fake_devices=1, state_dir=mnt / "state", args=args)
    jid = submit(d, {"benchmark": "copy", "params": {"fake_delay_ms": 2000}})["id"]
    wait_job(d, jid, ("running",))
    filler = fill(mnt / "filler")
    # SQLite may still have room in pages it holds: a 507 proves it has none.
    for _ in range(300):
        if d.post("/v1/jobs", json=QUICK).status_code == 507:
            break
    else:
        pytest.fail("the disk never filled")
    wait_for(lambda: "not_stored" in d.get("/v1/jobs/" + jid).json(), timeout=20,
             what="the job to end with nowhere to store its end")
    served = d.get("/v1/jobs/" + jid).json()
    assert served["state"] == "running" and served["finished"] is None, served
    assert served["not_stored"].startswith("the job ended (succeeded)"), served
    # The store does not have it: a final state shown would have been a promise it cannot keep.
    assert stored_states(mnt / "state")[jid] != "succeeded"
    return d, served, filler


def test_a_job_that_ended_while_the_disk_was_full_is_finished_after_a_stop(umd, tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if not can_mount_tmpfs(mnt):
        pytest.skip("needs root and permission to mount a small tmpfs for a full disk")
    try:
        d, served, filler = finished_while_the_disk_was_full(umd, mnt)
        # Space comes back and umd is stopped at once: before any periodic retry.
        filler.unlink()
        assert d.stop() == 0
        d2 = umd(fake_devices=1, state_dir=mnt / "state")
        again = d2.get("/v1/jobs/" + served["id"]).json()
        assert again["state"] == "succeeded", again
        assert again["parts"][0]["result"] == served["parts"][0]["result"]
        d2.kill()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_final_write_that_failed_is_retried_every_store_retry_ms(umd, tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if not can_mount_tmpfs(mnt):
        pytest.skip("needs root and permission to mount a small tmpfs for a full disk")
    try:
        d, served, filler = finished_while_the_disk_was_full(umd, mnt,
                                                             args=["--store-retry-ms", "200"])
        filler.unlink()
        # A crash, not a stop: only the periodic retry can have written it.
        wait_for_stored = time.monotonic() + 10
        while stored_states(mnt / "state").get(served["id"]) != "succeeded":
            assert time.monotonic() < wait_for_stored, stored_states(mnt / "state")
            time.sleep(0.1)
        # Committed: shown final from then on.
        now = d.get("/v1/jobs/" + served["id"]).json()
        assert now["state"] == "succeeded" and "not_stored" not in now, now
        d.kill()
        d2 = umd(fake_devices=1, state_dir=mnt / "state")
        assert d2.get("/v1/jobs/" + served["id"]).json()["state"] == "succeeded"
        d2.kill()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_deleting_umd_lock_does_not_let_a_second_instance_in(umd, tmp_path):
    state = tmp_path / "state"
    d = umd(state_dir=state)
    job = submit(d, {"benchmark": "copy", "device": 0, "params": {"fake_delay_ms": 1500}})
    (state / "umd.lock").unlink()
    d2 = umd(state_dir=state, wait=False)
    rc = d2.process.wait(30)
    assert rc != 0
    assert "refusing to start a second one" in d2.log()
    # The first one's running job was not marked interrupted by the second.
    assert wait_job(d, job["id"])["state"] == "succeeded"


def test_a_umd_db_that_is_a_symlink_is_refused(umd, tmp_path):
    other = tmp_path / "other-app.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE mine (x)")
    con.commit()
    con.close()
    before = other.read_bytes()
    state = tmp_path / "state"
    state.mkdir()
    (state / "umd.db").symlink_to(other)
    d = umd(state_dir=state, wait=False)
    assert d.process.wait(30) != 0
    assert "is a symbolic link" in d.log() and str(other) in d.log(), d.log()
    # The other application's database is as it was: no tables added, not switched to WAL.
    assert other.read_bytes() == before
    assert (state / "umd.db").is_symlink()


def damage_a_finished_jobs_page(state_dir):
    """Overwrite the b-tree header of one leaf page of the jobs table, in the middle (finished
    jobs only; the open jobs' index and the newest page are left whole)."""
    db = state_dir / "umd.db"
    con = sqlite3.connect(db)
    try:
        page_size = con.execute("PRAGMA page_size").fetchone()[0]
        leaves = [p for (p,) in con.execute(
            "SELECT pageno FROM dbstat WHERE name = 'jobs' AND pagetype = 'leaf' "
            "ORDER BY pageno")]
    finally:
        con.close()
    assert len(leaves) >= 3, leaves
    page = leaves[len(leaves) // 2]
    with open(db, "r+b") as f:
        f.seek((page - 1) * page_size)
        f.write(b"\x0d\xff\xff\xff\xff\xff\xff\xff")  # a leaf whose cell count and offsets lie


def store_checked(d, timeout=30):
    """/v1/health once the store file's check (run after READY, in the background) answered."""
    deadline = time.monotonic() + timeout
    while True:
        r = d.get("/v1/health")
        if r.json()["store_check"] != "pending" or time.monotonic() > deadline:
            return r
        time.sleep(0.02)


def test_a_damaged_page_among_finished_jobs_makes_health_say_so(umd, tmp_path):
    state = tmp_path / "state"
    d = umd(fake_devices=1, state_dir=state)
    for _ in range(40):
        wait_job(d, submit(d, {"benchmark": "copy", "params": {"size": "4KiB"},
                               "labels": {"pad": "x" * 200}})["id"])
    assert d.stop() == 0
    damage_a_finished_jobs_page(state)
    d2 = umd(fake_devices=1, state_dir=state)
    r = store_checked(d2)
    assert r.status_code == 503, r.text
    assert r.json()["store_check"] == "damaged"
    body = r.json()
    assert body["status"] == "degraded"
    assert "job store is damaged" in body["reason"]
    assert any("job store is damaged" in p for p in body["problems"])
    assert "quick_check" in d2.log()
    # Degraded, not down: a new job still runs.
    assert wait_job(d2, submit(d2, QUICK)["id"])["state"] == "succeeded"


def test_a_whole_store_passes_the_quick_check(umd, tmp_path):
    state = tmp_path / "state"
    d = umd(fake_devices=1, state_dir=state)
    wait_job(d, submit(d, QUICK)["id"])
    assert d.stop() == 0
    d2 = umd(fake_devices=1, state_dir=state)
    r = store_checked(d2)
    assert r.json()["status"] == "ok" and r.json()["store_check"] == "ok"
    assert "damaged" not in d2.log()


def burst(d, seconds, threads=4):
    """Submit jobs with padded labels from several threads for seconds; returns the largest WAL
    size seen meanwhile."""
    import threading
    wal = d.state_dir / "umd.db-wal"
    stop = threading.Event()
    body = {"benchmark": "copy", "device": 0, "params": {"size": "4KiB"},
            "labels": {f"pad{i}": "x" * 250 for i in range(4)}}

    def client():
        s = requests.Session()
        while not stop.is_set():
            r = s.post(d.url("/v1/jobs"), json=body, timeout=10)
            assert r.status_code in (202, 429), r.text
            if r.status_code == 429:
                time.sleep(0.05)

    ts = [threading.Thread(target=client) for _ in range(threads)]
    for t in ts:
        t.start()
    peak, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        peak = max(peak, wal.stat().st_size if wal.exists() else 0)
        time.sleep(0.02)
    stop.set()
    for t in ts:
        t.join(30)
    return peak


def wal_size(d):
    wal = d.state_dir / "umd.db-wal"
    return wal.stat().st_size if wal.exists() else 0


def test_the_wal_is_given_back_once_the_writer_is_idle(umd):
    d = umd()
    peak = burst(d, 3)
    assert peak > 1024 * 1024, peak  # the burst grew it: the test can tell
    deadline = time.monotonic() + 10
    while wal_size(d) > 0:
        assert time.monotonic() < deadline, (wal_size(d), peak)
        time.sleep(0.1)


def test_the_wal_stays_near_wal_max_bytes_under_load(umd):
    limit = 256 * 1024
    d = umd(args=["--wal-max-bytes", "256KiB"])
    peak = burst(d, 4)
    # Cut after the commit that passed the bound: one group commit more at most.
    assert peak < 4 * limit, peak
    deadline = time.monotonic() + 10
    while wal_size(d) > limit:
        assert time.monotonic() < deadline, wal_size(d)
        time.sleep(0.1)
