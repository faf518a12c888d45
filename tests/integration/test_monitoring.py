"""Metrics by the conventions, checked end to end: the names umd exports (base units, latency
as latency, umd_device_info with dcgm-exporter's labels, the time of each measurement), the
bound on label values, the shipped Grafana dashboard and alert rules naming only series umd
exports, and a real Prometheus (Debian's prometheus) scraping a umd with fake devices every
second, joining umd_device_info to a bandwidth series and firing the failed-verdict alert."""
import json
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

from conftest import REPO, wait_for
from prometheus_server import Prometheus

DASHBOARD = REPO / "packaging" / "grafana" / "umd.json"
ALERTS = REPO / "packaging" / "prometheus" / "alerts.yml"
FINAL = ("succeeded", "failed", "cancelled", "timed_out", "interrupted")
# PromQL words and functions that look like identifiers in an expression.
PROMQL_WORDS = {"sum", "max", "min", "avg", "by", "on", "without", "group_left", "group_right",
                "rate", "increase", "time", "histogram_quantile", "or", "and", "unless",
                "label_values", "count", "ignoring"}


def run(d, body, timeout=40):
    r = d.post("/v1/jobs", json=body)
    assert r.status_code == 202, r.text
    j = d.get(f"/v1/jobs/{r.json()['id']}?wait=30s", timeout=timeout).json()
    assert j["state"] in FINAL, j
    return j


def families(text):
    """Metric family names in an exposition, from its TYPE lines."""
    return {m.group(1) for m in re.finditer(r"^# TYPE (\S+) \S+$", text, re.M)}


def series_names(expr):
    return {n for n in re.findall(r"\b(umd_[a-z_]+)\b", expr)}


def exported(name, fams):
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    return name in fams or base in fams


def dashboard_exprs():
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["query"] for v in dash["templating"]["list"] if v.get("type") == "query"]
    return exprs


def alert_exprs():
    text = ALERTS.read_text()
    # Folded (>-) and plain expr values, without a YAML parser.
    out, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)expr:\s*(.*)$", line)
        if not m:
            continue
        if m.group(2) not in (">-", ">", "|"):
            out.append(m.group(2))
            continue
        body, ind = [], len(m.group(1))
        for nxt in lines[i + 1:]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= ind:
                break
            body.append(nxt.strip())
        out.append(" ".join(body))
    return out


@pytest.fixture
def measured(umd):
    """A umd with a copy, a latency and health jobs done (one over every GPU, so the GPU pairs
    have a verdict): every family has its series."""
    d = umd(fake_devices=2)
    run(d, {"benchmark": "copy", "device": 0, "params": {"size": "1MiB"}})
    run(d, {"benchmark": "latency", "device": 0})
    run(d, {"benchmark": "health", "device": 1})
    run(d, {"benchmark": "health"})
    return d


def test_metrics_are_in_base_units_and_join_dcgm(measured):
    text = measured.get("/metrics").text
    fams = families(text)
    assert "umd_bandwidth_gbps" not in fams
    m = re.search(r'^umd_bandwidth_bytes_per_second\{uuid="(GPU-[^"]+)",benchmark="copy",'
                  r'mode="h2d"\} (\S+)$', text, re.M)
    assert m and float(m.group(2)) > 1e9  # bytes per second, not GB/s
    lat = re.findall(r'^umd_latency_seconds\{[^}]*benchmark="latency"[^}]*\} (\S+)$', text, re.M)
    assert lat and all(0 < float(v) < 1 for v in lat)
    # Latency modes are not exported as bandwidths.
    assert not re.search(r'^umd_bandwidth_bytes_per_second\{[^}]*benchmark="latency"', text, re.M)
    ts = re.findall(r'^umd_measurement_timestamp_seconds\{[^}]*\} (\S+)$', text, re.M)
    assert ts and all(abs(float(v) - time.time()) < 300 for v in ts)
    info = re.findall(r'^umd_device_info\{([^}]*)\} 1$', text, re.M)
    assert len(info) == 2
    for labels in info:
        for key in ("uuid", "gpu", "UUID", "pci_bus_id", "modelName"):
            assert re.search(rf'\b{key}="[^"]+"', labels), labels


