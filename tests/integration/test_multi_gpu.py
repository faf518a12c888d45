"""Benchmarks across GPUs on fake devices: d2d on one GPU; peer, managed_peer, host_all and the
topology suite on the node worker (umd-worker --device all), their matrices in JSON and text,
the plain refusal on a one-GPU host, and that no GPU's worker shares a fate with another's or
with the node worker's."""
import os
import signal
import subprocess
import time

import pytest

from conftest import clean_env, submit, wait_for, wait_job, worker_argvs

MULTI = ("peer", "managed_peer", "host_all", "topology")
SMALL = {"size": "4MiB", "iterations": 3, "warmup": 1}


def workers(d):
    """{"0": pid, "1": pid, "all": pid}: umd's workers now, by their --device."""
    return {argv[argv.index(b"--device") + 1].decode(): pid
            for pid, argv in worker_argvs(d.process.pid).items() if b"--device" in argv}


def test_catalog_lists_the_new_benchmarks_and_how_many_gpus_they_need(umd):
    d = umd()
    cat = {b["name"]: b for b in d.get("/v1/benchmarks").json()}
    assert cat["d2d"]["min_gpus"] == 1 and cat["d2d"]["kind"] == "benchmark"
    for name in MULTI:
        assert cat[name]["min_gpus"] == 2, name
        params = {p["name"]: p for p in cat[name]["params"]}
        assert params["size"]["default"] == 256 * 1024 * 1024
    assert cat["topology"]["kind"] == "suite"
    peer = {p["name"]: p for p in cat["peer"]["params"]}
    assert peer["methods"]["default"] == ["ce", "sm"]
    assert peer["directions"]["default"] == ["uni", "bidir"]


def test_d2d_runs_on_each_gpu_and_counts_read_plus_write(umd):
    d = umd()
    j = wait_job(d, submit(d, {"benchmark": "d2d", "devices": "all", "params": SMALL})["id"])
    assert j["state"] == "succeeded", j
    assert len(j["parts"]) == 2
    for p in j["parts"]:
        res = p["result"]
        assert res["fake"] is True
        names = [m["name"] for m in res["measurements"]]
        assert names == ["copy_engine", "sm_copy"]
        for m in res["measurements"]:
            assert m["bytes_counted"] == "read+write" and m["bytes"] == 2 * 4 * 1024 * 1024
            assert m["verified"] is True and len(m["samples_ms"]) == 3


def test_peer_runs_once_on_the_node_worker_with_every_pair_and_its_link(umd):
    d = umd()
    j = wait_job(d, submit(d, {"benchmark": "peer", "params": SMALL})["id"])
    assert j["state"] == "succeeded", j
    assert len(j["parts"]) == 1
    part = j["parts"][0]
    assert part["device"] == "all" and part["uuid"] == "node"
    assert len(part["devices"]) == 2
    res = part["result"]
    assert res["fake"] is True and len(res["devices"]) == 2
    links = {(l["src"], l["dst"]): l for l in res["links"]}
    assert links[(0, 1)]["type"] == "nvlink" and links[(0, 1)]["nvlink_links"] == 18
    ms = {m["name"]: m for m in res["measurements"]}
    for name in ("ce_uni@0>1", "ce_uni@1>0", "sm_uni@0>1", "sm_uni@1>0", "ce_bidir@0>1",
                 "sm_bidir@0>1"):
        assert name in ms, sorted(ms)
        assert ms[name]["verified"] is True
    assert ms["ce_bidir@0>1"]["bytes_counted"] == "both directions"
    s = res["summary"]
    mx = {m["name"]: m["gbps"] for m in s["matrices"]}
    assert mx["ce_uni"][0][0] is None and mx["ce_uni"][0][1] > 250
    assert mx["ce_bidir"][0][1] == mx["ce_bidir"][1][0]
    assert s["links"][0][1] == "NV18" and s["expected_gbps"][0][1] == 450
    assert s["conclusion"].startswith("The slowest pair is GPU ")
    assert "450 GB/s" in s["conclusion"] and "NV18" in s["conclusion"]


