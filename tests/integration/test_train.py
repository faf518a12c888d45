"""Issue 60 against the real daemon with fake devices: train_step's placement matrix (every
class and placement against all in device memory, first step and steady state, where managed
memory is free and where it costs) and embedding_gather's strategies with their factors and the
planner's block beside TorchRec's constants; every bound accepted, one past it refused with a
problem and nothing stored; the text view. The numbers are fake_train.c's model, said as such."""
import pytest

from conftest import run_job, stored_docs, submit, wait_job
from test_jobs import problem

CLASSES = ["batch", "weights", "activations", "gradients", "optimizer", "all"]
PLACEMENTS = ["managed_resident", "managed_host", "host_mapped"]
STRATEGIES = ["device", "managed_uvm", "managed_on_demand", "host_mapped", "hbm_cache",
              "explicit_gather", "whole_copy"]


def job(d, bench, **params):
    done = run_job(d, {"benchmark": bench, "params": params})
    res = done["parts"][0]["result"]
    assert res["fake"] is True
    return done, res, {m["name"]: m for m in res["measurements"]}


def test_train_step_runs_every_class_in_every_placement_against_all_device(umd):
    d = umd(fake_devices=1)
    _, res, ms = job(d, "train_step")
    want = {"device@all"} | {f"{p}@{c}" for c in CLASSES for p in PLACEMENTS}
    assert set(ms) == want
    pm = res["placement_matrix"]
    assert pm["classes"] == CLASSES and pm["placements"] == PLACEMENTS
    ref = ms["device@all"]["stats"]["median_ms"]
    for row in pm["rows"]:
        for p, cell in row["cells"].items():
            m = ms[f"{p}@{row['class']}"]
            assert cell["steady_vs_device"] == pytest.approx(m["stats"]["median_ms"] / ref)
            assert m["max_rel_diff_vs_device"] == 0


def test_managed_memory_is_free_once_resident_and_costs_on_the_first_step(umd):
    d = umd(fake_devices=1)
    _, res, _ = job(d, "train_step", classes=["weights"])
    pm = res["placement_matrix"]
    cells = pm["rows"][0]["cells"]
    assert "managed_resident@weights" in pm["free"] and "managed_host@weights" in pm["free"]
    assert cells["managed_host"]["first_vs_device"] > 1.05
    assert cells["host_mapped"]["steady_vs_device"] > 1.05
    assert {c["name"] for c in pm["costs"]} >= {"managed_host@weights", "host_mapped@weights"}
    assert "free in the steady state in 2 of 2" in pm["conclusion"]


def test_a_host_written_batch_costs_managed_memory_every_step(umd):
    d = umd(fake_devices=1)
    _, res, _ = job(d, "train_step", classes=["batch"], placements=["managed_host"])
    cell = res["placement_matrix"]["rows"][0]["cells"]["managed_host"]
    assert cell["steady_vs_device"] > 1.0 and res["placement_matrix"]["free"] == []


def test_transformer_block_shape_has_four_gemms_a_layer(umd):
    d = umd(fake_devices=1)
    _, mlp, ms_mlp = job(d, "train_step", layers=1, classes=["all"])
    _, tf, ms_tf = job(d, "train_step", layers=1, classes=["all"], shape="transformer_block")
    f_mlp = ms_mlp["device@all"]["flops_per_step"]
    # FLOPs in units of 2 x batch x hidden^2: the MLP's one GEMM forward and its weight gradient
    # (2); the block's QKV 3 x 2, output 3 x 3 (with its input gradient), FFN 4 x 3 twice: 39
    assert ms_tf["device@all"]["flops_per_step"] == pytest.approx(f_mlp * 39 / 2)


def test_train_step_beyond_the_gpu_memory_is_refused_by_the_worker(umd):
    d = umd(fake_devices=1)
    done = wait_job(d, submit(d, {"benchmark": "train_step",
                                  "params": {"hidden": 16384, "layers": 32, "batch": 65536}})["id"])
    assert done["state"] == "failed"
    assert "refused" in done["parts"][0]["error"]


def test_embedding_gather_runs_every_strategy_with_factors_against_hbm(umd):
    d = umd(fake_devices=1)
    _, res, ms = job(d, "embedding_gather", size="64MiB", zipf_x100=105)
    assert set(ms) == set(STRATEGIES)
    emb = res["embedding"]
    f = {x["strategy"]: x for x in emb["factors"]}
    assert f["device"]["factor_vs_device"] == pytest.approx(1)
    for s in STRATEGIES[1:]:
        assert f[s]["factor_vs_device"] > 1, s
    assert f["device"]["rows_per_s"] == pytest.approx(65536 / ms["device"]["stats"]["median_ms"] * 1e3)
    assert 0 < ms["hbm_cache"]["hit_rate"] < 1
    pl = emb["planner"]
    assert pl["torchrec"]["uvm_lookup_gbps"] == pytest.approx(51 * 1.073741824 / 10)
    assert pl["measured"]["uvm_lookup_gbps"] == pytest.approx(ms["managed_uvm"]["gbps"])
    assert pl["measured"]["pcie_gbps"] > 0 and pl["off_by"]["uvm_lookup"] > 0


