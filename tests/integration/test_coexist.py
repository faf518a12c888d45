"""umd on a shared GPU node, against the real daemon with fake devices: idle release (workers
start cold, give back their pool, exit when idle, report cold starts), other processes on a GPU
(busy_policy wait/run/fail, contended results, busy_wait_max_s), pause and resume, verdicts
only from the canonical health check (re-run once on fail), the link and replay counter read
live, EXCLUSIVE_PROCESS GPUs, placement recorded, and the built-in health schedule.

What NVML would say of a fake GPU comes from the fake_gpu_state file (tests only), re-read at
every look: {"0": {"other_processes": 1, "compute_mode": "exclusive_process",
"pcie": {"current_gen": 3}, "replay_counter": 5, "bandwidth_pct": 30}}."""
import json
import os
import time
from pathlib import Path

from test_access import ADMIN, SUBMIT, bearer, tokens_file
from conftest import wait_for, worker_argvs
from test_jobs import problem, submit, wait_job

POLL = ["--busy-poll-ms", "50"]
QUICK = {"benchmark": "copy", "device": 0, "params": {"size": "1MiB", "iterations": 2}}
SLOW = {"benchmark": "copy", "device": 0, "params": {"size": "1MiB", "fake_delay_ms": 30000}}
CANONICAL = {"benchmark": "health", "device": 0}


class GpuState:
    """The fake_gpu_state file of one daemon."""

    def __init__(self, tmp_path):
        self.path = Path(tmp_path) / "gpu-state.json"
        self.set({})

    def set(self, state):
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.path)

    def args(self):
        return ["--fake-gpu-state", str(self.path)] + POLL


def start(umd, tmp_path, *args, fake_devices=2, **kw):
    gpu = GpuState(tmp_path)
    d = umd(fake_devices=fake_devices, args=[*gpu.args(), *args], **kw)
    return d, gpu


def device(d, i=0):
    return d.get("/v1/devices").json()[i]


def worker_pids(d):
    """The umd-worker processes umd has now (its children)."""
    return list(worker_argvs(d.process.pid))


def part(job, i=0):
    return job["parts"][i]


# -- idle release --

def test_no_worker_runs_before_the_first_job(umd, tmp_path):
    d, _ = start(umd, tmp_path)
    assert worker_pids(d) == []
    dev = device(d)
    assert dev["state"] == "idle" and dev["warm"] is False


def test_first_job_reports_a_cold_start_and_the_next_a_warm_one(umd, tmp_path):
    d, _ = start(umd, tmp_path)
    first = wait_job(d, submit(d, QUICK)["id"])
    assert first["state"] == "succeeded"
    cold = part(first)["cold_start"]
    assert cold["cold"] is True and cold["ms"] >= 0
    assert device(d)["warm"] is True
    second = wait_job(d, submit(d, QUICK)["id"])
    assert part(second)["cold_start"] == {"cold": False, "ms": None}


def test_idle_worker_exits_after_worker_idle_s_and_holds_nothing(umd, tmp_path):
    d, _ = start(umd, tmp_path, "--worker-idle-s", "1")
    wait_job(d, submit(d, QUICK)["id"])
    assert len(worker_pids(d)) == 1
    wait_for(lambda: worker_pids(d) == [] and device(d)["warm"] is False, timeout=10)
    assert device(d)["state"] == "idle"
    assert "crash" not in (device(d)["state_reason"] or "")
    # the next job starts a worker again, cold
    again = wait_job(d, submit(d, QUICK)["id"])
    assert again["state"] == "succeeded" and part(again)["cold_start"]["cold"] is True


def test_idle_worker_gives_back_its_pool_after_pool_idle_s(umd, tmp_path):
    d, _ = start(umd, tmp_path, "--pool-idle-s", "1", "--worker-idle-s", "60")
    wait_job(d, submit(d, QUICK)["id"])
    warm = wait_job(d, submit(d, QUICK)["id"])
    assert warm["parts"][0]["result"]["context"]["pool_given_back_before"] is False
    wait_for(lambda: "gave back the buffer pool" in d.log(), timeout=10)
    later = wait_job(d, submit(d, QUICK)["id"])
    assert later["parts"][0]["result"]["context"]["pool_given_back_before"] is True
    assert part(later)["cold_start"]["cold"] is False


