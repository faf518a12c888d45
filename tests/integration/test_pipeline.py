"""Issue 21 against the real daemon with fake devices: the training-step pipeline (every strategy
against the limit, the balanced intensity, weights and the first step, writeback, touched pages
and the gather), its bounds refused with a problem and nothing stored, the pipeline_sweep suite's
curves and sentence, copy_overlap's note on a kernel too short to hide the copy, and the text
view. The fake model follows the GPU's rules (kernels/fake_pipeline.c pipe_model), so the
numbers below are the model's, said as such."""
import pytest

from conftest import run_job, stored_docs
from test_jobs import problem

ALL = ["pinned_serial", "pinned_overlapped", "pageable_serial", "managed_on_demand",
       "managed_prefetch", "managed_prefetch_chunked", "zero_copy", "managed_prefetch_batch",
       "managed_discard_prefetch"]
MANAGED = ["managed_on_demand", "managed_prefetch", "managed_prefetch_chunked",
           "managed_prefetch_batch", "managed_discard_prefetch"]


def pipeline(d, **params):
    done = run_job(d, {"benchmark": "pipeline", "params": params})
    res = done["parts"][0]["result"]
    assert res["fake"] is True
    return res, {m["name"]: m for m in res["measurements"]}


def strategies(summary):
    return {s["strategy"]: s for s in summary["strategies"]}


def med(m):
    return m["stats"]["median_ms"]


def test_every_strategy_runs_on_the_same_batch_against_the_limit(umd):
    d = umd(fake_devices=1)
    res, ms = pipeline(d)
    assert set(ALL) | {"copy_alone", "kernel_alone"} <= set(ms)
    s = res["summary"]
    limit = max(med(ms["copy_alone"]), med(ms["kernel_alone"]))
    assert s["limit_ms"] == pytest.approx(limit)
    st = strategies(s)
    assert set(st) == set(ALL)
    for name, x in st.items():
        assert x["ratio_to_limit"] == pytest.approx(med(ms[name]) / limit), name
        assert x["ratio_to_limit"] > 0.95, name  # nothing beats the limit
    assert "1GiB" not in s["conclusion"] and "the limit" in s["conclusion"]


def test_balanced_intensity_makes_the_kernel_as_long_as_the_copy(umd):
    d = umd(fake_devices=1)
    res, ms = pipeline(d)
    it = res["intensity"]
    assert it["requested"] == "balanced" and it["chosen"] >= 1
    assert it["kernel_ms"] == pytest.approx(it["copy_ms"], rel=0.01)
    assert med(ms["kernel_alone"]) == pytest.approx(med(ms["copy_alone"]), rel=0.05)
    assert ms["pinned_overlapped"]["intensity"] == it["chosen"]


def test_serial_is_copy_plus_kernel_and_overlap_the_limit_plus_one_chunk(umd):
    d = umd(fake_devices=1)
    res, ms = pipeline(d, chunks=16)
    copy, kern = med(ms["copy_alone"]), med(ms["kernel_alone"])
    assert med(ms["pinned_serial"]) == pytest.approx(copy + kern, rel=0.05)
    assert med(ms["pinned_overlapped"]) == pytest.approx(max(copy, kern) + min(copy, kern) / 16,
                                                          rel=0.05)
    ov = strategies(res["summary"])["pinned_overlapped"]
    assert ov["speedup_vs_serial"] >= 1.8
    assert ov["ratio_to_limit"] <= 1.1


def test_one_stream_leaves_nothing_overlapped(umd):
    d = umd(fake_devices=1)
    _, ms = pipeline(d, streams=1, strategies=["pinned_serial", "pinned_overlapped"])
    assert med(ms["pinned_overlapped"]) == pytest.approx(med(ms["pinned_serial"]), rel=0.05)
    assert ms["pinned_overlapped"]["streams"] == 1


def test_on_demand_is_the_kernel_plus_the_batch_at_the_fault_rate(umd):
    d = umd(fake_devices=1)
    for k in (4, 4096):
        _, ms = pipeline(d, size="256MiB", intensity=k,
                         strategies=["managed_on_demand"])
        fault_ms = (256 << 20) / 8.5e9 * 1e3  # the model's on-demand rate
        assert med(ms["managed_on_demand"]) == pytest.approx(med(ms["kernel_alone"]) + fault_ms,
                                                              rel=0.05)