def store_counts(text):
    def one(pattern):
        m = re.search(pattern, text, re.M)
        assert m, pattern
        return int(m.group(1))
    return (one(r"^umd_store_commits_total (\d+)$"),
            one(r'^umd_store_changes_total\{waited="true"\} (\d+)$'),
            one(r'^umd_store_changes_total\{waited="false"\} (\d+)$'))


def test_store_counts_commits_and_the_submits_they_carried(umd):
    d = umd(fake_devices=1)
    commits0, waited0, lazy0 = store_counts(d.get("/metrics").text)
    ids = [d.post("/v1/jobs", json={"benchmark": "copy", "device": 0}).json()["id"]
           for _ in range(3)]
    commits, waited, _ = store_counts(d.get("/metrics").text)
    # Each submit was answered after its own commit (one client, one at a time).
    assert waited - waited0 == 3
    assert commits - commits0 >= 3
    for i in ids:
        assert d.get(f"/v1/jobs/{i}?wait=30s", timeout=40).json()["state"] in FINAL
    # The jobs' ends, made by umd, are committed too, counted apart (nobody waited for them).
    assert wait_for(lambda: store_counts(d.get("/metrics").text)[2] - lazy0 >= 3, 10)
    assert re.search(r"^# TYPE umd_store_changes_total counter$", d.get("/metrics").text, re.M)


def test_submits_from_many_clients_share_commits_on_one_http_thread(umd):
    """A submit's connection waits for its commit without holding an HTTP thread, so one thread
    carries many submits into each commit (a thread that blocked for its commit, as before,
    made one commit a submit here)."""
    d = umd(args=["--http-threads", "1"])
    for g in (0, 1):  # nothing runs: the only changes committed are the submits
        assert d.post(f"/v1/devices/{g}/pause", json={"reason": "test"}).status_code == 200
    commits0, waited0, _ = store_counts(d.get("/metrics").text)
    body = b'{"benchmark":"copy"}'
    request = (b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
               b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
               % (len(body), body))
    n = 48
    conns = [socket.create_connection(("127.0.0.1", d.port), timeout=30) for _ in range(n)]
    try:
        for s in conns:  # every request sent before any answer is read
            s.sendall(request)
        for s in conns:
            assert s.makefile("rb").readline().startswith(b"HTTP/1.1 202"), "not accepted"
    finally:
        for s in conns:
            s.close()
    commits, waited, _ = store_counts(d.get("/metrics").text)
    assert waited - waited0 == n
    assert commits - commits0 <= 0.75 * n, (commits - commits0, n)


def store_writes(text):
    def one(kind):
        m = re.search(rf'^umd_store_writes_total\{{kind="{kind}"\}} (\d+)$', text, re.M)
        assert m, kind
        return int(m.group(1))
    return one("document"), one("part")


def test_store_counts_the_rows_its_commits_wrote(umd):
    d = umd(fake_devices=1)
    text = d.get("/metrics").text
    (_, waited0, lazy0), (docs0, parts0) = store_counts(text), store_writes(text)
    ids = [d.post("/v1/jobs", json={"benchmark": "copy", "device": 0}).json()["id"]
           for _ in range(3)]
    # A job's GET answers once what it shows is committed: every change is, after these.
    for i in ids:
        assert d.get(f"/v1/jobs/{i}?wait=30s", timeout=40).json()["state"] in FINAL
    text = d.get("/metrics").text
    (_, waited, lazy), (docs, parts) = store_counts(text), store_writes(text)
    # Every job's final document at least; never more rows than changes (a change a later one
    # of its job replaced in the same commit is not written).
    assert docs - docs0 >= 3
    assert (docs - docs0) + (parts - parts0) <= (waited - waited0) + (lazy - lazy0)
    assert re.search(r"^# TYPE umd_store_writes_total counter$", text, re.M)