def test_exclusive_process_gpu_keeps_no_context_between_jobs(umd, tmp_path):
    d, gpu = start(umd, tmp_path, "--worker-idle-s", "600")
    gpu.set({"0": {"compute_mode": "exclusive_process"}})
    wait_for(lambda: device(d)["compute_mode"] == "exclusive_process")
    for _ in range(2):
        j = wait_job(d, submit(d, QUICK)["id"])
        assert j["state"] == "succeeded" and part(j)["cold_start"]["cold"] is True
        wait_for(lambda: worker_pids(d) == [], timeout=10)


def test_results_record_where_the_worker_ran(umd, tmp_path):
    d, _ = start(umd, tmp_path)
    j = wait_job(d, submit(d, QUICK)["id"])
    placement = j["parts"][0]["result"]["context"]["placement"]
    assert placement["cpus"]  # e.g. "0-1"
    assert placement["memory_policy"] in ("default", "preferred", "bind", "interleave", "other")
    assert "numa_node" in placement


# -- other processes on the GPU --

def test_part_waits_while_another_process_uses_the_gpu_then_runs(umd, tmp_path):
    d, gpu = start(umd, tmp_path)
    gpu.set({"0": {"other_processes": 1}})
    wait_for(lambda: device(d)["other_processes"] == 1)
    jid = submit(d, QUICK)["id"]
    j = wait_for(lambda: (lambda j: j if part(j).get("waiting") else None)(
        d.get("/v1/jobs/" + jid).json()))
    assert j["state"] == "queued"
    assert part(j)["waiting"] == "GPU in use by 1 other process"
    assert worker_pids(d) == []  # no context made beside the user's
    time.sleep(0.3)
    assert d.get("/v1/jobs/" + jid).json()["state"] == "queued"
    gpu.set({})
    j = wait_job(d, jid)
    assert j["state"] == "succeeded"
    assert "waiting" not in part(j) and "contended" not in part(j)


def test_busy_policy_fail_fails_the_part_with_the_reason(umd, tmp_path):
    d, gpu = start(umd, tmp_path, "--busy-policy", "fail")
    gpu.set({"0": {"other_processes": 2}})
    wait_for(lambda: device(d)["other_processes"] == 2)
    j = wait_job(d, submit(d, QUICK)["id"])
    assert j["state"] == "failed"
    assert part(j)["error"] == "GPU in use by 2 other processes (busy_policy fail)"


def test_busy_policy_run_marks_the_result_contended_and_never_judges_it(umd, tmp_path):
    d, gpu = start(umd, tmp_path)
    gpu.set({"0": {"other_processes": 1}})
    wait_for(lambda: device(d)["other_processes"] == 1)
    j = wait_job(d, submit(d, dict(CANONICAL, busy_policy="run"))["id"])
    assert j["state"] == "succeeded"
    assert part(j)["contended"]["other_processes"] == 1
    assert "verdict" not in part(j)
    assert device(d)["last_health"] is None


def test_a_process_that_appears_mid_part_marks_it_contended(umd, tmp_path):
    d, gpu = start(umd, tmp_path)
    jid = submit(d, {"benchmark": "copy", "device": 0,
                     "params": {"size": "1MiB", "fake_delay_ms": 1500}})["id"]
    wait_job(d, jid, states=("running",))
    gpu.set({"0": {"other_processes": 3}})
    j = wait_job(d, jid)
    assert j["state"] == "succeeded"
    assert part(j)["contended"]["other_processes"] == 3


def test_a_part_waits_at_most_busy_wait_max_s(umd, tmp_path):
    d, gpu = start(umd, tmp_path, "--busy-wait-max-s", "1")
    gpu.set({"0": {"other_processes": 1}})
    wait_for(lambda: device(d)["other_processes"] == 1)
    j = wait_job(d, submit(d, QUICK)["id"], timeout=15)
    assert j["state"] == "failed"
    assert "longer than busy_wait_max_s (1 s)" in part(j)["error"]


