"""A GPU paused (a Slurm prolog) while the canonical check's GPU-pair part runs on the node
worker: the part is cancelled saying which GPU's pause cancelled it, and the scheduler path
(umdctl health, umd-healthcheck) calls that unknown, never a failure. The real-Slurm case is in
test_slurm.py.

fake_gpu_state's "node": {"delay_ms": N} makes the node's part of the canonical check (which
takes no params) run for N ms, so the pause lands while it runs."""
import json
import subprocess

from conftest import wait_for
from test_umdctl import HEALTHCHECK, UMDCTL, env

PAIRS_MS = 20000


def slow_pairs(umd, tmp_path):
    state = tmp_path / "gpu-state.json"
    state.write_text(json.dumps({"node": {"delay_ms": PAIRS_MS}}))
    return umd(fake_devices=2, args=["--fake-gpu-state", str(state)])


def node_part(job):
    return next(p for p in job["parts"] if p["device"] == "all")


def running_pairs(d):
    """The canonical check whose node part is running now, or None."""
    for job in d.get("/v1/jobs?benchmark=health&status=running").json()["jobs"]:
        full = d.get("/v1/jobs/" + job["id"]).json()
        if node_part(full)["state"] == "running":
            return full
    return None


def pairs_final(d, jid):
    """The node part once it is final (the paused GPU's own part keeps waiting)."""
    def final():
        part = node_part(d.get("/v1/jobs/" + jid).json())
        return part if part["state"] not in ("queued", "running") else None
    return wait_for(final, timeout=15, what="the pairs part final")


def pause_during_pairs(d):
    job = wait_for(lambda: running_pairs(d), timeout=20, what="the pairs part running")
    r = d.post("/v1/devices/1/pause", json={"reason": "slurm job 42"})
    assert r.status_code == 200, r.text
    return job


def run_while_pausing(d, argv, **kw):
    """argv run while the pairs part runs and GPU 1 is paused under it: its exit status,
    stdout and stderr."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    try:
        pause_during_pairs(d)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, out, err


def test_a_pause_cancels_the_node_part_saying_which_gpu(umd, tmp_path):
    d = slow_pairs(umd, tmp_path)
    uuid1 = d.get("/v1/devices").json()[1]["uuid"]
    r = d.post("/v1/jobs", json={"benchmark": "health", "devices": "all"})
    assert r.status_code == 202, r.text
    job = pause_during_pairs(d)
    part = pairs_final(d, job["id"])
    assert part["state"] == "cancelled", part
    assert part["error"] == f"cancelled: device paused: GPU 1 ({uuid1}): slurm job 42", part


def test_a_cancel_asked_for_is_not_called_a_pause(umd, tmp_path):
    d = slow_pairs(umd, tmp_path)
    r = d.post("/v1/jobs", json={"benchmark": "health", "devices": "all"})
    job = wait_for(lambda: running_pairs(d), timeout=20, what="the pairs part running")
    assert d.delete("/v1/jobs/" + job["id"]).status_code == 200
    part = pairs_final(d, r.json()["id"])
    assert part["state"] == "cancelled" and "paused" not in (part["error"] or ""), part


def test_umdctl_health_calls_pairs_cancelled_by_a_pause_unknown(umd, tmp_path):
    d = slow_pairs(umd, tmp_path)
    rc, out, err = run_while_pausing(d, [UMDCTL, "--url", d.base_url, "health", "--timeout", "8s"],
                                     env=env())
    assert rc == 4, out + err
    assert "GPU pairs (every GPU) UNKNOWN: the check could not run: cancelled: device paused: " \
        "GPU 1" in out, out
    assert "GPU 1 " in out and "device paused: slurm job 42" in out, out  # held by the pause
    assert " FAIL" not in out, out


def test_slurm_mode_does_not_drain_when_a_pause_cancels_the_pairs(umd, tmp_path):
    log = tmp_path / "scontrol.log"
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\n')
    scontrol.chmod(0o755)
    d = slow_pairs(umd, tmp_path)
    rc, out, err = run_while_pausing(
        d, ["/bin/sh", str(HEALTHCHECK), "--url", d.base_url, "--mode", "slurm", "--timeout", "8s"],
        env=env(SCONTROL=str(scontrol), SLURMD_NODENAME="node7"))
    assert rc == 0, out + err
    assert "UNKNOWN" in out and not log.exists(), out
