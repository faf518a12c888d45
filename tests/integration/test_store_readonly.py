"""A disk gone read-only under umd (issue 57, item 4), as the attack did it: the state directory
on a loop device's ext4 mounted errors=remount-ro, and an ext4 error triggered mid-run
(/sys/fs/ext4/<dev>/trigger_fs_error), which remounts it read-only. While the store cannot
commit, no new part starts (the queued ones say why in `waiting`), /v1/health answers 503 with
`store_commit: failing`, /metrics shows it, and the store's errors are logged a line per kind
per interval, not one per failure. Needs root, loop devices and mkfs.ext4: skipped otherwise."""
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import submit, wait_for, wait_job

SLOW = {"benchmark": "copy", "params": {"fake_delay_ms": 1500}}
# Said, whatever the default: a part's start commits before its worker is sent it.
GATE = ["--start-commit-wait", "true"]


def run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.fixture
def ext4_remount_ro(tmp_path):
    """A mounted ext4 (errors=remount-ro) on a loop device: yields (mount point, /sys name)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to set up a loop device and mount it")
    if not shutil.which("losetup") or not shutil.which("mkfs.ext4"):
        pytest.skip("needs losetup and mkfs.ext4")
    img, mnt = tmp_path / "disk.img", tmp_path / "mnt"
    mnt.mkdir()
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    if run("mkfs.ext4", "-q", "-F", str(img)).returncode != 0:
        pytest.skip("mkfs.ext4 failed")
    r = run("losetup", "-f", "--show", str(img))
    if r.returncode != 0:
        pytest.skip(f"no loop device: {r.stderr.strip()}")
    dev = r.stdout.strip()
    try:
        r = run("mount", "-o", "errors=remount-ro", dev, str(mnt))
        if r.returncode != 0:
            pytest.skip(f"cannot mount {dev}: {r.stderr.strip()}")
        yield mnt, os.path.basename(dev)
    finally:
        run("umount", "-l", str(mnt))
        run("losetup", "-d", dev)


def remount_ro_by_error(sysname, mnt):
    with open(f"/sys/fs/ext4/{sysname}/trigger_fs_error", "w") as f:
        f.write("1")
    wait_for(lambda: " ro," in mount_options(mnt) or ",ro," in mount_options(mnt) or
             "emergency_ro" in mount_options(mnt), what="the ext4 remounted read-only")


def mount_options(mnt):
    for line in open("/proc/mounts"):
        f = line.split()
        if f[1] == str(mnt):
            return " " + f[3] + ","
    return ""


def test_a_disk_gone_read_only_stops_dispatch_and_says_so(umd, ext4_remount_ro):
    mnt, sysname = ext4_remount_ro
    d = umd(fake_devices=1, state_dir=mnt / "state", args=["--store-retry-ms", "200"] + GATE)
    assert d.get("/v1/health").json()["store_commit"] == "ok"
    running = submit(d, SLOW)["id"]
    queued = [submit(d, SLOW)["id"] for _ in range(5)]
    wait_job(d, running, states=("running",))
    remount_ro_by_error(sysname, mnt)

    # The running part ends and its commit fails: the store is failing from then on.
    wait_for(lambda: d.get("/v1/health").status_code == 503, timeout=20,
             what="/v1/health to answer 503")
    body = d.get("/v1/health").json()
    assert body["store_commit"] == "failing" and body["status"] == "degraded", body
    assert any("cannot commit" in p for p in body["problems"]), body
    assert re.search(r"^umd_store_commit_failing 1$", d.get("/metrics").text, re.M)

    # No new part starts once a commit failed: the queue waits and says why, for as long as the
    # disk is gone. Not even the part dispatched as the running one ended, before any commit had
    # failed: its worker is sent it only once its start commits, and that commit failed.
    still = [jid for jid in queued if d.get("/v1/jobs/" + jid).json()["state"] == "queued"]
    assert still == queued, still
    time.sleep(3)
    for jid in still:
        j = d.get("/v1/jobs/" + jid).json()
        assert j["state"] == "queued", j
    # The head of the queue says why it waits (the parts behind it wait for it, as for a pause).
    head = d.get("/v1/jobs/" + still[0]).json()
    assert "cannot commit" in head["parts"][0].get("waiting", ""), head

    # Rate-limited: a handful of store lines in those seconds, not one per failure.
    store_lines = [ln for ln in d.log().splitlines()
                   if "store" in ln or "SQLite" in ln]
    assert len(store_lines) < 30, "\n".join(store_lines)
    d.kill()



def shown_then_repaired(umd, mnt, sysname):
    """A umd whose disk went read-only mid-run, the jobs as it showed them then, and a umd on
    the repaired disk (stopped, e2fsck, mounted again): (jobs shown, new daemon)."""
    state = mnt / "state"
    d = umd(fake_devices=1, state_dir=state, args=["--store-retry-ms", "200",
                                                   "--shutdown-timeout-s", "2"] + GATE)
    running = submit(d, SLOW)["id"]
    jobs = [running] + [submit(d, SLOW)["id"] for _ in range(5)]
    wait_job(d, running, states=("running",))
    remount_ro_by_error(sysname, mnt)
    wait_for(lambda: d.get("/v1/health").status_code == 503, timeout=20,
             what="/v1/health to answer 503")
    time.sleep(1)
    shown = {jid: d.get("/v1/jobs/" + jid).json() for jid in jobs}
    d.stop()
    dev = next(line.split()[0] for line in open("/proc/mounts") if line.split()[1] == str(mnt))
    assert run("umount", str(mnt)).returncode == 0
    run("e2fsck", "-fy", dev)
    assert run("mount", "-o", "errors=remount-ro", dev, str(mnt)).returncode == 0
    return shown, umd(fake_devices=1, state_dir=state)


def test_after_the_disk_is_repaired_every_job_left_queued_runs(umd, ext4_remount_ro):
    """The jobs that waited while the store could not commit run once the disk is back."""
    shown, d2 = shown_then_repaired(umd, *ext4_remount_ro)
    waited = [jid for jid, before in shown.items() if before["state"] == "queued"]
    assert len(waited) >= 3, shown
    for jid in waited:
        assert wait_job(d2, jid, timeout=60)["state"] == "succeeded", jid


def test_after_the_disk_is_repaired_no_job_that_started_runs_again(umd, ext4_remount_ro):
    """A part's start commits before its worker is sent it, so the part dispatched as the disk
    went (its start in the batch that failed first) never ran: shown queued, it runs once after
    the repair, and every job shown started keeps the start it was shown."""
    shown, d2 = shown_then_repaired(umd, *ext4_remount_ro)
    started = [jid for jid, before in shown.items() if before["state"] != "queued"]
    assert started == list(shown)[:1], shown
    for jid, before in shown.items():
        if before["state"] != "queued":
            j = wait_job(d2, jid, timeout=60)
            assert j["parts"][0]["started"] == before["parts"][0]["started"], (before, j)


def test_after_the_disk_is_repaired_a_job_shown_final_stays_final(umd, ext4_remount_ro):
    """A final state is shown only once committed. The part that ran as the disk went ended
    with nowhere to put its end: it is shown running, as the store holds it, saying why, and
    after the repair reads back interrupted, which is what a client was shown could happen."""
    shown, d2 = shown_then_repaired(umd, *ext4_remount_ro)
    first = shown[next(iter(shown))]
    assert first["state"] == "running" and first["finished"] is None, first
    assert "could not keep it" in first["not_stored"], first
    assert first["not_stored"].startswith("the job ended (succeeded)"), first
    assert wait_job(d2, first["id"])["state"] == "interrupted"
    for jid, before in shown.items():
        if before["state"] in ("succeeded", "failed"):
            assert wait_job(d2, jid)["state"] == before["state"]