def test_busy_policy_is_validated(umd, tmp_path):
    d, _ = start(umd, tmp_path)
    problem(d.post("/v1/jobs", json=dict(QUICK, busy_policy="later")), 400, "busy_policy")


def test_busy_policy_config_is_validated(umd_run):
    r = umd_run(["--busy-policy", "sometimes"])
    assert r.returncode == 2 and "wait, run, fail" in r.stderr


# -- pause and resume --

def test_pause_cancels_the_running_part_and_holds_queued_ones(umd, tmp_path):
    d, _ = start(umd, tmp_path)
    uuid = device(d)["uuid"]
    running = submit(d, SLOW)["id"]
    wait_job(d, running, states=("running",))
    queued = submit(d, QUICK)["id"]
    r = d.post(f"/v1/devices/{uuid}/pause", json={"reason": "slurm job 42"})
    assert r.status_code == 200, r.text
    dev = r.json()
    assert dev["paused"] is True and dev["pause_reason"] == "slurm job 42"
    assert dev["state"] == "paused"
    j = wait_job(d, running, timeout=10)
    assert j["state"] == "cancelled"
    assert part(j)["error"] == "cancelled: device paused: slurm job 42"
    q = wait_for(lambda: (lambda j: j if part(j).get("waiting") else None)(
        d.get("/v1/jobs/" + queued).json()))
    assert q["state"] == "queued" and part(q)["waiting"] == "device paused: slurm job 42"
    wait_for(lambda: worker_pids(d) == [] and not device(d)["warm"], timeout=10)
    r = d.post(f"/v1/devices/{uuid}/resume")
    assert r.status_code == 200 and r.json()["paused"] is False
    assert wait_job(d, queued)["state"] == "succeeded"


def test_pause_survives_a_restart(umd, tmp_path):
    d, gpu = start(umd, tmp_path)
    assert d.post("/v1/devices/1/pause", json={"reason": "maintenance"}).status_code == 200
    d.stop()
    d2 = umd(args=gpu.args(), state_dir=d.state_dir)
    dev = device(d2, 1)
    assert dev["paused"] is True and dev["pause_reason"] == "maintenance"
    jid = submit(d2, dict(QUICK, device=1))["id"]
    time.sleep(0.3)
    assert d2.get("/v1/jobs/" + jid).json()["state"] == "queued"
    assert d2.post("/v1/devices/1/resume").status_code == 200
    assert wait_job(d2, jid)["state"] == "succeeded"


def test_pause_needs_the_admin_role(umd, tmp_path):
    d, _ = start(umd, tmp_path, "--tokens-file", str(tokens_file(tmp_path)))
    problem(d.post("/v1/devices/0/pause"), 401)
    problem(d.post("/v1/devices/0/pause", headers=bearer(SUBMIT)), 403)
    assert d.post("/v1/devices/0/pause", headers=bearer(ADMIN)).status_code == 200
    assert d.post("/v1/devices/0/resume", headers=bearer(ADMIN)).status_code == 200


def test_pause_of_an_unknown_device_or_a_bad_reason_is_refused(umd, tmp_path):
    d, _ = start(umd, tmp_path)
    problem(d.post("/v1/devices/GPU-nope/pause"), 404, "device")
    problem(d.post("/v1/devices/7/resume"), 404, "device")
    problem(d.post("/v1/devices/0/pause", json={"reason": 5}), 400, "reason")
    problem(d.post("/v1/devices/0/pause", json={"why": "x"}), 400, "why")
    problem(d.post("/v1/devices/0/pause", json={"reason": "x" * 201}), 400, "reason")
    assert device(d)["paused"] is False


# -- verdicts only from the canonical check --

def test_health_with_params_never_changes_the_verdict(umd, tmp_path):
    d, _ = start(umd, tmp_path, fake_devices=1)
    j = wait_job(d, submit(d, {"benchmark": "health", "device": 0,
                               "params": {"size": "64KiB", "fake_bandwidth_pct": 5}})["id"])
    assert j["state"] == "succeeded" and j["canonical"] is False
    assert "verdict" not in part(j)
    assert device(d)["last_health"] is None
    assert d.get("/v1/health").status_code == 200


