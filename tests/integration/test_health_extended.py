"""The canonical health check's extended tier (issue 24 part 3), against the real daemon with fake
GPUs: a health job with params {"tier": "extended"} runs the quick tier's checks plus a short
sweep of each path, bidirectional and pageable copies both ways, latency, managed memory, device
memory and every GPU pair at full size, inside health_extended_budget_s (two thirds to the GPUs,
side by side, one third to the pairs); what does not fit is skipped and said. The fake GPUs plan
on their model's times (kernels/fake_suite.c), which stand for the real ones."""
import json
from datetime import datetime

from conftest import submit, wait_job
from test_coexist import start

EXTENDED = {"benchmark": "health", "params": {"tier": "extended"}}
QUICK = {"benchmark": "health"}

# Every addition's check on a GPU, by name (daemon/health.c's extended_checks).
GPU_CHECKS = {"pinned_h2d_90pct_size", "pinned_d2h_90pct_size", "d2d_90pct_size", "bidir_vs_one_way",
              "d2d_full_vs_model", "d2d_full_vs_d2d", "pageable_h2d_vs_pinned",
              "pageable_d2h_vs_pinned", "managed_on_demand_vs_pinned",
              "managed_prefetch_vs_pinned", "latency_pinned_h2d", "latency_pinned_d2h",
              "latency_pageable_h2d", "latency_pageable_d2h", "latency_managed_fault", "plan"}


def checks(verdict):
    return {c["name"]: c for c in verdict["checks"]}


def seconds(ts):
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def test_extended_on_8_gpus_fits_its_budget_with_a_verdict_for_every_path(umd, tmp_path):
    d, _ = start(umd, tmp_path, fake_devices=8)
    j = wait_job(d, submit(d, EXTENDED)["id"], timeout=60)
    assert j["state"] == "succeeded" and j["canonical"] is True and j["tier"] == "extended"
    assert seconds(j["finished"]) - seconds(j["started"]) < 30
    gpus, node = j["parts"][:8], j["parts"][8]
    assert len(j["parts"]) == 9 and node["uuid"] == "node"
    # the GPUs run side by side on two thirds of the 30 s, the pairs after them on the rest
    assert j["params"]["budget_ms"] == 20000 and j["params"]["pairs_budget_ms"] == 10000
    for p in gpus:
        v = p["verdict"]
        assert v["verdict"] == "pass" and v["tier"] == "extended", v
        assert v["skipped"] == []
        assert GPU_CHECKS <= set(checks(v)), GPU_CHECKS - set(checks(v))
        assert all(checks(v)[n]["reason"] for n in GPU_CHECKS)
        plan = p["result"]["plan"]
        assert plan["estimated_ms"] <= plan["budget_ms"] == 20000
        assert len(plan["ran"]) == 8
    v = node["verdict"]
    assert v["verdict"] == "pass" and v["tier"] == "extended" and v["pairs"] == 56
    assert checks(v)["peer 0->7"]["verdict"] == "pass"
    assert node["result"]["plan"]["ran"] == ["every GPU pair at full size"]
    assert node["result"]["plan"]["estimated_ms"] <= 10000
    assert node["result"]["context"]["buffer_bytes"] == 1 << 30  # full_size


def test_a_tiny_budget_skips_the_pairs_at_full_size_and_says_so(umd, tmp_path):
    d, _ = start(umd, tmp_path, "--health-extended-budget-s", "1", fake_devices=8)
    j = wait_job(d, submit(d, EXTENDED)["id"], timeout=60)
    node = j["parts"][8]
    v = node["verdict"]
    # the pairs are still judged, at the quick tier's size
    assert v["verdict"] == "pass" and v["pairs"] == 56
    assert [s["check"] for s in v["skipped"]] == ["every GPU pair at full size"]
    c = checks(v)["skipped: every GPU pair at full size"]
    assert "ms of the 334 ms budget are left" in c["reason"], c
    assert node["result"]["context"]["buffer_bytes"] == 64 << 20