def test_managed_weights_cost_the_first_step_only(umd):
    d = umd(fake_devices=1)
    res, ms = pipeline(d, size="256MiB", weights="1GiB", steps=4,
                       strategies=["pinned_serial", "managed_on_demand"])
    od = ms["managed_on_demand"]
    assert od["first_step_ms"] > 1.5 * od["steady_step_ms"]
    st = strategies(res["summary"])
    assert st["managed_on_demand"]["first_step_differs"] is True
    assert st["pinned_serial"]["first_step_differs"] is False
    assert ms["pinned_serial"]["weights_bytes"] == 1 << 30


def test_writeback_adds_the_copy_back(umd):
    d = umd(fake_devices=1)
    _, plain = pipeline(d, size="256MiB", intensity=64, strategies=["pinned_serial"])
    _, wb = pipeline(d, size="256MiB", intensity=64, writeback="256MiB",
                     strategies=["pinned_serial"])
    back_ms = (256 << 20) / 55.3e9 * 1e3
    assert med(wb["pinned_serial"]) == pytest.approx(med(plain["pinned_serial"]) + back_ms, rel=0.05)


def test_a_sparse_step_is_measured_three_ways(umd):
    d = umd(fake_devices=1)
    _, ms = pipeline(d, size="1GiB", touched="4MiB", intensity=16,
                     strategies=["pinned_serial", "managed_on_demand", "pinned_gather"])
    assert ms["managed_on_demand"]["touched_bytes"] == 4 << 20
    # on demand pays for the touched pages only, explicit copies for all of them
    assert med(ms["managed_on_demand"]) < med(ms["pinned_serial"])
    assert med(ms["pinned_gather"]) < med(ms["pinned_serial"])


def test_gather_is_left_out_when_every_page_is_touched(umd):
    d = umd(fake_devices=1)
    _, ms = pipeline(d, size="64MiB", strategies=["pinned_serial", "pinned_gather"])
    assert "pinned_gather" not in ms and "pinned_serial" in ms


@pytest.mark.parametrize("params,field", [
    ({"intensity": "heavy"}, "params.intensity"),
    ({"intensity": 0}, "params.intensity"),
    ({"intensity": 1048577}, "params.intensity"),
    ({"chunks": 0}, "params.chunks"),
    ({"chunks": 1025}, "params.chunks"),
    ({"streams": 0}, "params.streams"),
    ({"streams": 9}, "params.streams"),
    ({"steps": 0}, "params.steps"),
    ({"steps": 101}, "params.steps"),
    ({"size": "64MiB", "touched": "128MiB"}, "params.touched"),
    ({"size": "64MiB", "writeback": "128MiB"}, "params.writeback"),
    ({"weights": "64GiB"}, "params.weights"),
    ({"strategies": []}, "params.strategies"),
    ({"strategies": ["pinned_serial", "pinned_serial"]}, "params.strategies"),
    ({"strategies": ["teleport"]}, "params.strategies"),
    ({"layout": "diagonal"}, "params.layout"),
    ({"batch": "loader"}, "params.batch"),
    ({"writers": 0}, "params.writers"),
    ({"writers": 65}, "params.writers"),
    ({"chunk_issue": "scatter"}, "params.chunk_issue"),
])
def test_out_of_bounds_params_are_refused_and_nothing_is_stored(umd, params, field):
    d = umd(fake_devices=1)
    before = stored_docs(d.state_dir)
    problem(d.post("/v1/jobs", json={"benchmark": "pipeline", "params": params}), 400, field)
    assert stored_docs(d.state_dir) == before


def test_every_bound_in_the_catalog_is_accepted(umd):
    d = umd(fake_devices=1)
    for params in ({"intensity": 1}, {"intensity": 1048576, "size": "4MiB"}, {"chunks": 1},
                   {"chunks": 1024, "size": "8MiB"}, {"streams": 8}, {"steps": 1},
                   {"steps": 100, "size": "4MiB"}, {"layout": "clustered", "touched": "1MiB"},
                   {"batch": "host_written", "writers": 1, "size": "64MiB"},
                   {"batch": "host_written", "writers": 64, "size": "64MiB"},
                   {"chunk_issue": "copy_stream"}, {"chunk_issue": "round_robin"}):
        pipeline(d, **params)


