"""The HTTP layer against the real umd: every endpoint's status and shape, and every error the
request layer answers itself (404, 405+Allow, 413, 415, malformed JSON, bad query, bad
Idempotency-Key)."""
import json
import os
import socket
import subprocess
import uuid

import pytest
import requests

from conftest import REPO, UMD_BIN, free_port, is_problem

JSON = {"Content-Type": "application/json"}


@pytest.fixture
def d(umd):
    return umd()


def test_health_ok_with_two_fake_devices(d):
    r = d.get("/v1/health")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    assert r.json()["status"] == "ok"


def test_devices_lists_two_fakes(d):
    r = d.get("/v1/devices")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    devs = r.json()
    assert isinstance(devs, list) and len(devs) == 2
    assert [x["index"] for x in devs] == [0, 1]
    for x in devs:
        assert x["fake"] is True
        assert x["uuid"].startswith("GPU-")
        assert x["state"] in ("idle", "busy", "faulted")
    assert devs[0]["uuid"] != devs[1]["uuid"]


@pytest.mark.skipif(os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl"),
                    reason="this machine has a GPU: real discovery would find it")
def test_no_gpu_devices_empty_and_health_503(umd):
    d = umd(fake_devices=0)
    r = d.get("/v1/devices")
    assert r.status_code == 200
    assert r.json() == []
    r = d.get("/v1/health")
    assert r.status_code == 503
    body = r.json()
    assert body["status"] != "ok"
    assert body.get("reason"), body


def test_version(d):
    r = d.get("/v1/version")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    v = r.json()
    assert isinstance(v["version"], str) and v["version"]
    assert "build" in v


def test_benchmarks_catalog(d):
    r = d.get("/v1/benchmarks")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    assert r.json()


def test_openapi_is_the_committed_file_plus_the_catalog_and_lists_every_route(d):
    r = d.get("/v1/openapi.json")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    committed = json.loads((REPO / "api" / "openapi.json").read_bytes())
    doc = r.json()
    # What the catalog adds: one params schema a benchmark, and JobSpec tied to them.
    names = [b["name"] for b in d.get("/v1/benchmarks").json()]
    schemas = dict(doc["components"]["schemas"])
    spec = json.loads(json.dumps(schemas["JobSpec"]))
    assert spec["properties"]["benchmark"].pop("enum") == names
    assert [a["if"]["properties"]["benchmark"]["const"] for a in spec.pop("allOf")] == names
    generated = {k for k in schemas if k.startswith("params_")}
    assert generated == {f"params_{n}" for n in names}
    rest = dict(doc, components=dict(doc["components"], schemas={
        k: (spec if k == "JobSpec" else v) for k, v in schemas.items() if k not in generated}))
    assert rest == committed
    # umd --print-openapi (what CI's linter reads) is the same document.
    printed = subprocess.run([UMD_BIN, "--print-openapi"], capture_output=True, check=True)
    assert json.loads(printed.stdout) == doc
    assert doc["openapi"].startswith("3.1")
    expected = {
        "/": {"get"}, "/metrics": {"get"}, "/v1/health": {"get"}, "/v1/devices": {"get"},
        "/v1/devices/node": {"get"},
        "/v1/version": {"get"}, "/v1/benchmarks": {"get"}, "/v1/openapi.json": {"get"},
        "/v1/jobs": {"get", "post"}, "/v1/jobs/{id}": {"get", "delete"},
        "/v1/devices/{id}/pause": {"post"}, "/v1/devices/{id}/resume": {"post"},
    }
    got = {p: {m for m in ops if m in ("get", "post", "delete", "put", "patch")}
           for p, ops in doc["paths"].items()}
    assert got == expected
    # and the daemon serves each one ({id} is covered by the job tests)
    for path, methods in expected.items():
        if "get" in methods and "{id}" not in path:
            assert d.get(path).status_code not in (404, 405), path


def test_metrics_is_prometheus_text(d):
    d.get("/v1/health")
    r = d.get("/metrics")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/plain; version=0.0.4"
    assert "# TYPE" in r.text


def test_dashboard_page(d):
    r = d.get("/")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/html")
    assert "<html" in r.text


def test_head_answers_like_get_without_body(d):
    r = requests.head(d.url("/v1/version"), timeout=10)
    assert r.status_code == 200
    assert r.content == b""


def test_jobs_list_shape(d):
    r = d.get("/v1/jobs")
    assert r.status_code == 200
    body = r.json()
    assert isinstance(body["jobs"], list)
    assert "next" in body


def test_jobs_list_unknown_query_argument_is_400(d):
    body = is_problem(d.get("/v1/jobs", params={"colour": "blue"}), 400)
    assert body["field"] == "colour"
    body = is_problem(d.get("/v1/jobs?status=queued&status=running"), 400)
    assert body["field"] == "status"


def test_submit_202_with_location_then_get_and_replay(d):
    spec = {"benchmark": "copy", "device": 0}
    key = {"Idempotency-Key": "test-" + uuid.uuid4().hex, **JSON}
    r = d.post("/v1/jobs", data=json.dumps(spec), headers=key)
    assert r.status_code == 202, r.text
    job = r.json()
    assert r.headers["Location"] == f"/v1/jobs/{job['id']}"
    g = d.get(r.headers["Location"])
    assert g.status_code == 200
    assert g.json()["id"] == job["id"]
    again = d.post("/v1/jobs", data=json.dumps(spec), headers=key)
    assert again.status_code == 200, again.text
    assert again.json()["id"] == job["id"]