def test_peer_methods_and_directions_can_be_narrowed(umd):
    d = umd()
    body = {"benchmark": "peer", "params": dict(SMALL, methods=["ce"], directions=["uni"])}
    j = wait_job(d, submit(d, body)["id"])
    names = sorted(m["name"] for m in j["parts"][0]["result"]["measurements"])
    assert names == ["ce_uni@0>1", "ce_uni@1>0"]


def test_topology_suite_renders_matrices_in_json_and_text_and_names_the_slowest_pair(umd):
    d = umd()
    jid = submit(d, {"benchmark": "topology", "params": SMALL})["id"]
    j = wait_job(d, jid)
    assert j["state"] == "succeeded", j
    s = j["parts"][0]["result"]["summary"]
    assert [g is not None for g in s["d2d_gbps"]] == [True, True]
    assert {m["name"] for m in s["matrices"]} == {"ce_uni", "ce_bidir", "sm_uni", "sm_bidir"}
    assert s["slowest"]["method"] == "ce" and s["slowest"]["expected_gbps"] == 450
    text = d.get("/v1/jobs/" + jid + "?format=text").text
    assert "device all  node  succeeded" in text
    assert "memcpy CE (cudaMemcpyPeerAsync), one direction, GB/s" in text
    assert "src\\dst" in text and "N/A" in text and "NV18" in text
    assert text.rstrip().splitlines()[-2].strip().startswith("The slowest pair is GPU") or \
        "The slowest pair is GPU" in text


def test_a_pair_degraded_to_fewer_links_or_the_host_is_the_slowest_against_its_link(umd):
    d = umd(fake_devices=3, env={"UMD_FAKE_P2P": "0-2=host,1-2=nvlink:12"})
    j = wait_job(d, submit(d, {"benchmark": "peer", "params": dict(SMALL, methods=["ce"])})["id"])
    s = j["parts"][0]["result"]["summary"]
    assert s["links"][0][2] == "host" and s["links"][2][1] == "NV12"
    assert s["slowest"]["src"] in (0, 2) and s["slowest"]["dst"] in (0, 2)
    assert s["slowest"]["link"] == "host"


def test_managed_peer_compares_on_demand_and_prefetch_with_the_peer_copy(umd):
    d = umd()
    j = wait_job(d, submit(d, {"benchmark": "managed_peer", "params": SMALL})["id"])
    assert j["state"] == "succeeded", j
    res = j["parts"][0]["result"]
    names = {m["name"] for m in res["measurements"]}
    assert {"on_demand@0>1", "prefetch@0>1", "peer_copy@0>1", "on_demand@1>0"} <= names
    pairs = res["summary"]["pairs"]
    assert len(pairs) == 2 and 0 < pairs[0]["on_demand_ratio"] < pairs[0]["prefetch_ratio"] < 1


def test_host_all_reports_the_aggregate_against_the_sum_alone(umd):
    d = umd()
    j = wait_job(d, submit(d, {"benchmark": "host_all", "params": dict(SMALL, direction="d2h")})[
        "id"])
    assert j["state"] == "succeeded", j
    res = j["parts"][0]["result"]
    assert [m["name"] for m in res["measurements"]] == ["alone@0", "alone@1", "all"]
    s = res["summary"]
    assert len(s["alone_gbps"]) == 2 and 0.9 < s["ratio"] < 1.05
    assert s["conclusion"].startswith("All 2 GPUs copying d2h at once")


@pytest.mark.parametrize("name", MULTI)
def test_on_a_one_gpu_host_each_benchmark_says_it_needs_two_gpus(umd, name):
    d = umd(fake_devices=1)
    r = d.post("/v1/jobs", json={"benchmark": name})
    assert r.status_code == 400, r.text
    assert r.json()["detail"] == f"{name} needs two GPUs: this node has 1"
    assert r.json()["field"] == "benchmark"


def test_naming_one_device_for_a_benchmark_spanning_gpus_is_400(umd):
    d = umd()
    r = d.post("/v1/jobs", json={"benchmark": "peer", "device": 0})
    assert r.status_code == 400 and r.json()["field"] == "device", r.text
    assert "spans every GPU" in r.json()["detail"]