def test_the_sweep_gives_curves_and_a_sentence_in_numbers(umd):
    d = umd(fake_devices=1)
    done = run_job(d, {"benchmark": "pipeline_sweep", "params": {"size": "1GiB"}})
    res = done["parts"][0]["result"]
    s = res["summary"]
    kb = res["balanced"]["chosen"]
    assert s["balanced_intensity"] == kb
    curves = {c["strategy"]: c for c in s["curves"]}
    assert set(ALL) <= set(curves)
    ks = [p["intensity"] for p in curves["pinned_overlapped"]["points"]]
    assert ks == sorted(ks) and ks[0] == 2 and kb in ks and ks[-1] <= 4 * kb
    # memory-bound: overlap comes within 10% of the limit at once; on demand never does
    assert curves["pinned_overlapped"]["within_10pct_from"] == 2
    assert curves["managed_on_demand"]["within_10pct_from"] == "never"
    assert [p["intensity"] for p in s["limit"]] == ks
    t = s["touched"]
    assert t["points"][0]["touched_bytes"] == 1 << 20 and t["points"][-1]["fraction"] == 1.0
    assert 0 < t["um_wins_up_to_fraction"] < t["um_wins_below_fraction"] \
        < t["um_loses_from_fraction"] <= 1
    c = s["conclusion"]
    assert c.startswith(f"With a kernel as long as the copy ({kb} FMAs a float")
    assert "overlapped pinned copies take" in c and "faulted in on demand takes" in c
    assert f"UM wins below about {100 * t['um_wins_below_fraction']:.2g}% of the buffer" in c


def test_copy_overlap_says_when_the_kernel_is_too_short_to_hide_the_copy(umd):
    d = umd(fake_devices=1)
    done = run_job(d, {"benchmark": "copy_overlap", "params": {"size": "1GiB"}})
    res = done["parts"][0]["result"]
    names = {m["name"] for m in res["measurements"]}
    assert {"overlapped", "serial", "copy_alone", "kernel_alone"} <= names
    s = res["summary"]
    assert "too short to hide the copy" in s["note"]
    assert f"{s['kernel_ms']:.2f} ms" in s["note"] and f"{s['copy_ms']:.2f} ms" in s["note"]
    assert s["overlapped_ms"] <= s["serial_ms"]


def test_um_vs_explicit_overlap_is_not_ranked_a_loss_when_nothing_can_be_hidden(umd):
    d = umd(fake_devices=1)
    done = run_job(d, {"benchmark": "um_vs_explicit", "params": {"size": "1GiB"}})
    res = done["parts"][0]["result"]
    s = res["summary"]
    modes = {m["mode"]: m for m in s["modes"]}
    assert modes["overlapped_copy_kernel"]["gbps"] >= modes["pinned_copy_kernel"]["gbps"]
    ov = next(m for m in res["measurements"] if m["name"] == "overlapped_copy_kernel")
    note = s["overlap_note"]
    assert f"the kernel ({ov['kernel_alone_ms']:.2f} ms)" in note
    assert f"the copy ({ov['copy_alone_ms']:.2f} ms)" in note
    text = d.get(f"/v1/jobs/{done['id']}?format=text").text
    assert "overlap: the kernel" in text


def test_text_view_shows_each_strategy_against_the_limit(umd):
    d = umd(fake_devices=1)
    done = run_job(d, {"benchmark": "pipeline", "params": {"size": "256MiB"}})
    r = d.get(f"/v1/jobs/{done['id']}?format=text")
    assert r.status_code == 200
    t = r.text
    assert "x limit" in t and "vs serial" in t
    for name in ALL:
        assert name in t
    assert "limit" in t and "balanced" in t


def test_umdctl_show_prints_the_pipeline_table(umd):
    from test_umdctl import UMDCTL, ctl
    if not UMDCTL:
        pytest.fail("UMDCTL must point at the built umdctl")
    d = umd(fake_devices=1)
    done = run_job(d, {"benchmark": "pipeline", "params": {"size": "64MiB", "intensity": 64}})
    r = ctl(d, "show", done["id"])
    assert r.returncode == 0, r.stderr
    assert "x limit" in r.stdout and "pinned_overlapped" in r.stdout
    assert "intensity 64 FMAs a float" in r.stdout