def test_canonical_check_takes_its_parameters_from_the_config(umd, tmp_path):
    d, _ = start(umd, tmp_path, "--health-size", "8MiB", "--health-iterations", "3",
                 fake_devices=1)
    j = wait_job(d, submit(d, CANONICAL)["id"])
    assert j["canonical"] is True
    assert j["params"]["size"] == 8 << 20 and j["params"]["iterations"] == 3
    v = part(j)["verdict"]
    assert v["verdict"] == "pass" and v["job"] == j["id"] and v["time"]
    assert device(d)["last_health"]["job"] == j["id"]


def test_a_failing_canonical_check_is_run_once_more_before_it_counts(umd, tmp_path):
    d, gpu = start(umd, tmp_path, fake_devices=1)
    gpu.set({"0": {"bandwidth_pct": 20}})
    j = wait_job(d, submit(d, CANONICAL)["id"])
    assert j["state"] == "succeeded"
    p = part(j)
    assert p["first_attempt"]["verdict"]["verdict"] == "fail"
    assert p["verdict"]["verdict"] == "fail"
    assert device(d)["last_health"]["verdict"] == "fail"
    assert d.get("/v1/health").status_code == 503


def test_a_passing_canonical_check_runs_once(umd, tmp_path):
    d, _ = start(umd, tmp_path, fake_devices=1)
    j = wait_job(d, submit(d, CANONICAL)["id"])
    assert "first_attempt" not in part(j)
    assert part(j)["verdict"]["verdict"] == "pass"


def test_link_trained_down_since_start_is_seen_by_the_next_check(umd, tmp_path):
    d, gpu = start(umd, tmp_path, fake_devices=1)
    assert part(wait_job(d, submit(d, CANONICAL)["id"]))["verdict"]["verdict"] == "pass"
    gpu.set({"0": {"pcie": {"current_gen": 3, "current_width": 16}}})
    wait_for(lambda: True)
    time.sleep(0.2)
    v = part(wait_job(d, submit(d, CANONICAL)["id"]))["verdict"]
    assert v["verdict"] in ("warn", "fail")
    assert any("Gen3 x16, below its maximum Gen5 x16" in r for r in v["reasons"])


def test_replay_counter_growth_faster_than_the_link_allows_warns(umd, tmp_path):
    # Judged as a rate (test_health_links.py has the rest): Gen5 x16 allows 30.2 a minute.
    d, gpu = start(umd, tmp_path, fake_devices=1)
    gpu.set({"0": {"replay_counter": 10}})
    time.sleep(0.2)
    v = part(wait_job(d, submit(d, CANONICAL)["id"]))["verdict"]
    assert v["verdict"] == "pass" and v["pcie_replay_counter"] == 10
    gpu.set({"0": {"replay_counter": 110}})
    time.sleep(0.2)
    v = part(wait_job(d, submit(d, CANONICAL)["id"]))["verdict"]
    assert v["verdict"] == "warn"
    assert any("replay counter grew by 100" in r for r in v["reasons"])


# -- the built-in schedule --

def test_health_interval_checks_idle_gpus_and_skips_paused_ones(umd, tmp_path):
    d, _ = start(umd, tmp_path, "--health-interval-s", "1")
    assert d.post("/v1/devices/1/pause").status_code == 200

    def scheduled():
        jobs = d.get("/v1/jobs?benchmark=health").json()["jobs"]
        return [j for j in jobs if j["labels"].get("scheduled") == "health_interval"
                and j["state"] == "succeeded"]

    jobs = wait_for(scheduled, timeout=15)
    assert all(j["canonical"] and j["parts"][0]["device"] == 0 for j in jobs)
    assert device(d, 0)["last_health"]["verdict"] == "pass"
    assert device(d, 1)["last_health"] is None