def test_zipf_skew_raises_the_row_cache_hit_rate(umd):
    d = umd(fake_devices=1)
    _, _, uni = job(d, "embedding_gather", size="64MiB", strategies=["hbm_cache"])
    _, _, zipf = job(d, "embedding_gather", size="64MiB", strategies=["hbm_cache"], zipf_x100=105)
    assert uni["hbm_cache"]["hit_rate"] == pytest.approx(0.2, rel=0.01)
    assert zipf["hbm_cache"]["hit_rate"] > 0.5


def test_rows_that_are_not_a_multiple_of_16_bytes_are_refused(umd):
    d = umd(fake_devices=1)
    done = wait_job(d, submit(d, {"benchmark": "embedding_gather",
                                  "params": {"size": "1MiB", "row_bytes": 24}})["id"])
    assert done["state"] == "failed" and "multiple of 16" in done["parts"][0]["error"]


@pytest.mark.parametrize("bench,params,field", [
    ("train_step", {"batch": 15}, "params.batch"),
    ("train_step", {"batch": 65537}, "params.batch"),
    ("train_step", {"hidden": 63}, "params.hidden"),
    ("train_step", {"hidden": 16385}, "params.hidden"),
    ("train_step", {"layers": 0}, "params.layers"),
    ("train_step", {"layers": 33}, "params.layers"),
    ("train_step", {"steps": 1}, "params.steps"),
    ("train_step", {"steps": 51}, "params.steps"),
    ("train_step", {"warmup": 11}, "params.warmup"),
    ("train_step", {"shape": "cnn"}, "params.shape"),
    ("train_step", {"classes": ["biases"]}, "params.classes"),
    ("train_step", {"placements": ["device"]}, "params.placements"),
    ("embedding_gather", {"row_bytes": 8}, "params.row_bytes"),
    ("embedding_gather", {"row_bytes": 65552}, "params.row_bytes"),
    ("embedding_gather", {"row_bytes": 128, "size": "60KiB"}, "params.size"),
    ("embedding_gather", {"size": "1MiB", "row_bytes": 2097152}, "params.row_bytes"),
    ("embedding_gather", {"lookups": 0}, "params.lookups"),
    ("embedding_gather", {"lookups": 4194305}, "params.lookups"),
    ("embedding_gather", {"zipf_x100": 301}, "params.zipf_x100"),
    ("embedding_gather", {"cache_load_factor": 0}, "params.cache_load_factor"),
    ("embedding_gather", {"cache_load_factor": 101}, "params.cache_load_factor"),
    ("embedding_gather", {"strategies": ["lru"]}, "params.strategies"),
])
def test_out_of_bounds_params_are_refused_and_nothing_is_stored(umd, bench, params, field):
    d = umd(fake_devices=1)
    before = stored_docs(d.state_dir)
    problem(d.post("/v1/jobs", json={"benchmark": bench, "params": params}), 400, field)
    assert stored_docs(d.state_dir) == before


def test_every_bound_in_the_catalog_is_accepted(umd):
    d = umd(fake_devices=1)
    for params in ({"batch": 16, "hidden": 64, "layers": 1, "steps": 2, "warmup": 0},
                   {"batch": 65536, "hidden": 64, "layers": 1, "steps": 50, "warmup": 10},
                   {"hidden": 16384, "layers": 1, "batch": 16},
                   {"layers": 32, "hidden": 64, "batch": 16}):
        run_job(d, {"benchmark": "train_step", "params": params})
    for params in ({"row_bytes": 16, "size": "64KiB", "lookups": 1, "zipf_x100": 300,
                    "cache_load_factor": 1},
                   {"row_bytes": 65536, "size": "64KiB", "lookups": 4194304,
                    "cache_load_factor": 100}):
        run_job(d, {"benchmark": "embedding_gather", "params": params})


def test_text_view_shows_the_matrix_and_the_factors(umd):
    d = umd(fake_devices=1)
    done, _, _ = job(d, "train_step", classes=["weights", "all"])
    text = d.get(f"/v1/jobs/{done['id']}?format=text").text
    assert "placement matrix" in text and "managed_resident" in text and "weights" in text
    done, _, _ = job(d, "embedding_gather", size="64MiB")
    text = d.get(f"/v1/jobs/{done['id']}?format=text").text
    assert "x HBM time" in text and "TorchRec" in text and "UVM lookup" in text


def test_a_steady_step_within_the_margin_is_not_called_a_cost(umd):
    d = umd(fake_devices=1)
    _, res, _ = job(d, "train_step", classes=["weights"], placements=["managed_host"])
    pm = res["placement_matrix"]
    assert pm["free"] == ["managed_host@weights"]
    assert "dearest first step is managed_host@weights" in pm["conclusion"]
    assert "dearest steady step" not in pm["conclusion"]