def test_gpu_parts_wait_while_the_node_job_holds_the_gpus(umd):
    d = umd()
    peer = submit(d, {"benchmark": "peer", "params": dict(SMALL, fake_delay_ms=800)})["id"]
    wait_job(d, peer, states=("running",))
    copy = submit(d, {"benchmark": "copy", "device": 1, "params": {"size": "4MiB"}})["id"]
    time.sleep(0.3)
    assert d.get("/v1/jobs/" + copy).json()["state"] == "queued"
    p, c = wait_job(d, peer), wait_job(d, copy)
    assert p["state"] == c["state"] == "succeeded"
    assert c["parts"][0]["started"] >= p["parts"][0]["finished"]


def test_a_job_on_one_gpu_survives_the_other_gpus_worker_being_killed(umd):
    d = umd()
    slow = submit(d, {"benchmark": "copy", "device": 0,
                      "params": {"size": "4MiB", "fake_delay_ms": 1500}})["id"]
    victim = submit(d, {"benchmark": "copy", "device": 1,
                        "params": {"size": "4MiB", "fake_delay_ms": 5000}})["id"]
    wait_job(d, slow, states=("running",))
    wait_job(d, victim, states=("running",))
    wait_for(lambda: "1" in workers(d), what="worker of device 1")
    os.kill(workers(d)["1"], signal.SIGKILL)
    v = wait_job(d, victim)
    assert v["state"] == "failed" and "SIGKILL" in v["parts"][0]["error"], v
    s = wait_job(d, slow)
    assert s["state"] == "succeeded", s
    # The killed GPU's worker comes back for the next job.
    again = wait_job(d, submit(d, {"benchmark": "copy", "device": 1,
                                   "params": {"size": "4MiB"}})["id"])
    assert again["state"] == "succeeded", again


def test_the_node_job_survives_a_gpu_worker_being_killed(umd):
    d = umd()
    # Warm both GPUs' workers, so there is one to kill while the node job runs.
    for jid in [submit(d, {"benchmark": "copy", "device": i, "params": {"size": "4MiB"}})["id"]
                for i in (0, 1)]:
        wait_job(d, jid)
    wait_for(lambda: {"0", "1"} <= set(workers(d)), what="both GPU workers")
    peer = submit(d, {"benchmark": "peer", "params": dict(SMALL, fake_delay_ms=1500)})["id"]
    wait_job(d, peer, states=("running",))
    os.kill(workers(d)["1"], signal.SIGKILL)
    p = wait_job(d, peer)
    assert p["state"] == "succeeded", p


def test_killing_the_node_worker_fails_only_its_job(umd):
    d = umd()
    peer = submit(d, {"benchmark": "peer", "params": dict(SMALL, fake_delay_ms=5000)})["id"]
    wait_job(d, peer, states=("running",))
    wait_for(lambda: "all" in workers(d), what="the node worker")
    os.kill(workers(d)["all"], signal.SIGKILL)
    p = wait_job(d, peer)
    assert p["state"] == "failed" and "SIGKILL" in p["parts"][0]["error"], p
    for i in (0, 1):
        j = wait_job(d, submit(d, {"benchmark": "copy", "device": i,
                                   "params": {"size": "4MiB"}})["id"])
        assert j["state"] == "succeeded", j
    assert [dev["state"] for dev in d.get("/v1/devices").json()] == ["idle", "idle"]
    again = wait_job(d, submit(d, {"benchmark": "peer", "params": SMALL})["id"])
    assert again["state"] == "succeeded", again


def test_cancel_stops_a_node_job(umd):
    d = umd()
    peer = submit(d, {"benchmark": "peer", "params": dict(SMALL, fake_delay_ms=10000)})["id"]
    wait_job(d, peer, states=("running",))
    assert d.delete("/v1/jobs/" + peer).status_code in (200, 202)
    assert wait_job(d, peer)["state"] == "cancelled"


# -- the canonical health check on a node with several GPUs --

def node_part(job):
    parts = [p for p in job["parts"] if p["uuid"] == "node"]
    assert len(parts) == 1, job["parts"]
    return parts[0]


