"""Issue 58, links and inventory, against the real daemon with fake devices: the PCIe replay
counter judged as a rate (one replay passes, a storm warns, a bigger one fails), NVLinks down
against the model, NVLink CRC and replay storms, each throttle reason attached to the copies it
explains, and a GPU missing from the node (expected_gpus), through /v1/health, umdctl and
umd-healthcheck. The faults come from the fake_gpu_state file (docs/design.md lists its keys):
fake devices stand for H200s, whose model has 18 NVLinks."""
import time

import pytest

from conftest import run_job, wait_for
from test_coexist import GpuState
from test_umdctl import ctl, fake_scontrol, hc, nhc

CANONICAL = {"benchmark": "health", "device": 0}


def start(umd, tmp_path, *args, fake_devices=1):
    gpu = GpuState(tmp_path)
    d = umd(fake_devices=fake_devices, args=[*gpu.args(), *args])
    return d, gpu


def verdict(d, device=0):
    time.sleep(0.2)  # a look (every 50 ms) has read the file
    return run_job(d, {"benchmark": "health", "device": device})["parts"][0]["verdict"]


def check(v, name):
    hits = [c for c in v["checks"] if c["name"] == name]
    assert len(hits) == 1, (name, v["checks"])
    return hits[0]


def test_a_healthy_gpu_with_zero_counters_passes(umd, tmp_path):
    d, gpu = start(umd, tmp_path)
    gpu.set({"0": {"replay_counter": 0, "nvlinks_active": 18,
                   "nvlink_errors": [{"link": 0, "crc": 0, "replay": 0, "recovery": 0}]}})
    verdict(d)
    v = verdict(d)
    assert v["verdict"] == "pass" and v["action"] == "none", v["reasons"]
    for name in ("pcie_replays", "nvlinks_active", "nvlink_errors"):
        assert check(v, name)["verdict"] == "pass"
        assert check(v, name)["threshold_source"]


def test_one_replay_passes_and_a_storm_warns_then_fails(umd, tmp_path):
    d, gpu = start(umd, tmp_path)
    gpu.set({"0": {"replay_counter": 10}})
    assert verdict(d)["verdict"] == "pass"
    gpu.set({"0": {"replay_counter": 11}})
    v = verdict(d)
    assert v["verdict"] == "pass", v["reasons"]
    assert "grew by 1 in" in check(v, "pcie_replays")["reason"]
    gpu.set({"0": {"replay_counter": 111}})  # 100 in under a minute: Gen5 x16 allows 30.2
    v = verdict(d)
    assert v["verdict"] == "warn" and v["action"] == "none"
    assert any("above the limit of 30.2 a minute" in r for r in v["reasons"])
    gpu.set({"0": {"replay_counter": 5111}})
    v = verdict(d)
    assert v["verdict"] == "fail" and v["action"] == "service"


def test_one_replay_does_not_drain_through_umd_healthcheck(umd, tmp_path):
    scontrol, log = fake_scontrol(tmp_path)
    d, gpu = start(umd, tmp_path)
    gpu.set({"0": {"replay_counter": 3}})
    time.sleep(0.2)
    assert hc(d, "--mode", "plain").returncode == 0
    gpu.set({"0": {"replay_counter": 4}})
    time.sleep(0.2)
    p = hc(d, "--mode", "slurm", SCONTROL=str(scontrol), SLURMD_NODENAME="node7")
    assert p.returncode == 0, p.stdout + p.stderr
    assert not log.exists() or "DRAIN" not in log.read_text()
    gpu.set({"0": {"replay_counter": 5004}})
    time.sleep(0.2)
    p = hc(d, "--mode", "plain")
    assert p.returncode == 1 and "PCIe replay counter grew by 5000" in p.stdout, p.stdout


def test_a_link_down_fails_with_reset_gpu(umd, tmp_path):
    d, gpu = start(umd, tmp_path)
    gpu.set({"0": {"nvlinks_active": 17}})
    v = verdict(d)
    assert v["verdict"] == "fail" and v["action"] == "reset_gpu"
    c = check(v, "nvlinks_active")
    assert "17 of the NVIDIA H200's 18 NVLinks are up" in c["reason"]
    assert "NVLINK_DOWN" in c["threshold_source"]


@pytest.mark.parametrize("kind,words", [("crc", "CRC errors"), ("replay", "replay errors"),
                                         ("recovery", "recovery errors")])
