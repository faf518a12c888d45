"""A real Prometheus server (Debian's prometheus) for the integration tests: scrapes the given
targets every second, evaluates the given rule files every second, and answers queries."""
import shutil
import subprocess
import time

import requests

from conftest import free_port


class Prometheus:
    def __init__(self, tmp_path, targets, rule_files):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cfg = tmp_path / "prometheus.yml"
        rules = "".join(f"  - {r}\n" for r in rule_files)
        listed = ", ".join(f"'{t}'" for t in targets)
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"rule_files:\n{rules}"
            "scrape_configs:\n  - job_name: umd\n    scrape_interval: 1s\n"
            f"    static_configs:\n      - targets: [{listed}]\n")
        self.log = open(tmp_path / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [shutil.which("prometheus"), f"--config.file={cfg}",
             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if requests.get(self.url + "/-/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise AssertionError("prometheus not ready")

    def query(self, q):
        r = requests.get(self.url + "/api/v1/query", params={"query": q}, timeout=5)
        assert r.status_code == 200, r.text
        return r.json()["data"]["result"]

    def alerts(self):
        r = requests.get(self.url + "/api/v1/alerts", timeout=5)
        return r.json()["data"]["alerts"]

    def rule_groups(self):
        r = requests.get(self.url + "/api/v1/rules", timeout=5)
        return r.json()["data"]["groups"]

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
