"""The fleet's view, end to end: what umd exports for the comparison of peers (only canonical,
undisturbed checks feed umd_health_bandwidth_bytes_per_second; ad-hoc health jobs export as
health_adhoc), and a real Prometheus (Debian's prometheus) scraping four umd instances with fake
GPUs, evaluating the shipped packaging/prometheus/fleet.yml, firing UmdGpuSlowerThanFleet for
the one GPU slowed through fake_gpu_state and clearing it once that GPU is fast again. Only the
rule's `for` and the group's `interval` (two of fleet.yml's documented knobs) are shortened, so
the test takes seconds."""
import json
import re
import shutil
import subprocess

import pytest

from conftest import REPO, wait_for
from prometheus_server import Prometheus
from test_coexist import CANONICAL, GpuState, device
from test_jobs import submit, wait_job

FLEET = REPO / "packaging" / "prometheus" / "fleet.yml"
DASHBOARD = REPO / "packaging" / "grafana" / "umd-fleet.json"
FIGURE = re.compile(r'^umd_health_bandwidth_bytes_per_second\{uuid="([^"]+)",figure="([^"]+)",'
                    r'link="([^"]+)"\} (\S+)$', re.M)


def figures(d):
    """{(uuid, figure): (link, bytes/s)} from a scrape."""
    return {(m[1], m[2]): (m[3], float(m[4])) for m in FIGURE.finditer(d.get("/metrics").text)}


def canonical(d, dev=0, **extra):
    j = wait_job(d, submit(d, dict(CANONICAL, device=dev, **extra))["id"], timeout=60)
    assert j["state"] == "succeeded", j
    return j


def test_a_canonical_check_exports_each_gpus_figures_with_its_slot(umd, tmp_path):
    gpu = GpuState(tmp_path)
    d = umd(fake_devices=2, args=gpu.args())
    uuid = canonical(d)["parts"][0]["uuid"]
    got = figures(d)
    assert {f for (u, f) in got if u == uuid} >= {"h2d", "d2h"}
    link, h2d = got[(uuid, "h2d")]
    assert link == "gen5x16" and h2d > 1e9
    assert f'umd_health_check_contended{{uuid="{uuid}"}} 0' in d.get("/metrics").text


def test_an_adhoc_health_job_never_feeds_the_fleet_figures(umd, tmp_path):
    d = umd(fake_devices=2)
    j = wait_job(d, submit(d, {"benchmark": "health", "device": 0,
                               "params": {"size": "1MiB"}})["id"], timeout=60)
    assert j["state"] == "succeeded", j
    text = d.get("/metrics").text
    assert "umd_health_bandwidth_bytes_per_second{" not in text
    assert 'benchmark="health_adhoc"' in text
    assert not re.search(r'^umd_bandwidth_bytes_per_second\{[^}]*benchmark="health"', text, re.M)


def test_a_contended_canonical_check_keeps_the_figures_and_is_marked(umd, tmp_path):
    gpu = GpuState(tmp_path)
    d = umd(fake_devices=2, args=gpu.args())
    uuid = canonical(d)["parts"][0]["uuid"]
    before = figures(d)[(uuid, "h2d")]
    gpu.set({"0": {"other_processes": 1, "bandwidth_pct": 30}})
    wait_for(lambda: device(d)["other_processes"] == 1)
    j = canonical(d, busy_policy="run")
    assert j["parts"][0]["contended"]["other_processes"] == 1
    assert figures(d)[(uuid, "h2d")] == before
    assert f'umd_health_check_contended{{uuid="{uuid}"}} 1' in d.get("/metrics").text


def test_the_node_check_gives_every_gpu_a_peer_figure(umd):
    d = umd(fake_devices=2)
    j = wait_job(d, submit(d, {"benchmark": "health", "device": "all"})["id"], timeout=60)
    assert j["state"] == "succeeded", j
    peers = {u: v for (u, f), v in figures(d).items() if f == "peer"}
    assert len(peers) == 2
    assert all(bw > 1e9 for _, bw in peers.values())