def test_canonical_health_also_checks_every_pair_against_its_link(umd):
    d = umd()
    j = wait_job(d, submit(d, {"benchmark": "health"})["id"])
    assert j["state"] == "succeeded", j
    assert [p["device"] for p in j["parts"]] == [0, 1, "all"]
    p = node_part(j)
    names = sorted(m["name"] for m in p["result"]["measurements"])
    assert names == ["ce_uni@0>1", "ce_uni@1>0"]
    v = p["verdict"]
    assert v["verdict"] == "pass" and v["pairs"] == 2, v
    assert any("of the 450 GB/s its link (NV18; 18 links x 25 GB/s, the NVIDIA H200's rate) "
               "should carry" in c["reason"] for c in v["checks"])
    for gpu in j["parts"][:2]:
        assert gpu["verdict"]["verdict"] in ("pass", "warn")


def test_health_with_params_or_on_one_device_has_no_pair_part(umd):
    d = umd()
    one = wait_job(d, submit(d, {"benchmark": "health", "device": 0})["id"])
    assert [p["device"] for p in one["parts"]] == [0]
    custom = wait_job(d, submit(d, {"benchmark": "health", "params": {"size": "4MiB"}})["id"])
    assert [p["device"] for p in custom["parts"]] == [0, 1]


def test_a_pair_going_through_the_host_fails_the_health_check(umd):
    d = umd(env={"UMD_FAKE_P2P": "0-1=host"})
    j = wait_job(d, submit(d, {"benchmark": "health"})["id"])
    p = node_part(j)
    assert p["verdict"]["verdict"] == "fail", p["verdict"]
    assert any("no peer access: its copies go through host memory" in r
               for r in p["verdict"]["reasons"])
    assert p["first_attempt"]["verdict"]["verdict"] == "fail"  # run twice before failing


def test_a_pair_that_lost_links_fails_against_its_own_past(umd, tmp_path):
    state = tmp_path / "state"
    d = umd(state_dir=state)
    for _ in range(3):  # health_baseline_min_runs
        j = wait_job(d, submit(d, {"benchmark": "health"})["id"])
        assert node_part(j)["verdict"]["verdict"] == "pass"
    d.stop()
    # 12 links still carry 259 GB/s, 86% of what 12 links should: against its link the pair
    # passes, so only the change of link and the drop against its baseline say what happened.
    d = umd(state_dir=state, env={"UMD_FAKE_P2P": "0-1=nvlink:12"})
    j = wait_job(d, submit(d, {"benchmark": "health"})["id"])
    v = node_part(j)["verdict"]
    assert v["verdict"] == "fail", v
    assert any("the link is NV12 now, NV18 in past passing checks" in r for r in v["reasons"])
    assert any("against its baseline" in r for r in v["reasons"])


def test_umdctl_health_reports_the_pairs_and_fails_on_a_pair_through_the_host(umd):
    d = umd(env={"UMD_FAKE_P2P": "0-1=host"})
    r = subprocess.run([os.environ["UMDCTL"], "--url", d.base_url, "health"],
                       capture_output=True, text=True, timeout=60, env=clean_env())
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("GPU pairs (every GPU) FAIL action=reset_gpu: GPU 0 -> GPU 1 has no peer access"
            in r.stdout), r.stdout


def test_a_queued_job_spanning_gpus_runs_after_a_restart(umd, tmp_path):
    # Its part names the node ("device": "all"); read back at start it is a job like any other.
    state = tmp_path / "state"
    d = umd(fake_devices=2, state_dir=state)
    running = submit(d, {"benchmark": "peer", "params": {**SMALL, "fake_delay_ms": 30000}})
    wait_job(d, running["id"], ("running",))
    queued = submit(d, {"benchmark": "peer", "params": SMALL})
    assert d.stop() == 0
    d2 = umd(fake_devices=2, state_dir=state)
    assert d2.get("/v1/jobs/" + running["id"]).json()["state"] == "interrupted"
    done = wait_job(d2, queued["id"])
    assert done["state"] == "succeeded", done
    assert done["parts"][0]["device"] == "all"