def test_metrics_say_warm_paused_and_other_processes(umd, tmp_path):
    d, gpu = start(umd, tmp_path)
    gpu.set({"1": {"other_processes": 2}})
    wait_job(d, submit(d, QUICK)["id"])
    assert d.post("/v1/devices/1/pause").status_code == 200
    wait_for(lambda: device(d, 1)["other_processes"] == 2)
    text = d.get("/metrics").text
    u0, u1 = device(d, 0)["uuid"], device(d, 1)["uuid"]
    assert f'umd_device_warm{{uuid="{u0}"}} 1' in text
    assert f'umd_device_warm{{uuid="{u1}"}} 0' in text
    assert f'umd_device_state{{uuid="{u1}",state="paused"}} 1' in text
    assert f'umd_device_other_processes{{uuid="{u1}"}} 2' in text


# -- looks right before and right after each part (issue 28): a minute between periodic looks,
# so only those can see what happens --

RARE_POLL = ["--busy-poll-ms", "60000"]


def waiting_part(d, jid):
    j = d.get("/v1/jobs/" + jid).json()
    return j if part(j).get("waiting") else None


def test_a_part_starts_only_on_a_look_taken_after_it_was_ready(umd, tmp_path):
    d, gpu = start(umd, tmp_path, *RARE_POLL)
    wait_for(lambda: device(d)["other_processes"] == 0)  # the look at start: free
    gpu.set({"0": {"other_processes": 1}})
    jid = submit(d, CANONICAL)["id"]
    # The last periodic look said free; the one taken for the start says otherwise.
    j = wait_for(lambda: waiting_part(d, jid), timeout=5, what="the part to wait")
    assert j["state"] == "queued"
    assert part(j)["waiting"] == "GPU in use by 1 other process"
    assert device(d)["last_health"] is None


def test_a_process_there_when_the_part_ends_marks_it_contended_with_no_poll_between(umd,
                                                                                  tmp_path):
    d, gpu = start(umd, tmp_path, *RARE_POLL)
    jid = submit(d, {"benchmark": "copy", "device": 0,
                     "params": {"size": "1MiB", "fake_delay_ms": 1500}})["id"]
    wait_job(d, jid, states=("running",))
    gpu.set({"0": {"other_processes": 2}})
    j = wait_job(d, jid)
    assert j["state"] == "succeeded"
    assert part(j)["contended"]["other_processes"] == 2


def test_an_undisturbed_part_is_not_marked_by_the_looks_around_it(umd, tmp_path):
    d, _ = start(umd, tmp_path, *RARE_POLL)
    j = wait_job(d, submit(d, CANONICAL)["id"])
    assert j["state"] == "succeeded"
    assert "contended" not in part(j)
    assert part(j)["verdict"]["verdict"] in ("pass", "warn")


def test_a_look_asked_for_one_gpu_leaves_the_others_to_the_periodic_look(umd, tmp_path):
    d, gpu = start(umd, tmp_path, *RARE_POLL)
    wait_for(lambda: device(d, 1)["other_processes"] == 0)  # the look at start
    gpu.set({"1": {"other_processes": 1}})
    # Device 0's part asks for a look before its start and after its end: at device 0 alone.
    j = wait_job(d, submit(d, QUICK)["id"])
    assert j["state"] == "succeeded"
    assert device(d, 1)["other_processes"] == 0
    # Device 1's own part asks for its own look, which sees the other process.
    jid = submit(d, {**QUICK, "device": 1, "busy_policy": "wait"})["id"]
    j = wait_for(lambda: waiting_part(d, jid), timeout=5, what="the part on device 1 to wait")
    assert part(j)["waiting"] == "GPU in use by 1 other process"
    assert device(d, 1)["other_processes"] == 1


def test_periodic_looks_keep_their_period_under_a_stream_of_pokes(umd, tmp_path):
    d, gpu = start(umd, tmp_path, "--busy-poll-ms", "200")
    wait_for(lambda: device(d, 1)["other_processes"] == 0)
    gpu.set({"1": {"other_processes": 1}})
    # Parts on device 0 one after another: a poke every few milliseconds for two seconds.
    seen, until = False, time.monotonic() + 2
    while time.monotonic() < until and not seen:
        wait_job(d, submit(d, QUICK)["id"])
        seen = device(d, 1)["other_processes"] == 1
    assert seen, "device 1 was not looked at while device 0's parts poked"