def test_additions_that_do_not_fit_are_skipped_each_with_its_reason(umd, tmp_path):
    # a 1 GiB quick tier takes the whole second: nothing more fits
    d, _ = start(umd, tmp_path, "--health-extended-budget-s", "1", "--health-size", "1GiB",
                 fake_devices=1)
    v = wait_job(d, submit(d, EXTENDED)["id"], timeout=60)["parts"][0]["verdict"]
    assert v["verdict"] == "pass" and v["tier"] == "extended"
    skipped = [s["check"] for s in v["skipped"]]
    assert "bidirectional copies" in skipped and "sweep of pinned_h2d" in skipped, skipped
    for s in v["skipped"]:
        assert s["reason"].startswith("skipped: " + s["check"] + " would take about ")
        assert "skipped: " + s["check"] in checks(v)
    assert "bidir_vs_one_way" not in checks(v)  # a skipped addition is not judged
    assert "pinned_h2d_vs_link" in checks(v)  # the quick tier's are


def test_a_slowed_gpu_fails_the_extended_tier_on_link_and_memory(umd, tmp_path):
    d, gpu = start(umd, tmp_path, fake_devices=2)
    gpu.set({"1": {"bandwidth_pct": 30}})
    j = wait_job(d, submit(d, EXTENDED)["id"], timeout=60)
    ok, slow = j["parts"][0]["verdict"], j["parts"][1]["verdict"]
    assert ok["verdict"] == "pass"
    assert slow["verdict"] == "fail" and slow["tier"] == "extended"
    c = checks(slow)
    # slowed both ways alike: the duplex check passes, the link and memory checks fail
    assert c["bidir_vs_one_way"]["verdict"] == "pass", c["bidir_vs_one_way"]
    assert c["pinned_h2d_vs_link"]["verdict"] == "fail", c["pinned_h2d_vs_link"]
    assert c["d2d_full_vs_model"]["verdict"] == "fail"
    assert "nominal memory bandwidth of the NVIDIA H200" in c["d2d_full_vs_model"]["reason"]


def test_each_tiers_last_verdict_is_kept_and_last_health_is_the_latest(umd, tmp_path):
    d, _ = start(umd, tmp_path, fake_devices=2)
    ext = wait_job(d, submit(d, EXTENDED)["id"], timeout=60)
    quick = wait_job(d, submit(d, QUICK)["id"], timeout=60)
    assert quick["tier"] == "quick" and quick["parts"][0]["verdict"]["tier"] == "quick"
    dev = d.get("/v1/devices").json()[0]
    assert dev["last_health"]["job"] == quick["id"]
    assert dev["last_health_by_tier"]["extended"]["job"] == ext["id"]
    assert dev["last_health_by_tier"]["quick"]["job"] == quick["id"]
    node = d.get("/v1/devices/node").json()
    assert node["last_health"]["tier"] == "quick"
    assert node["last_health_by_tier"]["extended"]["job"] == ext["id"]
    # and after a restart, from the store
    d.stop()
    d2 = umd(fake_devices=2, state_dir=d.state_dir)
    dev = d2.get("/v1/devices").json()[0]
    assert dev["last_health"]["job"] == quick["id"]
    assert dev["last_health_by_tier"]["extended"]["job"] == ext["id"]
    node = d2.get("/v1/devices/node").json()
    assert node["last_health_by_tier"]["extended"]["job"] == ext["id"]


def test_before_any_check_no_tier_has_a_verdict(umd, tmp_path):
    d, _ = start(umd, tmp_path, fake_devices=2)
    assert d.get("/v1/devices").json()[0]["last_health_by_tier"] == {}
    assert d.get("/v1/devices/node").json()["last_health_by_tier"] == {}


def test_an_unknown_tier_is_refused_naming_the_field(umd, tmp_path):
    d, _ = start(umd, tmp_path, fake_devices=1)
    r = d.post("/v1/jobs", json={"benchmark": "health", "params": {"tier": "deep"}})
    assert r.status_code == 400, r.text
    assert "tier" in json.dumps(r.json())


def test_extended_with_other_params_is_not_canonical_and_gives_no_verdict(umd, tmp_path):
    d, _ = start(umd, tmp_path, fake_devices=1)
    body = {"benchmark": "health", "device": 0,
            "params": {"tier": "extended", "size": "1MiB", "budget_ms": 50}}
    j = wait_job(d, submit(d, body)["id"], timeout=60)
    assert j["state"] == "succeeded" and j["canonical"] is False and j["tier"] == "extended"
    assert j["parts"][0].get("verdict") is None
    assert j["parts"][0]["result"]["plan"]["budget_ms"] == 50