def test_an_nvlink_error_storm_fails_and_a_crc_trickle_passes(umd, tmp_path, kind, words):
    d, gpu = start(umd, tmp_path)
    links = lambda n: {"0": {"nvlinks_active": 18, "nvlink_errors": [{"link": 5, kind: n}]}}
    gpu.set(links(0))
    verdict(d)
    if kind == "crc":
        gpu.set(links(3))  # three in a few seconds: well under 100 a second
        assert check(verdict(d), "nvlink_errors")["verdict"] == "pass"
    gpu.set(links(10_000_003))
    v = verdict(d)
    assert v["verdict"] == "fail" and v["action"] == "reset_gpu"
    grew = 10_000_000 if kind == "crc" else 10_000_003
    assert any(f"NVLink 5: {grew} {words}" in r for r in v["reasons"]), v["reasons"]


def test_each_throttle_reason_warns_and_explains_a_slow_copy(umd, tmp_path):
    d, gpu = start(umd, tmp_path)
    for reason in ("hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown",
                   "hw_power_brake_slowdown"):
        gpu.set({"0": {"throttle_reasons": [reason]}})
        v = verdict(d)
        c = check(v, "throttle")
        assert c["verdict"] == "warn" and c["action"] == "none", c
        assert reason.upper() in c["reason"] and c["throttle_reasons"] == [reason]
    # a copy at 30% of its link while the power brake held the clocks: the reason says so
    gpu.set({"0": {"throttle_reasons": ["hw_power_brake_slowdown"], "bandwidth_pct": 30}})
    v = verdict(d)
    slow = [c for c in v["checks"] if c["name"].endswith("_vs_link") and c["verdict"] != "pass"]
    assert slow and all(c["reason"].endswith("while HW_POWER_BRAKE_SLOWDOWN was active")
                        for c in slow), v["checks"]


def test_power_capping_alone_is_not_judged(umd, tmp_path):
    d, gpu = start(umd, tmp_path)
    gpu.set({"0": {"throttle_reasons": ["sw_power_cap"]}})
    v = verdict(d)
    assert v["verdict"] == "pass"
    assert not [c for c in v["checks"] if c["name"] == "throttle"]


def test_a_missing_gpu_fails_the_node(umd, tmp_path):
    d, gpu = start(umd, tmp_path, "--expected-gpus", "3", fake_devices=2)
    gpu.set({"pci_gpus": ["0000:18:00.0", "0000:19:00.0", "0000:5a:00.0"]})
    r = d.get("/v1/health")
    assert r.status_code == 503
    body = r.json()
    assert body["status"] == "degraded"
    inv = body["inventory"]
    assert inv["verdict"] == "fail" and inv["action"] == "reboot_node"
    assert inv["reason"].startswith("expected 3 GPUs, found 2: 0000:5a:00.0")
    assert inv["missing"] == ["0000:5a:00.0"] and inv["present"] == 2
    assert inv["reason"] in body["problems"]
    p = ctl(d, "health")
    assert p.returncode == 1
    assert ("GPU inventory (node) FAIL action=reboot_node: expected 3 GPUs, found 2: 0000:5a:00.0"
            in p.stdout)
    p = hc(d, "--mode", "nagios")
    assert p.returncode == 2 and "GPU inventory (node) FAIL" in p.stdout, p.stdout
    p = nhc(d)  # NHC reads the cached verdicts: the GPU count fails the node there too
    assert p.stdout.startswith(
        "DIE 1 umd: GPU inventory (node) FAIL action=reboot_node: expected 3"), p.stdout


def test_expected_gpus_present_passes(umd, tmp_path):
    d, _ = start(umd, tmp_path, "--expected-gpus", "2", fake_devices=2)
    r = d.get("/v1/health")
    assert r.status_code == 200
    assert r.json()["inventory"]["reason"] == "expected 2 GPUs, found 2"
    assert "inventory" not in umd(fake_devices=1).get("/v1/health").json()


def test_metrics_export_the_link_counters_and_the_node_count(umd, tmp_path):
    d, gpu = start(umd, tmp_path, "--expected-gpus", "2")
    gpu.set({"0": {"replay_counter": 7, "nvlinks_active": 17,
                   "nvlink_errors": [{"link": 4, "crc": 12, "replay": 1}]}})
    uuid = d.get("/v1/devices").json()[0]["uuid"]

    def scraped():
        text = d.get("/metrics").text
        return f'umd_gpu_pcie_replays_total{{gpu="0",UUID="{uuid}"}} 7' in text and text

    text = wait_for(scraped)
    assert f'umd_gpu_nvlinks_active{{gpu="0",UUID="{uuid}"}} 17' in text
    assert (f'umd_gpu_nvlink_errors_total{{gpu="0",UUID="{uuid}",link="4",kind="crc"}} 12'
            in text)
    assert (f'umd_gpu_nvlink_errors_total{{gpu="0",UUID="{uuid}",link="4",kind="recovery"}} 0'
            in text)
    assert "# TYPE umd_gpu_nvlink_errors_total counter" in text
    assert "umd_node_gpus_expected 2\n" in text and "umd_node_gpus_present 1\n" in text
