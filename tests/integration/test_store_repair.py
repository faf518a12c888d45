"""A damaged index at start-up loses no job (issue 57, item 3). umd compares each of its
indexes with its table at start (a count through the index against a count of the table) and
rebuilds those that disagree: an index missing entries (here jobs_open_cols, which recovery reads
the queue from) and an index whose root page is garbage. The file is damaged while umd is
stopped; every job is still served afterwards, every queued one runs, and /v1/health names what
was rebuilt."""
import os
import sqlite3

from conftest import db_execute, submit, wait_job

COPY = {"benchmark": "copy", "params": {"size": "64KiB", "iterations": 1}}
QUEUED = 40
FINISHED = 20


def a_store_with_a_queue(umd, state):
    """A stopped umd's state dir with FINISHED finished jobs and QUEUED queued ones (device 0
    paused). Returns (finished ids, queued ids)."""
    d = umd(fake_devices=1, state_dir=state)
    done = [wait_job(d, submit(d, COPY)["id"])["id"] for _ in range(FINISHED)]
    assert d.post("/v1/devices/0/pause", json={"reason": "repair test"}).status_code == 200
    waiting = [submit(d, COPY)["id"] for _ in range(QUEUED)]
    assert d.stop() == 0
    checkpoint(state)
    return done, waiting


def checkpoint(state):
    """Everything into umd.db itself, so that writing its pages is what the file holds."""
    con = sqlite3.connect(state / "umd.db", isolation_level=None)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()


def open_entries(state, index="jobs_open_cols"):
    return db_execute(state, f"SELECT count(*) FROM jobs INDEXED BY {index} "
                             "WHERE finished_ms IS NULL")[0][0]


def drop_half_of_the_open_index(state):
    """jobs_open_cols made to hold only half the open jobs: its definition narrowed through
    writable_schema, rebuilt that way, and the definition put back, so that SQLite believes it
    whole."""
    path = state / "umd.db"
    sql = db_execute(state, "SELECT sql FROM sqlite_schema WHERE name = 'jobs_open_cols'")[0][0]
    narrowed = sql.replace("WHERE finished_ms IS NULL",
                           "WHERE finished_ms IS NULL AND rowid % 2 = 0")
    assert narrowed != sql
    for new in (narrowed, None):
        con = sqlite3.connect(path, isolation_level=None)
        try:
            con.execute("PRAGMA writable_schema = ON")
            con.execute("UPDATE sqlite_schema SET sql = ? WHERE name = 'jobs_open_cols'",
                        (new or sql,))
            con.execute("PRAGMA writable_schema = OFF")
        finally:
            con.close()
        if new:
            con = sqlite3.connect(path, isolation_level=None)
            try:
                con.execute("REINDEX jobs_open_cols")
            finally:
                con.close()
    checkpoint(state)


def garbage_in_the_root_page_of(state, index):
    root = db_execute(state, "SELECT rootpage FROM sqlite_schema WHERE name = ?", (index,))[0][0]
    page = db_execute(state, "PRAGMA page_size")[0][0]
    with open(state / "umd.db", "r+b") as f:
        f.seek((root - 1) * page)
        f.write(os.urandom(page))


def all_served_and_the_queue_runs(d, done, waiting):
    for jid in done:
        assert d.get("/v1/jobs/" + jid).json()["state"] == "succeeded", jid
    listed = {j["id"] for j in d.get("/v1/jobs?status=queued&limit=500").json()["jobs"]}
    assert listed == set(waiting), len(listed)
    assert d.post("/v1/devices/0/resume").status_code == 200
    for jid in waiting:
        assert wait_job(d, jid, timeout=60)["state"] == "succeeded", jid


def test_an_index_missing_entries_is_rebuilt_and_every_queued_job_runs(umd, tmp_path):
    state = tmp_path / "state"
    done, waiting = a_store_with_a_queue(umd, state)
    drop_half_of_the_open_index(state)
    assert open_entries(state) < QUEUED  # the damage took: half the queue is invisible
    d = umd(fake_devices=1, state_dir=state)
    health = d.get("/v1/health").json()
    assert health["store_repaired"] == ["jobs_open_cols"], health
    assert "index jobs_open_cols rebuilt" in d.log()
    all_served_and_the_queue_runs(d, done, waiting)
    assert not list(state.glob("umd.db.corrupt-*"))


def test_garbage_in_an_index_root_page_is_rebuilt_not_the_store_set_aside(umd, tmp_path):
    state = tmp_path / "state"
    done, waiting = a_store_with_a_queue(umd, state)
    garbage_in_the_root_page_of(state, "jobs_open_cols")
    d = umd(fake_devices=1, state_dir=state)
    assert not list(state.glob("umd.db.corrupt-*")), d.log()
    assert d.get("/v1/health").json()["store_repaired"] == ["jobs_open_cols"]
    all_served_and_the_queue_runs(d, done, waiting)
    assert db_execute(state, "PRAGMA integrity_check") == [("ok",)]


def test_an_intact_store_rebuilds_nothing(umd, tmp_path):
    state = tmp_path / "state"
    done, waiting = a_store_with_a_queue(umd, state)
    d = umd(fake_devices=1, state_dir=state)
    assert d.get("/v1/health").json()["store_repaired"] == []
    assert "rebuilt" not in d.log()
    all_served_and_the_queue_runs(d, done, waiting)
