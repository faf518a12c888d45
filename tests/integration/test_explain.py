"""Issue 17 against the real daemon with fake devices: the explain pass (modelled counters,
marked fake, on every managed measurement and through um_vs_explicit), its sentence in the text
view, the second on-demand kernel shape, and the conditions every result records."""
import re

from conftest import run_job
from test_jobs import problem, submit, wait_job


def measurements(done):
    return {m["name"]: m for m in done["parts"][0]["result"]["measurements"]}


def test_explain_is_opt_in_and_off_by_default(umd):
    d = umd(fake_devices=1)
    ms = measurements(run_job(d, {"benchmark": "managed_on_demand", "params": {"size": "64MiB"}}))
    assert all("explain" not in m for m in ms.values())


def test_explain_adds_modelled_counters_to_every_managed_measurement(umd):
    d = umd(fake_devices=1)
    for bench, params, names in (
            ("managed_on_demand", {}, ("gpu_on_demand", "cpu_on_demand")),
            ("managed_prefetch", {}, ("prefetch_kernel", "prefetch", "prefetch_to_host")),
            ("managed_advise", {"advice": "read_mostly"}, ("read", "write"))):
        params = dict(params, size="64MiB", explain=True)
        ms = measurements(run_job(d, {"benchmark": bench, "params": params}))
        for n in names:
            x = ms[n]["explain"]
            assert x["available"] is True and x["fake"] is True, (bench, n, x)
            assert x["complete"] is True, (bench, n, x)
            for k in ("bytes_htod", "bytes_dtoh", "migrations_htod", "migrations_dtoh",
                      "gpu_page_faults", "cpu_page_faults", "thrashing_events",
                      "throttling_events", "remote_map_events"):
                assert isinstance(x[k], int) and x[k] >= 0, (n, k)
    # on demand: the whole buffer faulted in, 4 KiB faults, 64 KiB migrations
    x = measurements(run_job(d, {"benchmark": "managed_on_demand",
                                 "params": {"size": "64MiB", "explain": True}}))["gpu_on_demand"]
    assert x["explain"]["bytes_htod"] == 64 << 20
    assert x["explain"]["gpu_page_faults"] == (64 << 20) // 4096
    assert x["explain"]["mean_migration_htod_bytes"] == 65536


def test_explain_is_refused_where_nothing_migrates(umd):
    d = umd(fake_devices=1)
    r = d.post("/v1/jobs", json={"benchmark": "copy", "params": {"explain": True}})
    p = problem(r, 400)
    assert p["field"] == "params.explain"


def test_um_vs_explicit_carries_the_explanation_of_each_managed_mode(umd):
    d = umd(fake_devices=1)
    done = run_job(d, {"benchmark": "um_vs_explicit", "params": {"size": "64MiB",
                                                                 "explain": True}})
    ms = measurements(done)
    for name in ("managed_on_demand", "managed_prefetch", "managed_read_mostly",
                 "managed_preferred_host", "managed_preferred_device", "managed_accessed_by",
                 "managed_prefetch_to_host", "managed_cpu_on_demand"):
        assert ms[name]["explain"]["available"] is True, name
    for name in ("pinned_copy_kernel", "pageable_copy_kernel", "pinned_copy_d2h"):
        assert "explain" not in ms[name], name


def test_text_view_says_what_the_driver_did(umd):
    d = umd(fake_devices=1)
    job = submit(d, {"benchmark": "managed_on_demand", "params": {"size": "1GiB",
                                                                  "explain": True}})
    wait_job(d, job["id"])
    text = d.get(f"/v1/jobs/{job['id']}", params={"format": "text"}).text
    line = next(l for l in text.splitlines() if l.strip().startswith("explain gpu_on_demand:"))
    assert "the kernel faulted 262,144 times" in line
    assert "migrating 1 GiB to the GPU in 16,384 pieces of 64 KiB on average" in line
    assert "no thrashing or throttling" in line
    assert line.endswith("(fake device: modelled).")
    cpu = next(l for l in text.splitlines() if l.strip().startswith("explain cpu_on_demand:"))
    assert "the CPU faulted 262,144 times" in cpu and "to the host" in cpu
    # ReadMostly writes thrash in the model, and the sentence says so
    job = submit(d, {"benchmark": "managed_advise", "params": {"size": "64MiB",
                                                               "explain": True}})
    wait_job(d, job["id"])
    text = d.get(f"/v1/jobs/{job['id']}", params={"format": "text"}).text
    assert re.search(r"explain write: .*thrashing events and throttled [\d,]+ times", text)