@pytest.mark.system
@pytest.mark.skipif(not shutil.which("prometheus"), reason="prometheus (Debian) missing")
def test_real_prometheus_finds_the_one_gpu_slower_than_its_peers(umd, tmp_path):
    rules = tmp_path / "fleet.yml"
    text = FLEET.read_text()
    assert "for: 30m" in text and "interval: 1m" in text
    rules.write_text(text.replace("for: 30m", "for: 3s").replace("interval: 1m", "interval: 1s"))
    nodes = []
    for n in range(4):
        (tmp_path / f"node{n}").mkdir()
        gpu = GpuState(tmp_path / f"node{n}")
        nodes.append((umd(fake_devices=1, args=gpu.args()), gpu))
    slow_d, slow_gpu = nodes[2]
    slow_gpu.set({"0": {"bandwidth_pct": 70}})
    uuids = [canonical(d)["parts"][0]["uuid"] for d, _ in nodes]
    prom = Prometheus(tmp_path, [f"127.0.0.1:{d.port}" for d, _ in nodes], [rules])
    try:
        prom.wait_ready()
        wait_for(lambda: len(prom.query("umd:health_bandwidth:gpu")) >= 8, timeout=30,
                 what="every GPU's h2d and d2h in umd:health_bandwidth:gpu", step=0.5)
        # The group's count follows the scrapes by an evaluation or two (slower under ASan).
        wait_for(lambda: [float(m["value"][1]) for m in
                          prom.query('umd:health_bandwidth:fleet_gpus{figure="h2d"}')] == [4.0],
                 timeout=30, what="one group of 4 GPUs for h2d", step=0.5)

        def firing():
            return [a for a in prom.alerts() if a["labels"]["alertname"] ==
                    "UmdGpuSlowerThanFleet" and a["state"] == "firing"]

        fired = wait_for(firing, timeout=40, what="UmdGpuSlowerThanFleet firing", step=0.5)
        assert {a["labels"]["instance"] for a in fired} == {f"127.0.0.1:{slow_d.port}"}
        assert {a["labels"]["uuid"] for a in fired} == {uuids[2]}
        assert {a["labels"]["figure"] for a in fired} >= {"h2d", "d2h"}
        assert "30%" in fired[0]["annotations"]["summary"]

        # Every query of the fleet dashboard answers on this fleet.
        dash = json.loads(DASHBOARD.read_text())
        exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
        assert len(exprs) >= 5
        for e in exprs:
            q = e.replace("$model", ".*").replace("$figure", ".*")
            assert prom.query(q), f"the fleet dashboard's {e!r} is empty"

        # The GPU is fast again: its next canonical check clears the alert.
        slow_gpu.set({})
        canonical(slow_d)
        wait_for(lambda: not [a for a in prom.alerts()
                              if a["labels"]["alertname"] == "UmdGpuSlowerThanFleet"],
                 timeout=40, what="UmdGpuSlowerThanFleet cleared", step=0.5)
    finally:
        prom.close()


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian prometheus) missing")
def test_the_shipped_fleet_rules_pass_their_promtool_cases(tmp_path):
    # fleet_test.yml is written by fleet_test.py: the committed file must be what it writes.
    gen = tmp_path / "gen"
    gen.mkdir()
    shutil.copy(REPO / "packaging/prometheus/fleet_test.py", gen)
    subprocess.run(["/usr/bin/python3", str(gen / "fleet_test.py")], check=True)
    assert (gen / "fleet_test.yml").read_text() == \
        (REPO / "packaging/prometheus/fleet_test.yml").read_text()
    for args in (["check", "rules", "fleet.yml"], ["test", "rules", "fleet_test.yml"]):
        p = subprocess.run(["promtool", *args], cwd=REPO / "packaging/prometheus",
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr
