"""Issue 5 against the real daemon with fake devices: the um_vs_explicit comparison and its
sentence, sweeps, text rendering, health verdicts (link, baseline), metrics checked by
promtool (umd-healthcheck is tested in test_umdctl.py)."""
import re
import shutil
import subprocess
import time

import pytest

from conftest import run_job
from test_jobs import problem


# -- um_vs_explicit --

def test_um_vs_explicit_ranks_every_mode_against_pinned_copies(umd):
    d = umd(fake_devices=1)
    done = run_job(d, {"benchmark": "um_vs_explicit", "params": {"size": "64MiB"}})
    res = done["parts"][0]["result"]
    s = res["summary"]
    assert s["reference"] == "pinned_copy_kernel"
    modes = {m["mode"]: m for m in s["modes"]}
    assert modes["pinned_copy_kernel"]["ratio_to_pinned"] == pytest.approx(1.0)
    for name in ("pageable_copy_kernel", "overlapped_copy_kernel", "zero_copy_kernel",
                 "managed_on_demand", "managed_prefetch", "managed_read_mostly",
                 "managed_preferred_device", "managed_preferred_host", "managed_accessed_by"):
        assert name in modes, name
        assert modes[name]["gbps"] > 0 and modes[name]["median_ms"] > 0
        assert modes[name]["to_host"] is False
    assert modes["pinned_copy_d2h"]["to_host"] is True
    od = modes["managed_on_demand"]["ratio_to_pinned"]
    assert od < 0.5  # the fake model: 8.5 against 54 GB/s (copy then kernel)
    assert s["best"] in modes and not modes[s["best"]]["to_host"]


def test_um_vs_explicit_conclusion_is_built_from_the_numbers(umd):
    d = umd(fake_devices=1)
    s = run_job(d, {"benchmark": "um_vs_explicit"})["parts"][0]["result"]["summary"]
    modes = {m["mode"]: m for m in s["modes"]}
    slower = 1 / modes["managed_on_demand"]["ratio_to_pinned"]
    recovers = modes["managed_prefetch"]["ratio_to_pinned"]
    c = s["conclusion"]
    assert c.startswith("On this GPU, on-demand managed memory is ")
    assert f"{slower:.1f}x slower than pinned copies" in c
    assert f"prefetching recovers {recovers:.2f}x of pinned" in c


# -- sweep --

def test_sweep_gives_a_curve_per_mode_and_where_it_reaches_90_percent(umd):
    d = umd(fake_devices=1)
    sizes = ["4KiB", "64KiB", "1MiB", "16MiB", "64MiB"]
    done = run_job(d, {"benchmark": "sweep",
                       "params": {"modes": ["pinned_h2d", "managed_prefetch"], "sizes": sizes}})
    curves = {c["mode"]: c for c in done["parts"][0]["result"]["summary"]["curves"]}
    assert set(curves) == {"pinned_h2d", "managed_prefetch"}
    for c in curves.values():
        pts = c["points"]
        assert [p["size"] for p in pts] == [4096, 65536, 1 << 20, 16 << 20, 64 << 20]
        assert c["peak_gbps"] == max(p["gbps"] for p in pts)
        at = c["size_at_90pct_peak"]
        assert next(p for p in pts if p["size"] == at)["gbps"] >= 0.9 * c["peak_gbps"]
        assert all(p["gbps"] < 0.9 * c["peak_gbps"] for p in pts if p["size"] < at)


def test_sweep_rejects_an_unknown_mode(umd):
    d = umd(fake_devices=1)
    problem(d.post("/v1/jobs", json={"benchmark": "sweep", "params": {"modes": ["warp"]}}), 400,
            "params.modes")


# -- text rendering --

def test_finished_job_renders_as_an_aligned_table(umd):
    d = umd(fake_devices=1)
    done = run_job(d, {"benchmark": "um_vs_explicit", "params": {"size": "64MiB"}})
    for kw in ({"params": {"format": "text"}}, {"headers": {"Accept": "text/plain"}}):
        r = d.get("/v1/jobs/" + done["id"], **kw)
        assert r.status_code == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.text
        assert done["id"] in text and "succeeded" in text and "FAKE" in text
        assert "On this GPU, on-demand managed memory is" in text
        # Aligned: in each table, every row's GB/s figure ends under the header's "GB/s".
        lines = text.splitlines()
        tables = 0
        for i, head in enumerate(lines):
            if "GB/s" not in head or "median ms" not in head:
                continue
            tables += 1
            end = head.index("GB/s") + len("GB/s")
            rows = []
            for row in lines[i + 1:]:
                if not row.strip():
                    break
                rows.append(row)
            assert rows
            for row in rows:
                assert row[end - 1].isdigit() and row[end] == " ", (head, row)
        assert tables == 2  # the measurements and the comparison
    assert d.get("/v1/jobs/" + done["id"]).headers["Content-Type"].startswith("application/json")