def test_host_written_times_the_write_and_reports_it_for_every_strategy(umd):
    """batch host_written (issue 60): the host's write alone joins the limit; every strategy says
    what its own write cost, managed ones their CPU faults included (the model's rates: a writer
    copies at 10 GB/s, a managed page faults back at 2.5 GB/s), none after a discard."""
    d = umd(fake_devices=1)
    res, ms = pipeline(d, size="256MiB", batch="host_written", writers=1)
    write = (256 << 20) / 10e9 * 1e3
    assert med(ms["host_write"]) == pytest.approx(write, rel=0.05)
    for name in ALL:
        assert "host_write_ms" in ms[name], name
    for name in MANAGED:
        faults = 0 if name == "managed_discard_prefetch" else (256 << 20) / 2.5e9 * 1e3
        assert ms[name]["host_write_ms"] == pytest.approx(write + faults), name
    assert ms["pinned_serial"]["host_write_ms"] == pytest.approx(write)
    s = res["summary"]
    assert s["host_write_ms"] == pytest.approx(med(ms["host_write"]))
    assert s["limit_ms"] == pytest.approx(max(med(ms["copy_alone"]), med(ms["kernel_alone"]),
                                              med(ms["host_write"])))
    assert s["bound"] == "host_write"  # one writer is slower than the link
    assert "The host writes each batch into pinned memory in" in s["conclusion"]
    assert "its CPU faults included" in s["conclusion"]
    assert strategies(s)["managed_prefetch_chunked"]["host_write_ms"] > \
        strategies(s)["managed_discard_prefetch"]["host_write_ms"]


def test_a_prepared_batch_has_no_write(umd):
    d = umd(fake_devices=1)
    res, ms = pipeline(d, size="64MiB")
    assert "host_write" not in ms and "host_write_ms" not in ms["pinned_serial"]
    assert res["summary"]["host_write_ms"] is None
    assert "host writes" not in res["summary"]["conclusion"]


def test_the_sweep_counts_the_hosts_write(umd):
    d = umd(fake_devices=1)
    done = run_job(d, {"benchmark": "pipeline_sweep",
                       "params": {"size": "256MiB", "batch": "host_written", "writers": 8,
                                  "min_touched": "64MiB"}})
    s = done["parts"][0]["result"]["summary"]
    assert all(p["host_write_ms"] > 0 for p in s["points"])
    assert "The host writes each batch into pinned memory in" in s["conclusion"]


def test_text_view_shows_the_hosts_write(umd):
    d = umd(fake_devices=1)
    done = run_job(d, {"benchmark": "pipeline",
                       "params": {"size": "64MiB", "batch": "host_written"}})
    t = d.get(f"/v1/jobs/{done['id']}?format=text").text
    assert "the host writes each batch" in t and "write ms" in t
    assert "managed_discard_prefetch" in t


def steady(m):
    return m["steady_step_ms"]


def test_copy_stream_pays_each_managed_prefetch_in_series(umd):
    """chunk_issue (issue 60) on fake devices: pinned copies get the same ideal schedule either
    way (each stream's own turns, (copy + kernel) / streams, never exceed the longer half with two
    streams or more); managed prefetches all on one stream (copy_stream, or one stream whatever
    the issue) pay the model's 0.2 ms each in series, as the H100 measured 4-13 ms over round
    robin at 16 and 64 chunks; round robin on two streams or more overlaps them."""
    d = umd(fake_devices=1)
    both = ["pinned_overlapped", "managed_prefetch_chunked"]
    for streams in (1, 2, 3):
        _, cs = pipeline(d, size="256MiB", streams=streams, chunks=16, chunk_issue="copy_stream",
                         strategies=both)
        _, rr = pipeline(d, size="256MiB", streams=streams, chunks=16, chunk_issue="round_robin",
                         strategies=both)
        assert steady(rr["pinned_overlapped"]) == pytest.approx(steady(cs["pinned_overlapped"]))
        gap = steady(cs["managed_prefetch_chunked"]) - steady(rr["managed_prefetch_chunked"])
        assert gap == pytest.approx(0 if streams == 1 else 16 * 0.2), streams
        copy, kern = med(rr["copy_alone"]), med(rr["kernel_alone"])
        if streams == 1:
            assert med(rr["pinned_overlapped"]) == pytest.approx(copy + kern, rel=0.05)