def test_threads_are_named_for_top(umd):
    """top -H and perf tell umd's threads apart by name (bench/store/cpu splits its CPU so)."""
    d = umd(fake_devices=1)
    names = {(t / "comm").read_text().strip()
             for t in Path(f"/proc/{d.process.pid}/task").iterdir()}
    assert {"umd-store", "umd-checkpoint", "umd-supervisor", "umd-look",
            "umd-http", "umd-reaper"} <= names, names


def test_sweep_sizes_never_become_label_values(umd):
    d = umd(fake_devices=1)
    j = run(d, {"benchmark": "sweep", "device": 0,
                "params": {"sizes": ["4KiB", "64KiB", "1MiB", "2MiB"]}})
    assert j["state"] == "succeeded", j
    text = d.get("/metrics").text
    assert "@" not in "".join(l for l in text.splitlines() if not l.startswith("#"))
    assert "umd_metrics_series_dropped_total 0" in text
    # The stated bound: 64 (benchmark, mode) pairs a device.
    assert "already has 64 modes" in text


def test_grafana_dashboard_names_only_exported_series(measured):
    fams = families(measured.get("/metrics").text)
    exprs = dashboard_exprs()
    assert exprs
    names = set()
    for e in exprs:
        names |= series_names(e)
    assert "umd_device_info" in names and "umd_bandwidth_bytes_per_second" in names
    missing = sorted(n for n in names if not exported(n, fams))
    assert not missing, missing


def test_alert_rules_name_only_exported_series(measured):
    fams = families(measured.get("/metrics").text)
    names = set()
    for e in alert_exprs():
        names |= series_names(e)
    assert "umd_device_health_verdict" in names
    missing = sorted(n for n in names if not exported(n, fams))
    assert not missing, missing


def until(fn, timeout=30, what=""):
    return wait_for(fn, timeout=timeout, what=what, step=0.5)


@pytest.mark.system
@pytest.mark.skipif(not shutil.which("prometheus"), reason="prometheus (Debian) missing")
def test_real_prometheus_joins_and_fires_the_failed_verdict_alert(umd, tmp_path):
    state = tmp_path / "gpu-state.json"
    state.write_text("{}")
    d = umd(fake_devices=2, args=["--fake-gpu-state", str(state)])
    prom = Prometheus(tmp_path, [f"127.0.0.1:{d.port}"], [ALERTS])
    try:
        prom.wait_ready()
        run(d, {"benchmark": "copy", "device": 0, "params": {"size": "1MiB"}})
        joined = until(lambda: prom.query(
            'umd_bandwidth_bytes_per_second{benchmark="copy"} * on (instance, uuid) '
            'group_left (gpu, modelName, pci_bus_id, UUID) umd_device_info'),
            what="the join of umd_device_info and a bandwidth series")
        labels = joined[0]["metric"]
        assert labels["UUID"] == labels["uuid"] and labels["modelName"] and labels["gpu"] == "0"
        assert float(joined[0]["value"][1]) > 1e9

        # GPU 0 fails its canonical check (a health job without params).
        state.write_text('{"0": {"bandwidth_pct": 20}}')
        j = run(d, {"benchmark": "health", "device": 0}, timeout=60)
        assert j["parts"][0]["verdict"]["verdict"] == "fail"
        uuid = j["parts"][0]["uuid"]

        def firing():
            return [a for a in prom.alerts() if a["labels"]["alertname"] == "UmdGpuHealthFailed"
                    and a["state"] == "firing"]

        fired = until(firing, timeout=30, what="UmdGpuHealthFailed firing")
        assert fired[0]["labels"]["uuid"] == uuid
        assert fired[0]["labels"]["severity"] == "critical"
    finally:
        prom.close()
