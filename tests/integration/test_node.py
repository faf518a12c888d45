"""Issue 24, parts 4 and 5, against the real daemon with fake devices: the node worker (which
runs every job spanning GPUs and the canonical check's GPU pairs) in /v1/devices/node,
/v1/health and /metrics with its state, warmth and crashes; the GPU pairs' verdict kept like a
GPU's (served in /v1/health, back after a restart); health_interval_s checking the pairs; and
the canonical check of a node of 8 fake GPUs (28 unordered pairs, 56 ordered)."""
import os
import re
import signal
import time

from conftest import submit, wait_for, wait_job
from test_multi_gpu import SMALL, node_part, workers


def node(d):
    r = d.get("/v1/devices/node")
    assert r.status_code == 200, r.text
    return r.json()


def metric(d, name):
    """{labels text: value} of one family in /metrics."""
    text = d.get("/metrics").text
    return {m.group(1) or "": float(m.group(2))
            for m in re.finditer(rf"^{name}(?:\{{(.*)\}})? (\S+)$", text, re.M)}


def canonical(d):
    j = wait_job(d, submit(d, {"benchmark": "health"})["id"], timeout=60)
    assert j["state"] == "succeeded", j
    return j


def test_a_cold_node_worker_is_shown_beside_the_gpus(umd):
    d = umd(fake_devices=2)
    n = node(d)
    assert n == {"uuid": "node", "device": "all", "gpus": 2, "state": "idle", "warm": False,
                 "running": False, "restarts": 0, "crashes": 0, "last_health": None,
                 "last_health_by_tier": {}}
    assert d.get("/v1/health").json()["node"] == n
    assert metric(d, "umd_node_worker_state")['state="idle"'] == 1
    assert metric(d, "umd_node_worker_warm") == {"": 0}
    assert metric(d, "umd_node_worker_crashes_total") == {"": 0}


def test_a_host_with_one_gpu_has_no_node_worker(umd):
    d = umd(fake_devices=1)
    r = d.get("/v1/devices/node")
    assert r.status_code == 404 and "two GPUs" in r.json()["detail"]
    assert d.get("/v1/health").json()["node"] is None
    assert "umd_node_worker" not in d.get("/metrics").text


def test_the_node_worker_is_warm_after_a_job_spanning_gpus(umd):
    d = umd(fake_devices=2)
    assert wait_job(d, submit(d, {"benchmark": "peer", "params": SMALL})["id"])["state"] == \
        "succeeded"
    n = node(d)
    assert n["warm"] is True and n["state"] == "idle"
    assert metric(d, "umd_node_worker_warm") == {"": 1}


def test_a_node_worker_crash_is_counted(umd):
    d = umd(fake_devices=2)
    peer = submit(d, {"benchmark": "peer", "params": dict(SMALL, fake_delay_ms=5000)})["id"]
    wait_job(d, peer, states=("running",))
    assert node(d)["running"] is True
    wait_for(lambda: "all" in workers(d), what="the node worker")
    os.kill(workers(d)["all"], signal.SIGKILL)
    assert wait_job(d, peer)["state"] == "failed"
    wait_for(lambda: node(d)["crashes"] == 1, what="the crash counted")
    assert metric(d, "umd_node_worker_crashes_total") == {"": 1}


def test_the_pairs_verdict_is_served_in_health_and_metrics_and_kept_across_a_restart(
        umd, tmp_path):
    d = umd(fake_devices=2, state_dir=tmp_path / "s")
    j = canonical(d)
    v = node_part(j)["verdict"]
    h = d.get("/v1/health").json()
    assert h["node"]["last_health"] == v
    assert v["verdict"] == "pass" and v["pairs"] == 2 and v["job"] == j["id"]
    assert metric(d, "umd_node_health_verdict")['verdict="pass"'] == 1
    d.stop()
    d2 = umd(fake_devices=2, state_dir=tmp_path / "s")
    assert d2.get("/v1/health").json()["node"]["last_health"] == v
    assert metric(d2, "umd_node_health_verdict")['verdict="pass"'] == 1


def test_a_failing_pair_is_a_problem_but_no_gpu_is_less_usable(umd):
    d = umd(fake_devices=2, env={"UMD_FAKE_P2P": "0-1=host"})
    canonical(d)
    r = d.get("/v1/health")
    assert r.status_code == 200
    body = r.json()
    assert body["node"]["last_health"]["verdict"] == "fail"
    assert "the GPU pairs failed their last health check" in body["problems"]
    assert body["devices"]["usable"] == 2


def test_health_interval_checks_the_pairs_when_every_gpu_is_free(umd):
    d = umd(fake_devices=2, args=["--health-interval-s", "1"])
    n = wait_for(lambda: node(d)["last_health"], timeout=20, what="a scheduled check of the pairs")
    assert n["verdict"] == "pass" and n["pairs"] == 2
    job = d.get("/v1/jobs/" + n["job"]).json()
    assert job["labels"] == {"scheduled": "health_interval"}
    assert [p["device"] for p in job["parts"]] == [0, 1, "all"]


def test_eight_gpus_are_checked_with_every_pair_and_the_node_is_shown(umd):
    d = umd(fake_devices=8)
    t0 = time.monotonic()
    j = canonical(d)
    took = time.monotonic() - t0
    assert len(j["parts"]) == 9
    v = node_part(j)["verdict"]
    assert v["verdict"] == "pass" and v["pairs"] == 56, v
    assert len({c["name"] for c in v["checks"]}) == 56
    assert all(p["verdict"]["verdict"] == "pass" for p in j["parts"][:8])
    assert took < 30, took  # well inside the 45 s umd-healthcheck gives Slurm's 60 s
    h = d.get("/v1/health").json()
    assert h["node"]["gpus"] == 8 and h["node"]["last_health"]["pairs"] == 56
    assert len(h["device_health"]) == 8
    assert all(x["last_health"]["verdict"] == "pass" for x in h["device_health"])
    assert metric(d, "umd_node_health_verdict")['verdict="pass"'] == 1


def test_eight_gpus_slurm_and_nhc_answer_within_their_timeouts(umd, tmp_path):
    # Slurm's HealthCheckProgram runs the check (umd-healthcheck's 45 s default fits Slurm's
    # 60 s); NHC (30 s) and Nagios read the cached verdicts. The pairs' verdict is in
    # /v1/health's "node" for them to read.
    from test_umdctl import fake_scontrol, hc, nhc
    scontrol, log = fake_scontrol(tmp_path)
    d = umd(fake_devices=8)
    t0 = time.monotonic()
    p = hc(d, "--mode", "slurm", SCONTROL=str(scontrol), SLURMD_NODENAME="node7", timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert time.monotonic() - t0 < 45
    assert not log.exists()  # nothing drained
    assert d.get("/v1/health").json()["node"]["last_health"]["pairs"] == 56
    t0 = time.monotonic()
    assert "RC 0" in nhc(d).stdout
    p = hc(d, "--mode", "nagios", "--cached", "--max-age", "1h", timeout=30)
    assert p.returncode == 0 and p.stdout.startswith("UMD OK"), p.stdout + p.stderr
    assert time.monotonic() - t0 < 10
