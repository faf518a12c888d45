"""The OpenAPI document as a contract, for every benchmark the catalog has (new ones included:
the list comes from GET /v1/benchmarks): each runs on fake devices and every answer is checked
against the document by conftest's hook; the params schemas the catalog generates accept what
umd accepts and refuse what it refuses."""
import json

import jsonschema
import pytest

from conftest import contract

FINAL = ("succeeded", "failed", "cancelled", "timed_out", "interrupted")


def served_validator(d, benchmark):
    doc = d.get("/v1/openapi.json").json()
    root = {"$ref": f"#/components/schemas/params_{benchmark}", "components": doc["components"]}
    return jsonschema.Draft202012Validator(root)


def spec_validator(d):
    doc = d.get("/v1/openapi.json").json()
    root = {"$ref": "#/components/schemas/JobSpec", "components": doc["components"]}
    return jsonschema.Draft202012Validator(root)


def test_every_benchmark_runs_and_answers_by_the_document(umd):
    d = umd(fake_devices=2)
    before = contract().checked
    catalog = d.get("/v1/benchmarks").json()
    spec = spec_validator(d)
    ids = {}
    for b in catalog:
        body = {"benchmark": b["name"], "devices": "all"}
        if b["name"] != "health":  # a health job without params is the canonical check
            body["params"] = {"iterations": 3} if any(
                p["name"] == "iterations" for p in b["params"]) else {}
        spec.validate(body)
        r = d.post("/v1/jobs", json=body)
        assert r.status_code == 202, r.text
        ids[b["name"]] = r.json()["id"]
    for name, jid in ids.items():
        j = d.get(f"/v1/jobs/{jid}?wait=60s", timeout=90).json()
        assert j["state"] in FINAL, (name, j["state"])
        d.get(f"/v1/jobs/{jid}?format=text")
    d.get("/v1/jobs?include=results&limit=100")
    d.get("/v1/devices")
    d.get("/v1/health")
    d.get("/v1/version")
    # Every answer above went through the check (a failure would have raised).
    assert contract().checked - before >= 2 * len(catalog) + 5


def test_params_schemas_accept_the_defaults_umd_fills_in(umd):
    d = umd(fake_devices=2)  # benchmarks across GPUs need two
    for b in d.get("/v1/benchmarks").json():
        v = served_validator(d, b["name"])
        defaults = {p["name"]: p["default"] for p in b["params"] if "default" in p}
        v.validate(defaults)
        v.validate({})
        where = {"devices": "all"} if b.get("min_gpus", 1) > 1 else {"device": 0}
        j = d.post("/v1/jobs", json={"benchmark": b["name"], **where,
                                       "params": dict(defaults, fake_delay_ms=60000)
                                       if "fake_delay_ms" in defaults else defaults})
        assert j.status_code == 202, (b["name"], j.text)
        d.delete(f"/v1/jobs/{j.json()['id']}")


def test_params_schemas_refuse_what_umd_refuses(umd):
    d = umd(fake_devices=1)
    for b in d.get("/v1/benchmarks").json():
        v = served_validator(d, b["name"])
        bad = [{"no_such_param": 1}]
        for p in b["params"]:
            if p["type"] == "integer":
                bad.append({p["name"]: p["max"] + 1})
                bad.append({p["name"]: "1"})
            elif p["type"] == "size":
                bad += [{p["name"]: "1.5"}, {p["name"]: "64 XiB"}, {p["name"]: p["min"] - 1}]
            elif p["type"] == "enum":
                bad.append({p["name"]: "no-such-value"})
            elif p["type"] == "boolean":
                bad.append({p["name"]: 1})
            elif p["type"] in ("enum_list", "size_list"):
                bad.append({p["name"]: []})
        for params in bad:
            assert not v.is_valid(params), (b["name"], params)
            r = d.post("/v1/jobs", json={"benchmark": b["name"], "device": 0, "params": params})
            assert r.status_code == 400, (b["name"], params, r.text)


@pytest.mark.parametrize("size", ["64MiB", "64 MiB", "1.5MiB", "1GB", "4096", 4096])
def test_size_strings_the_schema_takes_umd_takes(umd, size):
    d = umd(fake_devices=1)
    v = served_validator(d, "copy")
    params = {"size": size, "fake_delay_ms": 60000}
    assert v.is_valid(params)
    r = d.post("/v1/jobs", json={"benchmark": "copy", "device": 0, "params": params})
    assert r.status_code == 202, r.text
    d.delete(f"/v1/jobs/{r.json()['id']}")


def test_an_undocumented_answer_fails_the_check():
    """The hook itself: a field the document lacks is an error, so is a status."""
    c = contract()

    class Answer:
        def __init__(self, status, body, ctype="application/json"):
            self.status_code = status
            self.content = json.dumps(body).encode()
            self.headers = {"Content-Type": ctype}

        def json(self):
            return json.loads(self.content)

    ok = {"version": "1", "build": "x", "cuda_runtime_built_against": "13.0", "cuda": False}
    c.check("GET", "http://h/v1/version", Answer(200, ok))
    with pytest.raises(AssertionError, match="does not match"):
        c.check("GET", "http://h/v1/version", Answer(200, dict(ok, extra=1)))
    with pytest.raises(AssertionError, match="status 418"):
        c.check("GET", "http://h/v1/version", Answer(418, ok))
    with pytest.raises(AssertionError, match="not in openapi.json"):
        c.check("GET", "http://h/v1/nope", Answer(200, ok))


def test_a_results_context_is_described_closed(umd):
    """Issue 23: context is umd's own shape, so the document describes it whole: a real
    result's context validates, and one key the document lacks, at the top or inside the
    conditions or the placement, fails."""
    d = umd(fake_devices=1)
    doc = d.get("/v1/openapi.json").json()
    v = jsonschema.Draft202012Validator(
        {"$ref": "#/components/schemas/ResultContext", "components": doc["components"]})
    jid = d.post("/v1/jobs", json={"benchmark": "copy", "params": {"iterations": 3}}).json()["id"]
    j = d.get(f"/v1/jobs/{jid}?wait=60s", timeout=90).json()
    assert j["state"] == "succeeded", j
    ctx = j["parts"][0]["result"]["context"]
    v.validate(ctx)
    for where in (ctx, ctx["conditions"], ctx["placement"], ctx["conditions"]["hmm"]):
        where["undocumented"] = 1
        assert not v.is_valid(ctx), where
        del where["undocumented"]
    v.validate(ctx)
