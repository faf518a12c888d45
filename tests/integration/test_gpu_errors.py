"""Issue 58, the GPU's error state, against the real daemon with fake devices: the canonical
check's result carries what NVML would read of the GPU (fake devices: fake_gpu_state's
"gpu_errors", over a healthy GPU's zero counters), each reading is one check of the verdict with
its action and the source of its threshold, and the action travels through /v1/health,
/metrics, umdctl health, umd-healthcheck's Nagios mode and the NHC check."""
import json

import pytest

from conftest import run_job
from test_umdctl import ctl, hc, need_umdctl, nhc

ERROR_CHECKS = ["remapped_rows", "ecc_volatile", "ecc_aggregate", "ecc_mode", "retired_pages",
                "recovery_action", "inforom"]

# Each fault as fake_gpu_state's "gpu_errors" says it, the check it fails, and the action.
FAULTS = {
    "pending_remap": ({"remapped_rows": {"pending": True, "uncorrected": 1}},
                      "remapped_rows", "fail", "reset_gpu"),
    "remap_failure": ({"remapped_rows": {"failure": True, "uncorrected": 8}},
                      "remapped_rows", "fail", "service"),
    "dram_uncorrectable": ({"ecc": {"volatile": {"dram": {"uncorrected": 1}}}},
                           "ecc_volatile", "fail", "reset_gpu"),
    "sram_uncorrectable": ({"ecc": {"volatile": {"sram": {"uncorrected": 1}}}},
                           "ecc_volatile", "fail", "reset_gpu"),
    "sram_aggregate": ({"ecc": {"aggregate": {"sram": {"uncorrected": 5}}}},
                       "ecc_aggregate", "fail", "service"),
    "recovery_gpu_reset": ({"recovery_action": {"value": 1}}, "recovery_action", "fail",
                           "reset_gpu"),
    "recovery_node_reboot": ({"recovery_action": {"value": 2}}, "recovery_action", "fail",
                             "reboot_node"),
    "recovery_drain_p2p": ({"recovery_action": {"value": 3}}, "recovery_action", "fail",
                           "restart_job"),
    "recovery_drain_and_reset": ({"recovery_action": {"value": 4}}, "recovery_action", "fail",
                                 "reset_gpu"),
    "ecc_off": ({"ecc_mode": {"current": "off", "pending": "off"}}, "ecc_mode", "warn", "none"),
    "inforom_invalid": ({"inforom": {"valid": False}}, "inforom", "warn", "none"),
    "retired_pages": ({"retired_pages": {"single_bit": 60, "double_bit": 3}}, "retired_pages",
                      "fail", "service"),
    "retirement_pending": ({"retired_pages": {"pending": True}}, "retired_pages", "fail",
                           "reset_gpu"),
}


def faulty(umd, tmp_path, errors, devices=1):
    state = tmp_path / "fake_gpu_state.json"
    state.write_text(json.dumps({"0": {"gpu_errors": errors}}))
    return umd(fake_devices=devices, args=["--fake-gpu-state", str(state)])


def health(d, device=0):
    return run_job(d, {"benchmark": "health", "device": device})["parts"][0]


def check(v, name):
    hits = [c for c in v["checks"] if c["name"] == name]
    assert len(hits) == 1, (name, v["checks"])
    return hits[0]


def test_a_healthy_fake_gpu_with_zero_counters_passes_every_error_check(umd):
    d = umd(fake_devices=1)
    part = health(d)
    assert part["result"]["gpu_errors"]["source"] == "fake"
    assert part["result"]["gpu_errors"]["remapped_rows"]["pending"] is False
    v = part["verdict"]
    assert v["verdict"] == "pass" and v["action"] == "none"
    for name in ERROR_CHECKS:
        c = check(v, name)
        assert c["verdict"] == "pass" and c["action"] == "none", c
    assert all("action" in c for c in v["checks"])
    assert d.get("/v1/health").json()["action"] == "none"


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_fault_gives_its_verdict_and_action(umd, tmp_path, fault):
    errors, name, verdict, action = FAULTS[fault]
    d = faulty(umd, tmp_path, errors)
    v = health(d)["verdict"]
    c = check(v, name)
    assert c["verdict"] == verdict and c["action"] == action, c
    assert c["threshold_source"] and c["expectation"] == "rule"
    assert v["verdict"] == verdict and v["action"] == action
    assert c["reason"] in v["reasons"]
    h = d.get("/v1/health").json()
    assert h["device_health"][0]["last_health"]["action"] == action
    assert h["action"] == action


def test_a_missing_entry_point_passes_saying_unknown(umd, tmp_path):
    d = faulty(umd, tmp_path, {"remapped_rows": {"unknown": "NVML lacks nvmlDeviceGetRemappedRows"}})
    v = health(d)["verdict"]
    c = check(v, "remapped_rows")
    assert c["verdict"] == "pass"
    assert "unknown: NVML lacks nvmlDeviceGetRemappedRows" in c["reason"]