def test_kernel_shape_is_a_parameter_of_on_demand_and_advise(umd):
    d = umd(fake_devices=1)
    bench = next(b for b in d.get("/v1/benchmarks").json()["benchmarks"]
                 if b["name"] == "managed_on_demand") if isinstance(
        d.get("/v1/benchmarks").json(), dict) else next(
        b for b in d.get("/v1/benchmarks").json() if b["name"] == "managed_on_demand")
    kernel = next(p for p in bench["params"] if p["name"] == "kernel")
    assert kernel["values"] == ["grid_stride", "warp_per_chunk"]
    assert kernel["default"] == "grid_stride"
    ms = measurements(run_job(d, {"benchmark": "managed_on_demand",
                                  "params": {"size": "64MiB", "kernel": "warp_per_chunk",
                                             "explain": True}}))
    # the model: the same bytes, faulted in 512 KiB pieces by far fewer faults
    x = ms["gpu_on_demand"]["explain"]
    assert x["bytes_htod"] == 64 << 20 and x["gpu_page_faults"] == 64 * 16
    r = d.post("/v1/jobs", json={"benchmark": "managed_prefetch",
                                 "params": {"kernel": "warp_per_chunk"}})
    assert problem(r, 400)["field"] == "params.kernel"
    r = d.post("/v1/jobs", json={"benchmark": "managed_on_demand",
                                 "params": {"kernel": "warp"}})
    assert problem(r, 400)["field"] == "params.kernel"


def test_every_result_records_its_conditions(umd):
    d = umd(fake_devices=1)
    for body in ({"benchmark": "copy"}, {"benchmark": "managed_on_demand"}):
        done = run_job(d, body)
        c = done["parts"][0]["result"]["context"]["conditions"]
        # fake devices read neither the driver nor NVML, and say so instead of guessing
        assert c["nvidia_uvm"] is None and "fake" in c["nvidia_uvm_why"]
        assert c["hmm"]["could_use_hmm"] is False and c["hmm"]["why"]
        assert "fake" in c["gpu_before"]["unavailable"]
        assert "fake" in c["gpu_after"]["unavailable"]


# -- issue 26: counted in pieces, the kernel clock's arrival view, the fault cost --

def test_explain_says_the_pieces_it_counted_in(umd):
    d = umd(fake_devices=1)
    x = measurements(run_job(d, {"benchmark": "managed_on_demand",
                                 "params": {"size": "1GiB", "explain": True}}))
    for n in ("gpu_on_demand", "cpu_on_demand"):
        assert x[n]["explain"]["pieces"] == 16 and x[n]["explain"]["piece_bytes"] == 64 << 20


def test_on_demand_has_the_arrival_view_and_the_fault_cost(umd):
    d = umd(fake_devices=1)
    x = measurements(run_job(d, {"benchmark": "managed_on_demand",
                                 "params": {"size": "1GiB", "explain": True}}))
    e = x["gpu_on_demand"]["explain"]
    a, c = e["arrival"], e["fault_cost"]
    assert a["available"] is True and a["source"] == "model"  # a fake says it is modelled
    assert a["bytes"] == 1 << 30 and a["bursts"] == 512
    assert 0 < a["waited_share"] <= 1 and a["rate_gbps"] < a["pinned_h2d_gbps"]
    assert c["batches"] == a["bursts"] and c["batches_from"] == "arrival bursts"
    assert abs(c["estimate_ms"] - c["batches"] * c["fault_single_us"] / 1e3) < 1e-6
    assert abs(c["gap_ms"] - (c["on_demand_ms"] - c["prefetch_kernel_ms"])) < 1e-6
    assert abs(c["explained_share"] - c["estimate_ms"] / c["gap_ms"]) < 1e-6
    assert e["views_agree"] is True
    assert "arrival" not in x["cpu_on_demand"]["explain"]  # the CPU's way has no kernel clock


def test_text_view_gives_the_arrival_and_the_fault_cost(umd):
    d = umd(fake_devices=1)
    job = submit(d, {"benchmark": "managed_on_demand", "params": {"size": "1GiB",
                                                                  "explain": True}})
    wait_job(d, job["id"])
    lines = d.get(f"/v1/jobs/{job['id']}", params={"format": "text"}).text.splitlines()
    arr = next(l for l in lines if l.strip().startswith("arrival gpu_on_demand:"))
    assert re.search(r"the kernel waited for pages 97% of its time; they arrived in 512 bursts "
                     r"of about 2 MiB, at 7\.2 GB/s while they moved, against 55 for a pinned "
                     r"copy \(the kernel's clock\) \(fake device: modelled\)\.$", arr.strip()), arr
    cost = next(l for l in lines if l.strip().startswith("fault cost gpu_on_demand:"))
    assert "512 fault batches (arrival bursts) at 43.5 us a fault" in cost
    assert "on-demand takes over prefetch + kernel" in cost