# -- health --

def health(d, device=0, **params):
    body = {"benchmark": "health", "device": device}
    if params:
        body["params"] = params
    done = run_job(d, body)
    return done["parts"][0]["verdict"]


def test_health_passes_a_nominal_device_and_says_why_per_check(umd):
    d = umd(fake_devices=1)
    v = health(d)
    assert v["verdict"] == "pass"
    names = {c["name"] for c in v["checks"]}
    assert {"link", "pinned_h2d_vs_link", "pinned_d2h_vs_link", "baseline"} <= names
    assert all(c["reason"] for c in v["checks"])
    dev = d.get("/v1/devices").json()[0]
    assert dev["last_health"]["verdict"] == "pass"


def test_device_dropping_below_its_own_history_fails(umd, tmp_path):
    # Only the canonical check judges, so the GPU itself must turn slow: the fake_gpu_state
    # file (tests only) tells the fake worker to run at 60% of its bandwidth.
    state = tmp_path / "gpu-state.json"
    state.write_text("{}")
    d = umd(fake_devices=1, args=["--health-baseline-runs", "3", "--fake-gpu-state", str(state)])
    for _ in range(3):
        assert health(d)["verdict"] == "pass"
    state.write_text('{"0": {"bandwidth_pct": 60}}')
    v = health(d)
    assert v["verdict"] == "fail"
    assert any("baseline" in r for r in v["reasons"])
    assert v["baseline"]["pinned_h2d"] > 50
    r = d.get("/v1/health")
    assert r.status_code == 503
    assert r.json()["devices"]["failing_health"] == 1
    assert d.get("/v1/devices").json()[0]["last_health"]["verdict"] == "fail"
    # a failed run does not become part of the baseline: the next nominal run passes again
    state.write_text("{}")
    assert health(d)["verdict"] == "pass"


def test_link_below_its_maximum_warns(umd):
    d = umd(fake_devices=2, env={"UMD_FAKE_LINK": "1=4x8"})
    assert health(d, device=0)["verdict"] == "pass"
    v = health(d, device=1)
    assert v["verdict"] == "warn"
    assert any("Gen4 x8, below its maximum Gen5 x16" in r for r in v["reasons"])


def test_last_verdict_survives_a_restart(umd, tmp_path):
    d = umd(fake_devices=1, state_dir=tmp_path / "s")
    health(d)
    d.stop()
    d2 = umd(fake_devices=1, state_dir=tmp_path / "s")
    assert d2.get("/v1/devices").json()[0]["last_health"]["verdict"] == "pass"


# -- metrics --

@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian prometheus) missing")
def test_metrics_pass_promtool_and_carry_bounded_labels(umd):
    d = umd(fake_devices=2)
    run_job(d, {"benchmark": "copy", "device": 0})
    health(d, device=1)
    d.get("/v1/nope")
    # A request is counted once it has completed on the server's side, which can come a
    # moment after the client has read the answer (seen under ASan): look until it shows.
    deadline = time.monotonic() + 5
    while True:
        text = d.get("/metrics").text
        if 'route="other"' in text or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True)
    # umd_device_info carries dcgm-exporter's own label names (UUID, modelName) so the two
    # join; promtool's lint prefers snake_case, and that one finding is the point.
    problems = [l for l in (p.stdout + p.stderr).splitlines()
                if l.strip() and l != "umd_device_info label names should be written in "
                "'snake_case' not 'camelCase'"]
    assert p.returncode in (0, 3) and not problems, p.stdout + p.stderr
    assert 'umd_jobs_finished_total{benchmark="copy",state="succeeded"} 1' in text
    assert re.search(r'umd_bandwidth_bytes_per_second\{uuid="GPU-[^"]+",benchmark="copy",mode="h2d"\} \d', text)
    assert 'umd_device_health_verdict{uuid="GPU-fa4e0000-0000-4000-8000-000000000001",verdict="pass"} 1' in text
    assert 'route="other"' in text  # unknown paths share one label value
    assert "umd_job_duration_seconds_count 2" in text
    for line in text.splitlines():
        assert "job" not in line.split("{")[1] if "{" in line and "id=" in line else True
    assert not re.search(r'[0-9a-f]{8}-[0-9a-f]{4}-7', text), "no job ids in labels"