def test_chunk_issue_auto_is_the_default(umd):
    """auto: pinned copies on one copy stream, managed prefetches round robin (each the faster on
    the H100); every chunked measurement and summary entry says which it used."""
    d = umd(fake_devices=1)
    res, ms = pipeline(d, size="256MiB")
    want = {"pinned_overlapped": "copy_stream", "managed_prefetch_chunked": "round_robin",
            "managed_discard_prefetch": "round_robin"}
    st = strategies(res["summary"])
    for name, issue in want.items():
        assert ms[name]["chunk_issue"] == issue, name
        assert st[name]["chunk_issue"] == issue, name
    assert "chunk_issue" not in ms["managed_prefetch_batch"]  # one call, no chunks of its own
    _, auto = pipeline(d, size="256MiB", strategies=["managed_prefetch_chunked"])
    _, rr = pipeline(d, size="256MiB", chunk_issue="round_robin",
                     strategies=["managed_prefetch_chunked"])
    assert steady(auto["managed_prefetch_chunked"]) == \
        pytest.approx(steady(rr["managed_prefetch_chunked"]))


def test_the_prefetch_alone_is_measured_where_a_strategy_prefetches(umd):
    d = umd(fake_devices=1)
    res, ms = pipeline(d, size="256MiB")
    pa = ms["managed_prefetch_alone"]
    assert pa["steps"] == 1
    assert med(pa) == pytest.approx((256 << 20) / 51e9 * 1e3, rel=0.05)  # the model's 51 GB/s
    assert res["summary"]["prefetch_alone_ms"] == pytest.approx(med(pa))
    res, ms = pipeline(d, size="256MiB", strategies=["pinned_overlapped", "managed_on_demand"])
    assert "managed_prefetch_alone" not in ms
    assert res["summary"]["prefetch_alone_ms"] is None


def test_managed_chunks_over_the_goal_say_what_stops_them(umd):
    """Issue 60's goal: managed memory prefetched in chunks within 1.10x the limit, or the result
    says what stops it. The model's prefetch alone is 1.09x (55.5 against 51 GB/s), within the
    goal; 16 chunks leave a sixteenth of the kernel past it, 1.15x: the chunks stop it. Issued
    copy_stream, the sentence says the prefetches also wait their turn."""
    d = umd(fake_devices=1)
    res, ms = pipeline(d, size="1GiB", chunks=16)
    s = res["summary"]
    pc = strategies(s)["managed_prefetch_chunked"]
    assert pc["ratio_to_limit"] > 1.10
    pf = med(ms["managed_prefetch_alone"])
    c = s["conclusion"]
    assert f"takes {pc['ratio_to_limit']:.2f}x the limit, over the 1.10x goal: managed " \
        f"prefetch alone, no kernel, moves the batch in {pf:.2f} ms" in c
    assert f"{pf / s['limit_ms']:.2f}x the limit, within the goal: what the chunks add stops " \
        "it." in c
    res, _ = pipeline(d, size="1GiB", chunks=16, chunk_issue="copy_stream")
    assert "issued copy_stream, every prefetch also waits its turn on one stream" in \
        res["summary"]["conclusion"]
    res, _ = pipeline(d, size="1GiB", chunks=16, batch="host_written", writers=1,
                      strategies=["managed_prefetch_chunked"])
    assert "the write, not the prefetch, stops it" in res["summary"]["conclusion"]


def test_the_sweep_says_what_stops_managed_chunks_at_the_balanced_point(umd):
    d = umd(fake_devices=1)
    done = run_job(d, {"benchmark": "pipeline_sweep",
                       "params": {"size": "256MiB", "chunks": 16, "min_touched": "64MiB"}})
    s = done["parts"][0]["result"]["summary"]
    assert "over the 1.10x goal: managed prefetch alone" in s["conclusion"]


def test_text_view_shows_the_prefetch_alone(umd):
    d = umd(fake_devices=1)
    done = run_job(d, {"benchmark": "pipeline", "params": {"size": "64MiB"}})
    t = d.get(f"/v1/jobs/{done['id']}?format=text").text
    assert "managed prefetch alone, no kernel:" in t