def test_unknown_job_is_404(d):
    is_problem(d.get(f"/v1/jobs/{uuid.uuid4()}"), 404)
    is_problem(d.delete(f"/v1/jobs/{uuid.uuid4()}"), 404)


def test_unknown_paths_are_404_problems(d):
    for path in ("/nope", "/v1", "/v1/health/", "/v1/jobs/", "/v1/jobs/a/b", "/v2/health"):
        is_problem(d.get(path), 404)


def test_wrong_method_is_405_with_allow(d):
    r = d.post("/v1/health", data="{}", headers=JSON)
    is_problem(r, 405)
    assert r.headers["Allow"] == "GET, HEAD"
    r = d.delete("/v1/jobs")
    is_problem(r, 405)
    assert set(r.headers["Allow"].split(", ")) == {"GET", "HEAD", "POST"}
    r = requests.put(d.url(f"/v1/jobs/{uuid.uuid4()}"), data="{}", headers=JSON, timeout=10)
    is_problem(r, 405)
    assert set(r.headers["Allow"].split(", ")) == {"GET", "HEAD", "DELETE"}


def test_oversized_body_is_413_from_content_length(umd):
    d = umd(args=["--max-body-bytes", "1024"])
    r = d.post("/v1/jobs", data=b" " * 2048, headers=JSON)
    body = is_problem(r, 413)
    assert "1024" in body["detail"]
    # the daemon is fine afterwards
    assert d.get("/v1/health").status_code == 200


def test_oversized_streamed_body_is_413(umd):
    d = umd(args=["--max-body-bytes", "1024"])

    def chunks():  # no Content-Length: requests sends it chunked
        for _ in range(3):
            yield b" " * 512

    r = d.post("/v1/jobs", data=chunks(), headers=JSON)
    is_problem(r, 413)


def test_body_at_the_limit_is_read(umd):
    d = umd(args=["--max-body-bytes", "1024"])
    body = json.dumps({"benchmark": "copy", "device": 0}).encode()
    body += b" " * (1024 - len(body))
    r = d.post("/v1/jobs", data=body, headers=JSON)
    assert r.status_code == 202, r.text


def test_non_json_body_is_415(d):
    r = d.post("/v1/jobs", data='{"benchmark":"copy"}', headers={"Content-Type": "text/plain"})
    assert is_problem(r, 415)["field"] == "Content-Type"
    r = d.post("/v1/jobs", data="benchmark=copy")  # form-encoded
    is_problem(r, 415)


def test_malformed_json_is_400_with_detail(d):
    for bad in ('{"benchmark":', "not json", '{"a":1,"a":2}', "[1]", "",
                "{\"a\":" + "[" * 40 + "]" * 40 + "}"):
        body = is_problem(d.post("/v1/jobs", data=bad, headers=JSON), 400)
        assert body["detail"]
    body = is_problem(d.post("/v1/jobs", data='{"benchmark":', headers=JSON), 400)
    assert "invalid JSON" in body["detail"]


def test_bad_idempotency_key_is_400(d):
    spec = json.dumps({"benchmark": "copy", "device": 0})
    r = d.post("/v1/jobs", data=spec, headers={**JSON, "Idempotency-Key": "k" * 129})
    assert is_problem(r, 400)["field"] == "Idempotency-Key"


def test_ipv6_loopback_listen(umd):
    try:
        port = free_port("::1", socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    d = umd(args=["--listen", f"[::1]:{port}"])
    r = requests.get(f"http://[::1]:{port}/v1/health", timeout=10)
    assert r.status_code == 200
    assert d.get("/v1/health").status_code == 200  # the first --listen still serves


def test_unix_socket_listen(umd, tmp_path):
    path = tmp_path / "umd.sock"
    if len(str(path)) >= 108:
        pytest.skip("tmp path too long for a unix socket")
    umd(args=["--unix-socket", str(path)])
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(path))
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: umd\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200"), data[:200]


@pytest.mark.parametrize("target", ["http://{host}/v1/version", "HTTP://{host}/v1/version",
                                    "http://other.example/v1/version"])
def test_an_absolute_form_target_is_served_as_its_path(d, target):
    # RFC 9112 section 3.2.2: a server must accept the absolute form (proxies send it).
    t = target.format(host=f"127.0.0.1:{d.port}").encode()
    with socket.create_connection(("127.0.0.1", d.port), timeout=5) as s:
        s.sendall(b"GET " + t + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = b""
        while (b := s.recv(65536)):
            data += b
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), data[:300]
    assert json.loads(body)["version"]


def test_an_absolute_form_target_keeps_its_query(d):
    with socket.create_connection(("127.0.0.1", d.port), timeout=5) as s:
        s.sendall(f"GET http://127.0.0.1:{d.port}/v1/jobs?bogus=1 HTTP/1.1\r\nHost: x\r\n"
                  "Connection: close\r\n\r\n".encode())
        data = b""
        while (b := s.recv(65536)):
            data += b
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), data[:300]
    assert json.loads(body)["field"] == "bogus"