def test_health_names_the_failing_gpus_action_in_problems(umd, tmp_path):
    d = faulty(umd, tmp_path, FAULTS["remap_failure"][0])
    health(d)
    r = d.get("/v1/health")
    assert r.status_code == 503
    assert any("failed its last health check (action: service)" in p
               for p in r.json()["problems"]), r.json()


def test_metrics_show_the_action_and_the_error_counters(umd, tmp_path):
    d = faulty(umd, tmp_path, {"remapped_rows": {"pending": True, "corrected": 2, "uncorrected": 1},
                               "ecc": {"aggregate": {"dram": {"corrected": 7}}}})
    health(d)
    text = d.get("/metrics").text
    lines = text.splitlines()
    assert any(l.startswith("umd_gpu_health_action{") and 'action="reset_gpu"' in l
               and l.endswith(" 1") for l in lines), text
    assert any(l.startswith("umd_gpu_ecc_errors_total{") and 'location="dram"' in l
               and 'type="corrected"' in l and l.endswith(" 7") for l in lines), text
    assert any(l.startswith("umd_gpu_remapped_rows{") and 'kind="uncorrected"' in l
               and l.endswith(" 1") for l in lines), text


def test_umdctl_health_prints_the_action_after_the_verdict(umd, tmp_path):
    d = faulty(umd, tmp_path, FAULTS["pending_remap"][0])
    p = ctl(d, "health")
    assert p.returncode != 0
    line = [l for l in p.stdout.splitlines() if l.startswith("GPU 0 ")]
    assert len(line) == 1, p.stdout
    assert " FAIL action=reset_gpu: " in line[0], line[0]
    assert "row remap is pending" in line[0]


def test_umdctl_health_json_carries_each_gpus_action_and_the_worst(umd, tmp_path):
    d = faulty(umd, tmp_path, FAULTS["recovery_node_reboot"][0], devices=2)
    p = ctl(d, "health", "--json")
    doc = json.loads(p.stdout)
    assert doc["action"] == "reboot_node"
    by_index = {e["index"]: e for e in doc["devices"] if isinstance(e["index"], int)}
    assert by_index[0]["action"] == "reboot_node" and by_index[1]["action"] == "none"


def test_a_line_whose_action_is_none_prints_none(umd):
    d = umd(fake_devices=1)
    p = ctl(d, "health")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "GPU 0 " in p.stdout and " PASS: every check passed" in p.stdout, p.stdout
    assert "action=" not in p.stdout


def test_nagios_mode_is_critical_and_names_the_action(umd, tmp_path):
    d = faulty(umd, tmp_path, FAULTS["remap_failure"][0])
    p = hc(d, "--mode", "nagios")
    assert p.returncode == 2, p.stdout + p.stderr
    first = p.stdout.splitlines()[0]
    assert first.startswith("UMD CRITICAL - GPU 0 FAIL action=service: row remapping failed"), first


def test_nagios_mode_warns_on_ecc_off(umd, tmp_path):
    d = faulty(umd, tmp_path, FAULTS["ecc_off"][0])
    p = hc(d, "--mode", "nagios")
    assert p.returncode == 1, p.stdout + p.stderr
    assert p.stdout.startswith("UMD WARNING - GPU 0 WARN: ECC is off"), p.stdout


def test_nhc_check_fails_the_node_with_the_action(umd, tmp_path):
    d = faulty(umd, tmp_path, FAULTS["recovery_gpu_reset"][0])
    ctl(d, "health")
    p = nhc(d)
    assert p.stdout.startswith("DIE 1 umd: GPU 0 "), p.stdout + p.stderr
    assert " FAIL action=reset_gpu: NVML asks for a recovery action: gpu_reset" in p.stdout


def test_the_extended_tier_judges_the_error_state_too(umd, tmp_path):
    d = faulty(umd, tmp_path, FAULTS["dram_uncorrectable"][0])
    part = run_job(d, {"benchmark": "health", "device": 0,
                       "params": {"tier": "extended"}})["parts"][0]
    v = part["verdict"]
    assert v["tier"] == "extended"
    assert check(v, "ecc_volatile")["action"] == "reset_gpu"
    assert v["verdict"] == "fail" and v["action"] == "reset_gpu"


def test_the_gpu_pairs_verdict_has_an_action(umd):
    d = umd(fake_devices=2)
    done = run_job(d, {"benchmark": "health", "devices": "all"})
    node = d.get("/v1/devices/node").json()["last_health"]
    assert node["action"] == "none" and all(c["action"] == "none" for c in node["checks"])
    assert all(p["verdict"]["action"] == "none" for p in done["parts"])
    assert d.get("/v1/health").json()["node"]["last_health"]["action"] == "none"
