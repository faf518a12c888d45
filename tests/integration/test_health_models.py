"""Issue 24, parts 1 and 2, against the real daemon with fake devices: the canonical check judges
device memory (a device-to-device copy) against the GPU model's nominal bandwidth and the GPU's
own history; the model comes from the shipped table or gpu_models_file; an unknown model is
judged against its link and history and says so. Fake devices stand for H200s
("NVIDIA H200 (fake)"); UMD_FAKE_NAME names one another model (tests only)."""
import re

from conftest import run_job

MiB = 1 << 20


def health(d, device=0):
    """The canonical check on one device: its part (verdict and result)."""
    done = run_job(d, {"benchmark": "health", "device": device})
    return done["parts"][0]


def check(v, name):
    hits = [c for c in v["checks"] if c["name"] == name]
    assert len(hits) == 1, (name, v["checks"])
    return hits[0]


def models_file(tmp_path, text):
    p = tmp_path / "gpu-models.conf"
    p.write_text(text)
    return ["--gpu-models-file", str(p)]


def test_canonical_check_measures_device_memory_at_health_d2d_size(umd):
    d = umd(fake_devices=1)
    part = health(d)
    d2d = [m for m in part["result"]["measurements"] if m["name"] == "d2d"]
    assert len(d2d) == 1
    assert d2d[0]["bytes"] == 2 * 256 * MiB  # read+write of the default 256 MiB
    d = umd(fake_devices=1, args=["--health-d2d-size", "1MiB"])
    d2d = [m for m in health(d)["result"]["measurements"] if m["name"] == "d2d"]
    assert d2d[0]["bytes"] == 2 * MiB


def test_h200_device_memory_is_judged_against_the_shipped_h200_entry(umd):
    d = umd(fake_devices=1)
    v = health(d)["verdict"]
    assert v["verdict"] == "pass"
    c = check(v, "d2d_vs_model")
    assert c["verdict"] == "pass" and c["expectation"] == "model"
    assert "of the 4800 GB/s nominal memory bandwidth of the NVIDIA H200" in c["reason"]
    assert v["expectation"]["device_name"] == "NVIDIA H200 (fake)"
    assert v["expectation"]["model"]["name"] == "NVIDIA H200"
    assert "datasheet" in v["expectation"]["model"]["source"]
    assert check(v, "pinned_h2d_vs_link")["expectation"] == "link"


def test_a_fake_gpu_below_its_model_warn_fraction_warns_naming_the_expectation(umd, tmp_path):
    # The fake copies at about 3900 GB/s: 65% of 6000, below the 70% warn fraction.
    d = umd(fake_devices=1, args=models_file(tmp_path, "[NVIDIA H200]\nmemory_gbps = 6000\n"))
    v = health(d)["verdict"]
    assert v["verdict"] == "warn"
    assert any(re.search(r"is 6\d% of the 6000 GB/s nominal memory bandwidth of the NVIDIA H200 "
                         r"\(warn below 70%, fail below 50%\)", r) for r in v["reasons"]), v
    assert check(v, "d2d_vs_model")["expectation"] == "model"
    assert v["expectation"]["model"]["from"] == "gpu_models_file"
    assert d.get("/v1/devices").json()[0]["last_health"]["verdict"] == "warn"


def test_a_fake_gpu_far_below_its_model_fails_and_the_node_says_so(umd, tmp_path):
    d = umd(fake_devices=1, args=models_file(tmp_path, "[NVIDIA H200]\nmemory_gbps = 9000\n"))
    part = health(d)
    v = part["verdict"]
    assert v["verdict"] == "fail"
    assert check(v, "d2d_vs_model")["verdict"] == "fail"
    assert "first_attempt" in part  # a first fail runs once more before it counts
    r = d.get("/v1/health")
    assert r.status_code == 503
    assert r.json()["devices"]["failing_health"] == 1


def test_memory_fractions_are_configurable(umd, tmp_path):
    args = models_file(tmp_path, "[NVIDIA H200]\nmemory_gbps = 6000\n")
    d = umd(fake_devices=1, args=args + ["--health-memory-warn-fraction", "0.60"])
    assert health(d)["verdict"]["verdict"] == "pass"


def test_an_unknown_model_falls_back_to_link_and_history_and_says_so(umd):
    d = umd(fake_devices=2, env={"UMD_FAKE_NAME": "1=NVIDIA Z999"})
    assert d.get("/v1/devices").json()[1]["name"] == "NVIDIA Z999 (fake)"
    v = health(d, device=1)["verdict"]
    assert v["verdict"] == "pass"
    c = check(v, "model")
    assert c["expectation"] == "none"
    assert "unknown GPU model 'NVIDIA Z999 (fake)'" in c["reason"]
    assert "link and its own history" in c["reason"]
    assert check(v, "d2d_vs_model")["expectation"] == "none"
    assert v["expectation"]["model"] is None
    assert check(health(d, device=0)["verdict"], "model")["expectation"] == "model"


def test_a_model_the_file_adds_is_used(umd, tmp_path):
    args = models_file(tmp_path, "[ACME X1]\nmatch = ACME X1*\nmemory_gbps = 9000\n"
                                 "source = the acceptance test of our order\n")
    d = umd(fake_devices=1, args=args, env={"UMD_FAKE_NAME": "0=ACME X1"})
    v = health(d)["verdict"]
    assert v["verdict"] == "fail"
    assert any("nominal memory bandwidth of the ACME X1" in r for r in v["reasons"])
    assert v["expectation"]["model"]["source"] == "the acceptance test of our order"


def test_a_bad_models_file_stops_umd_with_a_message(umd_run, tmp_path):
    bad = tmp_path / "gpu-models.conf"
    bad.write_text("[NVIDIA H200]\nmemory_gbps = lots\n")
    r = umd_run(["--gpu-models-file", str(bad), "--state-dir", str(tmp_path / "s"),
                 "--fake-devices", "1"])
    assert r.returncode == 2, r
    assert f"{bad}:2" in r.stderr and "memory_gbps" in r.stderr


def test_a_d2d_size_beyond_max_buffer_bytes_stops_umd_naming_both_keys(umd_run, tmp_path):
    # Every canonical check would be refused: Slurm would read "unknown" forever.
    for check in ([], ["--check-config"]):
        r = umd_run(check + ["--health-d2d-size", "512MiB", "--max-buffer-bytes", "256MiB",
                             "--state-dir", str(tmp_path / "s"), "--fake-devices", "1"])
        assert r.returncode == 2, r
        assert "health_d2d_size" in r.stderr and "max_buffer_bytes" in r.stderr, r.stderr


def test_a_health_size_beyond_max_buffer_bytes_stops_umd_naming_both_keys(umd_run, tmp_path):
    r = umd_run(["--check-config", "--health-size", "512MiB", "--max-buffer-bytes", "256MiB",
                 "--health-d2d-size", "1MiB", "--state-dir", str(tmp_path / "s")])
    assert r.returncode == 2, r
    assert "health_size" in r.stderr and "max_buffer_bytes" in r.stderr, r.stderr
